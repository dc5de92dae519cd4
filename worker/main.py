"""The worker's FastAPI app: `create_app(settings)` builds the services and mounts the routes.

Run it with `samevm worker` (or `uvicorn --factory worker.main:create_app`, settings from
the environment). With an API key set, every route but /health wants
`Authorization: Bearer <key>`. httpkit's Guard checks Host/Origin, bounds the body (the
upload limit plus room for the multipart framing) and refuses non-Unicode JSON first.
"""
from __future__ import annotations

import secrets
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from httpkit.errors import error_response
from rag.embedding import Embedder
from httpkit import openapi
from httpkit.guard import Guard, allowed_hosts
from worker import errors
from worker.api.main import api_router
from worker.services import Services
from worker.settings import WorkerSettings

OPEN_PATHS = {"/health"}
MULTIPART_ROOM = 1 << 20        # the body limit is the upload limit plus this for form framing


def create_app(settings: WorkerSettings | None = None, embedder: Embedder | None = None) -> FastAPI:
    settings = settings or WorkerSettings()
    services = Services(settings, embedder)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        services.jobs                   # recovers the jobs a previous worker left running
        yield
        services.close()

    app = FastAPI(title="samevm worker", version="0.1.0", lifespan=lifespan,
                  description="SQL, RAG over documents and PDFs, embeddings, rerank, speech.")
    app.state.services = services
    errors.install(app)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if settings.api_key and request.url.path not in OPEN_PATHS:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not secrets.compare_digest(given.encode(), settings.api_key.encode()):
                return error_response(401, "missing or wrong API key (Authorization: Bearer ...)",
                                      code="authentication_error")
        return await call_next(request)

    app.add_middleware(Guard, max_body_bytes=settings.max_upload_bytes + MULTIPART_ROOM,
                       hosts=allowed_hosts(settings.host, settings.allowed_hosts),
                       respond=lambda status, message, code: error_response(status, message, code=code))

    app.include_router(api_router)
    openapi.install(app)
    return app
