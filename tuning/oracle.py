"""The oracle: a model with ChatModel's `complete` that plays a turn's gold steps, and keeps
every request the agent loop sent with the reply it gave (Recorder keeps them for a served
model instead). The loop builds the prompts
exactly as it does for the served model (system prompt, strict tools, earlier turns, tool
results), so what is recorded is what the served model will see.

An answer step is computed from the tool results of the current turn as they appear in the
request (the loop's `role: tool` messages after the last user message), so it quotes what
the stores returned. A request beyond the plan is a failed task, not a bug: it raises
OracleError and the task is dropped.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from agents.model import Call, Reply
from tuning.answers import parse
from tuning.plan import Step


class OracleError(RuntimeError):
    """The loop asked for a step the plan does not have (a call failed or ran unexpectedly)."""


@dataclass(slots=True)
class Exchange:
    messages: list[dict]
    tools: list[dict]
    tool_choice: str | dict
    reply: Reply
    turn: int
    train: bool = True             # a step to learn from


def turn_results(messages: list[dict]) -> list[dict]:
    """The tool results since the last user message, parsed."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [parse(m["content"]) for m in messages[last_user + 1:] if m["role"] == "tool"]


class Oracle:
    def __init__(self, prefix: str):
        self.prefix, self.count = prefix, 0
        self.steps: list[Step] = []
        self.at, self.turn = 0, -1
        self.exchanges: list[Exchange] = []

    def play(self, steps: list[Step]) -> None:
        """The next turn's gold steps."""
        self.steps, self.at, self.turn = steps, 0, self.turn + 1

    def complete(self, messages: list[dict], tools: list[dict] | None = None, tool_choice: str | dict = "auto",
                 max_tokens: int = 256, temperature: float = 0.0, seed: int | None = None, parallel: bool = True,
                 text_regex: str | None = None) -> Reply:
        if self.at >= len(self.steps):
            raise OracleError(f"turn {self.turn}: the loop asked for step {self.at + 1} of {len(self.steps)}")
        step = self.steps[self.at]
        self.at += 1
        if step.calls:
            calls = []
            for name, arguments in step.calls:
                self.count += 1
                calls.append(Call(f"call_{self.prefix}_{self.count}", name, copy.deepcopy(arguments)))
            reply = Reply("", calls, "tool_calls")
        else:
            reply = Reply(step.answer(turn_results(messages)), [], "stop")
        self.exchanges.append(Exchange(copy.deepcopy(messages), copy.deepcopy(tools or []), tool_choice, reply,
                                       self.turn, step.train))
        return reply


class Recorder:
    """A served model (agents.model.ChatModel) whose requests and replies are kept, for runs of
    the stack itself: the steps of its turns that pass their checks are gold too."""

    def __init__(self, model):
        self.model = model
        self.turn = -1
        self.exchanges: list[Exchange] = []

    def play(self, steps: list[Step]) -> None:
        """The next turn (the model finds its own steps)."""
        self.turn += 1

    def complete(self, messages: list[dict], tools: list[dict] | None = None, tool_choice: str | dict = "auto",
                 max_tokens: int = 256, temperature: float = 0.0, seed: int | None = None, parallel: bool = True,
                 text_regex: str | None = None) -> Reply:
        reply = self.model.complete(messages, tools, tool_choice, max_tokens, temperature, seed, parallel, text_regex)
        self.exchanges.append(Exchange(copy.deepcopy(messages), copy.deepcopy(tools or []), tool_choice, reply,
                                       self.turn))
        return reply
