"""Generated trajectories against a real worker: the tasks pass their checks, spoiled gold
work fails them, and every written step is the request the agent loop sent with a reply that
calls offered tools with arguments their schemas accept."""
from __future__ import annotations

import json
import re
from collections import Counter

import jsonschema
import pytest

from tools.context import ToolContext
from tools.toolsets import build_registry
from tuning.generate import generate
from tuning.play import play
from tuning.plan import Step
from tuning.runtime_stub import card, runtime_stub
from tuning.tasks import build

SEED, TASKS = 11, 16


@pytest.fixture(scope="module")
def generated(worker_url, tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "steps.jsonl"
    seen = []
    stats = generate(worker_url, out, TASKS, SEED, progress=lambda done, total: seen.append((done, total)), threads=4)
    return stats, [json.loads(line) for line in out.read_text().splitlines()], seen


def test_every_generated_task_passes_its_checks(generated):
    stats, records, seen = generated
    assert stats["tasks"] == TASKS and stats["kept"] == TASKS, stats["dropped"]
    assert stats["examples"] == len(records) > TASKS * 3
    assert seen[-1] == (TASKS, TASKS)
    kinds = Counter(r["kind"] for r in records)
    assert kinds["call"] and kinds["answer"]
    assert len({r["domain"] for r in records}) >= 5 and len({r["turn_kind"] for r in records}) >= 8


def test_records_are_the_requests_the_loop_sent_and_calls_fit_the_offer(generated):
    _, records, _ = generated
    by_task: dict[str, list[dict]] = {}
    for r in records:
        by_task.setdefault(r["task"], []).append(r)
        assert r["messages"][0]["role"] == "system" and r["messages"][-1]["role"] in ("user", "tool")
        assert all(t["function"].get("strict") is True for t in r["tools"])
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in r["tools"]}
        chosen = r["chosen"]
        assert chosen["role"] == "assistant" and (chosen["tool_calls"] or chosen["content"])
        for c in chosen["tool_calls"]:
            assert c["function"]["name"] in schemas, (r["id"], c)
            jsonschema.validate(json.loads(c["function"]["arguments"]), schemas[c["function"]["name"]])
    # Within a turn, the next request is this one, the chosen reply and its results: the reply
    # the record says was given is the one the loop carried on from.
    followed = 0
    for steps in by_task.values():
        for a, b in zip(steps, steps[1:]):
            n = len(a["messages"])
            if a["chosen"]["tool_calls"] and b["messages"][:n] == a["messages"]:
                sent = b["messages"][n]
                assert sent["role"] == "assistant" and sent["tool_calls"] == a["chosen"]["tool_calls"]
                ids = [m["tool_call_id"] for m in b["messages"][n + 1:] if m["role"] == "tool"]
                assert ids[:len(a["chosen"]["tool_calls"])] == [c["id"] for c in a["chosen"]["tool_calls"]]
                followed += 1
    assert followed >= TASKS


def _task_with(kind: str, schemas: list[dict]):
    for i in range(200):
        task = build(i, SEED, schemas)
        for t in task.turns:
            if t.kind == kind and not t.faults and not any(s.fails for s in t.steps):
                return task, t
    raise AssertionError(f"no {kind} turn in 200 tasks")


def test_a_task_plays_and_its_checks_pass(shared, worker_url):
    registry, probe = shared
    task, _ = _task_with("keep", registry.openai_tools())
    outcome = _play_with_card(task, worker_url, probe)
    assert outcome.kept, outcome.problems


@pytest.mark.parametrize("kind", ["keep_status", "keep_figure", "keep_found"])
def test_what_a_tool_reported_is_kept_as_the_tool_said_it(shared, worker_url, kind):
    # the task passes its store checks, and every value the keep stores (and its answer quotes)
    # was in an earlier tool result of the session, as the model saw it, not in the request
    registry, probe = shared
    task, turn = _task_with(kind, registry.openai_tools())
    outcome = _play_with_card(task, worker_url, probe)
    assert outcome.kept, outcome.problems
    def asked(record: dict) -> int:
        return max(i for i, m in enumerate(record["messages"]) if m["role"] == "user")
    steps = [r for r in outcome.examples if r["messages"][asked(r)]["content"] == turn.user]
    inserts = [c for r in steps for c in r["chosen"]["tool_calls"] if "INSERT" in c["function"]["arguments"]]
    assert steps and inserts and turn.keys, task.id
    messages = steps[-1]["messages"][:asked(steps[-1]) + 1]
    told = " ".join(m["content"] for m in messages if m["role"] == "tool")
    for value in turn.keys:
        assert value in told and value not in turn.user, value
        assert any(value in json.loads(c["function"]["arguments"])["sql"] for c in inserts), value
        assert value in steps[-1]["chosen"]["content"], value


def test_a_suggestion_leaves_out_the_records_a_remembered_constraint_rules_out(shared, worker_url):
    # the suggestion is read off the rows the worker returned and the note saved earlier: the
    # records whose field holds the avoided value are left out of what is suggested, every other is in
    registry, probe = shared
    task, turn = _task_with("choose", registry.openai_tools())
    outcome = _play_with_card(task, worker_url, probe)
    assert outcome.kept, outcome.problems
    note = next(a["text"] for t in task.turns if t.kind == "avoid" for s in t.steps for n, a in s.calls if n == "memory_add")
    final = next(r for r in outcome.examples if r["kind"] == "answer" and r["turn_kind"] == "choose")
    rows = [row for m in final["messages"] if m["role"] == "tool"
            for row in json.loads(m["content"])["data"].get("rows", []) if len(row) == 2]
    suggested = final["chosen"]["content"].split("suggest", 1)[1]
    ruled_out = [key for value, key in rows if f" {value}." in note]
    left = [key for value, key in rows if f" {value}." not in note]
    assert left and all(k in suggested for k in left) and not any(k in suggested for k in ruled_out), (note, rows)


def test_a_look_up_of_a_record_never_stored_answers_from_the_empty_result(shared, worker_url):
    # the query finds no row and the tool says so; the answer names the record and quotes no
    # value, where a model answering from elsewhere would fill one in
    registry, probe = shared
    task, turn = _task_with("lookup_missing", registry.openai_tools())
    outcome = _play_with_card(task, worker_url, probe)
    assert outcome.kept, outcome.problems
    final = next(r for r in outcome.examples if r["kind"] == "answer" and r["turn_kind"] == "lookup_missing")
    result = json.loads(final["messages"][-1]["content"])["data"]
    assert result["rows"] == [] and "no row matched" in result["note"]
    answer = final["chosen"]["content"]
    assert turn.expect.answer_contains[0] in answer and re.search(r"\b(no|nothing)\b", answer, re.I), answer


def test_a_guessed_column_sent_twice_is_declined_and_the_next_step_mends_it(shared, worker_url):
    # the wrong query fails with the real columns named, is sent once more and declined by the
    # loop as a repeat; the step learnt from is the one after that refusal, and it differs
    registry, probe = shared
    found = None
    for i in range(400):
        task = build(i, SEED, registry.openai_tools())
        for t in task.turns:
            pairs = list(zip(t.steps, t.steps[1:]))
            if not t.faults and any(a.fails and b.calls == a.calls for a, b in pairs):
                found = task, next(a.calls[0] for a, b in pairs if a.fails and b.calls == a.calls)
                break
        if found:
            break
    assert found, "no declined repeat of a guessed column in 400 tasks"
    task, wrong = found
    outcome = _play_with_card(task, worker_url, probe)
    assert outcome.kept, outcome.problems
    after = [r for r in outcome.examples if r["messages"][-1]["role"] == "tool"
             and json.loads(r["messages"][-1]["content"]).get("error", "").startswith("not run again")]
    assert after, "no step learnt after the declined repeat"
    for r in after:
        sent = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in r["chosen"]["tool_calls"]]
        assert wrong not in sent


def _play_with_card(task, worker_url, probe):
    """Play `task` as generate.py does: a status turn reads the card this task's plan knows."""
    with runtime_stub() as runtime:
        return play(task, build_registry(ToolContext(worker_url=worker_url, runtime_url=f"{runtime}/{task.id}")), probe)


SPOILED = {"keep": "sql:", "file": "rag top-", "note": "memory note saved", "query": "answer contains",
           "lookup": "answer contains", "keep_status": "(keep_status): sql:", "keep_figure": "(keep_figure): sql ",
           "keep_found": "(keep_found): sql:", "lookup_reported": "answer contains", "choose": "answer contains",
           "lookup_which": "answer contains"}


@pytest.mark.parametrize("kind", list(SPOILED))
def test_spoiled_gold_work_fails_the_store_checks(shared, worker_url, kind):
    """The gold calls still succeed, but the last one stores another value (or the answer leaves
    the values out): the checks on the stores and the answer catch it."""
    registry, probe = shared
    task, turn = _task_with(kind, registry.openai_tools())
    last = max(i for i, s in enumerate(turn.steps) if s.calls)
    name, args = turn.steps[last].calls[-1]
    if kind in ("query", "lookup", "lookup_reported", "choose", "lookup_which"):
        turn.steps[-1] = Step(answer=lambda results: "I checked, it is all fine.")
    elif kind.startswith("keep"):          # a reported value is the last one of a keep_figure's row
        value = turn.expect.sql[-1].contains[-1 if kind == "keep_figure" else 0]
        spoiled = args["sql"].replace(f"'{value}'", "'spoiled'").replace(f", {value})", ", -1)")
        assert spoiled != args["sql"]
        turn.steps[last].calls[-1] = (name, {**args, "sql": spoiled})
    else:
        turn.steps[last].calls[-1] = (name, {**args, "text": "Something unrelated entirely."})
    outcome = _play_with_card(task, worker_url, probe)
    assert not outcome.kept
    assert any(SPOILED[kind] in p for p in outcome.problems), outcome.problems
    assert not any(re.match(r"t\d+\.\d+: ", p) for p in outcome.problems), outcome.problems    # no call failed


def test_a_status_turn_quotes_the_card_its_runtime_reports(shared, worker_url):
    # runtime_status reads the stub runtime under the task's own path; the plan's answer quotes
    # that card, and the answer check fails when the task reads another task's card
    registry, probe = shared
    task, turn = _task_with("status", registry.openai_tools())
    assert card(task.id)["id"] in " ".join(turn.expect.answer_contains)
    with runtime_stub() as runtime:
        mine = build_registry(ToolContext(worker_url=worker_url, runtime_url=f"{runtime}/{task.id}"))
        assert play(task, mine, probe).kept
        other = next(f"x{i}" for i in range(100) if card(f"x{i}")["id"] != card(task.id)["id"])
        theirs = build_registry(ToolContext(worker_url=worker_url, runtime_url=f"{runtime}/{other}"))
        outcome = play(task, theirs, probe)
    assert not outcome.kept and any("answer contains" in p for p in outcome.problems), outcome.problems
