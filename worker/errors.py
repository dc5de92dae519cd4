"""The worker's error handlers, in the runtime's OpenAI shape (httpkit.errors):
{"error": {"message", "type", "param", "code"}}.

Services raise httpkit's APIError (or rag's InputError / NotFoundError / UpstreamError);
the handlers installed by `install` turn each into its 4xx/503 with the message, so routes
stay free of try/except. An unexpected exception is logged and becomes a JSON 500.
"""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request

from httpkit import errors
from httpkit.errors import error_response
from rag.errors import InputError, NotFoundError, UpstreamError

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    errors.install(app)

    @app.exception_handler(InputError)
    async def _input(_: Request, e: InputError):
        return error_response(400, str(e))

    @app.exception_handler(NotFoundError)
    async def _missing(_: Request, e: NotFoundError):
        return error_response(404, str(e.args[0] if e.args else e))

    @app.exception_handler(UpstreamError)
    async def _upstream(_: Request, e: UpstreamError):
        return error_response(503, str(e), code="upstream_error")

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error: {type(e).__name__}", code="server_error")
