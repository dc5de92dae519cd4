"""The agent loop, as in smolagents: one `while` with a step cap.

Each step asks the model once. Tool calls run (the calls of one reply in parallel) and
their envelopes go back as `role: tool` messages with the calls' ids; the loop then asks
again. The model's mistakes become observations, up to `max_errors`:

- a call the server could not parse or validate: if it names an offered tool, the loop
  asks again with tool_choice naming that tool (the server then constrains decoding to
  a valid call); otherwise the text and a hint go back to the model;
- a reply cut off at max_tokens, and a tool that failed: the hint goes back;
- a call repeating one made earlier in the turn is not run again (small models repeat a
  call after its result, or restate it with the result's values as arguments). The loop
  then rewrites the request: the user's message followed by what is done and what the
  tools returned, as plain text, so no call/result messages are left to imitate. First in
  progress mode (tools still offered: "call the tool for a missing step, or answer"),
  after `steer_auto_repeats` repeats in answer mode (no tools, tool_choice "none", a
  system prompt without the call format); an answer that is still a JSON call is a
  mistake too. A reply pasting back a tool result (or the loop's own text) is not an answer:
  it is a mistake, answered in progress mode.

A plain-text reply is the answer, unless `verify` is on and the runtime's awareness summary
says it was generated with low confidence: then the model is asked once to check it
against the results (and may call a tool) before the answer stands. An answer written
beside the call messages that leaves out a short value whose field the request names
(asked for the context length, with context_length=32768 in a result) is asked for once
more in answer mode, which lists those values and the passages the lookups found; an
answer-mode answer that still leaves one out (or refuses) is asked for once more, told what
it left out. Bugs in our code and an unreachable runtime raise.
"""
from __future__ import annotations

import json
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
    """The offered tool that a malformed call in `text` names, if any; a name written as a
    call ('sql_exec()') or with a namespace ('functions.sql_exec') counts."""
    offered = {t["function"]["name"] for t in tools or []}
    names = (name.strip().removesuffix("()").rsplit(".", 1)[-1] for name in _CALL_NAME.findall(text or ""))
    return next((name for name in names if name in offered), None)


def looks_like_call(text: str) -> bool:
    return bool(_CALL_NAME.search(text or "")) and "{" in text


ECHO_CHARS = 40
_TOOL_TAGS = re.compile(r"</?tool_response>")


def pasted(text: str, interaction: list[dict]) -> bool:
    """Whether a reply pastes back what it was shown instead of acting on it: a tool result
    (word for word, or any JSON object that is not a call) or the loop's own list of results.
    Seen on the H100 (GGUF weights as they are, unlike the CPU's int8): the 0.5B replied
    '<tool_response> {"ok": true, ...}' after rag_ingest in 10 of 10 seeds, and the 1.5B
    answered with the progress-mode text 'Done so far, with what the tools returned: ...'."""
    text = text or ""
    if any(m["role"] == "tool" and len(m["content"]) >= ECHO_CHARS and m["content"][:ECHO_CHARS] in text
           for m in interaction) or prompts.DONE_SO_FAR in text:
        return True
    bare = _TOOL_TAGS.sub("", text).strip()
    if not (bare.startswith("{") and bare.endswith("}")):
        return False
    try:
        value = json.loads(bare)
    except ValueError:
        return False
    return isinstance(value, dict) and "name" not in value


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
        earlier = self.conversation.context()
        base = [{"role": "system", "content": self.system + ("\n\n" + earlier if earlier else "")},
                {"role": "user", "content": user}]
        interaction: list[dict] = []      # chat mode: this turn's calls, results and hints as messages
        note = ""                         # progress and answer modes: what the loop has to say
        done: set[tuple[str, str]] = set()
        errors = repeats = 0
        mode = "chat" if tools else "answer"
        choice: str | dict = "auto"
        while len(turn.steps) < cfg.max_steps:
            if mode == "chat":
                messages, offered = base + interaction, tools
            else:
                messages = self._flat_messages(base, turn, mode, note)
                offered, choice = (tools, choice) if mode == "progress" else (None, "none")
            reply = self.model.complete(messages, offered, choice, cfg.max_tokens, cfg.temperature,
                                        None if cfg.seed is None else cfg.seed + len(turn.steps))
            step = self._step(len(turn.steps) + 1, choice_label(choice), reply)
            turn.steps.append(step)
            fresh = [c for c in reply.calls if c.key not in done]
            step.kind, named = self._classify(reply, fresh, mode == "answer", tools, turn)
            if step.kind in ("answer", "incomplete", "verify") and mode != "answer" and pasted(reply.content, interaction):
                step.kind, named = "pasted", None
            choice, note = "auto", ""
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
                mode = "progress" if repeats <= cfg.steer_auto_repeats else "answer"
                step.observation = f"{mode} mode: the request and the turn's results as text" + (
                    ", tools still offered" if mode == "progress" else ", no tools offered")
            elif step.kind == "pasted":
                # Progress mode, as for a repeat, but without spending the repeats that lead to
                # answer mode: on the H100 the 0.5B pasted a result back in 23 of 50 canonical
                # turns, which left no progress step for the calls still missing.
                errors += 1
                mode = "progress"
                step.observation = "progress mode: the reply pasted back a result; the request and the results as text"
            elif step.kind == "malformed":
                errors += 1
                if named is not None and mode != "answer":
                    # The tool it meant, again, under the server's constrained decoding; the
                    # broken text stays out of the context, where it would be copied.
                    choice = {"type": "function", "function": {"name": named}}
                    step.observation = f"asked again for {named} with tool_choice naming it"
                else:
                    step.observation = note = (
                        prompts.PLAIN_ANSWER if mode == "answer" else
                        prompts.MALFORMED.format(errors="; ".join(reply.call_errors)) if reply.call_errors
                        else prompts.CUT_OFF if reply.finish_reason == "length" else prompts.PLAIN_CALL)
                    if mode == "chat":
                        interaction += [{"role": "assistant", "content": reply.content},
                                        {"role": "user", "content": step.observation}]
            elif step.kind == "incomplete":
                if mode == "answer":      # once more, saying what it left out (a refusal states nothing)
                    note = prompts.LEFT_OUT.format(fields=named)
                mode = "answer"
                step.observation = f"answer mode: the answer left out {named}"
            elif step.kind == "verify":
                turn.verified = True
                step.observation = prompts.VERIFY
                note = prompts.DRAFT.format(answer=reply.content) + " " + prompts.VERIFY
                interaction += [{"role": "assistant", "content": reply.content},
                                {"role": "user", "content": step.observation}]
            else:
                turn.answer, turn.stop = reply.content, "answer"
                break
            if errors > cfg.max_errors:
                turn.stop = "max_errors"
                break
        turn.latency_s = time.monotonic() - start
        self.conversation.add(user, turn.answer, "; ".join(
            f"{c.name}: " + ", ".join(prompts.facts(c.result.get("data"))) for c in turn.calls if c.ok))
        return turn

    def _classify(self, reply: Reply, fresh: list[Call], answer_mode: bool, tools: list[dict],
                  turn: Turn) -> tuple[str, str | None]:
        """(step kind, what it concerns) for a reply: the tool a repeat or malformed call names,
        or the values an incomplete answer left out. A malformed attempt at a tool that already
        succeeded this turn is a repeat: small models restate the call, often with the
        result's values as arguments, when they mean to answer."""
        if reply.calls:
            return ("calls", None) if fresh else ("repeat", reply.calls[0].name)
        # A reply cut at max_tokens counts only if it was a call; cut plain text is still an
        # answer. In answer mode no tools are offered, so any call-shaped text is a mistake.
        if reply.call_errors or looks_like_call(reply.content):
            named = None if answer_mode else attempted_tool(reply.content, tools)
            if named is not None and named in {c.name for c in turn.calls if c.ok}:
                return "repeat", named
            return "malformed", named
        if self.config.verify and not turn.verified and low_confidence(reply.awareness, self.config):
            return "verify", None
        asked = sum(s.kind == "incomplete" for s in turn.steps)
        left_out = prompts.missing(reply.content, prompts.requested(turn.user, turn.calls)) if asked < 2 else []
        if left_out and (asked == 0 or answer_mode):
            return "incomplete", prompts.listing(left_out)
        return "answer", None

    def _flat_messages(self, base: list[dict], turn: Turn, mode: str, note: str) -> list[dict]:
        """The request with the turn's results as text, no call/result messages to imitate.
        Progress mode keeps the system prompt (with the earlier turns) and the tools, for a
        step still missing; answer mode has a system prompt without the call format or the
        earlier turns, and no tools."""
        system = base[0]["content"]
        if mode == "answer":
            # Without the earlier turns: the request and this turn's results are all an answer
            # needs, and given earlier answers a small model restates one of them.
            system = prompts.ANSWER_SYSTEM
        if mode == "progress":
            closing = prompts.PROGRESS_NOW
        else:
            closing = prompts.ANSWER_NOW
            note = "\n\n".join(filter(None, [note, prompts.needs(prompts.requested(turn.user, turn.calls))]))
        content = prompts.flat_request(base[-1]["content"], turn.calls, note, closing, self.config.observation_chars,
                                       tools_offered=mode == "progress")
        return [{"role": "system", "content": system}, {"role": "user", "content": content}]

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
