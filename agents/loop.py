"""The agent loop, in smolagents' shape: one `while` with a step cap.

Every step is one constrained request. The turn's tools go out marked `strict`, with
tool_choice "auto": the runtime's grammar then admits only calls of offered tools whose
arguments validate against their schemas (several, one a line, when parallel calls are on),
or a plain-text reply that cannot open like a call, which is the answer. (With
`answer_tool`, the answer is a call of final_answer instead, and every step must call.)
The calls of one reply run in the order written (a CREATE TABLE before its INSERTs); a
failed call stops the rest of its reply, which may depend on it. Results go back as
`role: tool` messages.

A model's mistake becomes an observation: a failed tool (its error, after `tool_retries`
retries of a retryable one), a call already made this turn (not run again: see repeats.py),
a reply cut at max_tokens, a call the server refused to promote. An answer given in the same
reply as calls stands only if they all succeeded. Bugs in our code and an unreachable runtime raise.

Each turn's system prompt ends with the SQLite tables kept so far and their columns
(`tables_in_prompt`, read through `tables`): in a new session a small model otherwise guessed
the columns of a table it had made itself. The line changes only when a table does, and then
the runtime's prefix cache prefills the conversation again.
"""
from __future__ import annotations

import time
from typing import Callable, Protocol

from agents import prompts
from agents.config import AgentConfig
from agents.model import Call, ChatModel, Reply
from agents.repeats import RepeatGuard
from agents.state import Conversation
from agents.steps import ActionStep, ToolCallRecord, Turn


class Tools(Protocol):
    """What the loop needs of a tool registry (tools.registry.Registry fits)."""

    def call(self, name: str, arguments: dict | str | None = None) -> dict: ...


class Agent:
    def __init__(self, model: ChatModel, tools: Tools, config: AgentConfig | None = None,
                 system: str = prompts.SYSTEM, conversation: Conversation | None = None,
                 tables: Callable[[], str] | None = None):
        self.model, self.tools, self.tables = model, tools, tables
        self.config = config or AgentConfig()
        self.system = system
        self.conversation = conversation if conversation is not None else Conversation()

    def run(self, user: str, tools: list[dict]) -> Turn:
        """One user turn with `tools` (OpenAI schemas) offered; the turn's messages join the
        conversation, so later turns see the request, the calls and the answer."""
        cfg = self.config
        turn, start = Turn(user=user, stop="max_steps"), time.monotonic()
        offered = prompts.strict(tools) + ([prompts.final_answer_tool(cfg.answer_chars)] if cfg.answer_tool else [])
        system = self.system + (prompts.tables_line(self.tables()) if cfg.tables_in_prompt and self.tables else "")
        messages = self.conversation.messages(system, user)
        new = messages[-1:]                    # this turn's messages, kept in the conversation
        guard, errors = RepeatGuard(cfg.max_repeats, cfg.answer_tool), 0
        while len(turn.steps) < cfg.max_steps and errors <= cfg.max_errors:
            choice = guard.tool_choice()
            reply = self.model.complete(messages + new[1:], offered, choice, cfg.max_tokens, cfg.temperature,
                                        None if cfg.seed is None else cfg.seed + len(turn.steps),
                                        parallel=cfg.parallel_calls,
                                        text_regex=prompts.ANSWER_REGEX if choice == "none" else None)
            step = self._step(len(turn.steps) + 1, choice, reply)
            turn.steps.append(step)
            calls = [c for c in reply.calls if c.name != prompts.FINAL_ANSWER_NAME]
            answer = prompts.final_answer(reply.calls) if reply.calls else reply.content.strip() or None
            unusable = None if reply.calls else self._unusable(reply)
            if unusable:                         # no call came through and the text is no answer
                step.kind, step.observation = unusable
                new += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": step.observation}]
                errors += 1
                continue
            records = self._execute(calls, guard)
            step.calls = records                # the ones not run too (marked skipped): a reader sees what was repeated
            new += prompts.call_messages(reply.content, calls, records, cfg.observation_chars)
            failed = [r for r in records if not r.ok and not r.skipped]
            if answer is not None and not failed:
                turn.answer, turn.stop, step.kind = answer, "answer", "calls" if calls else "answer"
                new.append({"role": "assistant", "content": answer})
                break
            step.kind = "tool_error" if failed else "repeat" if any(r.skipped for r in records) else "calls"
            errors += bool(failed)
        turn.latency_s = time.monotonic() - start
        if turn.stop == "max_steps" and errors > cfg.max_errors:
            turn.stop = "max_errors"
        self.conversation.add(new)
        return turn

    def _step(self, number: int, choice: str | dict, reply: Reply) -> ActionStep:
        label = choice if isinstance(choice, str) else "named:" + choice["function"]["name"]
        return ActionStep(number=number, tool_choice=label, kind="calls", content=reply.content,
                          finish_reason=reply.finish_reason, awareness=reply.awareness,
                          prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                          latency_s=reply.latency_s)

    @staticmethod
    def _unusable(reply: Reply) -> tuple[str, str] | None:
        """A reply cut off mid-call or mid-answer, or a call the server refused (the lenient
        grammar let it through but its arguments failed validation): an observation, not the answer."""
        if reply.finish_reason == "length":
            return "cut_off", prompts.CUT_OFF
        if reply.call_errors:
            return "tool_error", prompts.REFUSED + " ".join(reply.call_errors)
        return None

    def _execute(self, calls: list[Call], guard: RepeatGuard) -> list[ToolCallRecord]:
        """Run `calls` in the order written. A repeat of a call made earlier in the turn is not
        run; after a failure the rest of the reply is not run either."""
        out: list[ToolCallRecord] = []
        for call in calls:
            if any(not r.ok and not r.skipped for r in out):
                out.append(ToolCallRecord.not_run(call, prompts.NOT_RUN))
            elif guard.seen(call):
                why = prompts.LAST_REPEAT if guard.must_answer() else prompts.REPEATED
                out.append(ToolCallRecord.not_run(call, why))
            else:
                out.append(self._run_one(call))
                guard.done(call, out[-1].result)
        return out

    def _run_one(self, call: Call) -> ToolCallRecord:
        start, attempts = time.monotonic(), 0
        while True:
            attempts += 1
            result = self.tools.call(call.name, call.arguments)
            if result.get("ok") or not result.get("retryable") or attempts > self.config.tool_retries:
                break
            time.sleep(self.config.retry_backoff_s * attempts)
        return ToolCallRecord(call.id, call.name, call.arguments, result, time.monotonic() - start, attempts)
