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
    assert {"canonical", "canonical-easy", "freeform"} <= set(names) and len(names) >= 10
    canonical = load("canonical")
    assert [t.name for t in canonical.turns] == ["discover", "keep_facts", "file_background", "note", "recall"]
    assert canonical.turns[1].expect.sql[0].db is None and canonical.turns[1].expect.sql[0].min_rows == 1
    assert load(str(SUITES_DIR / "freeform.yaml")).turns[0].expect.called == ["sql_exec", "rag_ingest", "memory_add"]
    fault = load("support-tickets").faults[0]
    assert (fault.tool, fault.turn, fault.times, fault.retryable) == ("sql_exec", "open_ticket", 2, True)


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
    (minimal(expect={"sql": [{"query": "SELECT 1"}]}), "a query needs the db"),
    (minimal(expect={"rag": [{"contains": ["x"]}]}), "missing 1 required positional argument: 'query'"),
    (minimal(gold=[{"name": "sql_exec", "args": {}}]), "gold\\[0\\]: unknown keys \\['args'\\]"),
    ({**minimal(), "faults": [{"tool": "sql_exec", "turn": "nope", "error": "x"}]}, "faults need a turn"),
    ({**minimal(), "hide_parameters": ["rag_ingest.paths"]}, "unknown keys \\['hide_parameters'\\]"),
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


def test_a_turn_offers_tools_and_toolsets_by_name_as_the_registry_describes_them(registry):
    from agents.runner import offered
    shown = offered(registry, ["wait", "math"])
    assert sorted(t["function"]["name"] for t in shown) == ["add", "wait"]    # a tool name and a toolset
    assert next(t for t in shown if t["function"]["name"] == "wait") == registry.tools["wait"].openai()
    assert offered(registry, []) == []
    with pytest.raises(ValueError, match="unknown tools"):
        offered(registry, ["nope"])
