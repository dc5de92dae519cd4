"""Run a suite against a live stack: per seed, empty the seed's namespace and apply the
suite's reset, then play its turns through one Agent (so the conversation carries across
turns) and check each turn.

Each seed stores in a namespace of its own ("s3"): its tools are a registry whose context
maps the names the model chooses (a database `budget`) to the worker's (`s3__budget`), and
its checks read through the same namespace. So seeds can run in parallel on one worker (the
runtime batches their requests) without seeing each other's rows, documents or notes.
The seed goes to the runtime's sampler (request seed = seed * 1000 + step), so seeds differ
only when the suite samples (agent.temperature > 0). The result is a plain dict (see
agents/report.py for its shape and the transcript).
"""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from types import SimpleNamespace
from typing import Callable

from agents.checks import Probe, evaluate
from agents.config import AgentConfig
from agents.faults import FaultyTools
from agents.loop import Agent
from agents.model import ChatModel, ModelError
from agents.state import Conversation
from agents.steps import Turn
from agents.suite import Suite
from tools.sql import table_lister


def offered(registry, names: list[str] | None) -> list[dict]:
    """OpenAI schemas of the tools a turn offers: `names` are toolsets or tool names (None:
    every tool), as the registry describes them."""
    sets = set(registry.toolsets())
    unknown = [n for n in names or [] if n not in sets and n not in registry.tools]
    if unknown:
        raise ValueError(f"unknown tools or toolsets {unknown}; toolsets: {sorted(sets)}")
    return [t.openai() for t in registry.tools.values() if names is None or t.toolset in names or t.name in names]


def within(registry, namespace: str):
    """The registry's tools bound to a copy of its context that stores under `namespace`
    (a registry without a context has nothing to keep apart, and is returned as it is)."""
    if registry.context is None:
        return registry
    scoped = type(registry)(registry.context.within(namespace))
    for tool in registry.tools.values():
        scoped.add(tool)
    return scoped


def filler(info: dict, seed: int) -> Callable[[str], str]:
    """str -> str filling {runtime.model|backend|context_length|revision} from /v1/models,
    and {run} with this seed's name (a value YAML read as a number or a date is taken as written)."""
    runtime = SimpleNamespace(model=info.get("id"), backend=info.get("backend"),
                              context_length=info.get("context_length"), revision=info.get("revision"))
    return lambda text: str(text).format(runtime=runtime, run=f"s{seed}")


def fill_all(value, fill):
    """`fill` applied to every string inside a JSON-like value."""
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, dict):
        return {k: fill_all(v, fill) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_all(v, fill) for v in value]
    return value


def agent_config(suite: Suite, overrides: dict) -> AgentConfig:
    known = {f.name for f in fields(AgentConfig)}
    settings = {**suite.agent, **{k: v for k, v in overrides.items() if v is not None}}
    unknown = set(settings) - known
    if unknown:
        raise ValueError(f"unknown agent settings {sorted(unknown)}; known: {sorted(known)}")
    return AgentConfig(**settings)


class SuiteRunner:
    def __init__(self, suite: Suite, model: ChatModel, registry, probe: Probe, overrides: dict | None = None,
                 on_turn: Callable[[int, dict], None] | None = None):
        self.suite, self.model, self.registry, self.probe = suite, model, registry, probe
        self.overrides = overrides or {}
        self.on_turn = on_turn
        self.info = model.info()
        unknown = {f.tool for f in suite.faults} - set(registry.tools)
        if unknown:
            raise ValueError(f"faults name tools the registry does not have: {sorted(unknown)}")

    def reset(self, probe: Probe, tools, fill: Callable[[str], str]) -> None:
        """Empty the seed's namespace, then run what the suite's `reset` names."""
        probe.clear()
        r = self.suite.reset
        for item in r.sql:
            probe.sql_exec(fill(item["db"]), fill(item["sql"]))
        for source in r.rag_sources:
            probe.rag_delete(fill(source), r.collection)
        for item in r.tools:
            result = tools.call(item["name"], fill_all(item.get("arguments") or {}, fill))
            if not result.get("ok"):
                raise RuntimeError(f"suite reset: {item['name']} failed: {result.get('error')}")

    def run_seed(self, seed: int) -> dict:
        fill = filler(self.info, seed)
        registry = within(self.registry, f"s{seed}")
        probe = self.probe.within(f"s{seed}", registry)
        try:
            self.reset(probe, registry, fill)
            return self._play(seed, FaultyTools(registry, self.suite.faults), probe, fill)
        finally:
            probe.close()

    def _play(self, seed: int, tools: FaultyTools, probe: Probe, fill: Callable[[str], str]) -> dict:
        mark = probe.memory_mark() if any(t.expect.memory for t in self.suite.turns) else 0
        config = agent_config(self.suite, {**self.overrides, "seed": seed * 1000})
        agent = Agent(self.model, tools, config, conversation=Conversation(), tables=table_lister(tools))
        turns, error = [], None
        start = time.monotonic()
        for spec in self.suite.turns:
            if spec.new_session:
                agent.conversation.reset()
            tools.turn = spec.name
            if error is None:
                try:
                    turn = agent.run(fill(spec.user), offered(tools.tools, self.suite.tools if spec.tools is None else spec.tools))
                except ModelError as e:       # the runtime failed, not the model: this seed fails, the others go on
                    error, turn = str(e), Turn(fill(spec.user), stop="model_error")
            else:
                turn = Turn(fill(spec.user), stop="not_run")
            checks = [] if error else evaluate(spec.expect, turn, probe, fill, mark)
            record = {"name": spec.name, "passed": error is None and all(c.ok for c in checks) and turn.answer is not None,
                      "checks": [asdict(c) for c in checks], "new_session": spec.new_session,
                      "faults_injected": tools.injected_in(spec.name),
                      **({"error": error} if error else {}), **turn.to_dict()}
            turns.append(record)
            if self.on_turn:
                self.on_turn(seed, record)
        return {"seed": seed, "passed": all(t["passed"] for t in turns), "turns": turns,
                "latency_s": time.monotonic() - start, **({"error": error} if error else {})}

    def run(self, seeds: list[int], parallel: int = 1) -> dict:
        """Every seed (`parallel` at a time), with the pass rates."""
        started = time.time()
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            runs = list(pool.map(self.run_seed, seeds))
        config = agent_config(self.suite, self.overrides)
        return {"suite": self.suite.name, "suite_file": str(self.suite.path) if self.suite.path else None,
                "model": self.info.get("id"), "backend": self.info.get("backend"),
                "revision": self.info.get("revision"), "agent": asdict(config), "seeds": seeds,
                "parallel": parallel, "started": started, "duration_s": time.time() - started, "runs": runs,
                "summary": summary(self.suite, runs)}


def summary(suite: Suite, runs: list[dict]) -> dict:
    """Pass rates overall and per turn, with the checks that failed most often (a check that
    names its run, such as the source notes-s3, is counted under the name with {run})."""
    n = len(runs)
    per_turn = {}
    for i, spec in enumerate(suite.turns):
        failed: dict[str, int] = {}
        for run in runs:
            rec = run["turns"][i]
            own_name = re.compile(rf"(?<![A-Za-z0-9])s{run['seed']}(?![0-9])")
            for c in rec["checks"]:
                if not c["ok"]:
                    check = own_name.sub("{run}", c["check"])
                    failed[check] = failed.get(check, 0) + 1
            if rec["answer"] is None:
                failed[f"no answer ({rec['stop']})"] = failed.get(f"no answer ({rec['stop']})", 0) + 1
        records = [r["turns"][i] for r in runs]
        per_turn[spec.name] = {"pass_rate": sum(r["passed"] for r in records) / n if n else 0.0,
                               "failed_checks": failed,
                               "mean_steps": sum(len(r["steps"]) for r in records) / n if n else 0.0,
                               "mean_latency_s": sum(r["latency_s"] for r in records) / n if n else 0.0}
    return {"runs": n, "passed": sum(r["passed"] for r in runs),
            "pass_rate": sum(r["passed"] for r in runs) / n if n else 0.0, "turns": per_turn}
