"""Play one task through the real agent loop and tool registry against a real worker, in a
namespace of its own, and keep its steps only if they hold up: every gold call succeeded
(or failed where the plan said it would), the loop asked for exactly the planned steps, and
the turn's checks on the stores and the answer pass (agents/checks.py, as the suites')."""
from __future__ import annotations

from dataclasses import dataclass, field

from agents.checks import Probe, evaluate
from agents.config import AgentConfig
from agents.faults import FaultyTools
from agents.loop import Agent
from agents.runner import within
from agents.steps import Turn
from tools.registry import Registry
from tuning.oracle import Exchange, Oracle, OracleError
from tuning.plan import Task, TurnPlan


@dataclass(slots=True)
class Outcome:
    task: Task
    kept: bool
    problems: list[str] = field(default_factory=list)
    examples: list[dict] = field(default_factory=list)


def step_problems(plan: TurnPlan, turn: Turn, index: int) -> list[str]:
    """Where the calls that ran differ from the plan: a planned failure that succeeded, a gold
    call that failed or was not run."""
    out = []
    if len(turn.steps) != len(plan.steps):
        return [f"t{index}: {len(turn.steps)} steps ran, {len(plan.steps)} planned (stop: {turn.stop})"]
    for n, (step, done) in enumerate(zip(plan.steps, turn.steps)):
        if not step.calls:
            continue
        ran = [c for c in done.calls if not c.skipped]
        if step.fails and all(c.ok for c in ran):
            out.append(f"t{index}.{n}: planned to fail, but {[c.name for c in ran]} succeeded")
        if not step.fails and (len(ran) != len(step.calls) or not all(c.ok for c in ran)):
            out.append(f"t{index}.{n}: " + "; ".join(f"{c.name}: {c.result.get('error')}" for c in ran if not c.ok))
    return out


def example(task: Task, n: int, x: Exchange) -> dict:
    """One agent step as a training record: the request as sent, and the oracle's reply."""
    plan = task.turns[x.turn]
    record = {"id": f"{task.id}-{n}", "task": task.id, "domain": task.domain,
              "kind": "call" if x.reply.calls else "answer", "messages": x.messages, "tools": x.tools,
              "chosen": {"role": "assistant", "content": x.reply.content,
                         "tool_calls": [c.openai() for c in x.reply.calls]},
              "workflow": task.workflow, "turn_kind": plan.kind}
    if not x.reply.calls:
        record["keys"] = plan.keys          # values a right answer must quote (rejected.py reads them)
    return record


def play(task: Task, registry: Registry, probe: Probe, config: AgentConfig | None = None) -> Outcome:
    """Run `task`; `registry` and `probe` are the shared ones, bound here to its namespace."""
    tools = within(registry, task.namespace)
    checker = probe.within(task.namespace, tools)
    outcome = Outcome(task, kept=False)
    try:
        checker.clear()
        faulty = FaultyTools(tools, [f for t in task.turns for f in t.faults])
        oracle = Oracle(task.namespace)
        agent = Agent(oracle, faulty, config or AgentConfig(), system=task.system)
        for i, plan in enumerate(task.turns):
            if plan.new_session:
                agent.conversation.reset()
            faulty.turn = f"t{i}"
            oracle.play(plan.steps)
            mark = checker.memory_mark() if plan.expect.memory else 0
            try:
                turn = agent.run(plan.user, plan.tools)
            except OracleError as e:
                outcome.problems.append(str(e))
                break
            outcome.problems += step_problems(plan, turn, i)
            outcome.problems += [f"t{i} ({plan.kind}): {c.check} {c.detail}".strip()
                                 for c in evaluate(plan.expect, turn, checker, str, mark) if not c.ok]
            if outcome.problems:
                break
        outcome.kept = not outcome.problems
        if outcome.kept:
            outcome.examples = [example(task, n, x) for n, x in enumerate(oracle.exchanges) if x.step.train]
        return outcome
    finally:
        checker.clear()
        checker.close()
        if tools.context is not None:
            tools.context.close()
