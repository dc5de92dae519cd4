"""Route dependencies: the shared server state, the API key, and the loopback rule for /admin."""
from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request

from httpkit.errors import APIError
from runtime.server.config import is_loopback
from runtime.server.state import ServerState


def get_state(request: Request) -> ServerState:
    return request.app.state.server


Server = Annotated[ServerState, Depends(get_state)]


def require_key(request: Request, state: Server) -> None:
    """With an API key configured, every guarded route needs `Authorization: Bearer <key>`."""
    key = state.config.api_key
    if not key:
        return
    given = request.headers.get("authorization", "")
    token = given[7:] if given.lower().startswith("bearer ") else ""
    if not secrets.compare_digest(token.encode(), key.encode()):
        raise APIError(401, "Incorrect API key provided", code="invalid_api_key")


def require_admin(request: Request, state: Server) -> None:
    """/admin is for the machine itself unless an API key guards it."""
    if state.config.api_key:
        return
    host = request.client.host if request.client else ""
    if not is_loopback(host):
        raise APIError(403, "/admin is only reachable from loopback unless an API key is configured",
                       code="admin_loopback_only")
