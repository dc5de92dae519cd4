"""HTTP routes, one module per resource; each answers under /v1 and, like llama.cpp, without it."""
from __future__ import annotations

from typing import Callable

from fastapi import APIRouter


def add_route(router: APIRouter, path: str, endpoint: Callable, methods: list[str], v1: bool = True, **kw) -> None:
    """Register `path` under /v1 (in the OpenAPI schema) and bare (an alias outside it)."""
    if v1:
        router.add_api_route(f"/v1{path}", endpoint, methods=methods, **kw)
    router.add_api_route(path, endpoint, methods=methods, include_in_schema=not v1, **kw)
