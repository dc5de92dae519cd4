"""Health probes of the stack's services over HTTP, shared by the supervisor and
`samevm status`. A probe never raises: it says whether the service answers, whether it is
ready, and what it said."""
from __future__ import annotations

from dataclasses import dataclass

import httpx

from httpkit.client import auth_headers


@dataclass(frozen=True, slots=True)
class Health:
    up: bool            # something answers HTTP at the address
    ready: bool         # the service says it can serve
    detail: str         # "ok", the service's own message while it loads, or why it is down
    failed: bool = False  # the service answers but says it cannot start (restarting will not help)


def _message(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:200]
    err = body.get("error") if isinstance(body, dict) else None
    return str(err.get("message") if isinstance(err, dict) else err or body)[:300]


def probe_health(base_url: str, timeout: float = 2.0) -> Health:
    """GET <base_url>/health: 200 is ready; the runtime answers 503 while its model loads."""
    try:
        r = httpx.get(base_url + "/health", timeout=timeout)
    except httpx.HTTPError as e:
        return Health(False, False, f"not answering ({type(e).__name__})")
    if r.status_code == 200:
        return Health(True, True, "ok")
    detail = _message(r)
    return Health(True, False, detail, failed="failed to load" in detail)


def probe_mcp(url: str, timeout: float = 2.0) -> Health:
    """An MCP streamable-HTTP endpoint is up when it answers HTTP at all (a bare GET without a
    session is refused with a 4xx by design)."""
    try:
        r = httpx.get(url, timeout=timeout, headers={"Accept": "text/event-stream"})
    except httpx.HTTPError as e:
        return Health(False, False, f"not answering ({type(e).__name__})")
    ok = r.status_code < 500
    return Health(True, ok, "ok" if ok else f"HTTP {r.status_code}")


def runtime_card(base_url: str, api_key: str | None = None, timeout: float = 2.0) -> dict | None:
    """The runtime's /v1/models card (model id, revision, backend, context length), or None."""
    try:
        r = httpx.get(base_url + "/v1/models", timeout=timeout, headers=auth_headers(api_key))
        cards = r.json().get("data") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return cards[0] if cards else None


def worker_models(base_url: str, api_key: str | None = None, timeout: float = 2.0) -> list[dict] | None:
    """The worker's models from /v1/status (name, kind, loaded), or None."""
    try:
        r = httpx.get(base_url + "/v1/status", timeout=timeout, headers=auth_headers(api_key))
        return r.json().get("models") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
