"""Reverse proxy from the console to one upstream service (the runtime or the worker).

The browser's request goes upstream with only the headers an API needs (never its cookies,
Origin or Authorization); the console's API key is added here. Bodies stream both ways, so
an upload is not held in memory and server-sent events (chat streaming, job progress) reach
the page as they are produced.
"""
from __future__ import annotations

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

REQUEST_HEADERS = ("accept", "content-type", "content-length", "last-event-id")
# hop-by-hop headers (RFC 9110 7.6.1) and what the ASGI server sets itself
DROPPED_RESPONSE_HEADERS = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-authenticate",
                            "trailer", "te", "content-length", "server", "date"}


class Upstream:
    def __init__(self, name: str, base_url: str, api_key: str | None):
        self.name, self.base_url = name, base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # no read timeout: a long generation or a job's event stream may stay quiet for a while
        self.client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(None, connect=5.0))

    async def forward(self, request: Request, path: str) -> Response:
        url = f"{self.base_url}/{path}"
        if request.url.query:
            url += "?" + request.url.query
        headers = {k: request.headers[k] for k in REQUEST_HEADERS if k in request.headers}
        has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
        upstream = self.client.build_request(request.method, url, headers=headers,
                                             content=request.stream() if has_body else None)
        try:
            response = await self.client.send(upstream, stream=True)
        except httpx.TransportError as e:
            return JSONResponse({"error": {"message": f"the {self.name} at {self.base_url} does not answer: "
                                                      f"{type(e).__name__}", "type": "upstream_unreachable"}}, 502)
        out = {k: v for k, v in response.headers.items() if k.lower() not in DROPPED_RESPONSE_HEADERS}
        return StreamingResponse(response.aiter_raw(), status_code=response.status_code, headers=out,
                                 background=BackgroundTask(response.aclose))

    async def close(self) -> None:
        await self.client.aclose()
