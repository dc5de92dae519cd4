"""Typed records of what happened in a turn, as smolagents keeps them: one ActionStep per
model request, with the tool calls it led to and the observation fed back; a Turn with the
final answer and why the loop stopped. They serialise to plain dicts for the suite report."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

# Why a step did not simply execute calls or answer.
StepKind = Literal["calls", "answer", "repeat", "tool_error", "cut_off"]
# Why a turn ended.
Stop = Literal["answer", "max_steps", "max_errors", "model_error", "not_run"]


@dataclass(slots=True)
class ToolCallRecord:
    id: str
    name: str
    arguments: dict | str
    result: dict                   # the registry's envelope: {"ok": ..., "data"|"error": ...}
    latency_s: float
    attempts: int = 1              # > 1 when a retryable failure was retried
    skipped: bool = False          # not run: a repeat, or after a failed call of the same reply

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @classmethod
    def not_run(cls, call, why: str) -> "ToolCallRecord":
        return cls(call.id, call.name, call.arguments, {"ok": False, "error": why}, 0.0, 0, skipped=True)


@dataclass(slots=True)
class ActionStep:
    number: int
    tool_choice: str
    kind: StepKind
    content: str                   # the model's text (for a malformed call, what it wrote)
    calls: list[ToolCallRecord] = field(default_factory=list)
    observation: str | None = None # what the loop told the model besides tool results
    finish_reason: str = "stop"
    awareness: dict = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


@dataclass(slots=True)
class Turn:
    user: str
    steps: list[ActionStep] = field(default_factory=list)
    answer: str | None = None
    stop: Stop = "answer"
    latency_s: float = 0.0

    @property
    def calls(self) -> list[ToolCallRecord]:
        """The calls that ran (the checks' "called X"), not those the loop declined."""
        return [c for s in self.steps for c in s.calls if not c.skipped]

    @property
    def tokens(self) -> dict:
        return {"prompt": sum(s.prompt_tokens for s in self.steps),
                "completion": sum(s.completion_tokens for s in self.steps)}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tokens"] = self.tokens
        return d
