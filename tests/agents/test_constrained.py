"""Constrained actions end to end: the agent loop against a real `samevm serve` on a tiny
random-weight model. Whatever the weights, every step must be a call of an offered tool with
arguments that validate, or a final answer; random weights without the grammar write neither."""
from __future__ import annotations

import jsonschema
import pytest

from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel
from agents.prompts import FINAL_ANSWER_NAME, final_answer_tool
from runtime.synthetic import Shape
from tests.runtime.server.conftest import start_server
from tools.registry import Registry, Tool

STORE = {"type": "object", "properties": {"key": {"type": "string", "maxLength": 8},
                                          "value": {"type": "integer", "minimum": 0, "maximum": 999}},
         "required": ["key", "value"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Lima", "Pune"]}},
          "required": ["city"], "additionalProperties": False}
SEEDS = 12


@pytest.fixture(scope="module")
def server(tiny_gguf, tmp_path_factory):
    s = start_server(tiny_gguf("qwen2", shape=Shape(context=4096)), tmp_path_factory.mktemp("agent-server"))
    yield s
    s.stop()


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.add(Tool("store", "test", "Keep a value under a key.", STORE, lambda key, value: {"kept": key}, False))
    r.add(Tool("lookup", "test", "Weather of a city.", LOOKUP, lambda city: {"city": city, "sky": "clear"}, False))
    return r


def test_every_step_of_a_random_model_is_an_offered_valid_call_or_an_answer(server, registry):
    config = dict(max_steps=3, max_tokens=160, temperature=1.0, answer_chars=40)
    schemas = {t["function"]["name"]: t["function"]["parameters"]
               for t in registry.openai_tools() + [final_answer_tool(config["answer_chars"])]}
    model = ChatModel(server.url, timeout=300)
    kinds = []
    for seed in range(SEEDS):
        agent = Agent(model, registry, AgentConfig(seed=seed * 100, **config))
        turn = agent.run("Keep the number of chairs, 12, and tell me the weather in Lima.", registry.openai_tools())
        for step in turn.steps:
            kinds.append(step.kind)
            assert step.kind in ("calls", "answer", "repeat"), (seed, step)
            for call in step.calls:
                assert call.name in schemas and call.ok, (seed, call)
                jsonschema.validate(call.arguments, schemas[call.name])
        assert turn.answer is None or 0 < len(turn.answer) <= 40
        assert not (turn.answer or " ")[0] in " {[<`"
    assert "calls" in kinds or "answer" in kinds


def test_the_same_weights_unconstrained_write_no_call(server, registry):
    """The control: under tool_choice auto the random model's text is not a valid call, so the
    test above could not pass without the grammar."""
    model = ChatModel(server.url, timeout=300)
    tools = registry.openai_tools() + [final_answer_tool(40)]
    replies = [model.complete([{"role": "user", "content": "Keep the number of chairs, 12."}], tools, "auto",
                              max_tokens=60, temperature=1.0, seed=seed) for seed in range(4)]
    assert not any(r.calls for r in replies)
    assert FINAL_ANSWER_NAME not in [c.name for r in replies for c in r.calls]
