"""JSON schema of a tool's parameters, derived from its type hints and docstring.

    def sql_query(ctx: ToolContext, db: str, sql: str, limit: int = 100) -> dict:
        '''Run a read-only SQL query.

        Args:
            db: name of the database
            sql: one SELECT statement
            limit: most rows to return
        '''

gives the description "Run a read-only SQL query." and an object schema with `db` and
`sql` required. Parameters annotated with an injected type (the tool context) are left out.
"""
from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

PRIMITIVES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(tp: Any) -> dict:
    """JSON schema for one annotation (primitives, Literal, list, dict, Optional/union)."""
    origin, args = get_origin(tp), get_args(tp)
    if tp in PRIMITIVES:
        return {"type": PRIMITIVES[tp]}
    if origin is Literal:
        values = list(args)
        return {"type": PRIMITIVES[type(values[0])], "enum": values}
    if origin in (list, tuple, set) or tp in (list, tuple, set):
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is dict or tp is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])} if args else {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return type_schema(options[0])
        return {"anyOf": [type_schema(a) for a in options]}
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    raise TypeError(f"no JSON schema for annotation {tp!r}")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-style docstring with an Args: section."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    head, _, rest = doc.partition("\nArgs:\n")
    description = " ".join(head.split("\n\n")[0].split())
    params: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        if line and not line[0].isspace():     # the next section (Returns:, ...) ends Args
            break
        m = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
        if m and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = m.group(1)
            params[current] = m.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    return description, params


def function_schema(fn, injected: tuple[type, ...] = ()) -> tuple[str, dict]:
    """(description, parameters schema) of `fn`; parameters typed as `injected` are skipped."""
    hints = typing.get_type_hints(fn)
    description, docs = parse_docstring(fn.__doc__)
    properties, required = {}, []
    for name, p in inspect.signature(fn).parameters.items():
        tp = hints.get(name, Any)
        if isinstance(tp, type) and issubclass(tp, injected):
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{fn.__name__}: tools take named parameters only, not *{name}")
        prop = type_schema(tp)
        if name in docs:
            prop["description"] = docs[name]
        if p.default is inspect.Parameter.empty:
            required.append(name)
        elif p.default is not None:
            prop["default"] = p.default
        properties[name] = prop
    if not description:
        raise ValueError(f"{fn.__name__}: a tool needs a docstring saying what it does")
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return description, schema
