"""Hot reload, rollback and the revision registry. Loopback only unless an API key is set."""
from __future__ import annotations

import json

from fastapi import APIRouter
from fastapi.responses import Response

from httpkit.errors import APIError
from runtime.server import loading
from runtime.server.deps import Server
from runtime.server.protocol import ReloadRequest

router = APIRouter(prefix="/admin")


@router.post("/reload")
async def reload(body: ReloadRequest, state: Server):
    """Load a GGUF (default: the live one) with a LoRA adapter or none beside the live
    revision, check it, and swap it in; 409/422 with the reason if refused."""
    return await loading.swap_in(state, body.path, body.revision, "reload", adapter=body.adapter)


@router.get("/revisions")
async def revisions(state: Server):
    """Revisions of the served model: active, last known good, and the history."""
    # ASCII-escaped: a registry written by an older version may hold a path UTF-8 cannot encode
    return Response(json.dumps(state.registry.describe(), ensure_ascii=True), media_type="application/json")


@router.post("/rollback")
async def rollback(state: Server):
    """Go back to the last known good revision, if its file still has the content it served with."""
    target = state.registry.last_known_good
    if target is None:
        raise APIError(409, "there is no earlier revision to roll back to", code="no_rollback_target")
    entry = state.registry.entry(target)
    return await loading.swap_in(state, entry["path"], target, "rollback", expect_digest=entry.get("digest"),
                                 adapter=entry.get("adapter"), expect_adapter=entry.get("adapter_sha256"))
