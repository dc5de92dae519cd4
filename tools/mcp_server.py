"""The registry as an MCP server (the official `mcp` SDK's low-level Server), over stdio or
streamable HTTP.

tools/list gives every registered tool with its JSON schema; tools/call runs it through
`Registry.call` in a worker thread and returns the envelope twice: as JSON text (what a
model reads) and as structured content. A tool's failure ({"ok": false, ...}) is a result
with isError set, so the client's model sees the message and can correct itself; only an
unknown tool name is a protocol error.
"""
from __future__ import annotations

import json
import logging
from importlib.metadata import version

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from tools.registry import Registry

log = logging.getLogger(__name__)

SERVER_NAME = "samevm"
INSTRUCTIONS = ("Tools of the local samevm stack: SQL databases, a document index (RAG), embeddings, "
                "reranking, speech, long-term memory notes, runtime status and fine-tuning. Every result "
                "is JSON: {\"ok\": true, \"data\": ...} or {\"ok\": false, \"error\": ..., \"retryable\": ...}.")


def build_server(registry: Registry) -> Server:
    """An MCP server exposing every tool of `registry`."""
    listing = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
               for t in registry.tools.values()]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in registry.tools:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        try:
            envelope = await anyio.to_thread.run_sync(registry.call, params.name, params.arguments or {})
        except Exception as e:        # a bug in a handler: the client gets an error result, the log the trace
            log.exception("tool %s failed", params.name)
            envelope = {"ok": False, "error": f"internal error in {params.name}: {type(e).__name__}: {e}",
                        "retryable": False}
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(envelope, ensure_ascii=False))],
                                    structured_content=envelope, is_error=not envelope["ok"])

    return Server(SERVER_NAME, version=version("samevm"), instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(registry: Registry) -> None:
    """Serve one client on this process's stdin/stdout until it closes them."""
    server = build_server(registry)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(registry: Registry, host: str = "127.0.0.1"):
    """A Starlette app serving MCP's streamable HTTP transport at /mcp. For a loopback host
    the SDK turns on DNS-rebinding protection (only loopback Host/Origin headers)."""
    return build_server(registry).streamable_http_app(host=host)


def serve_http(registry: Registry, host: str, port: int) -> None:
    import uvicorn
    uvicorn.run(http_app(registry, host), host=host, port=port, log_level="warning")
