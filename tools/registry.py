"""The tool registry: each tool is a name, a toolset, a description, a JSON schema and a
handler. The registry imports no tool; tool modules register their typed functions with
`@registry.tool(toolset=...)`.

`call` validates the arguments against the schema, runs the handler and returns an envelope,
{"ok": true, "data": ...} or {"ok": false, "error": "...", "retryable": bool}, so a model's
mistake (an unknown tool, bad arguments, a ToolError the handler raises) becomes an
observation it can correct. Any other exception is a bug in our code and raises. A null given
for an optional argument counts as not given (small models write every parameter out).
"""
from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from tools.context import ToolContext, ToolError
from tools.schema import function_schema


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    toolset: str
    description: str
    parameters: dict
    handler: Callable[..., Any]
    wants_context: bool

    def openai(self) -> dict:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


def ok(data: Any) -> dict:
    return {"ok": True, "data": data}


def error(message: str, retryable: bool = False) -> dict:
    return {"ok": False, "error": message, "retryable": retryable}


class Registry:
    def __init__(self, context: ToolContext | None = None):
        self.context = context
        self.tools: dict[str, Tool] = {}

    def tool(self, toolset: str, name: str | None = None):
        """Decorator: register a typed function as a tool (schema from hints and docstring)."""
        def register(fn: Callable) -> Callable:
            description, schema = function_schema(fn, injected=(ToolContext,))
            wants = any(p.annotation in (ToolContext, "ToolContext")
                        for p in inspect.signature(fn).parameters.values())
            self.add(Tool(name or fn.__name__, toolset, description, schema, fn, wants))
            return fn
        return register

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        Draft202012Validator.check_schema(tool.parameters)
        self.tools[tool.name] = tool

    def select(self, toolsets: list[str] | None = None) -> list[Tool]:
        return [t for t in self.tools.values() if toolsets is None or t.toolset in toolsets]

    def toolsets(self) -> list[str]:
        return sorted({t.toolset for t in self.tools.values()})

    def openai_tools(self, toolsets: list[str] | None = None) -> list[dict]:
        return [t.openai() for t in self.select(toolsets)]

    def call(self, name: str, arguments: dict | str | None = None) -> dict:
        tool = self.tools.get(name)
        if tool is None:
            return error(f"unknown tool {name!r}; available: {', '.join(sorted(self.tools))}")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                return error(f"arguments are not valid JSON ({e.msg} at position {e.pos})")
        if arguments is not None and not isinstance(arguments, dict):
            return error(f"arguments must be a JSON object, not {type(arguments).__name__}")
        # a null for an optional argument means "not given" (small models write them out)
        arguments = {k: v for k, v in (arguments or {}).items()
                     if not (v is None and k not in tool.parameters.get("required", []))}
        problems = sorted(Draft202012Validator(tool.parameters).iter_errors(arguments), key=str)
        if problems:
            where = lambda e: "/".join(map(str, e.path)) or "arguments"  # noqa: E731
            return error("invalid arguments: " + "; ".join(f"{where(e)}: {e.message}" for e in problems))
        try:
            data = tool.handler(self.context, **arguments) if tool.wants_context else tool.handler(**arguments)
        except ToolError as e:
            return error(str(e), e.retryable)
        # Anything else is a bug in a handler: it raises, so it is seen and fixed rather than
        # shown to the model as if the model had erred (the MCP server reports it to its client).
        return ok(data)
