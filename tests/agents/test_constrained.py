"""Constrained actions end to end: the agent loop against a real `samevm serve` on tiny
random-weight models. Whatever the weights, every step must be a call of an offered tool with
arguments that validate, or an answer that does not open like a call. The worst case is a
model that emits '{' almost always: unconstrained, it writes malformed calls."""
from __future__ import annotations

import jsonschema
import pytest

from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel
from agents.prompts import final_answer_tool
from dev.synthetic import Shape
from tests.runtime.server.conftest import start_server
from tools.registry import Registry, Tool

STORE = {"type": "object", "properties": {"key": {"type": "string", "maxLength": 8},
                                          "value": {"type": "integer", "minimum": 0, "maximum": 999}},
         "required": ["key", "value"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Lima", "Pune"]}},
          "required": ["city"], "additionalProperties": False}
SEEDS = 8
ASK = "Keep the number of chairs, 12, and tell me the weather in Lima."


@pytest.fixture(scope="module", params=[None, "{"], ids=["random", "brace-loving"])
def server(request, tiny_gguf, tmp_path_factory):
    model = tiny_gguf("qwen2", shape=Shape(context=4096), favour=request.param)
    s = start_server(model, tmp_path_factory.mktemp("agent-server"))
    yield s
    s.stop()


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.add(Tool("store", "test", "Keep a value under a key.", STORE, lambda key, value: {"kept": key}, False))
    r.add(Tool("lookup", "test", "Weather of a city.", LOOKUP, lambda city: {"city": city, "sky": "clear"}, False))
    return r


def play(server, registry, **config) -> list:
    schemas = {t["function"]["name"]: t["function"]["parameters"]
               for t in registry.openai_tools() + [final_answer_tool(40)]}
    model, turns = ChatModel(server.url, timeout=300), []
    for seed in range(SEEDS):
        agent = Agent(model, registry, AgentConfig(seed=seed * 100, max_steps=3, max_tokens=120, temperature=1.0,
                                                   answer_chars=40, **config))
        turn = agent.run(ASK, registry.openai_tools())
        for step in turn.steps:
            # text may run to max_tokens on random weights, but no reply may open a call it does not finish
            assert step.kind in ("calls", "answer", "repeat") or step.kind == "cut_off" and \
                step.content[:1] not in " \n\t{[<`", (seed, step)
            for call in step.calls:
                assert call.name in schemas and (call.ok or call.skipped), (seed, call)   # skipped: a declined repeat
                jsonschema.validate(call.arguments, schemas[call.name])
        assert turn.answer is None or turn.answer[0] not in " \n\t{[<`", (seed, turn.answer)
        turns.append(turn)
    return turns


def test_strict_tools_every_step_is_a_valid_call_or_a_clean_answer(server, registry):
    turns = play(server, registry)
    assert any(t.calls for t in turns) or any(t.answer for t in turns)


def test_answer_tool_every_step_is_a_valid_call_or_final_answer(server, registry):
    turns = play(server, registry, answer_tool=True)
    assert all(len(t.answer or "") <= 40 for t in turns)
