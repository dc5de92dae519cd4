"""The agent loop as a chat option: one user turn through agents.loop.Agent, whose
conversation (the earlier turns' messages, within a budget) lives here per conversation id."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from agents.config import AgentConfig
from agents.model import ModelError
from console.deps import StateDep

router = APIRouter()
CONVERSATION_ID = r"^[A-Za-z0-9_-]{1,64}$"


class TurnRequest(BaseModel):
    conversation: str = Field(pattern=CONVERSATION_ID)
    message: str = Field(min_length=1, max_length=100_000)
    toolsets: list[str] | None = Field(None, description="toolsets or tool names offered; null: all")
    max_tokens: int = Field(200, ge=1, le=8192)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_steps: int = Field(8, ge=1, le=32)


@router.post("/turn")
async def turn(req: TurnRequest, state: StateDep) -> dict:
    """Run one turn of the agent loop; the turn's steps, calls with their results, and answer."""
    registry = state.registry
    unknown = [n for n in req.toolsets or [] if n not in registry.toolsets() and n not in registry.tools]
    if unknown:
        raise HTTPException(400, f"unknown toolsets or tools {unknown}; toolsets: {registry.toolsets()}")
    tools = [t.openai() for t in registry.tools.values()
             if req.toolsets is None or t.toolset in req.toolsets or t.name in req.toolsets]
    config = AgentConfig(max_steps=req.max_steps, max_tokens=req.max_tokens, temperature=req.temperature)
    agent = state.agent(req.conversation, config)
    try:
        result = await run_in_threadpool(agent.run, req.message, tools)
    except ModelError as e:
        raise HTTPException(502, str(e)) from e
    return result.to_dict()


@router.delete("/{conversation}")
def forget(conversation: str, state: StateDep) -> dict:
    """Drop a conversation's carried turns (a new chat)."""
    return {"conversation": conversation, "forgotten": state.forget(conversation)}
