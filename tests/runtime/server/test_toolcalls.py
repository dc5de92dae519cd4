"""The tool-call parser over the shapes small models produce, and its streaming contract:
any chunking of the output yields exactly what parsing it whole yields."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.server.tool_schemas import ToolSchemaError, ToolSet
from runtime.server.toolcalls import ToolCallStream, collect, parse

WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city"]}
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
          "required": ["query"]}
TOOLS = ToolSet.from_request([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                              {"type": "function", "function": {"name": "search", "parameters": SEARCH}},
                              {"type": "function", "function": {"name": "now"}}])


def run(text: str, parallel: bool = True):
    return parse(text, TOOLS.names, TOOLS.validate, parallel)


def calls(result):
    return [(c.name, json.loads(c.arguments)) for c in result.calls]


PARIS = ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    '```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '  {"name": "get_weather", "arguments": {"city": "Paris"}}\n',
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',           # arguments as a JSON string
    '{"name": "get_weather", "parameters": {"city": "Paris"}}',                    # llama style
    '{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
    '{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}',                 # doubled braces
    '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n</tool_call>',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',        # stopped before the closing tag
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}',            # ... before the closing fence
    '[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
])
def test_one_call_in_every_shape(text):
    result = run(text)
    assert calls(result) == [PARIS]
    assert result.content is None and result.errors == []


def test_text_around_a_call_is_content():
    result = run('Let me check.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\nOne moment.')
    assert calls(result) == [PARIS]
    assert result.content == "Let me check.\n\nOne moment."


def test_several_calls_tags_list_and_lines():
    tags = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
            '<tool_call>{"name": "search", "arguments": {"query": "rain", "k": 3}}</tool_call>')
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    two = '{"name": "search", "arguments": {"query": "rain", "k": 3}}'
    listed, lines = f"[{one}, {two}]", f"{one}\n{two}"
    want = [PARIS, ("search", {"query": "rain", "k": 3})]
    for text in (tags, listed, lines):
        assert calls(run(text)) == want


def test_parallel_false_keeps_only_the_first_call():
    result = run('{"name": "get_weather", "arguments": {"city": "Paris"}}\n{"name": "now", "arguments": {}}',
                 parallel=False)
    assert calls(result) == [PARIS]
    assert "parallel_tool_calls is false" in result.errors[0]


def test_empty_and_missing_arguments_are_an_empty_object():
    for text in ('{"name": "now"}', '{"name": "now", "arguments": {}}', '{"name": "now", "arguments": ""}'):
        result = run(text)
        assert [c.arguments for c in result.calls] == ["{}"]


@pytest.mark.parametrize("text, reason", [
    ('{"name": "get_weather", "arguments": {"town": "Paris"}}', "'city' is a required property"),
    ('{"name": "get_weather", "arguments": {"city": 7}}', "7 is not of type 'string'"),
    ('{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "kelvin"}}', "'kelvin' is not one of"),
    ('{"name": "delete_everything", "arguments": {}}', "not one of the request's tools"),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}', "cut off"),                  # unclosed JSON
    ('<tool_call>{"name": "get_weather", "arguments": {"city": "Par', "cut off"),
    ('<tool_call>{"name": "get_weather", "arguments": {"city": Paris}}</tool_call>', "not valid JSON"),
    ('{"name": "get_weather", "arguments": [1, 2]}', "must be a JSON object"),
    ('{"name": "get_weather", "arguments": "{city"}', "string that is not JSON"),
    ('{"name": "get_weather", "arguments": {"city": NaN}}', "not valid JSON"),
])
def test_refused_calls_come_back_as_text_with_a_reason(text, reason):
    result = run(text)
    assert result.calls == []
    assert result.content == text.strip()
    assert any(reason in e for e in result.errors), result.errors


@pytest.mark.parametrize("text", [
    "The answer is 4.",
    "Here is code:\n```python\nprint({\"name\": \"get_weather\"})\n```\nDone.",
    '```json\n{"temperature": 21}\n```',          # JSON, but not a call
    "Use {curly} braces and <b>tags</b> freely.",
    "[1] a reference, and [link](http://x)",
    "{not json at all",
])
def test_plain_text_is_untouched(text):
    result = run(text)
    assert result.calls == [] and result.errors == []
    assert result.content == text


def test_a_mid_line_brace_is_not_a_call():
    text = 'I would call {"name": "get_weather", "arguments": {"city": "Paris"}} now.'
    assert run(text).calls == []


def test_call_ids_are_unique():
    result = run('\n'.join(f'{{"name": "search", "arguments": {{"query": "q{i}"}}}}' for i in range(5)))
    ids = [c.id for c in result.calls]
    assert len(set(ids)) == 5 and all(i.startswith("call_") and len(i) > 20 for i in ids)


def test_a_repeated_identical_call_is_dropped():
    result = run('\n'.join(['{"name": "get_weather", "arguments": {"city": "Paris"}}'] * 3))
    assert calls(result) == [PARIS]
    assert result.errors == ["dropped a repeated identical call to 'get_weather'"] * 2


def test_held_back_until_settled():
    s = ToolCallStream(TOOLS.names, TOOLS.validate)
    assert [e.content for e in s.feed("Sure")] == ["Sure"]
    assert s.feed(" <tool") == []                      # could be a tag: held
    assert s.feed('_call>{"name": "get_weather", "arguments": {"city": "Pa') == []
    events = s.feed('ris"}}</tool_call> ok')
    assert events[0].call.name == "get_weather" and events[-1].content == "  ok"  # the space before the tag was held


def test_malformed_tool_definitions_are_refused():
    bad = [
        [{"type": "function", "function": {"name": "has space"}}],
        [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}],
        [{"type": "function", "function": {"name": "a", "parameters": {"type": "string"}}}],
        [{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "required": "city"}}}],
    ]
    for tools in bad * 2:               # refused again: the schema check remembers only schemas that passed
        with pytest.raises(ToolSchemaError):
            ToolSet.from_request(tools)


OUTPUTS = [
    'Sure! <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\nDone.',
    '```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "now"}]\n```',
    '  Hmm.\n{"name": "search", "arguments": {"query": "a } b", "k": 2}}\n\n{"name": "nope"}\ntext  ',
    'code:\n```python\nx = {"a": 1}\n```\n{"name": "get_weather", "arguments": {"city": 3}}',
    '{"name": "get_weather", "arguments": {"city": "Par',
    "plain < text ` with ``` odd [ marks {",
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(OUTPUTS), st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=60))
def test_any_chunking_gives_the_whole_parse(text, cuts):
    whole = run(text)
    s = ToolCallStream(TOOLS.names, TOOLS.validate)
    events, i = [], 0
    for n in cuts:
        events += s.feed(text[i:i + n])
        i += n
    events += s.feed(text[i:]) + s.finish()
    streamed = collect(events, s)
    assert streamed.content == whole.content
    assert calls(streamed) == calls(whole)
    assert streamed.errors == whole.errors
