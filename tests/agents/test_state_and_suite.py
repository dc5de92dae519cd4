"""The suite file format."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agents.suite import SUITES_DIR, load, parse
from tests.agents.fake_model import text


def test_shipped_suites_load():
    names = sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))
    assert {"canonical", "freeform"} <= set(names)
    canonical = load("canonical")
    assert [t.name for t in canonical.turns] == ["discover", "store_facts", "store_background", "remember", "recall"]
    assert canonical.turns[1].expect.sql[0].min_rows == 1
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


def test_hidden_parameters_are_not_shown_and_required_ones_cannot_be_hidden(registry):
    from agents.runner import offered
    shown = offered(registry, ["wait", "math"], ["wait.label"])
    assert sorted(t["function"]["name"] for t in shown) == ["add", "wait"]    # a tool name and a toolset
    wait = next(t for t in shown if t["function"]["name"] == "wait")["function"]["parameters"]
    assert list(wait["properties"]) == ["seconds"]
    assert "label" in registry.tools["wait"].parameters["properties"]        # the registry's schema is untouched
    with pytest.raises(ValueError, match="required"):
        offered(registry, ["wait"], ["wait.seconds"])
    with pytest.raises(ValueError, match="unknown tools"):
        offered(registry, ["nope"])


def test_required_parameters_are_added_to_the_schema_the_model_sees(registry):
    from agents.runner import offered
    wait = offered(registry, ["wait"], require=["wait.label"])[0]["function"]["parameters"]
    assert sorted(wait["required"]) == ["label", "seconds"]
    assert registry.tools["wait"].parameters["required"] == ["seconds"]
    with pytest.raises(ValueError, match="no parameter"):
        offered(registry, ["wait"], require=["wait.colour"])
