"""Hot reload, rollback and the revision registry. Loopback only unless an API key is set."""
from __future__ import annotations

from fastapi import APIRouter

from httpkit.errors import APIError
from runtime.server import loading
from runtime.server.deps import Server
from runtime.server.protocol import ReloadRequest

router = APIRouter(prefix="/admin")


@router.post("/reload")
async def reload(body: ReloadRequest, state: Server):
    """Load a GGUF beside the live one, check it, and swap it in; 409/422 with the reason if refused."""
    return await loading.swap_in(state, body.path, body.revision, "reload")


@router.get("/revisions")
async def revisions(state: Server):
    """Revisions of the served model: active, last known good, and the history."""
    return state.registry.describe()


@router.post("/rollback")
async def rollback(state: Server):
    """Go back to the last known good revision."""
    target = state.registry.last_known_good
    if target is None:
        raise APIError(409, "there is no earlier revision to roll back to", code="no_rollback_target")
    return await loading.swap_in(state, state.registry.entry(target)["path"], target, "rollback")
