"""Gold steps from runs of the stack itself: the generator's tasks played by a served model
(the 1.5B, or best-of-n of the 0.5B) instead of the oracle, through the same loop, tools and
checks. Each task is tried up to `tries` times at `temperature` (different seeds); the try
that passes the most turns is kept, its turns up to the first failing one, less the steps
that were the model's own mistakes. The records have generate.py's shape, ids "m<seed>-<i>-<n>".

    python -m tuning.sampled --runtime URL --out runs.jsonl --tasks 200 --seed 1 --tries 4 [--worker URL]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Callable

from agents.checks import Probe
from agents.config import AgentConfig
from agents.model import ChatModel
from tools.context import ToolContext
from tools.toolsets import build_registry
from tuning.generate import run_all, stats, with_bar, write
from tuning.play import Outcome, play
from tuning.plan import Task
from tuning.tasks import build


def sample_gold(runtime_url: str, worker_url: str, out: Path, tasks: int, seed: int, tries: int = 4,
                temperature: float = 0.7, progress: Callable[[int, int], None] | None = None,
                threads: int = 8) -> dict:
    """Play `tasks` tasks with the model at `runtime_url`, best of `tries`, and write the steps
    of the turns that passed to `out`. Returns generate's counts plus the turns passed."""
    start = time.monotonic()
    model = ChatModel(runtime_url)
    registry = build_registry(ToolContext(worker_url=worker_url, runtime_url=runtime_url))
    probe = Probe(worker_url, registry)
    schemas = registry.openai_tools()
    plans = [dataclasses.replace(t, id="m" + t.id) for t in (build(i, seed, schemas) for i in range(tasks))]

    def best(task: Task) -> Outcome:
        index = int(task.id.rsplit("-", 1)[1])
        kept = None
        for k in range(tries):
            config = AgentConfig(temperature=temperature, seed=(index * tries + k) * 1000)
            outcome = play(task, registry, probe, model, config)
            if kept is None or outcome.turns_passed > kept.turns_passed:
                kept = outcome
            if outcome.turns_passed == len(task.turns):
                break
        return kept

    outcomes = run_all(plans, best, threads, progress)
    probe.close()
    model.close()
    write(outcomes, out)
    return {**stats(outcomes, time.monotonic() - start), "model": model.model,
            "turns_passed": sum(o.turns_passed for o in outcomes), "turns": sum(len(o.task.turns) for o in outcomes)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runtime", required=True, help="the runtime's URL, serving the model that plays")
    p.add_argument("--worker", help="the worker's URL (default: start one in a temporary home)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tries", type=int, default=4)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--threads", type=int, default=8)
    args = p.parse_args(argv)
    result = with_bar(args.worker, args.tasks, lambda url, progress: sample_gold(
        args.runtime, url, args.out, args.tasks, args.seed, args.tries, args.temperature, progress, args.threads))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
