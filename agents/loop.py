"""The agent loop, as in smolagents: one `while` with a step cap.

Each step asks the model once. Tool calls run (the calls of one reply in parallel) and
their envelopes go back as `role: tool` messages with the calls' ids; the loop then asks
again. The model's mistakes become observations, up to `max_errors`:

- a call the server could not parse or validate: if it names an offered tool, the loop
  asks again with tool_choice naming that tool (the server then constrains decoding to
  a valid call); otherwise the text and a hint go back to the model;
- a reply cut off at max_tokens, and a tool that failed: the hint goes back;
- a call repeating one made earlier in the turn is not run again; the model is steered to
  answer (small models repeat a call after its result), first with the tools still
  offered, then in answer mode;
- in answer mode the turn's tool results are given as plain text and no tools are
  offered (tool_choice "none"), so the model has no call format left to imitate; an
  answer that is still a JSON call is a mistake too.

A plain-text reply is the answer, unless `verify` is on and the runtime's awareness summary
says it was generated with low confidence: then the model is asked once to check it
against the results (and may call a tool) before the answer stands. Bugs in our code and
an unreachable runtime raise.
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from agents import prompts
from agents.config import AgentConfig, low_confidence
from agents.model import Call, ChatModel, Reply
from agents.state import Conversation
from agents.steps import ActionStep, ToolCallRecord, Turn

_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


class Tools(Protocol):
    """What the loop needs of a tool registry (tools.registry.Registry fits)."""

    def call(self, name: str, arguments: dict | str | None = None) -> dict: ...


def attempted_tool(text: str, tools: list[dict]) -> str | None:
    """The offered tool that a malformed call in `text` names, if any."""
    offered = {t["function"]["name"] for t in tools or []}
    return next((name for name in _CALL_NAME.findall(text or "") if name in offered), None)


def looks_like_call(text: str) -> bool:
    return bool(_CALL_NAME.search(text or "")) and "{" in text


def choice_label(choice: str | dict) -> str:
    return choice if isinstance(choice, str) else "named:" + choice["function"]["name"]


class Agent:
    def __init__(self, model: ChatModel, tools: Tools, config: AgentConfig | None = None,
                 system: str = prompts.SYSTEM, conversation: Conversation | None = None):
        self.model, self.tools = model, tools
        self.config = config or AgentConfig()
        self.system = system
        self.conversation = conversation if conversation is not None else Conversation()

    def run(self, user: str, tools: list[dict]) -> Turn:
        """One user turn with `tools` (OpenAI schemas) offered; the turn is added to the
        conversation so later turns see its request and answer."""
        cfg = self.config
        turn = Turn(user=user, stop="max_steps")
        start = time.monotonic()
        base = [{"role": "system", "content": self.system}, *self.conversation.messages(),
                {"role": "user", "content": user}]
        interaction: list[dict] = []      # this turn's calls, results and hints, as messages
        done: set[tuple[str, str]] = set()
        errors = repeats = 0
        choice: str | dict = "auto"
        while len(turn.steps) < cfg.max_steps:
            answer_mode = choice == "none" or not tools
            messages = self._answer_messages(base, turn) if answer_mode else base + interaction
            reply = self.model.complete(messages, None if answer_mode else tools, choice, cfg.max_tokens,
                                        cfg.temperature, None if cfg.seed is None else cfg.seed + len(turn.steps))
            step = self._step(len(turn.steps) + 1, "none" if answer_mode else choice_label(choice), reply)
            turn.steps.append(step)
            fresh = [c for c in reply.calls if c.key not in done]
            step.kind, named = self._classify(reply, fresh, answer_mode, tools, turn)
            choice = "auto"
            if step.kind == "calls":
                step.calls = self._execute(fresh)
                done.update(c.key for c in fresh)
                interaction.append({"role": "assistant", "content": reply.content or "",
                                    "tool_calls": [c.openai() for c in fresh]})
                interaction += [{"role": "tool", "tool_call_id": r.id, "name": r.name,
                                 "content": prompts.observation(r.result, cfg.observation_chars)}
                                for r in step.calls]
                if not all(r.ok for r in step.calls):
                    step.kind = "tool_error"
                    errors += 1
            elif step.kind == "repeat":
                repeats += 1
                if repeats <= cfg.steer_auto_repeats:
                    step.observation = prompts.REPEAT.format(name=named)
                    interaction.append({"role": "user", "content": step.observation})
                else:
                    step.observation = "answer mode: the turn's results as text, no tools offered"
                    choice = "none"
            elif step.kind == "malformed":
                errors += 1
                if answer_mode:
                    step.observation, choice = prompts.PLAIN_ANSWER, "none"
                elif named is not None:
                    # The tool it meant, again, under the server's constrained decoding; the
                    # broken text stays out of the context, where it would be copied.
                    choice = {"type": "function", "function": {"name": named}}
                    step.observation = f"asked again for {named} with tool_choice naming it"
                else:
                    step.observation = (prompts.MALFORMED.format(errors="; ".join(reply.call_errors))
                                        if reply.call_errors else prompts.CUT_OFF)
                    interaction += [{"role": "assistant", "content": reply.content},
                                    {"role": "user", "content": step.observation}]
            elif step.kind == "verify":
                turn.verified = True
                step.observation = prompts.VERIFY
                interaction += [{"role": "assistant", "content": reply.content},
                                {"role": "user", "content": step.observation}]
            else:
                turn.answer, turn.stop = reply.content, "answer"
                break
            if errors > cfg.max_errors:
                turn.stop = "max_errors"
                break
        turn.latency_s = time.monotonic() - start
        self.conversation.add(user, turn.answer)
        return turn

    def _classify(self, reply: Reply, fresh: list[Call], answer_mode: bool, tools: list[dict],
                  turn: Turn) -> tuple[str, str | None]:
        """(step kind, the tool name it concerns) for a reply. A malformed attempt at a tool
        that already succeeded this turn is a repeat: small models restate the call, often
        with the result's values as arguments, when they mean to answer."""
        if reply.calls:
            return ("calls", None) if fresh else ("repeat", reply.calls[0].name)
        if reply.call_errors or reply.finish_reason == "length" or looks_like_call(reply.content):
            named = None if answer_mode else attempted_tool(reply.content, tools)
            if named is not None and named in {c.name for c in turn.calls if c.ok}:
                return "repeat", named
            return "malformed", named
        if self.config.verify and not turn.verified and low_confidence(reply.awareness, self.config):
            return "verify", None
        return "answer", None

    def _answer_messages(self, base: list[dict], turn: Turn) -> list[dict]:
        """The request rewritten for a plain answer: a system prompt without the call format,
        the earlier turns, and the user's request followed by the turn's results as text."""
        last = turn.steps[-1] if turn.steps else None
        insist = last is not None and last.kind == "malformed" and last.tool_choice == "none"
        content = prompts.answer_request(base[-1]["content"], turn.calls, insist, self.config.observation_chars)
        return [{"role": "system", "content": prompts.ANSWER_SYSTEM}, *base[1:-1], {"role": "user", "content": content}]

    def _step(self, number: int, choice: str, reply: Reply) -> ActionStep:
        return ActionStep(number=number, tool_choice=choice, kind="answer", content=reply.content,
                          finish_reason=reply.finish_reason, awareness=reply.awareness,
                          prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                          latency_s=reply.latency_s)

    def _execute(self, calls: list[Call]) -> list[ToolCallRecord]:
        """Run independent calls in parallel; results come back in the calls' order."""
        if len(calls) == 1:
            return [self._run_one(calls[0])]
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            return list(pool.map(self._run_one, calls))

    def _run_one(self, call: Call) -> ToolCallRecord:
        start = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            result = self.tools.call(call.name, call.arguments)
            if result.get("ok") or not result.get("retryable") or attempts > self.config.tool_retries:
                break
            time.sleep(self.config.retry_backoff_s * attempts)
        return ToolCallRecord(call.id, call.name, call.arguments, result, time.monotonic() - start, attempts)
