"""Pass rates of the suite library (agents/suites/*.yaml) over seeds, per chat model and
backend: every suite, or --suites, 10 seeds at temperature 0.3 by default.

Each model gets one stack (runtime + worker) over a fresh data directory; the suites run on
it one after another, each seed in a namespace of its own that is emptied before it starts
(agents/runner.py), --parallel seeds at once batched by the runtime. A record per (suite,
model, backend, adapter, commit) goes into the JSON as soon as its suite finishes; records of
other keys already in the file are kept (so a CPU run and a GPU run add up), and --resume
skips the suites whose record at this commit is there. Full reports and transcripts go under
--home (not committed); the PNG shows the newest record of each (suite, model, backend, adapter).

    python benchmarks/agent_suite.py --models qwen2.5-coder-0.5b --parallel 5           # CPU
    python benchmarks/agent_suite.py --backend cuda --parallel 10 --resume               # GPU
    python benchmarks/agent_suite.py --models path/to/tuned.gguf --adapter orion-orpo    # a merged fine-tune
    python benchmarks/agent_suite.py --models qwen2.5-coder-0.5b --lora OUT/adapter       # base + LoRA adapter
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents import report as suite_report  # noqa: E402
from agents.checks import Probe  # noqa: E402
from agents.config import AgentConfig  # noqa: E402
from agents.model import ChatModel  # noqa: E402
from agents.runner import SuiteRunner  # noqa: E402
from agents.suite import load, names  # noqa: E402
from benchmarks.provenance import commit as head_commit  # noqa: E402
from runtime import catalog  # noqa: E402
from runtime.backends import cpu_kernels  # noqa: E402
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
    """The GPU's name for cuda (nvidia-smi), the CPU's model name for cpu."""
    if backend == "cuda":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        return out.splitlines()[0].strip() if out else "unknown GPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def record(result: dict) -> dict:
    """What the JSON keeps of one suite's run: pass rates overall and per turn, steps, latency
    (a step's: the model's reply to one prompt, the engine's prefill and decode as the client
    waited for them, beside the prompt and completion tokens they ran on)."""
    runs = result["runs"]
    turns = [t for r in runs for t in r["turns"]]
    steps = [s for t in turns for s in t["steps"]]
    return {"seeds": result["seeds"], "runs": len(runs), "passed": result["summary"]["passed"],
            "pass_rate": result["summary"]["pass_rate"], "turns": result["summary"]["turns"],
            "per_seed": [{"seed": r["seed"], "passed": r["passed"],
                          "turns": {t["name"]: t["passed"] for t in r["turns"]}} for r in runs],
            "mean_steps_per_turn": len(steps) / len(turns),
            **step_latency(steps),
            "mean_turn_latency_s": sum(t["latency_s"] for t in turns) / len(turns),
            "mean_seed_latency_s": sum(r["latency_s"] for r in runs) / len(runs),
            "mean_completion_tokens_per_turn": sum(t["tokens"]["completion"] for t in turns) / len(turns),
            "faults_injected": sum(t.get("faults_injected", 0) for t in turns),
            "duration_s": result["duration_s"]}


def step_latency(steps: list[dict]) -> dict:
    """Mean and median seconds of a step (None without steps) and its mean tokens."""
    mean = lambda key: sum(s[key] for s in steps) / len(steps) if steps else None  # noqa: E731
    return {"mean_step_latency_s": mean("latency_s"),
            "median_step_latency_s": statistics.median(s["latency_s"] for s in steps) if steps else None,
            "mean_step_prompt_tokens": mean("prompt_tokens"), "mean_step_completion_tokens": mean("completion_tokens")}


def short(model: str) -> str:
    """A model's name for labels and folders: a GGUF path's file name, else the name as given."""
    return Path(model).stem if model.endswith(".gguf") else model


def key(r: dict) -> tuple:
    """What a record measured: a new run of the same key replaces it."""
    return r["suite"], r["model"], r["backend"], r.get("adapter"), r["commit"], r.get("cpu_kernels"), agent(r)


def slot(r: dict) -> tuple:
    """(suite, model, backend, adapter, agent settings): one bar of the chart, its newest record."""
    return r["suite"], r["model"], r["backend"], r.get("adapter"), agent(r)


def agent(r: dict) -> str:
    return json.dumps(r.get("agent") or {}, sort_keys=True)


def run_model(model: str, args, data: dict, save) -> None:
    """The model's suites on one stack; a suite whose record at this commit exists is skipped
    with --resume."""
    def done(suite: str) -> bool:
        mine = key({"suite": suite, "model": model, "backend": args.backend, "adapter": args.adapter,
                    "commit": args.commit, "cpu_kernels": args.kernels, "agent": args.agent})
        return any(key(r) == mine and r["seeds"] == args.seed_list and r["temperature"] == args.temperature
                   for r in data["records"])

    todo = [s for s in args.suites if not (args.resume and done(s))]
    if not todo:
        return
    home = args.home / short(model) / args.backend / (args.adapter.split("@")[0] if args.adapter else "base")
    shutil.rmtree(home, ignore_errors=True)
    env = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
           "SAMEVM_CPU_KERNELS": args.cpu_kernels}
    settings = Settings(home=home, model=str(catalog.resolve(model, args.models_home)), backend=args.backend,
                        runtime_port=free_port(), worker_port=free_port(), mcp_port=free_port())
    lora = ["--lora", str(args.lora)] if args.lora else []
    with Stack(settings, attach=False, env=env, runtime_args=["--kv-cache-mb", str(args.kv_cache_mb), *lora]) as stack:
        registry = build_registry(ToolContext.from_settings(settings))
        probe = Probe(stack.urls.worker, registry)
        for suite_name in todo:
            runner = SuiteRunner(load(suite_name), ChatModel(stack.urls.runtime), registry, probe,
                                 {"temperature": args.temperature, **args.agent})
            print(f"{model} ({args.backend}) {suite_name}: {len(args.seed_list)} seeds...", flush=True)
            result = runner.run(args.seed_list, args.parallel)
            served = runner.info.get("backend")
            if served != args.backend:
                print(f"warning: asked for backend {args.backend}, the runtime reports {served!r}", flush=True)
            suite_report.write(result, home / "reports" / suite_name)
            print(suite_report.table(result), flush=True)
            new = {"suite": suite_name, "model": model, "model_id": runner.info.get("id"),
                   "revision": runner.info.get("revision"), "adapter": args.adapter,
                   "backend": served or args.backend, "device": args.device, "commit": args.commit,
                   "date": time.strftime("%Y-%m-%d"), "temperature": args.temperature, "parallel": args.parallel,
                   "cpu_kernels": args.kernels, "agent": args.agent or None, **record(result)}
            data["records"] = [r for r in data["records"] if key(r) != key(new)] + [new]
            save()


def newest(records: list[dict]) -> dict[tuple, dict]:
    """The newest record of each slot, by date then file order."""
    out: dict[tuple, dict] = {}
    for r in sorted(records, key=lambda r: r["date"]):
        out[slot(r)] = r
    return out


def plot(records: list[dict], path: Path, last: int = 6) -> None:
    """Pass rates per suite of the `last` series (model, backend, adapter, agent settings) measured most
    recently (file order): the file keeps every adapter ever tried, a chart of them all is unreadable."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latest = newest(records)
    order = {slot(r)[1:]: i for i, r in enumerate(records)}       # a series' last place in the file
    recent = set(sorted(order, key=order.get)[-last:])
    latest = {k: v for k, v in latest.items() if k[1:] in recent}
    suites = sorted({k[0] for k in latest})
    series = sorted({k[1:] for k in latest}, key=str)
    height = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.5 * len(suites) * max(1, len(series)) ** 0.5))
    for i, (model, backend, adapter, settings) in enumerate(series):
        ys = [j + i * height for j in range(len(suites))]
        cells = [latest.get((s, model, backend, adapter, settings)) for s in suites]
        rates = [c["pass_rate"] if c else 0.0 for c in cells]
        name, _, digest = (adapter or "").partition("@sha256:")
        commits = sorted({c["commit"] for c in cells if c})
        label = f"{short(model)} {backend}" + (f" + {name}" + (f"@{digest[:8]}" if digest else "") if adapter else "") \
            + (f" {settings}" if settings != "{}" else "") + f" ({', '.join(commits)})"
        ax.barh(ys, rates, height=height, label=label)
        for y, c in zip(ys, cells):
            if c:
                ax.text(c["pass_rate"] + 0.01, y, f"{c['passed']}/{c['runs']}", va="center", fontsize=7)
    ax.set_yticks([j + height * (len(series) - 1) / 2 for j in range(len(suites))], suites)
    ax.axvline(0.9, color="grey", linestyle="--", linewidth=1)
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("seeds passing every turn")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("agent suite library: pass rate per suite")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=MODELS, help="known model names or GGUF paths")
    p.add_argument("--adapter", help="name of the fine-tune the model carries (recorded; null: the base model)")
    p.add_argument("--lora", type=Path, help="serve the models with this PEFT LoRA adapter directory "
                                            "(recorded as adapter: its name@sha256 unless --adapter names it)")
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="the runtime's backend")
    p.add_argument("--suites", nargs="+", default=names(), help="suite names (default: the whole library)")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--parallel", type=int, default=5, help="seeds at once (batched by the runtime)")
    p.add_argument("--temperature", type=float, default=0.3)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the runtime (the worker needs a core too)")
    p.add_argument("--kv-cache-mb", type=int, default=1024)
    p.add_argument("--cpu-kernels", choices=["on", "off"], default="on",
                   help="off: the CPU runtime dequantizes int8 at load instead of computing on the GGUF "
                        "blocks (SAMEVM_CPU_KERNELS), the path before the kernels; recorded as cpu_kernels")
    p.add_argument("--home", type=Path, default=REPO / ".samevm" / "bench" / "agent_suite")
    p.add_argument("--models-home", type=Path, default=REPO / ".samevm", help="where `samevm models fetch` put them")
    p.add_argument("--out", type=Path, default=RESULTS / "agent_suite.json")
    p.add_argument("--agent", nargs="+", default=[], metavar="KEY=VALUE",
                   help="agent settings over the suites' own (AgentConfig fields, e.g. tables_in_prompt=false); recorded")
    p.add_argument("--resume", action="store_true", help="skip the suites whose record at this commit is in --out")
    args = p.parse_args(argv)
    unknown = set(args.suites) - set(names())
    if unknown:
        p.error(f"unknown suites {sorted(unknown)}; known: {', '.join(names())}")
    args.seed_list = list(range(args.seeds))
    try:
        args.agent = {k: json.loads(v) for k, _, v in (a.partition("=") for a in args.agent)}
    except json.JSONDecodeError as e:
        p.error(f"--agent values are JSON (numbers, true/false, quoted strings): {e}")
    unknown = set(args.agent) - {f.name for f in dataclasses.fields(AgentConfig)} | {"temperature", "seed"} & set(args.agent)
    if unknown:
        p.error(f"unknown agent settings {sorted(unknown)} (temperature has its own flag; seeds are the runner's)")
    if args.lora:
        from training.adapter import adapter_label
        args.adapter = args.adapter or adapter_label(args.lora)
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    data = {"records": old.get("records", [])}          # a file of the old per-cell format starts afresh
    args.commit = head_commit()
    args.device = device_name(args.backend)
    # which CPU path served (null on a GPU): the kernels run only where the extension is built
    args.kernels = (args.cpu_kernels == "on" and cpu_kernels.library_path() is not None) if args.backend == "cpu" else None
    data.update({"benchmark": "agent_suite", "python": platform.python_version(),
                 "note": "pass_rate = share of seeds in which every turn passed all its checks; per-turn rates, "
                         "mean steps and the checks that failed are under `turns`; adapter null = the base model"})

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1))
        plot(data["records"], args.out.with_suffix(".png"))

    for model in args.models:
        run_model(model, args, data, save)
    for r in newest(data["records"]).values():
        turns = ", ".join(f"{k} {v['pass_rate']:.0%}" for k, v in r["turns"].items())
        print(f"{short(r['model']):<20} {r['backend']:<4} {r['suite']:<16} {r['passed']}/{r['runs']} "
              f"({r['pass_rate']:.0%}) {r['mean_steps_per_turn']:.1f} steps/turn  [{turns}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
