"""The repeat guard: small models often call the same tool with the same arguments again
after its result instead of moving on. A call that succeeded is not run again in the turn; one
that failed in a way another try cannot mend is not run again until some call has succeeded
since (an INSERT refused for a missing table stands once the CREATE TABLE ran). The model is
told why. Past `limit` repeats in a
turn the next step may only answer (tool_choice "none", or final_answer where the answer is
a tool), so a loop on one call still ends in an answer."""
from __future__ import annotations

from agents.model import Call
from agents.prompts import FINAL_ANSWER_NAME


class RepeatGuard:
    def __init__(self, limit: int = 1, answer_tool: bool = False):
        self.limit, self.answer_tool = limit, answer_tool
        self.keys: set[tuple[str, str]] = set()        # succeeded this turn
        self.failed: set[tuple[str, str]] = set()      # failed for good, since the last success
        self.repeats = 0

    def seen(self, call: Call) -> bool:
        """Whether `call` was made before in this turn with a result that stands."""
        if call.key in self.keys or call.key in self.failed:
            self.repeats += 1
            return True
        return False

    def done(self, call: Call, result: dict) -> None:
        """Record a call's result: a success may have changed what an earlier failure met, so
        it reopens those; a retryable failure stays open to another try."""
        if result.get("ok"):
            self.keys.add(call.key)
            self.failed.clear()
        elif not result.get("retryable"):
            self.failed.add(call.key)

    def must_answer(self) -> bool:
        """Past `limit` repeats: the next step may only answer."""
        return self.repeats > self.limit

    def tool_choice(self) -> str | dict:
        if self.must_answer():
            return {"type": "function", "function": {"name": FINAL_ANSWER_NAME}} if self.answer_tool else "none"
        return "required" if self.answer_tool else "auto"
