"""Runs of a served model through the generator's tasks: only the turns up to the first that
fails its checks are kept, and none of the steps that were the model's own mistakes."""
from __future__ import annotations

from agents.model import Call, Reply
from tuning.oracle import Oracle
from tuning.play import play
from tuning.tasks import build


class RightThenWrong:
    """Plays the gold steps of the first `good` turns (a failed call first, in turn 0), then answers
    anything without a tool."""

    def __init__(self, task, good: int):
        self.task, self.good, self.oracle = task, good, Oracle("x")
        self.turn = -1

    def complete(self, messages, tools=None, tool_choice="auto", max_tokens=256, temperature=0.0, seed=None,
                 parallel=True, text_regex=None) -> Reply:
        users = [m["content"] for m in messages if m["role"] == "user"]
        turn = next(i for i, t in enumerate(self.task.turns) if t.user == users[-1])
        if turn != self.turn:
            self.turn = turn
            self.oracle.play(self.task.turns[turn].steps)
            self.stumbled = False
        if turn == 0 and not self.stumbled:      # a mistake first: a call of a tool that is not there
            self.stumbled = True
            return Reply("", [Call("call_bad", "sql_query", {"db": "nope", "sql": "SELECT * FROM nowhere"})], "tool_calls")
        if turn < self.good:
            return self.oracle.complete(messages, tools, tool_choice)
        return Reply("Sure, all done.", [], "stop")


def test_turns_after_the_first_failing_one_and_the_models_mistakes_are_not_kept(shared):
    registry, probe = shared
    schemas = registry.openai_tools()
    task = next(t for t in (build(i, 5, schemas) for i in range(100))
                if len(t.turns) >= 3 and t.turns[0].kind == "keep" and not t.turns[0].faults
                and t.turns[1].expect.called)
    outcome = play(task, registry, probe, model=RightThenWrong(task, good=1))
    assert outcome.kept and outcome.turns_passed == 1, outcome.problems
    assert outcome.problems and outcome.problems[0].startswith("t1")
    turn0 = outcome.examples
    assert turn0 and all(e["messages"][-1]["role"] in ("user", "tool") for e in turn0)
    assert all(task.turns[0].user in [m["content"] for m in e["messages"] if m["role"] == "user"] for e in turn0)
    assert not any("nowhere" in c["function"]["arguments"] for e in turn0 for c in e["chosen"]["tool_calls"])
    planned = sum(1 for s in task.turns[0].steps if s.train)
    assert len(turn0) == planned          # the gold steps of turn 0, not the failed call before them
