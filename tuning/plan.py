"""What a generated task is: turns of a conversation, each with the user's words, the tools
offered, the gold steps an oracle plays, the faults to inject and the checks on the stores.

A Step is one model reply: calls (run in the order written) or an answer. An answer is
computed from the tool results of its turn (`answer(results)`, one parsed envelope or
{"raw": text} per tool message), so it quotes what the tools really returned. A step whose
calls are planned to fail (`fails`) is played, and the next step recovers; `train` is False
for a step a model should not learn to make (a wrong SQL statement).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from agents.suite import Expect, Fault


@dataclass(slots=True)
class Step:
    calls: list[tuple[str, dict]] = field(default_factory=list)
    answer: Callable[[list[dict]], str] | None = None
    fails: bool = False            # its calls are planned to fail (a fault, or a wrong statement)
    train: bool = True             # a step to learn from

    def __post_init__(self):
        assert bool(self.calls) != (self.answer is not None), "a step calls tools or answers, not both"


@dataclass(slots=True)
class TurnPlan:
    user: str
    steps: list[Step]
    kind: str                      # the block that made it: keep, query, lookup, small_talk, ...
    expect: Expect = field(default_factory=Expect)
    faults: list[Fault] = field(default_factory=list)
    new_session: bool = False
    needs: set[str] = field(default_factory=set)     # tools the gold steps call
    keys: list[str] = field(default_factory=list)    # values the answer must quote
    tools: list[dict] = field(default_factory=list)  # offered, filled by offer.py


@dataclass(slots=True)
class Task:
    id: str
    domain: str
    workflow: str
    turns: list[TurnPlan]
    system: str
    namespace: str
