"""The agent loop through Agent.run and its HTTP client, against a scripted model server."""
from __future__ import annotations

import json

import pytest

from agents import prompts
from agents.model import ModelError
from tests.agents.fake_model import DOUBTFUL, call, calls, cut, malformed, text


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_call_result_goes_back_with_its_id_then_answer(agent_for, registry, counter):
    agent, fake = agent_for([call("add", a=2, b=3), text("2 + 3 = 5")])
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert turn.answer == "2 + 3 = 5" and turn.stop == "answer"
    assert [s.kind for s in turn.steps] == ["calls", "answer"]
    assert counter.calls == [("add", {"a": 2, "b": 3})]
    second = fake.requests[1]
    sent_call = second["messages"][-2]["tool_calls"][0]
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == sent_call["id"] == turn.calls[0].id
    assert json.loads(result["content"]) == {"ok": True, "data": 5}
    assert fake.requests[0]["tools"] and fake.requests[0]["tool_choice"] == "auto"


def test_independent_calls_run_in_parallel_and_come_back_in_order(agent_for, registry):
    agent, fake = agent_for([calls(("wait", {"seconds": 0.6, "label": "first"}),
                                   ("wait", {"seconds": 0.6, "label": "second"})), text("both done")])
    turn = agent.run("wait twice", registry.openai_tools())
    step = turn.steps[0]
    assert [c.result["data"]["label"] for c in step.calls] == ["first", "second"]
    # Run one after the other, the two would take 1.2 s; both finished within 0.3 s of each other.
    finished = [c.result["data"]["finished"] for c in step.calls]
    assert abs(finished[0] - finished[1]) < 0.3
    results = tool_messages(fake.requests[1])
    assert [m["tool_call_id"] for m in results] == [c.id for c in step.calls]
    assert [json.loads(m["content"])["data"]["label"] for m in results] == ["first", "second"]


def test_malformed_call_of_a_known_tool_is_asked_again_by_name(agent_for, registry, counter):
    bad = '{"name": "add", "arguments": {"a": 2, "c": 3}}'
    agent, fake = agent_for([malformed(bad, "add: Additional properties are not allowed ('c' was unexpected)"),
                             call("add", a=2, b=3), text("5")])
    turn = agent.run("add 2 and 3", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["malformed", "calls", "answer"]
    retry = fake.requests[1]
    assert retry["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert bad not in json.dumps(retry["messages"])       # the broken call is not there to be copied
    assert counter.calls == [("add", {"a": 2, "b": 3})] and turn.answer == "5"


def test_malformed_call_of_an_unknown_tool_goes_back_as_an_observation(agent_for, registry):
    bad = '{"name": "multiply", "arguments": {"a": 2}}'
    agent, fake = agent_for([malformed(bad, "'multiply' is not one of the request's tools"), text("I cannot multiply.")])
    turn = agent.run("multiply 2 by 3", registry.openai_tools())
    observation = fake.requests[1]["messages"][-1]
    assert observation["role"] == "user" and "'multiply' is not one of the request's tools" in observation["content"]
    assert fake.requests[1]["messages"][-2] == {"role": "assistant", "content": bad}
    assert fake.requests[1]["tool_choice"] == "auto"
    assert turn.steps[0].kind == "malformed" and turn.answer == "I cannot multiply."


def test_cut_off_call_is_not_a_call_but_cut_off_text_is_an_answer(agent_for, registry, counter):
    agent, fake = agent_for([cut('{"name": "add", "argu'), call("add", a=1, b=1), text("2")])
    turn = agent.run("1+1", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["malformed", "calls", "answer"]
    assert fake.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    agent2, _ = agent_for([cut("The answer is two, because one and one")])
    turn2 = agent2.run("1+1", registry.openai_tools())
    assert turn2.answer == "The answer is two, because one and one" and turn2.steps[0].finish_reason == "length"


def test_repeated_call_is_not_run_again_and_the_model_is_steered_to_answer(agent_for, registry, counter):
    same = call("add", a=2, b=3)
    agent, fake = agent_for([same, call("add", a=2, b=3), call("add", a=2, b=3), text("It is 5.")])
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert counter.calls == [("add", {"a": 2, "b": 3})]
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "repeat", "answer"]
    progress = fake.requests[2]                               # first steer: results as text, tools offered
    assert progress["tools"] and not tool_messages(progress) and len(progress["messages"]) == 2
    assert "- add(a=2, b=3) returned:\n  5" in progress["messages"][-1]["content"]
    assert progress["messages"][-1]["content"].endswith(prompts.PROGRESS_NOW)
    final = fake.requests[3]                                  # then answer mode: no tools, results as text
    assert "tools" not in final and not tool_messages(final)
    assert "- add(a=2, b=3) returned:\n  5" in final["messages"][-1]["content"] and "{" not in final["messages"][-1]["content"]
    assert final["messages"][0]["content"] == prompts.ANSWER_SYSTEM      # no call format to imitate
    assert turn.answer == "It is 5."


def test_malformed_restatement_of_a_done_call_counts_as_a_repeat(agent_for, registry, counter):
    restated = '{"name": "add", "arguments": {"a": 2, "b": 3, "result": 5}}'
    agent, fake = agent_for([call("add", a=2, b=3), malformed(restated, "add: Additional properties ..."),
                             malformed(restated, "add: Additional properties ..."), text("5")],
                            steer_auto_repeats=1)
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "repeat", "answer"]
    assert "tools" not in fake.requests[3] and len(counter.calls) == 1


def test_json_in_answer_mode_is_refused(agent_for, registry):
    agent, fake = agent_for([call("add", a=1, b=2), call("add", a=1, b=2),
                             text('{"name": "add", "arguments": {"a": 1}}'), text("3")], steer_auto_repeats=0)
    turn = agent.run("1+2", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "malformed", "answer"]
    assert prompts.PLAIN_ANSWER in fake.requests[3]["messages"][-1]["content"] and turn.answer == "3"


def test_step_cap_ends_a_turn_that_never_answers(agent_for, registry, counter):
    agent, fake = agent_for(lambda body: call("add", a=len(fake.requests), b=0), max_steps=4)
    turn = agent.run("count", registry.openai_tools())
    assert turn.stop == "max_steps" and turn.answer is None
    assert len(turn.steps) == 4 == len(fake.requests) == len(counter.calls)


def test_retryable_tool_failure_is_retried_before_the_model_sees_it(agent_for, registry, counter):
    agent, fake = agent_for([call("flaky", fail_times=1), text("done")], tool_retries=1)
    turn = agent.run("go", registry.openai_tools())
    record = turn.calls[0]
    assert record.ok and record.attempts == 2 and len(counter.calls) == 2


def test_tool_errors_go_back_with_a_hint_until_the_error_limit(agent_for, registry):
    agent, fake = agent_for(lambda body: call("broken", reason=f"try {len(fake.requests)}"), max_errors=2)
    turn = agent.run("go", registry.openai_tools())
    assert turn.stop == "max_errors" and [s.kind for s in turn.steps] == ["tool_error"] * 3
    seen = json.loads(tool_messages(fake.requests[1])[0]["content"])
    assert seen["ok"] is False and "refused: try 1" in seen["error"] and seen["hint"] == prompts.TOOL_ERROR_HINT
    assert turn.calls[0].attempts == 1                        # not retryable: not retried


def test_verify_step_only_when_on_and_low_confidence(agent_for, registry):
    script = [call("add", a=2, b=2), text("5", awareness=DOUBTFUL), text("4")]
    agent, fake = agent_for(list(script), verify=True)
    turn = agent.run("2+2?", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "verify", "answer"] and turn.verified
    assert fake.requests[2]["messages"][-1]["content"] == prompts.VERIFY and turn.answer == "4"
    off, _ = agent_for(list(script), verify=False)
    assert off.run("2+2?", registry.openai_tools()).answer == "5"
    confident, _ = agent_for([call("add", a=2, b=2), text("4")], verify=True)
    assert [s.kind for s in confident.run("2+2?", registry.openai_tools()).steps] == ["calls", "answer"]


def test_verify_happens_once(agent_for, registry):
    agent, _ = agent_for([text("maybe 5", awareness=DOUBTFUL), text("still 5", awareness=DOUBTFUL)], verify=True)
    turn = agent.run("2+2?", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["verify", "answer"] and turn.answer == "still 5"


def test_unreachable_model_raises(registry):
    from agents.loop import Agent
    from agents.model import ChatModel
    agent = Agent(ChatModel("http://127.0.0.1:9", model="x", timeout=2), registry)
    with pytest.raises(ModelError, match="cannot reach"):
        agent.run("hello", registry.openai_tools())


def test_call_the_server_did_not_recognise_is_still_a_malformed_call(agent_for, registry, counter):
    wrapped = '({"name": "add", "arguments": {"a": 1, "b": 2}})'       # no error from the server: not a call
    agent, fake = agent_for([text(wrapped), call("add", a=1, b=2), text("3")])
    turn = agent.run("1+2", registry.openai_tools())
    assert turn.steps[0].kind == "malformed" and turn.answer == "3"
    assert fake.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "add"}}


def test_progress_mode_lets_a_repeating_model_take_the_next_step(agent_for, registry, counter):
    agent, fake = agent_for([call("add", a=1, b=2), call("add", a=1, b=2), call("add", a=3, b=4), text("3 and 7")])
    turn = agent.run("Add 1+2, then 3+4.", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "calls", "answer"]
    assert counter.calls == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]
    after = fake.requests[3]["messages"][-1]["content"]       # still progress mode, both results as text
    assert "- add(a=1, b=2) returned:\n  3" in after and "- add(a=3, b=4) returned:\n  7" in after and fake.requests[3]["tools"]


def test_verify_in_progress_mode_shows_the_draft(agent_for, registry):
    agent, fake = agent_for([call("add", a=2, b=2), call("add", a=2, b=2), text("5", awareness=DOUBTFUL), text("4")],
                            verify=True)
    turn = agent.run("2+2?", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "verify", "answer"]
    content = fake.requests[3]["messages"][-1]["content"]
    assert prompts.DRAFT.format(answer="5") in content and prompts.VERIFY in content and turn.answer == "4"


def test_answer_mode_shows_tables_as_column_values_and_every_call_its_own_budget():
    from agents.steps import ToolCallRecord
    table = {"ok": True, "data": {"columns": ["model", "context_length"], "rows": [["qwen", 32768]], "row_count": 1}}
    big = {"ok": True, "data": {"hits": [{"text": "x" * 280, "page": None} for _ in range(8)]}}
    note = {"ok": True, "data": {"notes": [{"text": "the facts are in suite_s0", "tags": []}]}}
    calls = [ToolCallRecord("1", "sql_query", {"sql": "SELECT *"}, table, 0.0),
             ToolCallRecord("2", "rag_search", {"query": "q"}, big, 0.0),
             ToolCallRecord("3", "memory_search", {"query": "q"}, note, 0.0)]
    text = prompts.flat_request("recall", calls, "", prompts.ANSWER_NOW, 1200)
    assert "- sql_query(sql=SELECT *) returned:\n  row 1: model=qwen, context_length=32768\n  row_count: 1" in text
    assert "page" not in text and "tags" not in text                    # empty values are noise
    assert text.count("hits") < 8 and "  ..." in text                   # the long result is cut...
    assert "- memory_search(query=q) returned:\n  notes 1 text: the facts are in suite_s0" in text   # ...not the next one


def test_answer_mode_leaves_the_earlier_turns_out(agent_for, registry, counter):
    same = call("add", a=2, b=3)
    agent, fake = agent_for([text("Hello."), same, same, same, text("It is 5.")])
    agent.run("Say hello.", registry.openai_tools())
    turn = agent.run("What is 2 + 3?", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["calls", "repeat", "repeat", "answer"]
    assert "Earlier in this conversation" in fake.requests[1]["messages"][0]["content"]     # chat mode keeps them
    assert "Earlier in this conversation" in fake.requests[3]["messages"][0]["content"]     # progress mode too
    assert fake.requests[4]["messages"][0]["content"] == prompts.ANSWER_SYSTEM              # the answer: results only


def test_call_written_with_parentheses_is_asked_again_by_name(agent_for, registry, counter):
    bad = '{"name": "add()", "arguments": {"a": 2, "b": 3}}'
    agent, fake = agent_for([malformed(bad, "'add()' is not one of the request's tools"), call("add", a=2, b=3), text("5")])
    turn = agent.run("add 2 and 3", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["malformed", "calls", "answer"]
    assert fake.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "add"}}


STATUS = {"runtime": {"healthy": True, "model": "m-7b", "revision": "r1", "backend": "cpu", "context_length": 4096},
          "worker": {"healthy": True, "data_dir": "/tmp/home"}}


def status_agent(script):
    from agents.config import AgentConfig
    from agents.loop import Agent
    from agents.model import ChatModel
    from tests.agents.fake_model import ScriptedModel
    from tools.registry import Registry
    r = Registry()

    @r.tool(toolset="runtime")
    def status() -> dict:
        """Report the runtime's status."""
        return STATUS
    fake = ScriptedModel(script).__enter__()
    return Agent(ChatModel(fake.url), r, AgentConfig()), fake, r.openai_tools()


def run_scripted(make_agent, script, request: str):
    """One turn of `request` with the agent make_agent(script) builds; (turn, the scripted server)."""
    agent, fake, tools = make_agent(script)
    try:
        return agent.run(request, tools), fake
    finally:
        fake.__exit__(None, None, None)


ASK = "Which model is serving you, on which backend, and what is its context length?"


def test_an_answer_leaving_out_a_requested_value_is_asked_for_in_answer_mode_at_most_twice():
    turn, fake = run_scripted(status_agent, [call("status"), text("It is m-7b with a 4096-token context."),
                                       text("I'm sorry, but I can't assist with that."),
                                       text("Still m-7b, 4096 tokens.")], ASK)
    assert [s.kind for s in turn.steps] == ["calls", "incomplete", "incomplete", "answer"]
    assert turn.answer == "Still m-7b, 4096 tokens."            # asked twice: this one stands
    assert turn.steps[1].observation == "answer mode: the answer left out backend (cpu)"
    reask = fake.requests[2]
    assert "tools" not in reask or not reask["tools"]                          # answer mode: no tools
    content = reask["messages"][-1]["content"]
    # The fields the request names, with their values; not the ones it does not ask about.
    assert prompts.NEEDS.format(fields="model (m-7b), backend (cpu), context_length (4096)") in content
    assert "must give each of: model (m-7b), backend (cpu), context_length (4096)." in content
    assert "Your last answer" not in content
    # The refusal stated none of them: asked once more, told so.
    again = fake.requests[3]["messages"][-1]["content"]
    assert "Your last answer left out model (m-7b), backend (cpu), context_length (4096)." in again


def search_agent(script):
    from agents.config import AgentConfig
    from agents.loop import Agent
    from agents.model import ChatModel
    from tests.agents.fake_model import ScriptedModel
    from tools.registry import Registry
    r = Registry()

    @r.tool(toolset="kb")
    def search(query: str) -> dict:
        """Search the knowledge base.

        Args:
            query: what to look for
        """
        return {"hits": [{"source": "kb-1", "text": "Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half.",
                          "score": 0.9}, {"source": "kb-2", "text": "An older note about the build farm and its nightly jobs.",
                                          "score": 0.2}]}

    @r.tool(toolset="kb")
    def remember(text: str) -> dict:
        """Save a note.

        Args:
            text: the note
        """
        return {"id": 1, "text": text}
    fake = ScriptedModel(script).__enter__()
    return Agent(ChatModel(fake.url), r, AgentConfig()), fake, r.openai_tools()


def test_an_answer_that_does_not_say_what_a_lookup_found_is_asked_for_with_the_passage():
    turn, fake = run_scripted(search_agent, [calls(("search", {"query": "orion"}),
                                             ("remember", {"text": "Orion notes are kept in the knowledge base kb-1 now."})),
                                       text("The Orion notes are in the knowledge base."),
                                       text("Orion 4.2.1 moved the scheduler to a new queue, which cut p99 latency in half.")],
                              "What changed in Orion 4.2.1? Look it up, and note where you found it.")
    assert [s.kind for s in turn.steps] == ["calls", "incomplete", "answer"]
    content = fake.requests[2]["messages"][-1]["content"]
    # The top hit, not the second one, nor the note that only echoes what the model wrote.
    assert ("must give each of: the search passage (Orion 4.2.1 moved the scheduler to a new queue and cut p99 "
            "latency in half.).") in content
    assert "build farm" not in content.split("must give each of")[1]
    # What a tool says to the model about its result is not a passage to retell.
    from agents.steps import ToolCallRecord
    empty = {"ok": True, "data": {"hits": [], "note": "nothing is stored in the collection 'default' yet; call rag_ingest first"}}
    assert prompts.requested("What changed in Orion?", [ToolCallRecord("3", "search", {"query": "orion"}, empty, 0.0)]) == []


def test_a_complete_answer_ends_the_turn_and_given_values_are_not_required():
    turn, fake = run_scripted(status_agent, [call("status"), text("m-7b on CPU, context 4,096.")], ASK)  # as checks read it
    assert [s.kind for s in turn.steps] == ["calls", "answer"]
    from agents.steps import ToolCallRecord
    done = [ToolCallRecord("1", "status", {}, {"ok": True, "data": STATUS}, 0.0)]
    # A value the request itself holds is not news to the user; a field it does not name is not asked for.
    assert prompts.requested("Is m-7b serving on the cpu backend?", done) == []
    assert prompts.requested("What is the data dir?", done) == [("data_dir", "/tmp/home")]
    table = {"ok": True, "data": {"columns": ["model", "backend"], "rows": [["m-7b", "cpu"]], "row_count": 1}}
    assert prompts.requested("What does the table hold for model and backend?",
                             [ToolCallRecord("2", "sql_query", {}, table, 0.0)]) == [("model", "m-7b"), ("backend", "cpu")]


def test_a_failed_call_asks_for_a_fix_only_while_tools_are_offered(agent_for, registry):
    same = call("broken", reason="no")
    agent, fake = agent_for([same, same, same, text("It was refused.")])
    turn = agent.run("Try the broken tool.", registry.openai_tools())
    assert [s.kind for s in turn.steps] == ["tool_error", "repeat", "repeat", "answer"]
    progress, answer = fake.requests[2]["messages"][-1]["content"], fake.requests[3]["messages"][-1]["content"]
    assert "- broken failed: refused: no. Fix the arguments and call it again." in progress and fake.requests[2]["tools"]
    assert "- broken failed: refused: no." in answer and "Fix the arguments" not in answer     # nothing to call with


def test_a_reply_pasting_back_a_tool_result_is_not_the_answer():
    pasted = "<tool_response>\n" + json.dumps({"ok": True, "data": {"hits": [
        {"source": "kb-1", "text": "Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half.",
         "score": 0.9}]}}) + "\n</tool_response>"
    turn, fake = run_scripted(search_agent, [call("search", query="orion"), text(pasted),
                                             text("Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half.")],
                              "What changed in Orion 4.2.1?")
    assert [s.kind for s in turn.steps] == ["calls", "pasted", "answer"]
    assert turn.answer.startswith("Orion 4.2.1 moved")
    assert "tool_calls" not in json.dumps(fake.requests[2]["messages"])      # progress mode: results as text


def test_a_json_object_or_the_loops_own_text_as_the_reply_is_pasted_too():
    turn, fake = run_scripted(search_agent, [call("search", query="orion"), text('{"ok": true, "data": {"columns": ["source"]}}'),
                                       text(prompts.DONE_SO_FAR + "\n- search(query=orion) returned: ..."),
                                       text("Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half.")],
                              "What changed in Orion 4.2.1?")
    # Neither spends a repeat: the third request is still in progress mode, tools offered.
    assert [s.kind for s in turn.steps] == ["calls", "pasted", "pasted", "answer"]
    assert fake.requests[3]["tools"] and fake.requests[3]["messages"][0]["content"] != prompts.ANSWER_SYSTEM
