"""The agent loop through Agent.run and its HTTP client, against a scripted model server."""
from __future__ import annotations

import dataclasses
import json

import pytest

from agents import prompts, report
from agents.model import ModelError
from tests.agents.fake_model import answer, call, calls, cut, malformed, text


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_every_step_offers_the_tools_strict_and_a_text_reply_is_the_answer(agent_for, registry, counter):
    agent, fake = agent_for([call("add", a=2, b=3), text("2 + 3 = 5")])
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert turn.answer == "2 + 3 = 5" and turn.stop == "answer"
    assert [s.kind for s in turn.steps] == ["calls", "answer"]
    for request in fake.requests:
        assert request["tool_choice"] == "auto" and request["parallel_tool_calls"] is True
        assert [t["function"]["name"] for t in request["tools"]] == [t["function"]["name"] for t in registry.openai_tools()]
        assert all(t["function"]["strict"] is True for t in request["tools"])
    assert counter.calls == [("add", {"a": 2, "b": 3})]
    sent_call = fake.requests[1]["messages"][-2]["tool_calls"][0]
    result = fake.requests[1]["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == sent_call["id"] == turn.calls[0].id
    assert json.loads(result["content"]) == {"ok": True, "data": 5}


def test_with_answer_tool_every_step_must_call_and_final_answer_ends_the_turn(agent_for, registry):
    agent, fake = agent_for([call("add", a=2, b=3), answer("It is 5.")], answer_tool=True)
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert turn.answer == "It is 5." and [s.kind for s in turn.steps] == ["calls", "answer"]
    assert all(r["tool_choice"] == "required" for r in fake.requests)
    assert fake.requests[0]["tools"][-1]["function"]["name"] == "final_answer"


def test_calls_of_one_reply_run_in_the_order_written(agent_for, registry):
    agent, fake = agent_for([calls(("wait", {"seconds": 0.3, "label": "first"}),
                                   ("wait", {"seconds": 0.0, "label": "second"})), answer("both done")])
    turn = agent.run("wait twice", registry.openai_tools())
    first, second = turn.steps[0].calls
    assert [first.result["data"]["label"], second.result["data"]["label"]] == ["first", "second"]
    # The second started only after the first had finished, although it took no time itself.
    assert second.result["data"]["finished"] >= first.result["data"]["finished"]
    assert [m["tool_call_id"] for m in tool_messages(fake.requests[1])] == [first.id, second.id]


def test_a_failed_call_stops_the_rest_of_its_reply(agent_for, registry, counter):
    agent, fake = agent_for([calls(("broken", {"reason": "no table"}), ("add", {"a": 1, "b": 1})),
                             call("add", a=1, b=1), answer("2")])
    turn = agent.run("go", registry.openai_tools())
    assert counter.calls == [("broken", {"reason": "no table"}), ("add", {"a": 1, "b": 1})]
    assert turn.steps[0].kind == "tool_error"
    assert [(c.name, c.skipped) for c in turn.steps[0].calls] == [("broken", False), ("add", True)]
    results = [json.loads(m["content"]) for m in tool_messages(fake.requests[1])]
    assert "refused: no table" in results[0]["error"] and results[0]["hint"] == prompts.TOOL_ERROR_HINT
    assert results[1] == {"ok": False, "error": prompts.NOT_RUN}        # every call id gets its message
    assert turn.answer == "2"


def test_an_answer_beside_a_failed_call_does_not_stand(agent_for, registry):
    agent, fake = agent_for([calls(("broken", {"reason": "locked"}), ("final_answer", {"answer": "Saved!"})),
                             call("add", a=2, b=2), answer("It failed first, then 4.")], answer_tool=True)
    turn = agent.run("go", registry.openai_tools())
    assert turn.answer == "It failed first, then 4." and len(turn.steps) == 3
    assert "Saved!" not in json.dumps(fake.requests[1]["messages"])


def test_an_answer_beside_successful_calls_ends_the_turn(agent_for, registry, counter):
    agent, _ = agent_for([calls(("add", {"a": 1, "b": 2}), ("final_answer", {"answer": "Done: 3."}))], answer_tool=True)
    turn = agent.run("1+2", registry.openai_tools())
    assert turn.answer == "Done: 3." and len(turn.steps) == 1 and counter.calls == [("add", {"a": 1, "b": 2})]


def test_a_repeated_call_is_not_run_again_and_then_only_an_answer_is_allowed(agent_for, registry, counter):
    same = lambda: call("add", a=2, b=3)  # noqa: E731
    agent, fake = agent_for([same(), same(), same(), text("It is 5.")], max_repeats=1)
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert counter.calls == [("add", {"a": 2, "b": 3})]
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "repeat", "answer"]
    # a repeat step names the call it declined (a reader sees what was repeated); the turn's
    # calls, which the checks read, hold only the one that ran
    assert [(c.name, c.skipped) for c in turn.steps[1].calls] == [("add", True)]
    assert [(c.name, c.skipped) for c in turn.calls] == [("add", False)]
    line = report._call_line(dataclasses.asdict(turn.steps[1].calls[0]))
    assert line.startswith('    -> add({"a": 2, "b": 3})  [not run: not run again') and "<-" not in line
    assert json.loads(tool_messages(fake.requests[2])[-1]["content"])["error"] == prompts.REPEATED
    # the repeat past the limit tells the model that it must answer now, and not fill in what failed
    assert json.loads(tool_messages(fake.requests[3])[-1]["content"])["error"] == prompts.LAST_REPEAT
    assert fake.requests[2]["tool_choice"] == "auto" and "structured_outputs" not in fake.requests[2]
    # then a text answer only, itself under a constraint: it cannot open like a call
    assert fake.requests[3]["tool_choice"] == "none"
    assert fake.requests[3]["structured_outputs"] == {"regex": prompts.ANSWER_REGEX}
    assert turn.answer == "It is 5."


def test_a_call_that_failed_for_good_is_not_run_again(agent_for, registry, counter):
    agent, _ = agent_for([call("broken", reason="x"), call("broken", reason="x"), text("It cannot be done.")])
    turn = agent.run("go", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["tool_error", "repeat", "answer"] and len(counter.calls) == 1


def test_a_failed_call_runs_again_once_another_call_has_succeeded_since(agent_for, registry, counter):
    # an INSERT refused for a missing table, the CREATE TABLE, the same INSERT: it must run
    agent, _ = agent_for([call("broken", reason="x"), call("add", a=1, b=1), call("broken", reason="x"),
                          call("broken", reason="x"), text("Still failing.")])
    turn = agent.run("go", registry.openai_tools())
    assert counter.calls == [("broken", {"reason": "x"}), ("add", {"a": 1, "b": 1}), ("broken", {"reason": "x"})]
    assert [s.kind for s in turn.steps] == ["tool_error", "calls", "tool_error", "repeat", "answer"]


def test_a_repeat_beside_a_new_call_does_not_block_it(agent_for, registry, counter):
    agent, _ = agent_for([call("add", a=1, b=2), calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
                          text("3 and 7")])
    turn = agent.run("Add 1+2, then 3+4.", registry.openai_tools())
    assert counter.calls == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})] and turn.answer == "3 and 7"


def test_a_reply_cut_off_at_the_token_limit_is_an_observation(agent_for, registry, counter):
    agent, fake = agent_for([cut('{"name": "add", "argu'), call("add", a=1, b=1), text("2")])
    turn = agent.run("1+1", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["cut_off", "calls", "answer"]
    assert fake.requests[1]["messages"][-1] == {"role": "user", "content": prompts.CUT_OFF}
    assert counter.calls == [("add", {"a": 1, "b": 1})]


def test_a_call_the_server_refused_is_an_observation_not_the_answer(agent_for, registry, counter):
    # the lenient grammar let a call through that failed validation: its text is no answer
    refused = '<tool_call>\n{"name": "add", "arguments": {"a": "one", "b": 1}}\n</tool_call>'
    agent, fake = agent_for([malformed(refused, "add: a: 'one' is not of type 'integer'"), call("add", a=1, b=1),
                             text("2")])
    turn = agent.run("1+1", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["tool_error", "calls", "answer"] and turn.answer == "2"
    told = fake.requests[1]["messages"][-1]
    assert told["role"] == "user" and "'one' is not of type 'integer'" in told["content"]
    assert counter.calls == [("add", {"a": 1, "b": 1})]


def test_step_cap_ends_a_turn_that_never_answers(agent_for, registry, counter):
    agent, fake = agent_for(lambda body: call("add", a=len(fake.requests), b=0), max_steps=4)
    turn = agent.run("count", registry.openai_tools())
    assert turn.stop == "max_steps" and turn.answer is None
    assert len(turn.steps) == 4 == len(fake.requests) == len(counter.calls)


def test_retryable_tool_failure_is_retried_before_the_model_sees_it(agent_for, registry, counter):
    agent, _ = agent_for([call("flaky", fail_times=1), answer("done")], tool_retries=1)
    record = agent.run("go", registry.openai_tools()).calls[0]
    assert record.ok and record.attempts == 2 and len(counter.calls) == 2


def test_tool_errors_go_back_until_the_error_limit(agent_for, registry):
    agent, fake = agent_for(lambda body: call("broken", reason=f"try {len(fake.requests)}"), max_errors=2)
    turn = agent.run("go", registry.openai_tools())
    assert turn.stop == "max_errors" and [s.kind for s in turn.steps] == ["tool_error"] * 3
    assert turn.calls[0].attempts == 1                        # not retryable: not retried


def test_unreachable_model_raises(registry):
    from agents.loop import Agent
    from agents.model import ChatModel
    agent = Agent(ChatModel("http://127.0.0.1:9", model="x", timeout=2), registry)
    with pytest.raises(ModelError, match="cannot reach"):
        agent.run("hello", registry.openai_tools())


def test_a_call_that_failed_may_be_made_again(agent_for, registry, counter):
    agent, _ = agent_for([call("flaky", fail_times=1), call("flaky", fail_times=1), answer("done")], tool_retries=0)
    turn = agent.run("go", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["tool_error", "calls", "answer"] and len(counter.calls) == 2
