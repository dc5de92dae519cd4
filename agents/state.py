"""Conversation state across turns, kept compact for a small model's context.

A finished turn is carried forward as its request and its final answer only (tool calls and
results are dropped: the answer states what mattered, and what was stored can be looked
up again with tools), in a short block the agent appends to its system prompt. Not as
user/assistant messages: given earlier answers as its own messages, a 0.5B model tends to
answer the new request by repeating the last one. Each request and answer is cut to
`turn_chars`; past `budget_chars` in all, the oldest turns go first. So five turns cost at
most about `budget_chars` (budget/4 tokens) on top of the system prompt, the tool list
and the current turn, whatever the turns did.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " ..."


@dataclass(slots=True)
class Conversation:
    budget_chars: int = 2400
    turn_chars: int = 500
    turns: list[tuple[str, str]] = field(default_factory=list)   # (user, answer)

    def add(self, user: str, answer: str | None) -> None:
        self.turns.append((clip(user, self.turn_chars), clip(answer or "(no answer)", self.turn_chars)))

    def reset(self) -> None:
        """A new session: nothing of the earlier turns stays in context."""
        self.turns.clear()

    def context(self) -> str:
        """The carried turns as a text block for the system prompt ("" when there are none),
        the newest kept first under the budget."""
        kept: list[tuple[str, str]] = []
        used = 0
        for user, answer in reversed(self.turns):
            used += len(user) + len(answer)
            if used > self.budget_chars:
                break
            kept.append((user, answer))
        if not kept:
            return ""
        lines = [f"- The user asked: {user}\n  You answered: {answer}" for user, answer in reversed(kept)]
        return "Earlier in this conversation:\n" + "\n".join(lines)
