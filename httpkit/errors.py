"""OpenAI-style errors for both services: every refusal is
{"error": {"message", "type", "param", "code"}}.

Routes and services raise APIError; `install` turns it, FastAPI's request validation (bad
JSON, wrong types, unknown fields: a 400 naming the offending parameter, as OpenAI answers)
and Starlette's HTTP exceptions into that body. Each service adds handlers for its own
exceptions with `error_response`.
"""
from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from httpkit.echo import clip

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "invalid_request_error", 405: "invalid_request_error", 409: "conflict_error",
         413: "invalid_request_error", 422: "invalid_request_error", 503: "service_unavailable"}


class APIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None, **extra):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.extra = status, message, param, code, extra


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None, **extra) -> dict:
    return {"error": {"message": clip(message), "type": TYPES.get(status, "server_error"),
                      "param": param, "code": code, **extra}}


class ErrorJSON(JSONResponse):
    """ASCII-escaped: an error may quote the client's input, which can hold lone surrogates
    that UTF-8 cannot encode."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(status: int, message: str, *, param: str | None = None, code: str | None = None,
                   headers: dict | None = None, **extra) -> JSONResponse:
    return ErrorJSON(error_body(status, message, param=param, code=code, **extra), status_code=status, headers=headers)


def _param(loc: tuple) -> str | None:
    parts = [str(p) for p in loc if p != "body"]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or None


def _validation_message(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return f"Unrecognized request argument supplied: {_param(err['loc'])}"
    if err["type"] == "json_invalid":
        return f"We could not parse the JSON body of your request: {err.get('ctx', {}).get('error', err['msg'])}"
    where = _param(err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def install(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, e: APIError):
        return error_response(e.status, e.message, param=e.param, code=e.code, **e.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError):
        errors = e.errors()
        first = errors[0] if errors else {"type": "invalid", "loc": (), "msg": "invalid request"}
        code = "unknown_parameter" if first["type"] == "extra_forbidden" else "invalid_value"
        message = _validation_message(first)
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        return error_response(400, message, param=_param(first["loc"]), code=code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, e: StarletteHTTPException):
        return error_response(e.status_code, str(e.detail), headers=getattr(e, "headers", None))
