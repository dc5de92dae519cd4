"""Chat and text completions."""
from __future__ import annotations

from fastapi import APIRouter, Request

from runtime.server import chat, completions
from runtime.server.deps import Server
from runtime.server.protocol import ChatCompletionRequest, CompletionRequest
from runtime.server.routes import add_route

router = APIRouter()


async def chat_completions(body: ChatCompletionRequest, request: Request, state: Server):
    """Chat completion: messages (and tools) in, one assistant message out; SSE with stream."""
    return await chat.create(state, body, request)


async def text_completions(body: CompletionRequest, request: Request, state: Server):
    """Text completion: a raw prompt continued; SSE with stream."""
    return await completions.create(state, body, request)


add_route(router, "/chat/completions", chat_completions, ["POST"])
add_route(router, "/completions", text_completions, ["POST"])
