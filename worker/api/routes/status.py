"""Health, status (models, memory, GPU, data directory) and cache clearing."""
from __future__ import annotations

from fastapi import APIRouter

from worker import catalog, status as status_service
from worker.deps import ServicesDep

router = APIRouter()


@router.get("/health")
def health() -> dict:
    """Liveness: answers as soon as the server runs, without loading anything."""
    return {"status": "ok"}


@router.get("/v1/status")
def status(services: ServicesDep) -> dict:
    """Models (loaded or not), memory, GPU memory when present, data directory usage."""
    return status_service.status(services.models(), services.settings.home)


@router.get("/v1/models")
def models(services: ServicesDep) -> dict:
    """The worker's models and whether each is installed (OpenAI's list shape)."""
    rows = catalog.listing(services.settings.home)
    return {"object": "list", "data": [{"id": r["name"], "object": "model", "owned_by": "samevm",
                                        "installed": r["installed"], "description": r["description"]}
                                       for r in rows]}


@router.post("/v1/cache/clear")
def clear(services: ServicesDep) -> dict:
    """Unload every loaded model; the next request that needs one loads it again."""
    return {"unloaded": [m.name for m in services.models() if m.unload()]}
