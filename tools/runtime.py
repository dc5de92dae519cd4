"""The `runtime` toolset: what serves the agent (chat model, revision, backend, context) and
which models the stack has, read from the runtime's /v1/models and the worker's status."""
from __future__ import annotations

from tools.context import ToolContext, ToolError
from tools.registry import Registry

CARD_FIELDS = ("id", "revision", "backend", "architecture", "context_length", "rope_scaling")


def _card(ctx: ToolContext) -> dict:
    cards = ctx.runtime("GET", "/v1/models").get("data") or []
    if not cards:
        raise ToolError("the runtime lists no model", retryable=True)
    return {k: cards[0][k] for k in CARD_FIELDS if k in cards[0]}


def register(registry: Registry) -> None:
    @registry.tool(toolset="runtime")
    def runtime_status(ctx: ToolContext) -> dict:
        """Report the running stack: the chat model with its weights revision, backend and
        context length, and the local worker with its loaded models."""
        # Only what answers "what serves me": a small model given URLs and every card field
        # to read tends to report those instead of the model, and carried into later turns
        # the data directory's path (.../agent_suite/...) made it name the database
        # "facts_suite_s3" in 10 of 10 runs. Addresses appear on failure.
        out: dict = {}
        try:
            card = _card(ctx)
            out["runtime"] = {"healthy": True, "model": card.pop("id"), **card}
        except ToolError as e:
            out["runtime"] = {"healthy": False, "url": ctx.runtime_url, "error": str(e)}
        try:
            status = ctx.worker("GET", "/v1/status")
            out["worker"] = {"healthy": True,
                             "loaded_models": [m["name"] for m in status.get("models", []) if m.get("loaded")]}
        except ToolError as e:
            out["worker"] = {"healthy": False, "url": ctx.worker_url, "error": str(e)}
        if not out["runtime"]["healthy"] and not out["worker"]["healthy"]:
            raise ToolError(f"neither the runtime nor the worker answers: {out['runtime']['error']}",
                            retryable=True)
        return out

    @registry.tool(toolset="runtime")
    def runtime_models(ctx: ToolContext) -> dict:
        """List the stack's models: the chat model the runtime serves and the worker's
        embedding, speech and transcription models with whether each is installed."""
        chat = [{k: c[k] for k in CARD_FIELDS if k in c} for c in ctx.runtime("GET", "/v1/models").get("data", [])]
        worker = [{"id": m["id"], "installed": m.get("installed"), "description": m.get("description")}
                  for m in ctx.worker("GET", "/v1/models").get("data", [])]
        return {"chat": chat, "worker": worker}
