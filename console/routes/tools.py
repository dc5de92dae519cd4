"""The tool registry for the chat page: which tools and toolsets exist, and one call by name
(the page runs the model's tool calls through here, as any agent would)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from console.deps import StateDep

router = APIRouter()


class CallRequest(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] | str | None = None


@router.get("")
def list_tools(state: StateDep) -> dict:
    """Every tool with its toolset and OpenAI schema."""
    registry = state.registry
    return {"toolsets": registry.toolsets(),
            "tools": [{"name": t.name, "toolset": t.toolset, "description": t.description, "schema": t.openai()}
                      for t in registry.tools.values()]}


@router.post("/call")
async def call_tool(req: CallRequest, state: StateDep) -> dict:
    """Run one tool; the registry's envelope ({ok, data} or {ok: false, error, retryable})."""
    return await run_in_threadpool(state.registry.call, req.name, req.arguments)
