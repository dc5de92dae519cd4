"""Model text -> content and structured tool calls, incrementally and at the end.

A call is a JSON object {"name": ..., "arguments": {...}} (also "parameters", or wrapped as
{"function": {...}}), or a list of them, found in one of three kinds of span:
`<tool_call>...</tool_call>` (Hermes/Qwen), a fenced block (```json ... ```), or bare JSON
starting a line. A span becomes calls only if every object in it names one of the request's
tools and its arguments validate against that tool's schema; otherwise the span's text
stays content and the reason goes to `errors`. A span cut off before its JSON closes is
never a call. A call repeating an earlier one of the same output exactly is dropped (small
models loop on a call), as are calls after the first when parallel calls are off.

`ToolCallStream.feed(delta)` returns the events that are settled so far; `finish()` the
rest. `parse(text)` is the same machine fed once, so streamed and non-streamed results are
equal by construction, whatever the chunking. Content is trimmed of leading and trailing
whitespace (trailing whitespace is held until something follows it).
"""
from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass, field
from typing import Callable

from runtime.server.model_json import json_end, loads_lenient

TAG_OPEN, TAG_CLOSE, FENCE = "<tool_call>", "</tool_call>", "```"
JSON_FENCE_LANGS = {"", "json", "tool_call", "tool_calls", "jsonc"}
_FENCE_HEAD = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\r?\n")
_ID_CHARS = string.ascii_letters + string.digits

# validate(name, arguments) -> error strings; [] when the call is acceptable
Validator = Callable[[str, dict], list[str]]


def new_call_id() -> str:
    return "call_" + "".join(secrets.choice(_ID_CHARS) for _ in range(24))


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: str                  # compact JSON object text, "{}" when empty
    id: str = field(default_factory=new_call_id)


@dataclass(slots=True)
class Event:
    content: str = ""               # text to append to the message content
    call: ToolCall | None = None


@dataclass(slots=True)
class ParseResult:
    content: str | None
    calls: list[ToolCall]
    errors: list[str]


def _as_call(obj) -> tuple[str, object] | None:
    """(name, raw arguments) of a call-shaped object, else None."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str):
        return None
    args = obj.get("arguments", obj.get("parameters"))
    return name, {} if args is None else args


class ToolCallStream:
    def __init__(self, tool_names: set[str], validate: Validator, parallel: bool = True):
        self.tool_names = tool_names
        self.validate = validate
        self.parallel = parallel
        self.text = ""
        self.pos = 0                  # text[:pos] is settled
        self.in_code = False          # inside a fenced block of another language
        self.calls: list[ToolCall] = []
        self.errors: list[str] = []
        self._started = False         # a non-whitespace content character has been emitted
        self._held_ws = ""            # trailing content whitespace not yet emitted

    def feed(self, delta: str) -> list[Event]:
        self.text += delta
        return self._advance(final=False)

    def finish(self) -> list[Event]:
        return self._advance(final=True)

    # ---- scanning --------------------------------------------------------------------
    def _advance(self, final: bool) -> list[Event]:
        out: list[Event] = []
        while True:
            if self.in_code and not self._skip_code(final, out):
                return out
            start, settled = self._next_candidate(final)
            if start is None:
                self._content(self.text[self.pos:settled], out)
                self.pos = settled
                return out
            self._content(self.text[self.pos:start], out)
            self.pos = start
            end, payload = self._span(start, final)
            if end is None and not final:
                return out
            if end is None:                      # cut off: the text stays content
                span = self.text[start:]
                if '"name"' in span:
                    self.errors.append("an unfinished tool call was cut off; returned as text")
                self._content(span, out)
                self.pos = len(self.text)
                return out
            self._resolve(self.text[start:end], payload, out)
            self.pos = end

    def _skip_code(self, final: bool, out: list[Event]) -> bool:
        """Inside a code block: emit it as content up to its closing fence. False while the
        fence has not closed."""
        close = self.text.find(FENCE, self.pos)
        if close < 0:
            settled = len(self.text) if final else _hold_partial(self.text, self.pos, (FENCE,))
            self._content(self.text[self.pos:settled], out)
            self.pos = settled
            return False
        self._content(self.text[self.pos:close + len(FENCE)], out)
        self.pos = close + len(FENCE)
        self.in_code = False
        return True

    def _next_candidate(self, final: bool) -> tuple[int | None, int]:
        """(start of the next possible call span or None, how far the text is settled when
        there is none: a trailing prefix of a marker is held until more text arrives)."""
        text, n = self.text, len(self.text)
        for i in range(self.pos, n):
            c = text[i]
            if c == "<" and text.startswith(TAG_OPEN, i) or c == "`" and text.startswith(FENCE, i):
                return i, n
            if c in "{[" and self._line_blank(i):
                rest = text[i + 1:].lstrip()
                if c == "{" or rest.startswith("{"):
                    return i, n
                if not rest and not final:       # "[" at the end: wait for what follows
                    return None, i
        return None, (n if final else _hold_partial(text, self.pos, (TAG_OPEN, FENCE)))

    def _line_blank(self, i: int) -> bool:
        line_start = self.text.rfind("\n", 0, i) + 1
        return not self.text[line_start:i].strip(" \t")

    def _span(self, start: int, final: bool) -> tuple[int | None, str]:
        """(end, JSON payload) of the span at `start`; end None while it is incomplete."""
        text = self.text
        if text.startswith(TAG_OPEN, start):
            body = start + len(TAG_OPEN)
            close = text.find(TAG_CLOSE, body)
            if close >= 0:
                return close + len(TAG_CLOSE), _strip_fence(text[body:close])
            return self._unclosed(body, final)
        if text.startswith(FENCE, start):
            head = _FENCE_HEAD.match(text, start)
            if head is None:
                line_end = text.find("\n", start)
                if line_end < 0:
                    return (len(text), "") if final else (None, "")
                return line_end + 1, ""          # not a fence head (```inline```): text
            if head.group(1).lower() not in JSON_FENCE_LANGS:
                self.in_code = True              # ```python: its body is never a call
                return head.end(), ""
            close = text.find(FENCE, head.end())
            if close >= 0:
                return close + len(FENCE), text[head.end():close]
            return self._unclosed(head.end(), final)
        end = json_end(text, start)
        return end, text[start:end] if end else ""

    def _unclosed(self, body: int, final: bool) -> tuple[int | None, str]:
        """A tag or fence whose closer never came counts at the end of the output if its
        JSON closed and only whitespace follows (a model may stop right after the JSON)."""
        if not final:
            return None, ""
        lead = len(self.text) - len(self.text[body:].lstrip())
        end = json_end(self.text, lead) if self.text[lead:lead + 1] in ("{", "[") else None
        if end is None or self.text[end:].strip():
            return None, ""
        return len(self.text), self.text[lead:end]

    # ---- resolving -------------------------------------------------------------------
    def _resolve(self, span: str, payload: str, out: list[Event]) -> None:
        calls, errors = self._calls_in(payload)
        self.errors.extend(errors)
        if calls is None:
            self._content(span, out)
            return
        for call in calls:
            if self.calls and not self.parallel:
                self.errors.append(f"parallel_tool_calls is false: dropped a second call to {call.name!r}")
            elif any((c.name, c.arguments) == (call.name, call.arguments) for c in self.calls):
                self.errors.append(f"dropped a repeated identical call to {call.name!r}")
            else:
                self.calls.append(call)
                out.append(Event(call=call))

    def _calls_in(self, payload: str) -> tuple[list[ToolCall] | None, list[str]]:
        if not payload.strip():
            return None, []
        try:
            obj = loads_lenient(payload)
        except ValueError as e:
            looks = '"name"' in payload
            return None, [f"tool call is not valid JSON: {e}"] if looks else []
        items = obj if isinstance(obj, list) else [obj]
        parsed = [_as_call(item) for item in items]
        if not items or any(p is None for p in parsed):
            return None, []                      # JSON, but not call-shaped: plain content
        calls, errors = [], []
        for name, raw in parsed:
            if name not in self.tool_names:
                errors.append(f"{name!r} is not one of the request's tools")
                continue
            args = raw
            if isinstance(raw, str):
                try:
                    args = loads_lenient(raw) if raw.strip() else {}
                except ValueError:
                    errors.append(f"arguments of {name!r} are a string that is not JSON")
                    continue
            if not isinstance(args, dict):
                errors.append(f"arguments of {name!r} must be a JSON object, not {type(args).__name__}")
                continue
            problems = self.validate(name, args)
            if problems:
                errors.extend(f"{name}: {p}" for p in problems)
                continue
            calls.append(ToolCall(name, json.dumps(args, ensure_ascii=False)))
        return (None if errors else calls), errors

    def _content(self, piece: str, out: list[Event]) -> None:
        """Emit content, trimmed: nothing before the first non-whitespace character, and
        whitespace at the end held until something follows it."""
        if not piece:
            return
        body = piece.rstrip()
        if not body:
            if self._started:
                self._held_ws += piece
            return
        if not self._started:
            body = body.lstrip()
            self._held_ws = ""
            self._started = True
        out.append(Event(content=self._held_ws + body))
        self._held_ws = piece[len(piece.rstrip()):]


def _hold_partial(text: str, pos: int, markers: tuple[str, ...]) -> int:
    """Where settled text ends: before a trailing proper prefix of one of `markers`."""
    for k in range(max(pos, len(text) - max(map(len, markers)) + 1), len(text)):
        tail = text[k:]
        if any(m.startswith(tail) for m in markers):
            return k
    return len(text)


def _strip_fence(payload: str) -> str:
    """The JSON inside a tag, which some models wrap in a fence too."""
    inner = payload.strip()
    head = _FENCE_HEAD.match(inner)
    if head and inner.endswith(FENCE):
        return inner[head.end():-len(FENCE)]
    return inner


def collect(events: list[Event], stream: ToolCallStream) -> ParseResult:
    text = "".join(e.content for e in events)
    return ParseResult(text or None, [e.call for e in events if e.call], list(stream.errors))


def parse(text: str, tool_names: set[str], validate: Validator, parallel: bool = True) -> ParseResult:
    """Parse a whole output at once (the non-streaming path)."""
    stream = ToolCallStream(tool_names, validate, parallel)
    events = stream.feed(text) + stream.finish()
    return collect(events, stream)
