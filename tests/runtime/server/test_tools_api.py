"""Tool calling and structured output through the `openai` client: every tool_choice mode,
parallel calls on and off, validation failures, cut-off calls, response_format, and
streamed results equal to non-streamed ones.

A random model never writes a call by itself; `structured_outputs` (a samevm extension)
forces its output to a given text, which is how the tool_choice=auto parsing is driven
end to end here. required/named modes are enforced by the server's own grammar.
"""
from __future__ import annotations

import json

import jsonschema
import pytest

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 5}},
           "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time now"}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
SCHEMAS = {"get_weather": WEATHER, "get_time": {"type": "object", "properties": {}}}


def literal(text: str) -> str:
    """A regex matching exactly `text` (llguidance's regex syntax)."""
    return "".join("\\n" if c == "\n" else "\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)


def forced(text: str) -> dict:
    return {"structured_outputs": {"regex": literal(text)}}


def whole(r) -> tuple:
    c = r.choices[0]
    calls = [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls or []]
    return c.message.content, calls, c.finish_reason, r.model_extra["samevm"].get("tool_call_errors", [])


def streamed(chunks) -> tuple:
    """Reassemble a stream the way OpenAI clients do, checking the delta contract."""
    content, calls, finish, errors = "", {}, None, []
    for ch in chunks:
        if not ch.choices:
            continue
        c = ch.choices[0]
        content += c.delta.content or ""
        for tc in c.delta.tool_calls or []:
            if tc.index not in calls:
                assert tc.index == len(calls), "indexes count up from 0"
                assert tc.id.startswith("call_") and tc.function.name and tc.function.arguments == ""
                calls[tc.index] = [tc.function.name, ""]
            else:
                assert tc.id is None and tc.function.name is None, "the name comes once, first"
                calls[tc.index][1] += tc.function.arguments
        if c.finish_reason:
            finish = c.finish_reason
            errors = ch.model_extra["samevm"].get("tool_call_errors", [])
    return content or None, [(n, json.loads(a)) for n, a in calls.values()], finish, errors


def both(server, **kw) -> tuple:
    c = server.client()
    args = {"model": server.model_id, "messages": ASK, "tools": TOOLS, "temperature": 0, "max_tokens": 120, **kw}
    a = whole(c.chat.completions.create(**args))
    b = streamed(c.chat.completions.create(**args, stream=True))
    assert a == b, "streamed and non-streamed results differ"
    return a


def assert_valid(calls):
    for name, args in calls:
        jsonschema.validate(args, SCHEMAS[name])


def test_required_yields_a_valid_call(server):
    content, calls, finish, errors = both(server, tool_choice="required", max_tokens=400)
    assert content is None and finish == "tool_calls"
    assert all("repeated identical call" in e for e in errors)     # a random model loops on its call
    assert 1 <= len(calls) and {n for n, _ in calls} <= set(SCHEMAS)
    assert_valid(calls)


def test_required_without_parallel_is_one_call(server):
    for seed in range(3):
        _, calls, finish, _ = both(server, tool_choice="required", parallel_tool_calls=False,
                                   temperature=1.0, seed=seed)
        assert len(calls) == 1 and finish == "tool_calls"
        assert_valid(calls)


def test_named_choice_calls_that_tool(server):
    choice = {"type": "function", "function": {"name": "get_time"}}
    _, calls, finish, _ = both(server, tool_choice=choice)
    assert calls == [("get_time", {})] and finish == "tool_calls"
    _, calls, _, _ = both(server, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert [n for n, _ in calls] == ["get_weather"]
    assert_valid(calls)


CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'


@pytest.mark.parametrize("text", [
    f"```json\n{CALL}\n```",
    f"<tool_call>\n{CALL}\n</tool_call>",
    CALL,
    f"Let me look that up.\n{CALL}",
])
def test_auto_parses_the_models_call(server, text):
    content, calls, finish, errors = both(server, tool_choice="auto", extra_body=forced(text))
    assert calls == [("get_weather", {"city": "Paris", "days": 2})]
    assert finish == "tool_calls" and errors == []
    assert content == ("Let me look that up." if text.startswith("Let") else None)


def test_auto_without_a_call_is_plain_content(server):
    content, calls, finish, _ = both(server, max_tokens=15)
    assert calls == [] and finish == "length" and content


def test_parallel_on_and_off(server):
    two = f'{CALL}\n{{"name": "get_time", "arguments": {{}}}}'
    _, calls, _, _ = both(server, extra_body=forced(two))
    assert calls == [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]
    _, calls, _, errors = both(server, extra_body=forced(two), parallel_tool_calls=False)
    assert calls == [("get_weather", {"city": "Paris", "days": 2})]
    assert "parallel_tool_calls is false" in errors[0]


def test_empty_arguments_stream_as_an_empty_object(server):
    c = server.client()
    chunks = list(c.chat.completions.create(model=server.model_id, messages=ASK, tools=TOOLS, max_tokens=60,
                                            stream=True, extra_body=forced('{"name": "get_time"}')))
    args = "".join(tc.function.arguments or "" for ch in chunks if ch.choices
                   for tc in ch.choices[0].delta.tool_calls or [])
    assert args == "{}"


@pytest.mark.parametrize("text, reason", [
    ('{"name": "get_weather", "arguments": {"city": "Atlantis"}}', "is not one of"),
    ('{"name": "get_weather", "arguments": {"days": 2}}', "'city' is a required property"),
    ('{"name": "get_weather", "arguments": {"city": "Rome", "days": "two"}}', "is not of type 'integer'"),
    ('{"name": "launch_rockets", "arguments": {}}', "not one of the request's tools"),
])
def test_invalid_calls_come_back_as_content_with_reasons(server, text, reason):
    content, calls, finish, errors = both(server, extra_body=forced(text))
    assert calls == [] and content == text and finish == "stop"
    assert any(reason in e for e in errors), errors


def test_cut_off_call_is_not_a_call(server):
    content, calls, finish, errors = both(server, max_tokens=12, extra_body=forced(CALL))
    assert calls == [] and finish == "length"
    assert content and CALL.startswith(content)
    assert any("cut off" in e for e in errors)


def test_tool_choice_none_neither_lists_tools_nor_parses(server):
    content, calls, finish, _ = both(server, tool_choice="none", extra_body=forced(CALL))
    assert calls == [] and content == CALL and finish == "stop"
    c = server.client()
    usage = lambda choice: c.chat.completions.create(model=server.model_id, messages=ASK, tools=TOOLS,  # noqa: E731
                                                     tool_choice=choice, max_tokens=1).usage.prompt_tokens
    assert usage("none") < usage("auto")


def test_response_format_json_schema_parses_and_validates(server):
    schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 9},
                                               "sure": {"type": "boolean"},
                                               "unit": {"enum": ["none", "apples"]}},
              "required": ["answer", "sure", "unit"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}
    for seed in range(3):
        content, calls, finish, _ = both(server, tools=None, response_format=fmt, temperature=1.0, seed=seed)
        assert finish == "stop" and calls == []
        jsonschema.validate(json.loads(content), schema)


def test_response_format_json_object(server):
    """A random model writes long random strings, so some samples hit max_tokens; every one
    that ends by itself is a JSON object."""
    finished = 0
    for seed in range(8):
        r = server.client().chat.completions.create(model=server.model_id, messages=ASK, max_tokens=300,
                                                    temperature=1.0, seed=seed,
                                                    response_format={"type": "json_object"})
        text = r.choices[0].message.content
        assert text.startswith("{")
        if r.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(text), dict)
            finished += 1
    assert finished >= 2


def test_forced_call_conflicts_with_response_format(server):
    r = server.post("/v1/chat/completions", json={
        "model": server.model_id, "messages": ASK, "tools": TOOLS, "tool_choice": "required",
        "response_format": {"type": "json_object"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"
    r = server.post("/v1/chat/completions", json={
        "model": server.model_id, "messages": ASK, "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tool_choice"
