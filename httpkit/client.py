"""The one way to build an HTTP client for samevm's loopback services (the runtime, the
worker, each other): a base URL without its trailing slash and `Authorization: Bearer <key>`
when a key is configured."""
from __future__ import annotations

import httpx


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def client(base_url: str = "", api_key: str | None = None, timeout: float | None = 60.0,
           headers: dict[str, str] | None = None) -> httpx.Client:
    """An httpx.Client for base_url (requests then take paths) with the key's header; timeout
    None waits for ever (a followed event stream)."""
    return httpx.Client(base_url=base_url.rstrip("/"), headers={**auth_headers(api_key), **(headers or {})},
                        timeout=timeout)
