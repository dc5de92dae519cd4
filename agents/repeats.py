"""The repeat guard: small models often call the same tool with the same arguments again
after its result instead of moving on. A repeat of a call that succeeded is not run again; the model is told it has
the result already, and after `limit` repeats in a turn the next step may only call
final_answer, so a loop on one call still ends in an answer."""
from __future__ import annotations

from agents.model import Call
from agents.prompts import FINAL_ANSWER_NAME


class RepeatGuard:
    def __init__(self, limit: int = 1):
        self.limit = limit
        self.keys: set[tuple[str, str]] = set()
        self.repeats = 0

    def seen(self, call: Call) -> bool:
        """Whether `call` already succeeded in this turn (a failed call may be tried again)."""
        if call.key in self.keys:
            self.repeats += 1
            return True
        return False

    def done(self, call: Call) -> None:
        self.keys.add(call.key)

    def tool_choice(self) -> str | dict:
        if self.repeats > self.limit:
            return {"type": "function", "function": {"name": FINAL_ANSWER_NAME}}
        return "required"
