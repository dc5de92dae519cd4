"""The promote/reload handshake with the runtime server's admin API.

promote() asks the runtime to load a revision's GGUF (`POST /admin/reload`), which checks it
and swaps it in between two engine steps, then reads `GET /admin/revisions` to record the
revision actually served. A refusal (409/422: wrong architecture or tokenizer, a corrupt
file, a failed smoke test) comes back as PromotionError with the runtime's reason, and the
old revision keeps serving.
"""
from __future__ import annotations

import httpx

from httpkit.client import client

RELOAD_TIMEOUT_S = 900.0      # a reload loads and smoke-tests a model: minutes for a large one on CPU


class PromotionError(RuntimeError):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class RuntimeAdmin:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = RELOAD_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.http = client(self.url, api_key, timeout)

    def _call(self, method: str, path: str, **kw) -> dict:
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise PromotionError(f"the runtime at {self.url} is unreachable: {e}") from e
        if r.status_code >= 400:
            try:
                reason = r.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                reason = r.text[:500]
            raise PromotionError(f"the runtime refused {method} {path} ({r.status_code}): {reason}", r.status_code)
        return r.json()

    def reload(self, path: str, revision: str) -> dict:
        return self._call("POST", "/admin/reload", json={"path": path, "revision": revision})

    def revisions(self) -> dict:
        return self._call("GET", "/admin/revisions")

    def rollback(self) -> dict:
        return self._call("POST", "/admin/rollback")

    def close(self) -> None:
        self.http.close()


def promote(url: str, path: str, revision: str, api_key: str | None = None) -> dict:
    """Reload the runtime onto `path` as `revision`; returns what it now serves."""
    admin = RuntimeAdmin(url, api_key)
    try:
        reply = admin.reload(path, revision)
        active = admin.revisions().get("active")
    finally:
        admin.close()
    if active != revision:
        raise PromotionError(f"the runtime accepted {revision} but now serves {active}")
    return {"served_revision": active, "previous_revision": reply.get("previous"),
            "load_seconds": reply.get("load_seconds"), "draining_requests": reply.get("draining_requests")}
