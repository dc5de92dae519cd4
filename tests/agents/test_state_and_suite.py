"""Conversation compaction across turns (through Agent.run) and the suite file format."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agents.state import Conversation
from agents.suite import SUITES_DIR, load, parse
from tests.agents.fake_model import text


def test_earlier_turns_are_carried_as_request_and_answer_only(agent_for, registry):
    from tests.agents.fake_model import call
    agent, fake = agent_for([call("add", a=40, b=2), text("The sum is 42."), text("You asked about 40 + 2.")])
    agent.run("What is 40 + 2?", registry.openai_tools())
    agent.run("What did I ask before?", registry.openai_tools())
    second_turn = fake.requests[2]["messages"]
    assert [m["role"] for m in second_turn] == ["system", "user", "assistant", "user"]
    assert second_turn[1]["content"] == "What is 40 + 2?" and second_turn[2]["content"] == "The sum is 42."
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in second_turn)


def test_five_long_turns_stay_within_the_budget(agent_for, registry):
    long_answer = "fact " * 400                                       # 2,000 characters each
    agent, fake = agent_for([text(long_answer)] * 6)
    for i in range(6):
        agent.run(f"turn {i}: " + "detail " * 100, registry.openai_tools())
    carried = fake.requests[-1]["messages"][1:-1]
    size = sum(len(m["content"]) for m in carried)
    budget = agent.conversation.budget_chars
    assert 0 < size <= budget
    assert carried[-2]["content"].startswith("turn 4:")              # the newest turns are the ones kept
    assert all(len(m["content"]) <= agent.conversation.turn_chars for m in carried)


def test_a_new_session_forgets_the_context():
    c = Conversation()
    c.add("remember 7", "ok")
    assert len(c.messages()) == 2
    c.reset()
    assert c.messages() == []


def test_shipped_suites_load():
    names = sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))
    assert {"canonical", "freeform"} <= set(names)
    canonical = load("canonical")
    assert [t.name for t in canonical.turns] == ["discover", "store_facts", "store_background", "remember", "recall"]
    assert canonical.turns[1].expect.sql[0].min_rows == 3
    assert load(str(SUITES_DIR / "freeform.yaml")).turns[0].expect.called == ["sql_exec", "rag_ingest", "memory_add"]


def minimal(**turn) -> dict:
    return {"name": "t", "turns": [{"name": "one", "user": "hi", **turn}]}


def test_a_suite_file_by_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(minimal(expect={"answer_contains": ["hello"]})))
    suite = load(str(path))
    assert suite.path == path and suite.turns[0].expect.answer_contains == ["hello"]


@pytest.mark.parametrize("data, message", [
    (minimal(expect={"answer_contain": ["x"]}), "unknown keys \\['answer_contain'\\]"),
    (minimal(expect={"sql": [{"db": "x", "query": "SELECT 1", "rows": 3}]}), "unknown keys \\['rows'\\]"),
    (minimal(expect={"sql": [{"query": "SELECT 1"}]}), "missing 1 required positional argument: 'db'"),
    ({"name": "t", "turns": []}, "at least one turn"),
    ({"name": "t", "turns": [{"name": "a", "user": "x"}, {"name": "a", "user": "y"}]}, "unique"),
    ({"name": "t", "turns": {"name": "a"}}, "turns must be a list"),
    ({"name": "t", "turns": [{"name": "a", "user": "x"}], "reset": {"sqls": []}}, "reset: unknown keys"),
])
def test_mistakes_in_a_suite_file_are_refused(data, message):
    with pytest.raises(ValueError, match=message):
        parse(data, Path("x.yaml"))


def test_unknown_suite_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: .*canonical"):
        load("no-such-suite")
    with pytest.raises(FileNotFoundError):
        load("/nonexistent/suite.yaml")


def test_report_round_trips_as_json(agent_for, registry):
    agent, _ = agent_for([text("hi")])
    turn = agent.run("hello", registry.openai_tools())
    assert json.loads(json.dumps(turn.to_dict()))["answer"] == "hi"
