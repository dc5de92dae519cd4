"""What chat and text completions share: turning request fields into SamplingParams and a
constraint, following a submitted generation (aborting it when the client goes away),
usage and logprobs in OpenAI's shapes, and the SSE response."""
from __future__ import annotations

import asyncio
import json
import time
from typing import AsyncIterator, Callable

from fastapi import Request
from fastapi.responses import StreamingResponse

from httpkit.errors import APIError
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from runtime.server import grammar
from runtime.server.bridge import Delta, EngineLoop, Generation
from runtime.server.protocol import SamplingFields
from runtime.server.state import ServerState

# How often a non-streaming response asks whether its client is still there: a hung-up client's
# sequence stops within this (the tiny test models decode ~1,000 tokens a second on one core).
DISCONNECT_POLL_S = 0.1


def max_new_tokens(requested: int | None, prompt_len: int, engine: LLMEngine, param: str,
                   prompt_param: str) -> int:
    room = engine.max_model_len - prompt_len
    if room < 1:
        raise APIError(400, f"This model's maximum context length is {engine.max_model_len} tokens; "
                            f"your prompt has {prompt_len} tokens and leaves no room for a reply.",
                       param=prompt_param, code="context_length_exceeded")
    if requested is None:
        return room
    if requested < 1:
        raise APIError(400, f"{param} must be at least 1, not {requested}", param=param, code="invalid_value")
    if requested > room:
        raise APIError(400, f"{param} is too large: the prompt has {prompt_len} tokens and this model's "
                            f"context is {engine.max_model_len}, so at most {room} can be generated.",
                       param=param, code="context_length_exceeded")
    return requested


def sampling_params(req: SamplingFields, max_tokens: int, logprobs: int | None, constraint) -> SamplingParams:
    if req.logit_bias:
        raise APIError(400, "logit_bias is not supported", param="logit_bias", code="unsupported_parameter")
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if any(not s for s in stop):
        raise APIError(400, "stop strings must not be empty", param="stop", code="invalid_value")
    given = {k: getattr(req, k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                                         "presence_penalty", "frequency_penalty", "seed")
             if getattr(req, k) is not None}
    if "seed" in given:
        given["seed"] %= 2**64            # the sampler hashes 64-bit seeds; OpenAI allows negative ones
    try:
        return SamplingParams(max_tokens=max_tokens, stop=tuple(stop), ignore_eos=req.ignore_eos,
                              logprobs=logprobs, constraint=constraint, **given)
    except ValueError as e:
        raise APIError(400, str(e), code="invalid_value") from e


def structured_grammar(req: SamplingFields) -> str | None:
    so = req.structured_outputs
    if so is None:
        return None
    return grammar.regex_grammar(so.regex) if so.regex is not None else grammar.lark_grammar(so.grammar)


def constraint_for(state: ServerState, engine: LLMEngine, source: str | None, param: str):
    """A fresh constraint for the grammar `source`, or None; a grammar that does not
    compile is the client's mistake (400)."""
    if source is None:
        return None
    try:
        return state.grammar_factory(engine).constraint(source)
    except grammar.GrammarError as e:
        raise APIError(400, f"{param} cannot be enforced: {e}", param=param, code="invalid_schema") from e


def encode(engine: LLMEngine, text: str, add_special: bool, param: str) -> list[int]:
    try:
        text.encode("utf-8")              # JSON can carry lone surrogates ("\ud800"); no tokenizer takes them
    except UnicodeEncodeError as e:
        raise APIError(400, f"{param} is not valid Unicode: {e.reason}", param=param, code="invalid_value") from e
    return engine.tokenizer.encode(text, add_special=add_special)


async def follow(loop: EngineLoop, gen: Generation, request: Request | None) -> AsyncIterator[Delta]:
    """The generation's deltas until it finishes. The sequence is aborted (its KV blocks
    freed) if the caller stops early, or, given `request`, once the client has gone: a
    non-streaming response notices that only by asking, every DISCONNECT_POLL_S (streams
    are cancelled by Starlette and need no request)."""
    checked = time.monotonic()
    try:
        while True:
            try:
                delta = await asyncio.wait_for(gen.next(), DISCONNECT_POLL_S)
            except asyncio.TimeoutError:
                delta = None
            if request is not None and time.monotonic() - checked >= DISCONNECT_POLL_S:
                checked = time.monotonic()
                if await request.is_disconnected():
                    return
            if delta is None:
                continue
            if delta.error is not None:
                raise APIError(delta.status, delta.error,
                               code="invalid_request" if delta.status < 500 else "engine_error")
            yield delta
            if delta.finished:
                return
    finally:
        if not gen.finished:
            loop.abort(gen)


def usage(last: Delta) -> dict:
    return {"prompt_tokens": last.prompt_tokens, "completion_tokens": last.completion_tokens,
            "total_tokens": last.prompt_tokens + last.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": last.cached_tokens}}


def token_entry(engine: LLMEngine, token: int, logprob: float) -> dict:
    text = engine.tokenizer.token_text(token)
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8", "replace"))}


def chat_logprobs(engine: LLMEngine, entries: list) -> list[dict]:
    return [{**token_entry(engine, tok, lp), "top_logprobs": [token_entry(engine, t, v) for t, v in top]}
            for tok, lp, top in entries]


def headers(gen: Generation) -> dict:
    return {"x-samevm-backend": gen.backend, "x-samevm-revision": gen.revision}


def sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


class EventStream(StreamingResponse):
    """text/event-stream that runs `on_close` however the stream ends (finished, client
    gone, server shutting down), so a sequence never outlives its connection."""

    def __init__(self, chunks: AsyncIterator[str], on_close: Callable[[], None], headers: dict):
        super().__init__(chunks, media_type="text/event-stream",
                         headers={**headers, "cache-control": "no-cache"})
        self.on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()


def now() -> int:
    return int(time.time())
