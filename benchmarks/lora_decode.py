"""What serving a LoRA adapter costs at decode: the same GGUF without an adapter (base), with a
random adapter on all 7 projections (q, k, v, o, gate, up, down) merged into the weights at load
(merged, the default: W + B A in Q8_0, runtime/lora_merge.py) and applied unmerged (the
low-rank product in the kernels), timed alternately. On the GPU by default; --backend cpu
times the CPU backend (int8, its served default).

    PYTHONPATH=. python benchmarks/lora_decode.py [--model GGUF] [--shape 0.6B] [--qtype Q4_K] [--rank 16]
    PYTHONPATH=. python benchmarks/lora_decode.py --backend cpu --model GGUF --batches 1 --prompt 64 --new 64

Without --model a random GGUF in the Qwen3-0.6B (or 1.7B) shape is written (dev.synthetic,
tied embeddings, the full vocabulary). The adapter is written as peft's save_pretrained
writes one (adapter_config.json + adapter_model.safetensors). Correctness first: what merging
costs in accuracy (the CPU float32 reference with the adapter merged into Q8_0 against the same
adapter unmerged), and on the GPU each mode against the CPU reference serving it the same way
(teacher-forced logits, greedy tokens). Decode is timed through engine.step() as
decode_samevm.decode does (aggregate tok/s, prefill excluded), base, merged and unmerged
alternating for --rounds rounds; reported: medians with min/max, the captured graph's GPU
time per step (CUDA), load seconds (the merge's among them), and the ratios to the base.
Writes benchmarks/results/lora_decode.json (cuda) or lora_decode_cpu.json (cpu).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import decode_samevm as samevm  # noqa: E402
from benchmarks.provenance import commit  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PROJECTIONS = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
               "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def write_model(models: Path, shape: str, qtype: str) -> Path:
    from gguf import GGMLQuantizationType as Q

    from dev.synthetic import QWEN3_0_6B, QWEN3_1_7B, write_random_gguf
    path = models / f"qwen3-{shape}-{qtype}.gguf"
    if not path.exists():
        models.mkdir(parents=True, exist_ok=True)
        write_random_gguf(path, "qwen3", {"0.6B": QWEN3_0_6B, "1.7B": QWEN3_1_7B}[shape], Q[qtype], tied=True)
    return path


def write_adapter(folder: Path, spec, rank: int, seed: int = 0) -> Path:
    """A random adapter in peft's format (B nonzero, as after training)."""
    from safetensors.numpy import save_file

    from runtime.lora import shapes
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(spec.n_layers):
        for module, (n_out, n_in) in shapes(spec).items():
            key = f"base_model.model.model.layers.{layer}.{PROJECTIONS[module]}.{module}"
            tensors[f"{key}.lora_A.weight"] = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(np.float32)
            tensors[f"{key}.lora_B.weight"] = (rng.standard_normal((n_out, rank)) * 0.01).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": sorted(PROJECTIONS),
        "bias": "none", "use_dora": False, "use_rslora": False, "task_type": "CAUSAL_LM"}))
    return folder


MODES = ("base", "merged", "unmerged")


def engine(path: Path, args, mode: str, adapter: Path, **kw):
    lora = None if mode == "base" else str(adapter)
    return samevm.engine(path, args.tokenizer_cache, backend=args.backend, cpu_dtype=args.cpu_dtype, lora=lora,
                         lora_mode="unmerged" if mode == "unmerged" else "merged", **kw)


def reference(path: Path, adapter: Path, tok_cache: str, mode: str):
    """The CPU float32 reference serving the adapter; merged, in Q8_0 as CUDA and CPU int8 hold it
    (its own float32 merge would be exact)."""
    from gguf import GGMLQuantizationType as Q

    from runtime.backends.cpu import CPUOps
    from runtime.config import EngineConfig
    from runtime.engine.llm_engine import LLMEngine
    ops = CPUOps()
    ops.merge_qtype = Q.Q8_0
    return LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", kv_cache_mb=64, tokenizer_cache=tok_cache,
                                            lora=str(adapter), lora_mode=mode), ops=ops)


def agreement(ref, other) -> dict:
    """`other` against `ref`: greedy tokens from one prompt, then teacher-forced logits on ref's tokens."""
    from runtime.sampling import SamplingParams
    p = samevm.parity_prompt(ref.spec.vocab)
    params = SamplingParams(max_tokens=samevm.PARITY_TOKENS, temperature=0, ignore_eos=True)
    tokens = ref.generate([p], params)[0].token_ids
    got = other.generate([p], params)[0].token_ids
    a, b = ref.prompt_logits(p + tokens), other.prompt_logits(p + tokens)
    equal = next((i for i, (x, y) in enumerate(zip(got, tokens)) if x != y), len(tokens))
    return {"greedy_tokens_equal": equal, "of": len(tokens),
            "logits_max_rel_err": float(np.abs(a - b).max() / np.abs(a).max()),
            "argmax_agree": float((a.argmax(1) == b.argmax(1)).mean())}


def parity(path: Path, adapter: Path, args) -> dict:
    refs = {mode: reference(path, adapter, args.tokenizer_cache, mode) for mode in ("merged", "unmerged")}
    out = {"merge_q8_0_vs_unmerged_cpu_f32": agreement(refs["unmerged"], refs["merged"])}
    if args.backend == "cuda":
        for mode, ref in refs.items():
            out[f"cuda_{mode}_vs_cpu"] = agreement(ref, engine(path, args, mode, adapter, kv_cache_mb=256))
    return out


def environment(backend: str) -> dict:
    if backend == "cuda":
        from benchmarks.decode import environment
    else:
        from benchmarks.cpu_decode import environment
    return environment()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="a GGUF (default: a random one in --shape)")
    ap.add_argument("--shape", default="0.6B", choices=["0.6B", "1.7B"])
    ap.add_argument("--qtype", default="Q4_K", help="weights of the random GGUF (Q4_K, Q8_0, F16)")
    ap.add_argument("--models", type=Path, default=Path("/tmp/samevm-bench-models"))
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--cpu-dtype", default="int8", choices=["int8", "bfloat16", "float32"])
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-parity", action="store_true")
    ap.add_argument("--tokenizer-cache", default="/tmp/samevm-bench-tokenizers")
    args = ap.parse_args()
    from runtime.gguf import load_gguf

    path = args.model or write_model(args.models, args.shape, args.qtype)
    spec = load_gguf(path).spec
    adapter = write_adapter(args.models / f"lora-r{args.rank}-{path.stem}", spec, args.rank)
    batches = [int(b) for b in args.batches.split(",")]
    out = {"model": path.name, "arch": spec.arch, "layers": spec.n_layers, "hidden": spec.hidden,
           "rank": args.rank, "modules": sorted(PROJECTIONS), "backend": args.backend,
           "cpu_dtype": args.cpu_dtype if args.backend == "cpu" else None, "prompt": args.prompt, "new": args.new,
           "rounds": args.rounds, **environment(args.backend), "commit": commit()}
    if not args.skip_parity:
        out["parity"] = parity(path, adapter, args)
        print("parity", json.dumps(out["parity"]), flush=True)
    kv_mb = max(batches) * (args.prompt + args.new) * 150 // 1000 + 512
    engines = {mode: engine(path, args, mode, adapter, max_num_seqs=max(batches), kv_cache_mb=kv_mb) for mode in MODES}
    out["load"] = {mode: {"seconds": e.load_seconds, "merge_seconds": e.load_phases.get("merge")}
                   for mode, e in engines.items()}
    print("load", json.dumps(out["load"]), flush=True)
    rng = np.random.default_rng(1)
    runs: dict = {(mode, b): [] for mode in engines for b in batches}
    for e in engines.values():                # warm-up: captures each bucket's graph
        for b in batches:
            samevm.decode(e, samevm.prompts(rng, spec.vocab, b, args.prompt), 8)
    for _ in range(args.rounds):
        for b in batches:
            for mode, e in engines.items():   # alternating, so drift hits all alike
                runs[mode, b].append(samevm.decode(e, samevm.prompts(rng, spec.vocab, b, args.prompt), args.new))
    out["decode"] = []
    for b in batches:
        row = {"batch": b}
        for mode, e in engines.items():
            rates = [r[0] for r in runs[mode, b]]
            row[mode] = {"decode_tok_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                         "step_ms": statistics.median(r[1] for r in runs[mode, b]),
                         "graph_gpu_ms": samevm.graph_ms(e, b) if args.backend == "cuda" else None}
        for mode in ("merged", "unmerged"):
            row[f"{mode}_vs_base"] = row[mode]["decode_tok_s"] / row["base"]["decode_tok_s"]
            if row["base"]["graph_gpu_ms"] and row[mode]["graph_gpu_ms"]:
                row[f"{mode}_graph_gpu_ms_added"] = row[mode]["graph_gpu_ms"] - row["base"]["graph_gpu_ms"]
        out["decode"].append(row)
        print(f"batch {b}: " + ", ".join(f"{m} {row[m]['decode_tok_s']:.1f} tok/s" for m in MODES)
              + f"; merged/base {row['merged_vs_base']:.3f}, unmerged/base {row['unmerged_vs_base']:.3f}", flush=True)
    out["date"] = time.strftime("%Y-%m-%d %H:%M")
    RESULTS.mkdir(exist_ok=True)
    result = RESULTS / ("lora_decode.json" if args.backend == "cuda" else "lora_decode_cpu.json")
    result.write_text(json.dumps(out, indent=1))
    print(f"wrote {result}")


if __name__ == "__main__":
    main()
