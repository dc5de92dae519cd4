"""Decode of several sequences at once on the CPU backend: the CPU block kernels against the
dequantized int8 torch path (SAMEVM_CPU_KERNELS=off), on the same GGUF, in one run.

    PYTHONPATH=. python benchmarks/cpu_batched_decode.py [--model NAME_OR_PATH] [--batches 1,2,4] [--reps 3]
        [--baseline-lib OLD_qmatmul.so --baseline-commit SHA]

The agent suites decode a step for every running conversation at once (the scheduler batches
them), so what a step of b sequences costs beside a step of one decides their CPU latency. Each
arm runs in its own process (the kernels start once a process), the arms one after the other
in every repetition, so all see the same machine (it may be shared: medians count, and the load
average is recorded). A process prefills b prompts of --prompt-tokens, then times the decode
steps in which all b sequences are running (engine.step(): scheduling, forward, sampling).

Arms: `kernels` (this checkout's extension), `off` (the torch int8 path), and with
--baseline-lib `kernels-baseline`: an extension built from an earlier commit, to show before
and after in one run. Per arm and batch: median step seconds, tok/s per sequence and in
aggregate, and the step-time ratio to batch 1.

With --product-tokens, each kernels arm also times the kernels alone: one pass of T rows over
every weight a decode step multiplies (the layers' and the LM head), for T = 1, 2, 3, 4, 8, 12,
16, 24, which shows what a step of T sequences costs in the products and where the prefill
kernel (AVX512, from kern_api.h's PREFILL_MIN rows) takes over.

Writes benchmarks/results/cpu_batched_decode.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.provenance import commit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def child(args) -> None:
    """One arm: every batch size on one engine; prints one JSON line."""
    from runtime.backends import cpu_kernels
    if args.lib:                                # an earlier build of the extension, for before / after
        cpu_kernels.library_path = lambda: Path(args.lib)
    kernels = cpu_kernels.load(args.threads)    # the kernels start once a process, on these threads
    if kernels is None and args.threads:
        import torch
        torch.set_num_threads(args.threads)
    elif kernels is not None and args.level is not None:
        kernels.use_level(args.level)
    from runtime.config import EngineConfig
    from runtime.engine.llm_engine import LLMEngine
    from runtime.sampling import SamplingParams

    batches = [int(b) for b in args.batches.split(",")]
    engine = LLMEngine.from_gguf(EngineConfig(
        model=args.model, backend="cpu", cpu_dtype="int8", tokenizer_cache=args.tok_cache,
        max_num_seqs=max(batches), kv_cache_mb=max(batches) * (args.prompt_tokens + args.new_tokens) * 32 // 1000 + 64))
    text = (ROOT / "benchmarks" / "cpu_decode.py").read_text()
    ids = engine.tokenizer.encode(text) * 8
    engine.generate([ids[:16]], SamplingParams(max_tokens=4, temperature=0))           # warm-up
    out = {"weights": engine.ops.weights, "batches": {}}
    for b in batches:
        # b different prompts (offset windows of one text), so no sequence shares another's cache
        # (an earlier batch's cached prefix may serve one: only prefill is shorter for it)
        prompts = [ids[997 * i:997 * i + args.prompt_tokens] for i in range(b)]
        params = SamplingParams(max_tokens=args.new_tokens, temperature=0, ignore_eos=True)
        seqs = [engine.add_request(p, params) for p in prompts]
        while any(s.num_output == 0 for s in seqs):
            engine.step()
        steps = []
        while all(not s.is_finished for s in seqs):
            t0 = time.perf_counter()
            engine.step()
            steps.append(time.perf_counter() - t0)
        while engine.has_unfinished():
            engine.step()
        step = statistics.median(steps)
        out["batches"][str(b)] = {"step_s": step, "step_s_mean": statistics.mean(steps), "steps": len(steps),
                                  "tok_s_per_seq": 1 / step, "tok_s_aggregate": b / step}
    print(json.dumps(out), flush=True)


def products_child(args) -> None:
    """The kernels alone: one pass over every weight a decode step multiplies (each layer's and
    the LM head), x of T rows of random activations, for each T; prints one JSON line of median
    seconds a pass."""
    from types import SimpleNamespace

    import numpy as np
    from gguf import GGMLQuantizationType as Q

    from runtime.backends import cpu_kernels
    from runtime.gguf import read_gguf, tensor_data
    if args.lib:
        cpu_kernels.library_path = lambda: Path(args.lib)
    kernels = cpu_kernels.load(args.threads)
    if args.level is not None:
        kernels.use_level(args.level)
    f = read_gguf(args.model)
    names = {t.name for t in f.tensors}
    head = "output.weight" if "output.weight" in names else "token_embd.weight"      # tied: the embedding
    weights = [kernels.weight([SimpleNamespace(qtype=Q(t.qtype), data=tensor_data(f, t, Q(t.qtype)),
                                               shape=tuple(reversed(t.dims)))])
               for t in f.tensors if len(t.dims) == 2 and Q(t.qtype) in cpu_kernels.BLOCK_TYPES
               and (t.name.startswith("blk.") or t.name == head)]
    rng = np.random.default_rng(0)
    for w in weights:                           # fault in the mapped file's pages before timing
        w.matmul(rng.standard_normal((1, w.parts[0].cols)).astype(np.float32))
    out = {}
    for T in (int(t) for t in args.product_tokens.split(",")):
        xs = {K: rng.standard_normal((T, K)).astype(np.float32) for K in {w.parts[0].cols for w in weights}}
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for w in weights:
                w.matmul(xs[w.parts[0].cols])
            times.append(time.perf_counter() - t0)
        out[str(T)] = statistics.median(times)
    print(json.dumps({"level": kernels.level, "threads": kernels.threads, "weights": len(weights), "pass_s": out}),
          flush=True)


ARMS = {"kernels": {}, "off": {"SAMEVM_CPU_KERNELS": "off"}}


def run_arm(arm: str, args, lib: str | None, what: str = "engine") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **ARMS.get(arm, {})}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", what, "--model", str(args.model_path),
           "--product-tokens", args.product_tokens,
           "--batches", args.batches, "--prompt-tokens", str(args.prompt_tokens), "--new-tokens", str(args.new_tokens),
           "--tok-cache", args.tok_cache, "--threads", str(args.threads)] + (["--lib", lib] if lib else []) + \
        (["--level", str(args.level)] if args.level is not None else [])
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"{arm} exited with {run.returncode}: {run.stderr[-3000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def environment() -> dict:
    model_name = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                       if ln.startswith("model name")), platform.machine())
    import numpy
    import torch
    return {"cpu": model_name, "cores": os.cpu_count(), "torch": torch.__version__, "numpy": numpy.__version__,
            "python": platform.python_version(), "commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--home", default=os.environ.get("SAMEVM_HOME", ".samevm"))
    ap.add_argument("--batches", default="1,2,4")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="kernel threads (0: one a physical core)")
    ap.add_argument("--baseline-lib", help="an earlier build of the kernels' extension (_qmatmul*.so)")
    ap.add_argument("--baseline-commit", default="", help="the commit --baseline-lib was built from")
    ap.add_argument("--level", type=int, help="the kernels' instruction set: 2 AVX512-VNNI, 1 AVX2, 0 portable "
                                              "(default: the best this CPU has)")
    ap.add_argument("--out", default="cpu_batched_decode.json")
    ap.add_argument("--product-tokens", default="1,2,3,4,8,12,16,24",
                    help="rows of the kernels-alone passes over the weights ('' for none)")
    ap.add_argument("--child", choices=["engine", "products"], help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--tok-cache", default=str(Path(os.environ.get("SAMEVM_HOME", ".samevm")) / "cache" / "tokenizers"))
    args = ap.parse_args()
    if args.child:
        return (child if args.child == "engine" else products_child)(args)
    from runtime import catalog
    args.model_path = catalog.resolve(args.model, args.home)
    arms = ["kernels", "off"] + (["kernels-baseline"] if args.baseline_lib else [])
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    products: dict[str, list[dict]] = {a: [] for a in arms if a != "off"}
    for rep in range(args.reps):                # arms back to back, so all see the same machine
        for arm in arms:
            load = os.getloadavg()
            r = run_arm(arm, args, args.baseline_lib if arm == "kernels-baseline" else None)
            runs[arm].append({**r, "loadavg_before": load, "loadavg_after": os.getloadavg()})
            print(f"rep {rep} {arm}: " + ", ".join(f"b{b} {v['step_s'] * 1e3:.0f} ms" for b, v in r["batches"].items())
                  + f" (load {load[0]:.2f})", flush=True)
            if arm != "off" and args.product_tokens:
                load = os.getloadavg()
                r = run_arm(arm, args, args.baseline_lib if arm == "kernels-baseline" else None, "products")
                products[arm].append({**r, "loadavg_before": load, "loadavg_after": os.getloadavg()})
                print(f"rep {rep} {arm} products: " + ", ".join(f"T{t} {v * 1e3:.1f} ms" for t, v in r["pass_s"].items()),
                      flush=True)
    batches = args.batches.split(",")
    records = []
    for arm, rs in runs.items():
        rec = {"arm": arm, "weights": rs[0]["weights"], "model": args.model_path.name,
               "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "batches": {}}
        if arm == "kernels-baseline":
            rec["baseline_commit"] = args.baseline_commit
        for b in batches:
            steps = [r["batches"][b]["step_s"] for r in rs]
            step = statistics.median(steps)
            rec["batches"][b] = {"step_s": step, "step_s_min": min(steps), "step_s_max": max(steps),
                                 "tok_s_per_seq": 1 / step, "tok_s_aggregate": int(b) / step}
        one = rec["batches"][batches[0]]["step_s"]
        for b in batches:
            rec["batches"][b][f"step_vs_batch_{batches[0]}"] = rec["batches"][b]["step_s"] / one
        rec["runs"] = rs
        if products.get(arm):
            ps = products[arm]
            passes = {t: statistics.median(p["pass_s"][t] for p in ps) for t in ps[0]["pass_s"]}
            one = passes[next(iter(passes))]
            rec["products"] = {"level": ps[0]["level"], "threads": ps[0]["threads"], "weights": ps[0]["weights"],
                               "pass_s": passes, "pass_vs_first": {t: v / one for t, v in passes.items()}, "runs": ps}
        records.append(rec)
    by_arm = {r["arm"]: r for r in records}
    for b in batches:                           # kernels against the torch path at each batch
        by_arm["kernels"]["batches"][b]["speedup_vs_off"] = by_arm["off"]["batches"][b]["step_s"] / \
            by_arm["kernels"]["batches"][b]["step_s"]
        if "kernels-baseline" in by_arm:
            by_arm["kernels"]["batches"][b]["speedup_vs_baseline"] = \
                by_arm["kernels-baseline"]["batches"][b]["step_s"] / by_arm["kernels"]["batches"][b]["step_s"]
    for rec in records:
        print(f"{rec['arm']}: " + "; ".join(f"b{b} {v['step_s'] * 1e3:.0f} ms ({v[f'step_vs_batch_{batches[0]}']:.2f}x "
                                            f"b{batches[0]}, {v['tok_s_aggregate']:.1f} tok/s)"
                                            for b, v in rec["batches"].items()))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps({**environment(), "records": records}, indent=2))


if __name__ == "__main__":
    main()
