"""Rejected replies: which sampled actions count as wrong against the gold one, and sampling
from a real `samevm serve` on a tiny random-weight model."""
from __future__ import annotations

import json

import pytest

from dev.synthetic import Shape
from tests.runtime.server.conftest import start_server
from tuning.generate import generate
from tuning.rejected import said_by_agent, sample_rejected, wrong


def reply(content: str = "", *calls: tuple[str, dict]) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}


INSERT = ("sql_exec", {"db": "garage", "sql": "INSERT INTO services (job, cost) VALUES ('oil change', 84.5)"})
CONTEXT = said_by_agent([{"role": "user", "content": "Keep my car services."},
                         {"role": "assistant", "content": "I created the services table of the SQLite database garage."}])


@pytest.mark.parametrize("sampled, why", [
    (reply("Done, saved."), "answered where a call was due"),
    (reply("", ("rag_ingest", {"text": "oil change 84.5", "source": "car"})), "other tools or order"),
    (reply("", ("sql_exec", {"db": "garage", "sql": "CREATE TABLE services (job TEXT, cost REAL)"})),
     "another statement kind or table set"),
    (reply("", ("sql_exec", {"db": "garage", "sql": "INSERT INTO jobs (job, cost) VALUES ('oil change', 84.5)"})),
     "another statement kind or table set"),
    (reply("", ("sql_exec", {"db": "garage", "sql": "INSERT INTO services (job, cost) VALUES ('oil change', 48.5)"})),
     "statement without"),
    (reply("", INSERT, INSERT), "other tools or order"),
])
def test_wrong_actions_are_named(sampled, why):
    assert wrong(reply("", INSERT), sampled, context=CONTEXT).startswith(why)


def test_names_the_conversation_has_not_given_are_the_models_choice():
    create = ("sql_exec", {"db": "garage", "sql": "CREATE TABLE IF NOT EXISTS services (job TEXT, cost REAL)"})
    mine = ("sql_exec", {"db": "car", "sql": "CREATE TABLE jobs (job TEXT, cost REAL)"})
    users_words = said_by_agent([{"role": "user", "content": "Keep my car services in the garage database."}])
    assert wrong(reply("", create), reply("", mine), context=users_words) is None
    assert wrong(reply("", INSERT), reply("", ("sql_exec", {**INSERT[1], "db": "car"})), context=CONTEXT) == \
        "another database"


def test_the_same_action_in_other_words_is_not_wrong():
    same = ("sql_exec", {"db": "garage", "sql": "insert into services values ('oil change', 84.50)"})
    assert wrong(reply("", INSERT), reply("", same)) is None
    gold = reply("The total cost is 249.5 (from the services table).")
    assert wrong(gold, reply("You spent 249.5 in all."), ["249.5"]) is None
    assert wrong(gold, reply("You spent 250 in all."), ["249.5"]).startswith("answer without")
    assert wrong(gold, reply("", INSERT), ["249.5"]) == "called where an answer was due"


@pytest.fixture(scope="module")
def tiny_server(tiny_gguf, tmp_path_factory):
    s = start_server(tiny_gguf("qwen2", shape=Shape(context=8192)), tmp_path_factory.mktemp("rejected-server"))
    yield s
    s.stop()


def test_sampled_rejected_replies_differ_from_the_chosen(worker_url, tiny_server, tmp_path):
    steps = tmp_path / "steps.jsonl"
    generate(worker_url, steps, 4, 3, threads=2)
    small = sorted((json.loads(line) for line in steps.read_text().splitlines()), key=lambda r: len(json.dumps(r)))
    picked = [r for r in small if r["kind"] == "call"][:2] + [r for r in small if r["kind"] == "answer" and r["keys"]][:2]
    examples = tmp_path / "few.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in picked))
    out = tmp_path / "pairs.jsonl"
    stats = sample_rejected(tiny_server.url, examples, out, samples=2, temperature=1.0, max_tokens=40, threads=2,
                            steps=3)
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert stats["examples"] == 3 and stats["pairs"] == len(pairs) > 0    # a bounded sample of the 4 steps
    for p in pairs:
        assert p["rejected"] != p["chosen"] and p["rejected"]["role"] == "assistant"
        assert wrong(p["chosen"], p["rejected"], p.get("keys"), said_by_agent(p["messages"])) == p["rejected_why"]
        original = next(r for r in picked if r["id"] == p["id"])
        assert {k: p[k] for k in original} == original
