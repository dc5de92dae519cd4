"""The console's ASGI app: `create_app(config)`.

    /                 the page (static/index.html); /static/* its scripts and styles
    /runtime/{path}   forwarded to the runtime's API (OpenAI routes, /metrics, /admin)
    /worker/{path}    forwarded to the worker's API (SQL, RAG, jobs)
    /api/*            the console's own: tools, the agent loop, suites
    /health           for the supervisor

Every request passes console.guard first (Host, Origin, API key).
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from console.config import ConsoleConfig
from console.guard import Guard
from console.proxy import Upstream
from console.routes import api_router
from console.state import ConsoleState

STATIC = Path(__file__).parent / "static"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# the page loads nothing from elsewhere and may not be framed (clickjacking)
PAGE_HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
                "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


def create_app(config: ConsoleConfig) -> FastAPI:
    runtime = Upstream("runtime", config.runtime_url, config.api_key)
    worker = Upstream("worker", config.worker_url, config.api_key)
    state = ConsoleState(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await runtime.close()
        await worker.close()
        state.close()

    app = FastAPI(title="samevm console", version="0.1.0", lifespan=lifespan, docs_url="/api/docs",
                  redoc_url=None, openapi_url="/api/openapi.json")
    app.state.console = state
    app.add_middleware(Guard, config=config)
    app.include_router(api_router, prefix="/api")

    @app.api_route("/runtime/{path:path}", methods=METHODS, include_in_schema=False)
    async def to_runtime(request: Request, path: str):
        return await runtime.forward(request, path)

    @app.api_route("/worker/{path:path}", methods=METHODS, include_in_schema=False)
    async def to_worker(request: Request, path: str):
        return await worker.forward(request, path)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
