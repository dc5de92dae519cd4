"""Batch-1 decode steps of the CUDA engine under named kernel settings, A/B in one process.

    python benchmarks/step_settings.py MODEL.gguf [MODEL.gguf ...] \\
        --setting 'base:lin.MV_UNROLL=1;attn.MIN_SPLIT_POSITIONS=0' --setting new:lin.MV_UNROLL=2

A setting assigns module constants (`lin` = runtime.backends.cuda.linear, `attn` = .attention)
before its engines are built, and is undone after; every model runs under every setting, in
order, on one GPU, so the differences are the settings' and not the machine's. Reported: decode
tok/s through engine.step() (128-token prompt, 256 new tokens, median of 3) and the GPU time of
one replay of the batch-1 graph. This steers kernel choices; claims against peers come from
decode.py. Writes benchmarks/results/step_settings.json.
"""
from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import decode_samevm as samevm  # noqa: E402
from benchmarks.provenance import commit  # noqa: E402
from runtime.backends.cuda import attention as attn  # noqa: E402
from runtime.backends.cuda import linear as lin  # noqa: E402

MODULES = {"lin": lin, "attn": attn}


def parse(spec: str) -> tuple[str, list[tuple[object, str, object]]]:
    """'label:mod.NAME=value;...' -> (label, [(module, NAME, value)]); values are Python literals."""
    label, _, body = spec.partition(":")
    assigns = []
    for item in filter(None, body.split(";")):
        target, _, value = item.partition("=")
        mod, _, name = target.strip().partition(".")
        if mod not in MODULES or not hasattr(MODULES[mod], name):
            raise SystemExit(f"unknown setting {target!r}: use lin.NAME or attn.NAME of an existing constant")
        assigns.append((MODULES[mod], name, ast.literal_eval(value.strip())))
    return label, assigns


def measure(path: Path, tok_cache: str, new: int) -> dict:
    e = samevm.engine(path, tok_cache, max_num_seqs=4, kv_cache_mb=512)
    rng = np.random.default_rng(1)
    samevm.decode(e, samevm.prompts(rng, e.spec.vocab, 1, 128), 16)        # captures the graph
    runs = [samevm.decode(e, samevm.prompts(rng, e.spec.vocab, 1, 128), new) for _ in range(3)]
    out = {"decode_tok_s": statistics.median(r[0] for r in runs), "step_ms": statistics.median(r[1] for r in runs),
           "graph_gpu_ms": samevm.graph_ms(e, 1)}
    del e
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--setting", action="append", default=[], help="label:lin.NAME=value;attn.NAME=value")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--tokenizer-cache", default="/tmp/samevm-bench-tokenizers")
    args = ap.parse_args()
    settings = [parse(s) for s in args.setting] or [("default", [])]
    rows = []
    for label, assigns in settings:
        saved = [(m, n, getattr(m, n)) for m, n, _ in assigns]
        for m, n, v in assigns:
            setattr(m, n, v)
        try:
            for path in args.models:
                r = {"setting": label, "model": path.name, **measure(path, args.tokenizer_cache, args.new)}
                print(f"{label:16s} {path.name:28s} {r['decode_tok_s']:7.0f} tok/s  step {r['step_ms']:.3f} ms  "
                      f"graph {r['graph_gpu_ms']:.3f} ms", flush=True)
                rows.append(r)
        finally:
            for m, n, v in saved:
                setattr(m, n, v)
    out = ROOT / "benchmarks" / "results" / "step_settings.json"
    out.write_text(json.dumps({"commit": commit(), "settings": args.setting, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
