"""The server on the real default model (slow; runs when it is installed): a weather-style
request yields a valid structured tool call in auto and in required mode, streamed as it
is returned whole, and a plain chat answers 2+2."""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from runtime import catalog
from tests.runtime.server.conftest import start_server

pytestmark = pytest.mark.slow
HOME = Path(os.environ.get("SAMEVM_HOME", ".samevm"))
PATH = catalog.installed_path(catalog.DEFAULT_MODEL, HOME)
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "search_notes", "description": "Search the user's notes.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]
ASK = [{"role": "user", "content": "What is the weather like in Paris right now?"}]


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    if PATH is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    home = tmp_path_factory.mktemp("real-home")
    cache = HOME.resolve() / "cache" / "tokenizers"
    if cache.is_dir():                          # skip the 20 s tokenizer conversion
        (home / "cache").mkdir()
        (home / "cache" / "tokenizers").symlink_to(cache)
    s = start_server(str(PATH), home, "--kv-cache-mb", "128", "--max-model-len", "2048")
    yield s
    s.stop()


def the_call(r):
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", (choice.message.content, r.model_extra["samevm"])
    (call,) = choice.message.tool_calls
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER)
    return call.function.name, args


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_weather_request_yields_a_valid_tool_call(real_server, mode):
    c = real_server.client(timeout=600)
    kw = dict(model=real_server.model_id, messages=ASK, tools=TOOLS, tool_choice=mode, temperature=0, max_tokens=80)
    name, args = the_call(c.chat.completions.create(**kw))
    assert name == "get_weather" and "paris" in args["city"].lower()
    if mode == "auto":
        chunks = list(c.chat.completions.create(**kw, stream=True))
        deltas = [tc for ch in chunks if ch.choices for tc in ch.choices[0].delta.tool_calls or []]
        assert deltas[0].function.name == name
        assert json.loads("".join(d.function.arguments or "" for d in deltas)) == args


def test_chat_answers_two_plus_two(real_server):
    r = real_server.client(timeout=600).chat.completions.create(
        model=real_server.model_id, messages=[{"role": "user", "content": "What is 2+2? Answer with the number."}],
        temperature=0, max_tokens=20)
    assert "4" in r.choices[0].message.content
    assert r.model_extra["samevm"]["awareness"]["perplexity"] < 2.0
