"""POST /v1/completions: raw text (or token ids) in, one choice out, non-streaming or SSE.
The prompt gets the model's BOS where the model wants one; no chat template."""
from __future__ import annotations

import time
import uuid

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse

from httpkit.errors import APIError, error_body, error_response
from runtime.engine.llm_engine import LLMEngine
from runtime.server.bridge import Delta, EngineLoop, Generation
from runtime.server.generation import (EventStream, constraint_for, encode, follow, headers, max_new_tokens,
                                       now, sampling_params, sse, structured_grammar, usage)
from runtime.server.protocol import CompletionRequest
from runtime.server.state import ServerState


def prompt_ids(engine: LLMEngine, prompt) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise APIError(400, "prompt must not be empty", param="prompt", code="invalid_value")
        return encode(engine, prompt, add_special=True, param="prompt")
    if min(prompt) < 0 or max(prompt) >= engine.spec.vocab:
        raise APIError(400, f"token ids must be in [0, {engine.spec.vocab})", param="prompt", code="invalid_value")
    return list(prompt)


class TextLogprobs:
    """OpenAI's legacy shape: parallel lists of tokens, their logprobs, alternatives, offsets."""

    def __init__(self, engine: LLMEngine):
        self.engine = engine
        self.offset = 0

    def convert(self, entries: list) -> dict:
        tokens, lps, tops, offsets = [], [], [], []
        for tok, lp, top in entries:
            text = self.engine.tokenizer.token_text(tok)
            tokens.append(text)
            lps.append(lp)
            tops.append({self.engine.tokenizer.token_text(t): v for t, v in top})
            offsets.append(self.offset)
            self.offset += len(text)
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


def plan(state: ServerState, engine: LLMEngine, req: CompletionRequest):
    ids = prompt_ids(engine, req.prompt)
    limit = max_new_tokens(req.max_tokens, len(ids), engine, "max_tokens", "prompt")
    constraint = constraint_for(state, engine, structured_grammar(req), "structured_outputs")
    return ids, sampling_params(req, limit, req.logprobs, constraint)


def extension(gen: Generation, last: Delta) -> dict:
    return {"awareness": last.awareness, "revision": gen.revision, "adapter": gen.adapter, "backend": gen.backend}


async def create(state: ServerState, req: CompletionRequest, request: Request):
    arrival = time.monotonic()
    loop = state.ready()
    state.check_model(req.model)
    engine = loop.live
    ids, params = await anyio.to_thread.run_sync(plan, state, engine, req)
    gen = loop.submit(ids, params)
    base = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": now(),
            "model": state.config.model_id, "system_fingerprint": gen.revision}
    lp = TextLogprobs(engine) if req.logprobs is not None else None
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        chunks = stream(state, loop, gen, base, lp, arrival, include_usage)
        return EventStream(chunks, on_close=lambda: gen.finished or loop.abort(gen), headers=headers(gen))
    text, entries, stamps, last = "", [], [], None
    async for delta in follow(loop, gen, request):
        text += delta.text
        entries += delta.logprobs
        stamps.append(delta.time)
        last = delta
    if last is None:
        return error_response(499, "client closed the request")
    state.metrics.observe_tokens(stamps, arrival, last.prompt_tokens)
    choice = {"index": 0, "text": text, "logprobs": lp.convert(entries) if lp else None,
              "finish_reason": last.finish_reason}
    return JSONResponse({**base, "choices": [choice], "usage": usage(last), "samevm": extension(gen, last)},
                        headers=headers(gen))


async def stream(state: ServerState, loop: EngineLoop, gen: Generation, base: dict, lp: TextLogprobs | None,
                 arrival: float, include_usage: bool):
    stamps, last = [], None
    try:
        async for delta in follow(loop, gen, None):
            stamps.append(delta.time)
            last = delta
            choice = {"index": 0, "text": delta.text, "logprobs": lp.convert(delta.logprobs) if lp else None,
                      "finish_reason": delta.finish_reason}
            extra = {"samevm": extension(gen, delta)} if delta.finished else {}
            yield sse({**base, "choices": [choice], **extra})
    except APIError as e:
        yield sse(error_body(e.status, e.message, param=e.param, code=e.code))
        yield "data: [DONE]\n\n"
        return
    if last is None:
        return
    state.metrics.observe_tokens(stamps, arrival, last.prompt_tokens)
    if include_usage:
        yield sse({**base, "choices": [], "usage": usage(last)})
    yield "data: [DONE]\n\n"
