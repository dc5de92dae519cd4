"""The fence between generated data and the evaluation suites catches what leaks."""
from __future__ import annotations

import json

import pytest

from agents.suite import load, names
from tuning.disjoint import Fence, LeakError, check, eval_texts
from tuning.domains import DOMAINS


def record(user: str, answer: str = "Done.", arguments: str = "{}") -> dict:
    return {"id": "x-0", "messages": [{"role": "system", "content": "You help."}, {"role": "user", "content": user}],
            "chosen": {"role": "assistant", "content": answer,
                       "tool_calls": [{"id": "c1", "type": "function",
                                       "function": {"name": "sql_exec", "arguments": arguments}}]}}


@pytest.fixture(scope="module")
def fence():
    return Fence()


def test_the_fence_holds_every_suite():
    texts = eval_texts()
    assert {k.split(".")[0] for k in texts} == set(names())
    assert any(k.endswith(".user") for k in texts) and any(".gold[" in k for k in texts)


def test_a_planted_user_sentence_of_a_suite_is_caught(fence):
    suite = load("household-budget")
    planted = " ".join(suite.turns[1].user.split())
    clean = record("My bike did the canal path in 41 minutes, please log it.")
    check([clean], [d.name for d in DOMAINS], fence)
    with pytest.raises(LeakError, match="household-budget"):
        check([clean, record("Sure. " + planted + " Thanks!")], [], fence)


def test_a_planted_gold_argument_is_caught_in_the_chosen_call(fence):
    gold = next(g for n in names() for t in load(n).turns for g in t.gold if len(str(g.arguments.get("sql", "")).split()) > 8)
    with pytest.raises(LeakError):
        check([record("Log it.", arguments=json.dumps({"db": "x", "sql": gold.arguments["sql"]}))], [], fence)


def test_domains_named_after_suite_subjects_are_caught(fence):
    check([], [d.name for d in DOMAINS], fence)
    assert len(DOMAINS) >= 20
    with pytest.raises(LeakError, match="reading-list"):
        check([], ["car-maintenance", "reading-list"], fence)
