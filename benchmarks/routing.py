"""Same-VM routing (Treni's thesis): the same tool-using tasks with the tools reached on
loopback, and through an external hop (benchmarks/routing_proxy.py, a separate process
adding latency, stalls past the client's timeout, and failures).

Each task is a turn of the agent loop (agents/loop.py: parallel calls, retries of
retryable failures, envelopes) driven by a replayed model, so both routes run exactly the
same calls and the model's own time (identical on both routes) is left out: what differs
is only the path to the tools. The two routes alternate, repetition by repetition, so
background load hits both alike. Reports per profile: task latency (median, mean, p95)
on each route, the external/internal ratio, calls that still failed after retries, tasks
that failed, retries and timeouts. Writes benchmarks/results/routing.json and .png.

    python benchmarks/routing.py [--reps 20] [--worker-url URL]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.provenance import commit as head_commit  # noqa: E402

from agents.config import AgentConfig  # noqa: E402
from agents.loop import Agent  # noqa: E402
from agents.model import Call, Reply  # noqa: E402
from tools.context import ToolContext  # noqa: E402
from tools.toolsets import build_registry  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
# Profiles of the external hop, after Treni's: median added delay (ms), log-normal sigma,
# share of requests that stall past the client timeout, share answered 503.
PROFILES = {
    "baseline": dict(latency_ms=20, jitter=0.2, timeout_rate=0.0, failure_rate=0.0),
    "mild_timeout": dict(latency_ms=40, jitter=0.4, timeout_rate=0.03, failure_rate=0.0),
    "mixed_moderate": dict(latency_ms=60, jitter=0.6, timeout_rate=0.05, failure_rate=0.05),
    "mixed_aggressive": dict(latency_ms=120, jitter=0.8, timeout_rate=0.10, failure_rate=0.15),
}
CLIENT_TIMEOUT_S = 1.5   # the tools' HTTP timeout; a stall lasts 2 s
STALL_S = 2.0


def tasks(rep: int) -> dict[str, list[list[tuple[str, dict]]]]:
    """The canonical suite's tool work as replayed turns: each step a list of calls (several
    calls in a step run in parallel)."""
    note = f"Release {rep} of orion moved the scheduler to a new queue (routing run {rep})."
    return {
        "facts": [[("sql_exec", {"db": "routing", "sql": "CREATE TABLE IF NOT EXISTS facts (name TEXT, value TEXT)"})],
                  [("sql_exec", {"db": "routing", "sql": f"INSERT INTO facts VALUES ('run{rep}', '{rep}')"})],
                  [("sql_query", {"db": "routing", "sql": f"SELECT name, value FROM facts WHERE name = 'run{rep}'"})]],
        "background": [[("rag_ingest", {"text": note, "source": f"routing-{rep}"})],
                       [("rag_search", {"query": "What moved the scheduler?", "k": 3})]],
        "memory": [[("memory_add", {"text": f"routing run {rep}: facts in routing.facts"})],
                   [("memory_search", {"query": f"routing run {rep}"})]],
        "freeform": [[("sql_exec", {"db": "routing", "sql": f"INSERT INTO facts VALUES ('deploy{rep}', '4.2.1')"}),
                      ("rag_ingest", {"text": note + " Deploy notes.", "source": f"deploy-{rep}"}),
                      ("memory_add", {"text": f"deploy {rep} is in routing.facts and the routing collection"})]],
    }


class ReplayModel:
    """Stands in for ChatModel: returns the scripted calls step by step, then an answer."""

    def __init__(self, steps: list[list[tuple[str, dict]]]):
        self.steps = list(steps)

    def complete(self, messages, tools=None, tool_choice="auto", max_tokens=0, temperature=0.0, seed=None,
                 parallel=True, text_regex=None) -> Reply:
        if not self.steps:
            return Reply(content="done", calls=[], finish_reason="stop")
        step = self.steps.pop(0)
        calls = [Call(f"call_{len(self.steps)}_{i}", name, args) for i, (name, args) in enumerate(step)]
        return Reply(content="", calls=calls, finish_reason="tool_calls")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout} s")


def start(argv: list[str], url: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    wait_http(url, proc)
    return proc


def run_task(registry, steps, config: AgentConfig) -> dict:
    turn = Agent(ReplayModel(steps), registry, config).run("task", registry.openai_tools())
    calls = turn.calls
    errors = [str(c.result.get("error")) for c in calls if not c.ok]
    return {"latency_s": turn.latency_s, "calls": len(calls), "failed_calls": len(errors),
            "retries": sum(c.attempts - 1 for c in calls), "timeouts": sum("timed out" in e for e in errors),
            "task_failed": bool(errors)}


def summarize(records: list[dict]) -> dict:
    lat = sorted(r["latency_s"] * 1000 for r in records)
    calls = sum(r["calls"] for r in records)
    return {"tasks": len(records), "median_ms": statistics.median(lat), "mean_ms": statistics.fmean(lat),
            "p95_ms": lat[min(len(lat) - 1, int(0.95 * len(lat)))],
            "attempt_error_rate": sum(r["retries"] + r["failed_calls"] for r in records)
            / (calls + sum(r["retries"] for r in records)),
            "call_error_rate": sum(r["failed_calls"] for r in records) / calls,
            "task_failure_rate": sum(r["task_failed"] for r in records) / len(records),
            "retries_per_task": sum(r["retries"] for r in records) / len(records),
            "timeouts_after_retries": sum(r["timeouts"] for r in records)}


def run_profile(name: str, profile: dict, worker_url: str, reps: int, config: AgentConfig, logs: Path) -> dict:
    port = free_port()
    proxy = start([sys.executable, str(REPO / "benchmarks" / "routing_proxy.py"), "--target", worker_url,
                   "--port", str(port), "--stall-s", str(STALL_S), "--latency-ms", str(profile["latency_ms"]),
                   "--jitter", str(profile["jitter"]), "--timeout-rate", str(profile["timeout_rate"]),
                   "--failure-rate", str(profile["failure_rate"]), "--seed", "7"],
                  f"http://127.0.0.1:{port}/", logs / f"proxy-{name}.log")
    routes = {"internal": worker_url, "external": f"http://127.0.0.1:{port}"}
    registries = {r: build_registry(ToolContext(worker_url=u, timeout=CLIENT_TIMEOUT_S)) for r, u in routes.items()}
    records: dict[str, list[dict]] = {"internal": [], "external": []}
    try:
        for rep in range(reps):
            for route in ("internal", "external") if rep % 2 == 0 else ("external", "internal"):
                for task, steps in tasks(rep * 2 + (route == "external")).items():
                    records[route].append({"task": task, **run_task(registries[route], steps, config)})
    finally:
        proxy.terminate()
        proxy.wait(10)
    out = {"profile": profile, "internal": summarize(records["internal"]), "external": summarize(records["external"])}
    out["latency_ratio_median"] = out["external"]["median_ms"] / out["internal"]["median_ms"]
    out["latency_ratio_mean"] = out["external"]["mean_ms"] / out["internal"]["mean_ms"]
    return out


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["profiles"])
    x = list(range(len(names)))
    panels = [("median_ms", "median task latency, tool path (ms, log)", 1),
              ("task_failure_rate", "tasks with a call failed after retries (%)", 100),
              ("retries_per_task", "retries per task", 1)]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (key, title, scale) in zip(axes, panels):
        for off, route in ((-0.2, "internal"), (0.2, "external")):
            ax.bar([i + off for i in x], [scale * report["profiles"][n][route][key] for n in names], 0.4, label=route)
        ax.set_title(title)
        ax.set_xticks(x, names, rotation=15)
        ax.legend()
    axes[0].set_yscale("log")
    for i, n in enumerate(names):
        axes[0].annotate(f"x{report['profiles'][n]['latency_ratio_median']:.1f}",
                         (i + 0.2, report["profiles"][n]["external"]["median_ms"]), ha="center", va="bottom")
    for ax in axes[1:]:
        ax.set_ylim(bottom=0)
    fig.suptitle(f"same-VM tools vs an external hop ({report['reps']} reps x {len(report['tasks'])} tasks per route)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20, help="repetitions of the task set per route and profile")
    p.add_argument("--worker-url", help="use this running worker (default: start one in a temporary home)")
    p.add_argument("--retries", type=int, default=2, help="retries of a retryable tool failure")
    p.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    p.add_argument("--out", type=Path, default=RESULTS / "routing.json")
    args = p.parse_args(argv)
    config = AgentConfig(max_steps=8, max_errors=8, tool_retries=args.retries, retry_backoff_s=0.1)
    with tempfile.TemporaryDirectory(prefix="routing-") as tmp:
        logs = Path(tmp)
        worker = None
        url = args.worker_url
        if url is None:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            worker = start([sys.executable, "-m", "samevm", "--home", str(logs / "home"), "worker", "--port", str(port)],
                           url + "/health", logs / "worker.log")
        try:
            warm = build_registry(ToolContext(worker_url=url))
            for steps in tasks(-1).values():       # first uses: the embedder, chroma's collection, the tables
                run_task(warm, steps, config)
            profiles = {}
            for name in args.profiles:
                profiles[name] = run_profile(name, PROFILES[name], url, args.reps, config, logs)
                r = profiles[name]
                print(f"{name:<17} internal {r['internal']['median_ms']:7.1f} ms  external "
                      f"{r['external']['median_ms']:7.1f} ms  x{r['latency_ratio_median']:.2f}  failed tasks "
                      f"{r['internal']['task_failure_rate']:.0%} / {r['external']['task_failure_rate']:.0%}  "
                      f"retries/task {r['external']['retries_per_task']:.2f}", flush=True)
        finally:
            if worker:
                worker.terminate()
                worker.wait(20)
    commit = head_commit()
    report = {"benchmark": "routing", "date": time.strftime("%Y-%m-%d"), "commit": commit,
              "cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
              "reps": args.reps, "tasks": list(tasks(0)), "tool_retries": args.retries,
              "client_timeout_s": CLIENT_TIMEOUT_S, "stall_s": STALL_S, "profiles": profiles,
              "note": "task latency is the tool path of one agent turn (the replayed model takes no time); "
                      "attempt_error_rate counts every failed HTTP attempt, call_error_rate the calls still "
                      "failed after retries; a task fails when one of its calls does"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    plot(report, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
