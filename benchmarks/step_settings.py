"""Batch-1 decode steps of the CUDA engine under named kernel settings, A/B in one process.

    python benchmarks/step_settings.py MODEL.gguf [MODEL.gguf ...] \\
        --setting 'base:matvec_unroll=1;min_split_positions=0' --setting new:matvec_unroll=2

A setting is a set of CudaOptions fields (runtime/config.py) its engines are built with; every
model runs under every setting, in order, on one GPU, so the differences are the settings' and
not the machine's. A kernel choice that is not an option yet becomes one to be A/B'd here. Reported: decode
tok/s through engine.step() (128-token prompt, 256 new tokens, median of 3) and the GPU time of
one replay of the batch-1 graph. This steers kernel choices; claims against peers come from
decode.py. Writes benchmarks/results/step_settings.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import decode_samevm as samevm  # noqa: E402
from benchmarks.provenance import commit  # noqa: E402
from runtime.config import CudaOptions  # noqa: E402


def parse(spec: str) -> tuple[str, CudaOptions]:
    """'label:name=value;...' -> (label, the CudaOptions with those fields)."""
    label, _, body = spec.partition(":")
    try:
        return label, CudaOptions.parse([item for item in body.split(";") if item.strip()])
    except ValueError as e:
        raise SystemExit(f"setting {spec!r}: {e}") from None


def measure(path: Path, tok_cache: str, new: int, options: CudaOptions) -> dict:
    e = samevm.engine(path, tok_cache, max_num_seqs=4, kv_cache_mb=512, cuda=options)
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
    ap.add_argument("--setting", action="append", default=[], help="label:name=value;name=value (CudaOptions)")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--tokenizer-cache", default="/tmp/samevm-bench-tokenizers")
    args = ap.parse_args()
    settings = [parse(s) for s in args.setting] or [("default", CudaOptions())]
    rows = []
    for label, options in settings:
        for path in args.models:
            r = {"setting": label, "model": path.name, **measure(path, args.tokenizer_cache, args.new, options)}
            print(f"{label:16s} {path.name:28s} {r['decode_tok_s']:7.0f} tok/s  step {r['step_ms']:.3f} ms  "
                  f"graph {r['graph_gpu_ms']:.3f} ms", flush=True)
            rows.append(r)
    out = ROOT / "benchmarks" / "results" / "step_settings.json"
    out.write_text(json.dumps({"commit": commit(), "settings": args.setting, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
