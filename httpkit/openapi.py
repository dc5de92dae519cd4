"""The OpenAPI schema says what the services answer: FastAPI documents a request that fails
validation as 422 with its own body, while both services answer 400 with OpenAI's error
shape ({"error": {"message", "type", "param", "code"}}), as OpenAI's API does."""
from __future__ import annotations

ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"],
    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                   "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}
VALIDATION_REF = "#/components/schemas/HTTPValidationError"


def validation_as_400(schema: dict) -> dict:
    """`schema` with every validation 422 documented as the 400 the services send."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorResponse"] = ERROR
    invalid = {"description": "Invalid request (the message names the parameter)",
               "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {}) if isinstance(operation, dict) else {}
            body = responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if body.get("$ref") == VALIDATION_REF:
                del responses["422"]
                responses.setdefault("400", invalid)
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    return schema


def install(app) -> None:
    """Make `app.openapi()` build its schema through validation_as_400 (once, then cached)."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = validation_as_400(build())
        return app.openapi_schema
    app.openapi = openapi
