"""Models, health, metrics, tokenize and detokenize."""
from __future__ import annotations

import anyio
from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from httpkit.errors import APIError
from runtime.server.chat_prompt import render, template_messages
from runtime.server.deps import Server
from runtime.server.generation import encode
from runtime.server.protocol import DetokenizeRequest, TokenizeRequest
from runtime.server.routes import add_route
from runtime.server.tool_schemas import ToolSchemaError, ToolSet

router = APIRouter()
public = APIRouter()          # no API key: supervisors and scrapers poll these


async def health(state: Server):
    """200 {"status": "ok", "revision", "adapter"} once the model serves; 503 with an error body while it loads."""
    engine = state.ready().live
    return {"status": "ok", "revision": engine.revision, "adapter": engine.adapter}


async def models(state: Server):
    """The served model, its context length (what one request may use: prompt and reply),
    weights revision, LoRA adapter (name, sha256) and backend, and its rope scaling when the context needs one."""
    engine = state.ready().live
    card = {"id": state.config.model_id, "object": "model", "created": state.started_at,
            "owned_by": "samevm", "context_length": engine.max_model_len, "max_model_len": engine.max_model_len,
            "revision": engine.revision, "adapter": engine.adapter, "backend": engine.ops.name,
            "architecture": engine.spec.arch}
    scaling = engine.model.rope_scaling
    if scaling is not None:     # the served context reaches past training through rope scaling: say so
        card["rope_scaling"] = {"type": scaling.kind, "factor": scaling.factor,
                                "original_context": scaling.original_context}
    return {"object": "list", "data": [card]}


async def metrics(state: Server):
    """Prometheus metrics."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def _tokenize(state, body: TokenizeRequest) -> dict:
    engine = state.ready().live
    if body.prompt is not None:
        ids = encode(engine, body.prompt, add_special=body.add_special_tokens, param="prompt")
    else:
        tools = [t.model_dump(exclude_none=True) for t in body.tools or []]
        try:
            ToolSet.from_request(tools)
        except ToolSchemaError as e:
            raise APIError(400, str(e), param=e.param, code="invalid_tools") from e
        text = render(engine, template_messages(body.messages), tools or None, body.add_generation_prompt)
        ids = encode(engine, text, add_special=False, param="messages")
    return {"tokens": ids, "count": len(ids), "max_model_len": engine.max_model_len}


async def tokenize(body: TokenizeRequest, state: Server):
    """Token ids of a prompt, or of messages (and tools) rendered through the chat template."""
    state.check_model(body.model)
    return await anyio.to_thread.run_sync(_tokenize, state, body)


async def detokenize(body: DetokenizeRequest, state: Server):
    """The text of token ids."""
    state.check_model(body.model)
    engine = state.ready().live
    if body.tokens and (min(body.tokens) < 0 or max(body.tokens) >= engine.spec.vocab):
        raise APIError(400, f"token ids must be in [0, {engine.spec.vocab})", param="tokens", code="invalid_value")
    return {"prompt": engine.tokenizer.decode(body.tokens, skip_special=False)}


add_route(public, "/health", health, ["GET"], v1=False)
add_route(router, "/models", models, ["GET"])
add_route(public, "/metrics", metrics, ["GET"], v1=False)
add_route(router, "/tokenize", tokenize, ["POST"], v1=False)
add_route(router, "/detokenize", detokenize, ["POST"], v1=False)
