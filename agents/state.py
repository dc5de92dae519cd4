"""Conversation state across turns: the earlier turns as the chat messages they were (the
user's requests in full, the calls, their results and the answers), within a budget.

A finished turn is kept as its messages with each tool result cut to `result_chars`, once,
when it is added, so the rendered history does not change from turn to turn and the runtime's
prefix cache keeps serving it. Past `budget_chars` the oldest turns first lose their calls and
results (the request and the answer stay), then go whole. What the user gave (a note, a list
of values) therefore stays word for word as long as its turn is within the budget.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field


def _size(message: dict) -> int:
    return len(message.get("content") or "") + len(json.dumps(message.get("tool_calls") or ""))


def _spoken(turn: list[dict]) -> list[dict]:
    """A turn without its calls and results: the request and the answer."""
    return [m for m in turn if m["role"] == "user" or (m["role"] == "assistant" and not m.get("tool_calls"))]


@dataclass(slots=True)
class Conversation:
    budget_chars: int = 12000      # earlier turns' messages, about budget/4 tokens
    result_chars: int = 600        # a tool result of an earlier turn is cut to this
    turns: list[list[dict]] = field(default_factory=list)

    def add(self, messages: list[dict]) -> None:
        """Keep a finished turn's messages (its user message first)."""
        kept = []
        for m in messages:
            if m["role"] == "tool" and len(m["content"]) > self.result_chars:
                m = {**m, "content": m["content"][:self.result_chars] + " ...(cut)"}
            kept.append(m)
        self.turns.append(kept)

    def reset(self) -> None:
        """A new session: nothing of the earlier turns stays in context."""
        self.turns.clear()

    def history(self) -> list[dict]:
        """The earlier turns' messages that fit the budget, oldest first."""
        turns = [list(t) for t in self.turns]
        used = lambda: sum(_size(m) for t in turns for m in t)  # noqa: E731
        for i in range(len(turns) - 1):          # the newest turn keeps its calls longest
            if used() <= self.budget_chars:
                break
            turns[i] = _spoken(turns[i])
        while len(turns) > 1 and used() > self.budget_chars:
            turns.pop(0)
        return [m for t in turns for m in t]

    def messages(self, system: str, user: str) -> list[dict]:
        return [{"role": "system", "content": system}, *self.history(), {"role": "user", "content": user}]
