"""samevm mcp [--http]: serve samevm's tools to any MCP client, over stdio (the default: an
MCP client starts this command) or streamable HTTP at http://HOST:PORT/mcp. The tools call
the runtime and the worker that the settings name (start them with `samevm up`)."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("mcp", help="serve samevm's tools over MCP (stdio, or streamable HTTP with --http)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", help="address to bind with --http (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port with --http (default: the settings' mcp_port, 8083)")
    p.add_argument("--toolsets", help="comma-separated toolsets to expose (default: all)")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    import anyio

    from tools import mcp_server
    from tools.context import ToolContext
    from tools.toolsets import build_registry

    host = args.host or settings.host
    if args.http and host not in ("127.0.0.1", "::1", "localhost"):
        raise ValueError(f"the MCP server binds to loopback only, not {host}: its tools can write files and databases")
    toolsets = [t.strip() for t in args.toolsets.split(",") if t.strip()] if args.toolsets else None
    registry = build_registry(ToolContext.from_settings(settings), toolsets)
    if args.http:
        port = args.port or settings.mcp_port
        print(f"samevm mcp: {len(registry.tools)} tools on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
        mcp_server.serve_http(registry, host, port)
    else:
        anyio.run(mcp_server.serve_stdio, registry)
    return 0
