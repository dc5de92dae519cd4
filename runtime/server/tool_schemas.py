"""A request's tools, checked where they enter, and the validation calls are held to.

`ToolSet.from_request(tools)` refuses malformed definitions with ToolSchemaError (a 400:
bad name, duplicate, parameters that are not an object JSON schema). `validate(name, args)`
checks arguments against the tool's schema (types, required, enum, ...) and returns the
problems as readable strings; an empty list means the call may be returned.

jsonschema is imported by the first request with tools, not with the server: it is a tenth of
the server's imports, and a start's first plain request needs none of it.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jsonschema

NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
EMPTY_OBJECT = {"type": "object", "properties": {}}
MAX_PROBLEMS = 5


class ToolSchemaError(ValueError):
    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


@functools.lru_cache(maxsize=1024)
def _check(canonical: str) -> type:
    """The validator class of one parameters schema (given as canonical JSON), after the
    meta-schema check. An agent sends the same few schemas with every step, and checking them
    again was 78% of rendering a training step (a failed check raises, and is not remembered)."""
    import jsonschema

    schema = json.loads(canonical)
    kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    kind.check_schema(schema)
    return kind


@dataclass(slots=True)
class ToolSet:
    schemas: dict[str, dict]                     # name -> parameters schema
    validators: dict[str, jsonschema.protocols.Validator]

    @property
    def names(self) -> set[str]:
        return set(self.schemas)

    @classmethod
    def from_request(cls, tools: list[dict]) -> ToolSet:
        """tools: OpenAI `tools` entries as plain dicts ({"type": "function", "function": {...}})."""
        from jsonschema.exceptions import SchemaError
        schemas, validators = {}, {}
        for i, tool in enumerate(tools):
            fn = tool["function"]
            name, where = fn["name"], f"tools[{i}].function"
            if not NAME.match(name):
                raise ToolSchemaError(f"tool name {name!r} must be 1-64 letters, digits, or _ . : -",
                                      f"{where}.name")
            if name in schemas:
                raise ToolSchemaError(f"tool {name!r} is defined twice", f"{where}.name")
            schema = fn.get("parameters")
            schema = EMPTY_OBJECT if schema is None else schema
            if schema.get("type", "object") != "object":
                raise ToolSchemaError(f"parameters of {name!r} must describe a JSON object",
                                      f"{where}.parameters")
            try:
                kind = _check(json.dumps(schema, sort_keys=True))
            except SchemaError as e:
                raise ToolSchemaError(f"parameters of {name!r} are not a valid JSON schema: {e.message}",
                                      f"{where}.parameters") from e
            schemas[name] = schema
            validators[name] = kind(schema)
        return cls(schemas, validators)

    def validate(self, name: str, arguments: dict) -> list[str]:
        from referencing.exceptions import Unresolvable
        try:
            errors = sorted(self.validators[name].iter_errors(arguments), key=lambda e: list(e.path))
        except Unresolvable as e:
            return [f"its schema has a $ref that cannot be resolved: {e}"]
        problems = []
        for e in errors[:MAX_PROBLEMS]:
            where = "/".join(str(p) for p in e.path)
            problems.append(f"{where}: {e.message}" if where else e.message)
        return problems
