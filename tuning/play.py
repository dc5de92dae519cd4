"""Play one task through the real agent loop and tool registry against a real worker, in a
namespace of its own, and keep its steps only if they hold up.

With the oracle (no `model`): every gold call succeeded (or failed where the plan said it
would), the loop asked for exactly the planned steps, and every turn's checks on the stores
and the answer pass (agents/checks.py, as the suites'); else nothing of the task is kept.
With a served `model`: the turns up to the first that fails its checks are kept, less the
steps that were the model's own mistakes (a failed call, a repeat, a reply cut off).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from agents import prompts
from agents.checks import Probe, evaluate
from agents.config import AgentConfig
from agents.faults import FaultyTools
from agents.loop import Agent
from agents.model import ModelError
from agents.runner import within
from agents.steps import Turn
from tools.registry import Registry
from tools.sql import table_lister
from tuning.oracle import Exchange, Oracle, OracleError, Recorder
from tuning.plan import Task, TurnPlan

GOOD_STEPS = ("calls", "answer")


@dataclass(slots=True)
class Outcome:
    task: Task
    kept: bool
    problems: list[str] = field(default_factory=list)
    examples: list[dict] = field(default_factory=list)
    turns_passed: int = 0


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
        declined = done.calls and all(c.skipped and c.result.get("error") in (prompts.REPEATED, prompts.LAST_REPEAT)
                                      for c in done.calls)
        if step.fails and not declined and all(c.ok for c in ran):
            out.append(f"t{index}.{n}: planned to fail, but {[c.name for c in ran]} succeeded")
        if not step.fails and (len(ran) != len(step.calls) or not all(c.ok for c in ran)):
            out.append(f"t{index}.{n}: " + "; ".join(f"{c.name}: {c.result.get('error')}" for c in ran if not c.ok))
    return out


def example(task: Task, n: int, x: Exchange) -> dict:
    """One agent step as a training record: the request as sent, and the reply given."""
    plan = task.turns[x.turn]
    record = {"id": f"{task.id}-{n}", "task": task.id, "domain": task.domain,
              "kind": "call" if x.reply.calls else "answer", "messages": x.messages, "tools": x.tools,
              "chosen": {"role": "assistant", "content": x.reply.content,
                         "tool_calls": [c.openai() for c in x.reply.calls]},
              "workflow": task.workflow, "turn_kind": plan.kind}
    if not x.reply.calls:
        record["keys"] = plan.keys          # values a right answer must quote (rejected.py reads them)
    return record


def play(task: Task, registry: Registry, probe: Probe, model=None, config: AgentConfig | None = None) -> Outcome:
    """Run `task` with the oracle, or with `model` (a ChatModel) under `config`; `registry` and
    `probe` are the shared ones, bound here to the task's namespace."""
    tools = within(registry, task.namespace)
    checker = probe.within(task.namespace, tools)
    outcome = Outcome(task, kept=False)
    try:
        checker.clear()
        faulty = FaultyTools(tools, [f for t in task.turns for f in t.faults])
        player = Oracle(task.namespace) if model is None else Recorder(model)
        agent = Agent(player, faulty, config or AgentConfig(), system=task.system, tables=table_lister(tools))
        for i, plan in enumerate(task.turns):
            if plan.new_session:
                agent.conversation.reset()
            faulty.turn = f"t{i}"
            player.play(plan.steps)
            mark = checker.memory_mark() if plan.expect.memory else 0
            try:
                turn = agent.run(plan.user, plan.tools)
            except (OracleError, ModelError) as e:     # the plan or the runtime failed this task, not our code
                outcome.problems.append(f"t{i}: {e}")
                break
            problems = step_problems(plan, turn, i) if model is None else \
                ([] if turn.answer is not None else [f"t{i}: no answer ({turn.stop})"])
            problems += [f"t{i} ({plan.kind}): {c.check} {c.detail}".strip()
                         for c in evaluate(plan.expect, turn, checker, str, mark) if not c.ok]
            if model is not None:
                mine = [x for x in player.exchanges if x.turn == i]
                for x, step in zip(mine, turn.steps):
                    x.train = step.kind in GOOD_STEPS
            if problems:
                outcome.problems += problems
                break
            outcome.turns_passed = i + 1
        outcome.kept = outcome.turns_passed > 0 if model is not None else not outcome.problems
        if outcome.kept:
            outcome.examples = [example(task, n, x) for n, x in enumerate(player.exchanges)
                                if x.train and x.turn < outcome.turns_passed]
        return outcome
    finally:
        checker.clear()
        checker.close()
        if tools.context is not None:
            tools.context.close()
