"""The app factory. The port opens at once; the model loads in a background thread
(/health answers 503 until it serves). Responses carry `x-samevm-backend` and
`x-samevm-revision`: generation routes set the revision that actually served them,
everything else gets the live one."""
from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import Callable

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi

from httpkit import errors
from httpkit.guard import Guard, allowed_hosts
from httpkit.openapi import validation_as_400
from runtime.server import loading
from runtime.server.config import ServerConfig
from runtime.server.deps import require_admin, require_key
from runtime.server.revisions import RevisionRegistry
from runtime.server.routes import admin, openai, service
from runtime.server.state import ServerState

log = logging.getLogger(__name__)
KNOWN_ROUTES = {"/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions",
                "/v1/models", "/models", "/health", "/metrics", "/tokenize", "/detokenize",
                "/admin/reload", "/admin/revisions", "/admin/rollback"}


class ServedHeaders:
    """Pure ASGI middleware (streams pass straight through): adds the served-by headers when
    the route did not, and counts requests by route and status."""

    def __init__(self, app, state: ServerState):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = []
                engine = self.state.loop.live if self.state.loop else None
                if engine and b"x-samevm-revision" not in names:
                    extra = [(b"x-samevm-backend", engine.ops.name.encode()),
                             (b"x-samevm-revision", engine.revision.encode())]
                message = {**message, "headers": list(message.get("headers", [])) + extra}
                route = scope["path"] if scope["path"] in KNOWN_ROUTES else "other"
                self.state.metrics.observe_request(route, message["status"])
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _load(start: Callable[[ServerState], None], state: ServerState) -> None:
    try:
        start(state)
    except Exception as e:                 # a bug while loading: say so on /health, not "loading"
        state.load_error = f"{type(e).__name__}: {e}"
        log.exception("loading the model failed")


def create_app(config: ServerConfig, start: Callable[[ServerState], None] = loading.start) -> FastAPI:
    """`start(state)` loads the model (blocking; run in a thread) and sets state.loop or
    state.load_error; tests pass their own to hold the server in its loading state."""
    state = ServerState(config, RevisionRegistry(config.revisions_dir, config.model_id))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loader = threading.Thread(target=_load, args=(start, state), name="model-loader", daemon=True)
        loader.start()
        yield
        if state.loop is not None:
            state.loop.close()

    app = FastAPI(title="samevm runtime", version="0.1.0", lifespan=lifespan,
                  description="OpenAI-compatible chat and completions with tool calling, "
                              "structured output and hot reload.")
    app.state.server = state
    errors.install(app)
    guarded = [Depends(require_key)]
    app.include_router(openai.router, dependencies=guarded)
    app.include_router(service.public)
    app.include_router(service.router, dependencies=guarded)
    app.include_router(admin.router, dependencies=guarded + [Depends(require_admin)])
    app.add_middleware(Guard, max_body_bytes=config.max_body_bytes,
                       hosts=allowed_hosts(config.host, config.allowed_hosts),
                       respond=lambda status, message, code: errors.error_response(status, message, code=code))
    app.add_middleware(ServedHeaders, state=state)
    app.openapi = lambda: served_model_schema(app, config.model_id)
    return app


def served_model_schema(app: FastAPI, model_id: str) -> dict:
    """The OpenAPI schema, saying which `model` this server answers to (others get 404)."""
    if app.openapi_schema is None:
        schema = validation_as_400(get_openapi(title=app.title, version=app.version,
                                               description=app.description, routes=app.routes))
        for component in schema.get("components", {}).get("schemas", {}).values():
            model = component.get("properties", {}).get("model")
            if model is not None:
                model.clear()
                model.update({"type": "string", "enum": [model_id], "title": "Model"})
        app.openapi_schema = schema
    return app.openapi_schema
