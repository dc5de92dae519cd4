"""Conversation state across turns, kept compact for a small model's context.

A finished turn is carried forward as its request, what its tools returned (as one line of
`field: value` text, cut to `result_chars`) and its final answer, in a short block the agent
appends to its system prompt. The results are there because a small model's answer often
drops one of the values it looked up, and the next request ("store those three facts")
then has nothing to copy it from. Not as user/assistant/tool messages: given earlier
answers as its own messages, a 0.5B model tends to answer the new request by repeating the
last one. Each request and answer is cut to `turn_chars`; past `budget_chars` in all, the
oldest turns go first. So five turns cost at most about `budget_chars` (budget/4 tokens) on
top of the system prompt, the tool list and the current turn, whatever the turns did.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from agents.text import clip


@dataclass(slots=True)
class Conversation:
    budget_chars: int = 3000
    turn_chars: int = 500
    result_chars: int = 300
    turns: list[tuple[str, str, str]] = field(default_factory=list)   # (user, tool results, answer)

    def add(self, user: str, answer: str | None, results: str = "") -> None:
        self.turns.append((clip(user, self.turn_chars), clip(results, self.result_chars),
                           clip(answer or "(no answer)", self.turn_chars)))

    def reset(self) -> None:
        """A new session: nothing of the earlier turns stays in context."""
        self.turns.clear()

    def context(self) -> str:
        """The carried turns as a text block for the system prompt ("" when there are none),
        the newest kept first under the budget."""
        kept: list[tuple[str, str, str]] = []
        used = 0
        for turn in reversed(self.turns):
            used += sum(map(len, turn))
            if used > self.budget_chars:
                break
            kept.append(turn)
        if not kept:
            return ""
        lines = [f"- The user asked: {user}\n" + (f"  Tools returned: {results}\n" if results else "")
                 + f"  You answered: {answer}" for user, results, answer in reversed(kept)]
        return "Earlier in this conversation:\n" + "\n".join(lines)
