"""Conversation state across turns, kept compact for a small model's context.

A finished turn is carried forward as two messages only, the user's request and the final
answer (tool calls and results are dropped: the answer already states what mattered, and
what was stored can be looked up again with tools). Each carried message is cut to
`turn_chars`; when all of them exceed `budget_chars`, the oldest turns go first. So five
turns cost at most `budget_chars` (about budget/4 tokens) on top of the system prompt,
the tool list and the current turn, whatever the turns did.
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

    def messages(self) -> list[dict]:
        """The carried turns as user/assistant messages, newest kept first under the budget."""
        kept: list[tuple[str, str]] = []
        used = 0
        for user, answer in reversed(self.turns):
            used += len(user) + len(answer)
            if used > self.budget_chars:
                break
            kept.append((user, answer))
        out: list[dict] = []
        for user, answer in reversed(kept):
            out += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        return out
