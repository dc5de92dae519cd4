"""Write gold agent steps as JSONL: `generate(worker_url, out, tasks, seed)` builds `tasks`
tasks, plays them in parallel (each in its own namespace on the worker), keeps the steps of
the tasks whose checks pass, checks the lot against the evaluation suites' text, and writes
one step a line:

    {"id", "task", "domain", "kind": "call"|"answer", "messages": [as the loop sent them],
     "tools": [as sent, strict], "chosen": {"role": "assistant", "content", "tool_calls"},
     "workflow", "turn_kind", "keys" (answers: the values a right answer quotes)}

    python -m tuning.generate --out steps.jsonl --tasks 400 --seed 1 [--worker URL] [--domains NAME ...]

Without --worker a worker is started in a temporary home for the run.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

from agents.checks import Probe
from tools.context import ToolContext
from tools.toolsets import build_registry
from tuning import disjoint
from tuning.domains import BY_NAME, DOMAINS
from tuning.play import Outcome, play
from tuning.plan import Task
from tuning.runtime_stub import runtime_stub
from tuning.tasks import build


def stats(outcomes: list[Outcome], seconds: float) -> dict:
    records = [e for o in outcomes if o.kept for e in o.examples]
    workflows: dict[str, list[int]] = {}
    for o in outcomes:
        kept_total = workflows.setdefault(o.task.workflow, [0, 0])
        kept_total[0] += o.kept
        kept_total[1] += 1
    return {"tasks": len(outcomes), "kept": sum(o.kept for o in outcomes), "examples": len(records),
            "by_kind": dict(Counter(r["kind"] for r in records)),
            "by_turn_kind": dict(Counter(r["turn_kind"] for r in records)),
            "by_domain": dict(Counter(r["domain"] for r in records)),
            "by_workflow": {w: {"kept": k, "tasks": n} for w, (k, n) in sorted(workflows.items())},
            "dropped": [f"{o.task.id} ({o.task.workflow}): {o.problems[0]}" for o in outcomes if not o.kept][:20],
            "seconds": round(seconds, 1)}


def run_all(plans: list[Task], player: Callable[[Task], Outcome], threads: int,
            progress: Callable[[int, int], None] | None) -> list[Outcome]:
    """`player(task)` for every task, `threads` at a time, in the order of `plans`."""
    outcomes: list[Outcome | None] = [None] * len(plans)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        futures = {pool.submit(player, task): i for i, task in enumerate(plans)}
        for done, future in enumerate(as_completed(futures), 1):
            outcomes[futures[future]] = future.result()
            if progress:
                progress(done, len(plans))
    return outcomes


def write(outcomes: list[Outcome], out: Path) -> None:
    """The kept steps, once they are shown to stay clear of the evaluation suites' text."""
    records = [e for o in outcomes if o.kept for e in o.examples]
    disjoint.check(records, [d.name for d in DOMAINS])
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def generate(worker_url: str, out: Path, tasks: int, seed: int, progress: Callable[[int, int], None] | None = None,
             threads: int = 8, domains: tuple = DOMAINS) -> dict:
    """Play `tasks` tasks (about `domains`) against the worker at `worker_url` and write the kept
    steps to `out`; `progress(done, total)` is called as tasks finish. Returns the counts."""
    start = time.monotonic()
    registry = build_registry(ToolContext(worker_url=worker_url))
    probe = Probe(worker_url, registry)
    schemas = registry.openai_tools()
    plans = [build(i, seed, schemas, domains) for i in range(tasks)]
    with runtime_stub() as runtime:
        def player(task: Task) -> Outcome:        # runtime_status reads the card this task's plan knows
            return play(task, build_registry(ToolContext(worker_url=worker_url, runtime_url=f"{runtime}/{task.id}")),
                        probe)
        outcomes = run_all(plans, player, threads, progress)
    probe.close()
    write(outcomes, out)
    return stats(outcomes, time.monotonic() - start)


def with_bar(worker: str | None, tasks: int, run: Callable[[str, Callable[[int, int], None]], dict]) -> dict:
    """run(worker_url, progress) under a progress bar, on the worker at `worker` or (None) on one
    started for the run."""
    from tqdm import tqdm

    from tuning.worker import local_worker

    with tqdm(total=tasks, desc="tasks", unit="task") as bar:
        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)
        if worker:
            return run(worker, progress)
        with local_worker() as url:
            return run(url, progress)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", help="the worker's URL (default: start one in a temporary home)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tasks", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--domains", nargs="+", choices=sorted(BY_NAME), help="only tasks about these (default: all)")
    args = p.parse_args(argv)
    domains = tuple(BY_NAME[n] for n in args.domains) if args.domains else DOMAINS
    result = with_bar(args.worker, args.tasks, lambda url, progress: generate(url, args.out, args.tasks, args.seed,
                                                                              progress, args.threads, domains))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
