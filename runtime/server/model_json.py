"""Reading JSON that a model writes: where an object or array ends while the text is still
streaming, and loading it leniently where small models have a known, safe-to-undo habit."""
from __future__ import annotations

import json


def json_end(text: str, start: int) -> int | None:
    """Index just past the JSON object/array opening at `start` (string-aware bracket
    matching), or None if it has not closed yet."""
    depth, in_str, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def loads_lenient(payload: str):
    """json.loads (strict: no NaN/Infinity), then once more with doubled braces undone
    ({{"name": ...}}, copied by small models from templates that escape their example for
    a format string). Raises ValueError."""
    try:
        return json.loads(payload, parse_constant=_no_constants)
    except ValueError:
        if "{{" not in payload:
            raise
        return json.loads(payload.replace("{{", "{").replace("}}", "}"), parse_constant=_no_constants)
