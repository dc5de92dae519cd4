"""The outermost ASGI layer of both services: what every request must pass before any route
sees it, and the last catch for what no route handled.

- Host and Origin: the Host header must name this server (loopback names by default, plus
  the bound address and any configured names), else 421; an Origin header, when a browser
  sends one, must name an allowed host too, else 403. A page on another site then cannot
  reach the API through DNS rebinding or a cross-site form/`text/plain` POST.
- The body limit counts bytes as they arrive (chunked bodies included), so a route never
  reads, parses or tokenizes more than `max_body_bytes`: 413 at once for a larger declared
  Content-Length, and 413 as soon as a streamed body passes the limit.
- A JSON body must be text: a lone surrogate escape ("\\ud800") decodes to a str that
  UTF-8 cannot encode and no tokenizer, regex engine or database takes, so it is refused
  with 400 here, once, for every route; so is JSON nested deeper than Python can parse.
- A NUL byte in the URL path is refused with 400.
- An exception no handler took becomes a JSON 500 sent from here, so uvicorn keeps the
  keep-alive connection open instead of resetting it.

`respond(status, message, code)` renders each refusal in the service's own error shape.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import re
from typing import Callable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
MAX_JSON_DEPTH = 200
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

Respond = Callable[[int, str, str], Response]


def allowed_hosts(bind_host: str, extra: tuple[str, ...] | list[str] = ()) -> frozenset[str]:
    """Host names a request may address: loopback, the bound address, and `extra`. Bound to
    every interface ("0.0.0.0"), any name reaches the server, so any is allowed (that bind
    needs an API key, which a browser page cannot know); "*" in `extra` allows any too."""
    if bind_host in WILDCARD_BINDS:
        return frozenset({"*"})
    return frozenset({*LOOPBACK_NAMES, bind_host.strip("[]").lower(), *(h.lower() for h in extra)})


def host_name(value: str) -> str | None:
    """The host of a Host header value ("name", "name:port", "[v6]:port"), lowercased; None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, closed, rest = value[1:].partition("]")
        if not closed or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
        return name
    name, _, port = value.partition(":")
    if not name or (port and not port.isdigit()):
        return None
    return name


class BodyTooLarge(Exception):
    pass


class Guard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int, hosts: frozenset[str], respond: Respond):
        self.app, self.max_body_bytes, self.hosts, self.respond = app, max_body_bytes, hosts, respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self.check_headers(scope)
        if refusal is not None:
            return await refusal(scope, receive, send)
        started = False
        overflow: list[bool] = []

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if overflow:       # the app read past the limit and answered (FastAPI's form parser: 400)
                if not started and message["type"] == "http.response.start":
                    started = True
                    await self.too_large()(scope, receive, send)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            receive = await self.checked_body(scope, receive, overflow)
            await self.app(scope, receive, tracked_send)
        except BodyTooLarge:
            if started:
                raise
            await self.too_large()(scope, receive, send)
        except _Refused as e:
            await e.response(scope, receive, send)
        except Exception:
            if started:        # part of a response is out: only closing the connection can say so
                raise
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            await self.respond(500, "internal error; the server log has the details",
                               "server_error")(scope, receive, send)

    # ---- the checks ------------------------------------------------------------------
    def check_headers(self, scope: Scope) -> Response | None:
        if "\x00" in scope.get("path", ""):
            return self.respond(400, "the URL path contains a NUL byte", "invalid_path")
        headers = Headers(scope=scope)
        if "*" not in self.hosts:
            name = host_name(headers.get("host", ""))
            if name not in self.hosts:
                return self.respond(421, "this server does not answer to that Host header (it accepts "
                                         "loopback names and the configured allowed hosts)", "invalid_host")
            origin = headers.get("origin")
            if origin is not None and not self.origin_allowed(origin):
                return self.respond(403, "cross-origin requests are refused (the Origin header names "
                                         "another site)", "invalid_origin")
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            return self.too_large()
        return None

    def origin_allowed(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin)
            name = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and name is not None and name in self.hosts

    def too_large(self) -> Response:
        return self.respond(413, f"the request body is over the limit of {self.max_body_bytes} bytes",
                            "payload_too_large")

    async def checked_body(self, scope: Scope, receive: Receive, overflow: list[bool]) -> Receive:
        """`receive` counting the body as it streams (past the limit it raises, and marks
        `overflow`); a JSON body is read whole (bounded) and checked first, then replayed."""
        counted = 0

        async def counting() -> Message:
            nonlocal counted
            message = await receive()
            if message["type"] == "http.request":
                counted += len(message.get("body", b""))
                if counted > self.max_body_bytes:
                    overflow.append(True)
                    raise BodyTooLarge
            return message

        content_type = Headers(scope=scope).get("content-type", "").split(";")[0].strip().lower()
        if scope.get("method") in ("GET", "HEAD") or not (content_type in ("", "application/json")
                                                          or content_type.endswith("+json")):
            return counting
        chunks, trailing = [], None
        while True:
            message = await counting()
            if message["type"] != "http.request":
                trailing = message
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = json_problem(body)
        if problem is not None:
            raise _Refused(self.respond(400, problem, "invalid_value"))
        replay = [{"type": "http.request", "body": body, "more_body": False}] + ([trailing] if trailing else [])

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()
        return replayed


class _Refused(Exception):
    def __init__(self, response: Response):
        self.response = response


def json_problem(body: bytes) -> str | None:
    """Why a JSON body cannot be taken although it parses, or None. Only bodies that could
    have the problem are parsed here (the route parses again); invalid JSON is the route's
    to report."""
    deep = body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH
    if not deep and not SURROGATE_ESCAPE.search(body):
        return None
    try:
        value = json.loads(body)
    except RecursionError:
        return "the JSON body is nested too deeply"
    except ValueError:
        return None
    if deep and _depth(value) > MAX_JSON_DEPTH:
        return f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "the JSON body holds text that is not valid Unicode (a lone surrogate such as \\ud800)"
    return None


def _depth(value, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of parsed JSON, counted without recursion (stops past `limit`)."""
    depth, level = 0, [value]
    while level and depth <= limit:
        depth += 1
        level = [v for item in level if isinstance(item, (list, dict))
                 for v in (item.values() if isinstance(item, dict) else item)
                 if isinstance(v, (list, dict))]
    return depth
