"""Pass rates of the conversation suites over seeds: the canonical 5-turn suite and the
freeform turn, with and without the uncertainty-aware verify step, on each chat model.

Every (suite, verify) cell of a model starts its own stack (runtime + worker) over a fresh
data directory and runs the same seeds, sampled at --temperature so seeds differ, with
--parallel seeds batched by the runtime at once. Each finished cell is written to the
JSON at once, and --resume skips cells already there, so a long matrix can be run in
parts. Full reports and transcripts go under the data directory (not committed).
--backend picks the runtime's backend (cpu, the default, or cuda); each cell records the
backend the runtime reported serving on and the device's name.

    python benchmarks/agent_suite.py --models qwen2.5-coder-0.5b --seeds 10 --parallel 5
    python benchmarks/agent_suite.py --backend cuda --parallel 10    # on a GPU machine
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents import report as suite_report  # noqa: E402
from agents.checks import Probe  # noqa: E402
from agents.model import ChatModel  # noqa: E402
from agents.runner import SuiteRunner  # noqa: E402
from agents.suite import load  # noqa: E402
from benchmarks.provenance import commit as head_commit  # noqa: E402
from runtime import catalog  # noqa: E402
from samevm.settings import Settings  # noqa: E402
from samevm.supervisor import Stack  # noqa: E402
from tools.context import ToolContext  # noqa: E402
from tools.toolsets import build_registry  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
MODELS = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def device_name(backend: str) -> str:
    """The GPU's name for cuda (nvidia-smi, else CuPy), the CPU's model name for cpu."""
    if backend == "cuda":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            if out:
                return out.splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            import cupy
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
            return name.decode() if isinstance(name, bytes) else str(name)
        except Exception:                       # noqa: BLE001 - a name is all we want here
            return "unknown GPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cell_summary(result: dict, suite) -> dict:
    """What the JSON keeps of one (model, suite, verify) run: rates, per-turn failures, costs."""
    runs = result["runs"]
    turns = [t for r in runs for t in r["turns"]]
    steps = [s for t in turns for s in t["steps"]]
    return {"seeds": result["seeds"], "runs": len(runs), "passed": result["summary"]["passed"],
            "pass_rate": result["summary"]["pass_rate"], "turns": result["summary"]["turns"],
            "per_seed": [{"seed": r["seed"], "passed": r["passed"],
                          "turns": {t["name"]: t["passed"] for t in r["turns"]}} for r in runs],
            "verify_steps": sum(s["kind"] == "verify" for s in steps),
            "turns_verified": sum(t["verified"] for t in turns),
            "mean_steps_per_turn": len(steps) / len(turns),
            "mean_completion_tokens_per_turn": sum(t["tokens"]["completion"] for t in turns) / len(turns),
            "mean_seed_latency_s": sum(r["latency_s"] for r in runs) / len(runs),
            "duration_s": result["duration_s"]}


def run_model(model: str, args, data: dict, save) -> None:
    """Each (suite, verify) cell on a stack of its own over a fresh data directory, so no cell
    sees the notes, documents or rows that an earlier cell (or an earlier run) left."""
    def same(c: dict, suite_name: str, verify: str) -> bool:      # cells before --backend were all cpu
        return (c["model"] == model and c["suite"] == suite_name and c["verify"] == (verify == "on")
                and c.get("backend", "cpu") == args.backend)

    cells = [(s, v) for s in args.suites for v in args.verify
             if not (args.resume and any(same(c, s, v) and c["seeds"] == args.seed_list for c in data["cells"]))]
    env = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    for suite_name, verify in cells:
        home = args.home / model / f"{suite_name}-verify-{verify}"
        shutil.rmtree(home, ignore_errors=True)
        settings = Settings(home=home, model=str(catalog.resolve(model, args.models_home)), backend=args.backend,
                            runtime_port=free_port(), worker_port=free_port(), mcp_port=free_port())
        with Stack(settings, attach=False, env=env, runtime_args=["--kv-cache-mb", "1024"]) as stack:
            registry = build_registry(ToolContext.from_settings(settings))
            suite = load(suite_name)
            runner = SuiteRunner(suite, ChatModel(stack.urls.runtime), registry, Probe(stack.urls.worker, registry),
                                 {"verify": verify == "on", "temperature": args.temperature})
            print(f"{model} {suite_name} verify {verify}: {len(args.seed_list)} seeds...", flush=True)
            result = runner.run(args.seed_list, args.parallel)
        served = runner.info.get("backend")
        if served != args.backend:
            print(f"warning: asked for backend {args.backend}, the runtime reports {served!r}", flush=True)
        suite_report.write(result, home / "report")
        print(suite_report.table(result), flush=True)
        data["cells"] = [c for c in data["cells"] if not same(c, suite_name, verify)]
        data["cells"].append({"model": model, "model_id": runner.info.get("id"), "suite": suite_name,
                              "verify": verify == "on", "commit": args.commit, "date": time.strftime("%Y-%m-%d"),
                              "backend": served or args.backend, "device": args.device,
                              **cell_summary(result, suite)})
        save()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=MODELS)
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="the runtime's backend")
    p.add_argument("--suites", nargs="+", default=["canonical", "freeform"])
    p.add_argument("--verify", nargs="+", default=["off", "on"], choices=["off", "on"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--parallel", type=int, default=5, help="seeds at once (batched by the runtime)")
    p.add_argument("--temperature", type=float, default=0.3)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the runtime")
    p.add_argument("--home", type=Path, default=REPO / ".samevm" / "bench" / "agent_suite")
    p.add_argument("--models-home", type=Path, default=REPO / ".samevm", help="where `samevm models fetch` put them")
    p.add_argument("--out", type=Path, default=RESULTS / "agent_suite.json")
    p.add_argument("--resume", action="store_true", help="keep the cells already in --out and skip them")
    args = p.parse_args(argv)
    args.seed_list = list(range(args.seeds))
    data = json.loads(args.out.read_text()) if args.resume and args.out.exists() else {"cells": []}
    args.commit = head_commit()
    args.device = device_name(args.backend)
    data.pop("commit", None)                 # each cell records the commit and date it ran at
    data.pop("date", None)
    data.update({"benchmark": "agent_suite",
                 "cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                 "backend": args.backend, "temperature": args.temperature, "parallel": args.parallel,
                 "runtime_threads": args.threads,
                 "note": "pass rate = share of seeds in which every turn passed all its checks; per-turn rates "
                         "and the checks that failed are under `turns`; each cell ran on a fresh data directory"})

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1))

    for model in args.models:
        run_model(model, args, data, save)
    save()
    for c in data["cells"]:
        turns = ", ".join(f"{k} {v['pass_rate']:.0%}" for k, v in c["turns"].items())
        print(f"{c['model']:<20} {c.get('backend', 'cpu'):<4} {c['suite']:<10} verify {'on ' if c['verify'] else 'off'} "
              f"{c['passed']}/{c['runs']} ({c['pass_rate']:.0%})  [{turns}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
