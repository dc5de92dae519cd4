"""Conversation state across turns, through Agent.run: earlier turns as their messages, within
a budget."""
from __future__ import annotations

from agents.state import Conversation
from tests.agents.fake_model import answer, call


def test_a_later_turn_sees_the_earlier_request_calls_and_answer_as_messages(agent_for, registry):
    note = "Keep this: the freezer in room 4 holds samples A-17, B-22 and C-09, logged by Dana at 7:45."
    agent, fake = agent_for([call("add", a=40, b=2), answer("Noted."), answer("A-17, B-22 and C-09.")])
    agent.run(note, registry.openai_tools())
    agent.run("Which samples did I mention?", registry.openai_tools())
    second = fake.requests[2]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second[1]["content"] == note                                # the user's words, in full
    assert second[3]["content"] == '{"ok": true, "data": 42}' and second[4]["content"] == "Noted."
    # The history renders the same on every later turn, so the runtime's prefix cache serves it.
    assert fake.requests[2]["messages"][:5] == fake.requests[1]["messages"][:2] + second[2:5]


def test_past_the_budget_old_turns_lose_their_results_then_go(agent_for, registry):
    agent, fake = agent_for(lambda body: call("add", a=1, b=1) if body["messages"][-1]["role"] == "user"
                            else answer("ok " * 300))
    agent.conversation.budget_chars = 4000
    for i in range(6):
        agent.run(f"turn {i}: " + "detail " * 100, registry.openai_tools())
    last_turn = next(r for r in fake.requests if r["messages"][-1]["content"].startswith("turn 5:"))
    history = last_turn["messages"][1:-1]
    size = sum(len(m.get("content") or "") for m in history)
    assert 0 < size <= 4000 + 400
    users = [m["content"] for m in history if m["role"] == "user"]
    assert users[-1].startswith("turn 4:") and not any(u.startswith("turn 0:") for u in users)
    assert history[-1]["role"] == "assistant" and any(m["role"] == "tool" for m in history)  # newest kept whole


def test_a_new_session_forgets_the_context():
    c = Conversation()
    c.add([{"role": "user", "content": "remember 7"}, {"role": "assistant", "content": "ok"}])
    assert c.messages("sys", "hi")[1]["content"] == "remember 7"
    c.reset()
    assert c.messages("sys", "hi") == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
