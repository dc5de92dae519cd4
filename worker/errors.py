"""Errors as the worker returns them, in the same OpenAI shape as the runtime server:
{"error": {"message", "type", "param", "code"}}.

Services raise ServiceError (or rag's InputError / NotFoundError / UpstreamError); the
handlers installed by `install` turn each into its 4xx/503 with the message, so routes
stay free of try/except. Request validation failures are 400s naming the parameter. An
unexpected exception is logged and becomes a JSON 500.
"""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from httpkit.echo import clip
from rag.errors import InputError, NotFoundError, UpstreamError

log = logging.getLogger(__name__)

TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
         413: "payload_too_large", 503: "service_unavailable"}


class ServiceError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def error_response(status: int, message: str, code: str | None = None, param: str | None = None,
                   headers: dict | None = None, **extra) -> JSONResponse:
    return JSONResponse({"error": {"message": clip(message), "type": TYPES.get(status, "invalid_request_error"),
                                   "param": param, "code": code, **extra}}, status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service(_: Request, e: ServiceError):
        return error_response(e.status, e.message, e.code, e.param)

    @app.exception_handler(InputError)
    async def _input(_: Request, e: InputError):
        return error_response(400, str(e))

    @app.exception_handler(NotFoundError)
    async def _missing(_: Request, e: NotFoundError):
        return error_response(404, str(e.args[0] if e.args else e))

    @app.exception_handler(UpstreamError)
    async def _upstream(_: Request, e: UpstreamError):
        return error_response(503, str(e), "upstream_error")

    @app.exception_handler(HTTPException)
    async def _http(_: Request, e: HTTPException):
        return error_response(e.status_code, str(e.detail), headers=getattr(e, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, e: RequestValidationError):
        errors = e.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        param = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        message = f"{param}: {first.get('msg', '')}" if param else str(first.get("msg", "invalid request"))
        return error_response(400, message, "invalid_value", param)

    @app.exception_handler(Exception)
    async def _bug(request: Request, e: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error: {type(e).__name__}", "server_error")
