"""Run a suite against a live stack: per seed, reset what the suite names, then play its
turns through one Agent (so the conversation carries across turns) and check each turn.

The seed goes to the runtime's sampler (request seed = seed * 1000 + step), so seeds differ
only when the suite samples (agent.temperature > 0). Seeds can run in parallel (the
runtime batches their requests): a suite names what it stores with {run} ("s<seed>") so
that runs do not share tables, documents or notes. The result is a plain dict (see
agents/report.py for its shape and the transcript).
"""
from __future__ import annotations

import copy
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from types import SimpleNamespace
from typing import Callable

from agents.checks import Probe, evaluate
from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel, ModelError
from agents.state import Conversation
from agents.steps import Turn
from agents.suite import Suite


def offered(registry, names: list[str] | None, hide: list[str] = (), require: list[str] = ()) -> list[dict]:
    """OpenAI schemas of the tools a turn offers: `names` are toolsets or tool names (None:
    every tool), without the optional parameters named in `hide` ("tool.parameter") and with
    those in `require` made required. What a small model is not shown it cannot fill with
    values borrowed from a description; what the schema requires the server enforces (a
    call without it is refused, and asked for again under constrained decoding)."""
    sets = set(registry.toolsets())
    unknown = [n for n in names or [] if n not in sets and n not in registry.tools]
    if unknown:
        raise ValueError(f"unknown tools or toolsets {unknown}; toolsets: {sorted(sets)}")
    tools = [t for t in registry.tools.values() if names is None or t.toolset in names or t.name in names]
    out = []
    for tool in tools:
        schema = copy.deepcopy(tool.openai())
        params = schema["function"]["parameters"]
        for item in hide:
            name, _, param = item.partition(".")
            if name == tool.name and param in params.get("properties", {}):
                if param in params.get("required", []):
                    raise ValueError(f"hide_parameters: {item} is required and cannot be hidden")
                del params["properties"][param]
        for item in require:
            name, _, param = item.partition(".")
            if name == tool.name:
                if param not in params.get("properties", {}):
                    raise ValueError(f"require_parameters: {tool.name} has no parameter {param!r}")
                params["required"] = sorted(set(params.get("required", [])) | {param})
        out.append(schema)
    return out


def filler(info: dict, seed: int) -> Callable[[str], str]:
    """str -> str filling {runtime.model|backend|context_length|revision} from /v1/models,
    and {run} with this seed's name."""
    runtime = SimpleNamespace(model=info.get("id"), backend=info.get("backend"),
                              context_length=info.get("context_length"), revision=info.get("revision"))
    return lambda text: text.format(runtime=runtime, run=f"s{seed}")


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

    def reset(self, fill: Callable[[str], str]) -> None:
        r = self.suite.reset
        for item in r.sql:
            self.probe.sql_exec(fill(item["db"]), fill(item["sql"]))
        for source in r.rag_sources:
            self.probe.rag_delete(fill(source), r.collection)
        for item in r.tools:
            args = {k: fill(v) if isinstance(v, str) else v for k, v in (item.get("arguments") or {}).items()}
            result = self.registry.call(item["name"], args)
            if not result.get("ok"):
                raise RuntimeError(f"suite reset: {item['name']} failed: {result.get('error')}")

    def run_seed(self, seed: int) -> dict:
        fill = filler(self.info, seed)
        self.reset(fill)
        mark = self.probe.memory_mark() if any(t.expect.memory for t in self.suite.turns) else 0
        config = agent_config(self.suite, {**self.overrides, "seed": seed * 1000})
        agent = Agent(self.model, self.registry, config, conversation=Conversation())
        turns, error = [], None
        start = time.monotonic()
        for spec in self.suite.turns:
            if spec.new_session:
                agent.conversation.reset()
            if error is None:
                try:
                    turn = agent.run(fill(spec.user), offered(self.registry, spec.tools, self.suite.hide_parameters,
                                                                    self.suite.require_parameters))
                except ModelError as e:       # the runtime failed, not the model: this seed fails, the others go on
                    error, turn = str(e), Turn(fill(spec.user), stop="model_error")
            else:
                turn = Turn(fill(spec.user), stop="not_run")
            checks = [] if error else evaluate(spec.expect, turn, self.probe, fill, mark)
            record = {"name": spec.name, "passed": error is None and all(c.ok for c in checks) and turn.answer is not None,
                      "checks": [asdict(c) for c in checks], "new_session": spec.new_session,
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
    names its run, such as the database suite_s3, is counted under the name with {run})."""
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
                               "mean_latency_s": sum(r["latency_s"] for r in records) / n if n else 0.0}
    return {"runs": n, "passed": sum(r["passed"] for r in runs),
            "pass_rate": sum(r["passed"] for r in runs) / n if n else 0.0, "turns": per_turn}
