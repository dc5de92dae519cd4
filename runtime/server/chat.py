"""POST /v1/chat/completions: one choice, non-streaming or SSE.

With tools (tool_choice auto, required or named) the output runs through
toolcalls.ToolCallStream in both modes, so a streamed response carries exactly the content
and calls of the non-streamed one: a call goes out (name first, then its arguments in
fragments, under a stable index) once its JSON has closed and validated. Calls that fail
come back as content, finish_reason is then the engine's, and `samevm.tool_call_errors`
says why. Every response names its weights revision (`system_fingerprint`, headers) and
carries the generation's uncertainty summary in `samevm.awareness`.
"""
from __future__ import annotations

import time
import uuid
from typing import AsyncIterator

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse

from httpkit.errors import APIError, error_body, error_response
from runtime.server import toolcalls
from runtime.server.bridge import Delta, EngineLoop, Generation
from runtime.server.chat_prompt import ChatPlan, plan
from runtime.server.generation import (EventStream, chat_logprobs, follow, headers, now, sse, usage)
from runtime.server.protocol import ChatCompletionRequest
from runtime.server.state import ServerState

ARG_FRAGMENT = 32      # characters of arguments per streamed fragment


class Output:
    """Accumulates one generation into a chat message, emitting OpenAI deltas as it goes."""

    def __init__(self, plan: ChatPlan):
        self.tools = None
        if plan.tools is not None:
            self.tools = toolcalls.ToolCallStream(plan.tools.names, plan.tools.validate, plan.parallel)
        self.events: list[toolcalls.Event] = []
        self.text = ""
        self.num_calls = 0

    def feed(self, text: str, final: bool) -> list[dict]:
        """Message deltas for the newly generated `text`."""
        if self.tools is None:
            self.text += text
            return [{"content": text}] if text else []
        events = self.tools.feed(text) + (self.tools.finish() if final else [])
        self.events += events
        deltas = []
        for e in events:
            if e.call is None:
                deltas.append({"content": e.content})
                continue
            index, self.num_calls = self.num_calls, self.num_calls + 1
            deltas.append({"tool_calls": [{"index": index, "id": e.call.id, "type": "function",
                                           "function": {"name": e.call.name, "arguments": ""}}]})
            args = e.call.arguments
            for i in range(0, len(args), ARG_FRAGMENT):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": args[i:i + ARG_FRAGMENT]}}]})
        return deltas

    def message(self) -> tuple[dict, list[str]]:
        if self.tools is None:
            return {"role": "assistant", "content": self.text}, []
        result = toolcalls.collect(self.events, self.tools)
        msg = {"role": "assistant", "content": result.content}
        if result.calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in result.calls]
        return msg, result.errors

    @property
    def has_calls(self) -> bool:
        return self.num_calls > 0


def extension(gen: Generation, last: Delta, errors: list[str]) -> dict:
    ext = {"awareness": last.awareness, "revision": gen.revision, "adapter": gen.adapter, "backend": gen.backend}
    if errors:
        ext["tool_call_errors"] = errors
    return ext


async def create(state: ServerState, req: ChatCompletionRequest, request: Request):
    arrival = time.monotonic()
    loop = state.ready()
    state.check_model(req.model)
    engine = loop.live
    p = await anyio.to_thread.run_sync(plan, state, engine, req)
    gen = loop.submit(p.prompt_ids, p.params)
    out = Output(p)
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": now(), "model": state.config.model_id,
            "system_fingerprint": gen.revision}
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        chunks = stream(state, loop, gen, p, out, base, arrival, include_usage)
        return EventStream(chunks, on_close=lambda: gen.finished or loop.abort(gen), headers=headers(gen))
    logprobs, stamps, last = [], [], None
    async for delta in follow(loop, gen, request):
        out.feed(delta.text, delta.finished)
        logprobs += delta.logprobs
        stamps.append(delta.time)
        last = delta
    if last is None:                        # the client went away; nobody reads this
        return error_response(499, "client closed the request")
    message, errors = out.message()
    record(state, last, stamps, arrival, errors)
    body = {**base, "object": "chat.completion",
            "choices": [{"index": 0, "message": message,
                         "logprobs": {"content": chat_logprobs(engine, logprobs)} if p.logprobs else None,
                         "finish_reason": "tool_calls" if out.has_calls else last.finish_reason}],
            "usage": usage(last), "samevm": extension(gen, last, errors)}
    return JSONResponse(body, headers=headers(gen))


def record(state: ServerState, last: Delta, stamps: list[float], arrival: float, errors: list[str]) -> None:
    state.metrics.observe_tokens(stamps[:last.completion_tokens], arrival, last.prompt_tokens)
    state.metrics.tool_call_errors.inc(len(errors))


async def stream(state: ServerState, loop: EngineLoop, gen: Generation, p: ChatPlan, out: Output,
                 base: dict, arrival: float, include_usage: bool) -> AsyncIterator[str]:
    def chunk(delta: dict, finish_reason=None, logprobs=None, **extra) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        return sse({**base, "object": "chat.completion.chunk", "choices": [choice], **extra})

    engine = gen.engine
    yield chunk({"role": "assistant", "content": ""})
    stamps, last = [], None
    try:
        async for delta in follow(loop, gen, None):
            stamps.append(delta.time)
            last = delta
            lp = {"content": chat_logprobs(engine, delta.logprobs)} if p.logprobs and delta.logprobs else None
            pieces = out.feed(delta.text, delta.finished)
            if not pieces and lp:
                pieces = [{}]
            for i, piece in enumerate(pieces):
                yield chunk(piece, logprobs=lp if i == 0 else None)
    except APIError as e:                   # headers are sent: the error goes in the stream
        yield sse(error_body(e.status, e.message, param=e.param, code=e.code))
        yield "data: [DONE]\n\n"
        return
    if last is None:
        return
    _, errors = out.message()
    record(state, last, stamps, arrival, errors)
    yield chunk({}, finish_reason="tool_calls" if out.has_calls else last.finish_reason,
                samevm=extension(gen, last, errors))
    if include_usage:
        yield sse({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage(last)})
    yield "data: [DONE]\n\n"
