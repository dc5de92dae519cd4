"""Who may use the console: Host and Origin checks against DNS rebinding and cross-site
requests, and the API key when one is configured.

- Host must name this console (loopback names, the bound address, or configured names):
  a page from another site that rebinds its name to 127.0.0.1 sends its own name.
- A request a browser marks as coming from another origin (Origin not this Host, or
  Sec-Fetch-Site: cross-site) is refused, whatever its method and content type, so no
  form or `text/plain` POST from another page reaches the stack through the console.
- With an API key, everything but the static files and /health wants it (the page asks
  for it once and keeps it in sessionStorage). The static files hold no data.

This is the console's own minimal check; it moves to the shared middleware of the
services once that exists.
"""
from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from console.config import ConsoleConfig

OPEN_PREFIXES = ("/static/", "/health")
OPEN_PATHS = {"/", "/favicon.ico"}


def _host_name(host: str) -> str:
    """'example.com:8084' -> 'example.com'; '[::1]:8084' -> '::1'."""
    return urlsplit(f"//{host}").hostname or ""


def refusal(config: ConsoleConfig, method: str, path: str, headers: dict[str, str]) -> tuple[int, str] | None:
    """(status, reason) when the request must be refused, else None."""
    host = headers.get("host", "")
    if _host_name(host) not in config.host_names:
        return 403, f"Host {host[:100]!r} is not this console's name"
    origin = headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != host:
        return 403, f"cross-origin request from {origin[:100]!r} refused"
    if origin == "null" or headers.get("sec-fetch-site") == "cross-site":
        return 403, "cross-site request refused"
    if config.api_key and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES):
        given = headers.get("authorization", "")
        token = given[7:] if given.lower().startswith("bearer ") else ""
        if not secrets.compare_digest(token.encode(), config.api_key.encode()):
            return 401, "missing or wrong API key (Authorization: Bearer ...)"
    return None


class Guard:
    """ASGI middleware applying `refusal` to every HTTP request."""

    def __init__(self, app: ASGIApp, config: ConsoleConfig):
        self.app, self.config = app, config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            refused = refusal(self.config, scope["method"], scope["path"], headers)
            if refused:
                status, message = refused
                kind = "authentication_error" if status == 401 else "forbidden"
                await JSONResponse({"error": {"message": message, "type": kind}}, status)(scope, receive, send)
                return
        await self.app(scope, receive, send)
