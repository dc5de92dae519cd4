"""tables_in_prompt through the real registry and worker: the system prompt of a later turn
lists the SQLite tables an earlier turn created, with their columns and as the model named
them, and nothing of another agent's namespace."""
from __future__ import annotations

from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel
from tools.sql import table_lister
from tests.agents.fake_model import ScriptedModel, call, text
from tools.context import ToolContext
from tools.sql import kept_tables
from tools.toolsets import build_registry
from tests.stack_fixtures import free_port

CREATE = "CREATE TABLE spending (item TEXT, price REAL, date TEXT)"


def _run(worker_url: str, namespace: str, on: bool) -> list[dict]:
    registry = build_registry(ToolContext(worker_url=worker_url, namespace=namespace))
    other = build_registry(ToolContext(worker_url=worker_url, namespace=namespace + "x"))
    assert other.call("sql_exec", {"db": "secret", "sql": "CREATE TABLE salaries (who TEXT, pay REAL)"})["ok"]
    script = [call("sql_exec", db="budget", sql=CREATE), text("Created."), text("You spent nothing yet.")]
    with ScriptedModel(script) as fake:
        agent = Agent(ChatModel(fake.url), registry, AgentConfig(tables_in_prompt=on), tables=table_lister(registry))
        tools = registry.openai_tools()
        agent.run("Keep my spending: item, price and date.", tools)
        agent.run("What did I spend?", tools)
    return [r["messages"][0]["content"] for r in fake.requests]


def test_a_later_turn_is_told_the_tables_kept_so_far(worker):
    url, _, _ = worker
    first, _, later = _run(url, "kt1", on=True)
    assert "SQLite tables" not in first                     # none yet: the prompt is the plain one
    assert "budget: spending(item, price, date)" in later
    assert "salaries" not in later and "kt1" not in later


def test_off_the_prompt_does_not_change(worker):
    url, _, _ = worker
    systems = _run(url, "kt2", on=False)
    assert len(set(systems)) == 1 and "SQLite tables" not in systems[0]


def test_the_list_keeps_to_the_namespace_leaves_out_memory_and_cuts_whole_tables(worker):
    url, _, _ = worker
    shared = build_registry(ToolContext(worker_url=url))
    mine = build_registry(ToolContext(worker_url=url, namespace="kt3"))
    assert shared.call("sql_exec", {"db": "kt_shared", "sql": "CREATE TABLE rota (who TEXT, day TEXT)"})["ok"]
    assert mine.call("sql_exec", {"db": "home", "sql": "CREATE TABLE plants (name TEXT, watered TEXT)"})["ok"]
    assert mine.call("memory_add", {"text": "The plants are in the home database."})["ok"]
    ours = kept_tables(mine.context)
    assert ours == "home: plants(name, watered)"                 # not memory's notes, nor the shared rota
    everyone = kept_tables(shared.context)
    assert "kt_shared: rota(who, day)" in everyone and "plants" not in everyone and "kt3" not in everyone
    for n in range(6):
        assert mine.call("sql_exec", {"db": "home", "sql": f"CREATE TABLE t{n} (a_long_column_name TEXT)"})["ok"]
    cut = kept_tables(mine.context, max_chars=120)
    assert len(cut) <= 120 and cut.endswith("more tables)") and "a_long_column_na" not in cut.split("(and")[-1]
    assert all(part.endswith(")") for part in cut.split(" (and")[0].split("; "))   # no table cut in half


def test_a_worker_that_does_not_answer_leaves_the_prompt_plain():
    assert kept_tables(ToolContext(worker_url=f"http://127.0.0.1:{free_port()}", timeout=2)) == ""
