"""What serving a LoRA adapter costs at decode on the GPU: the same GGUF without and with a
random rank-16 adapter on all 7 projections (q, k, v, o, gate, up, down), timed alternately.

    PYTHONPATH=. python benchmarks/lora_decode.py [--model GGUF] [--shape 0.6B] [--qtype Q4_K] [--rank 16]

Without --model a random GGUF in the Qwen3-0.6B (or 1.7B) shape is written (dev.synthetic,
tied embeddings, the full vocabulary). The adapter is written as peft's save_pretrained
writes one (adapter_config.json + adapter_model.safetensors). Correctness first: the CUDA
engine with the adapter against the CPU reference with the same adapter (teacher-forced
logits, greedy tokens). Decode is timed through engine.step() as decode_samevm.decode does
(128-token prompts, 256 new tokens, aggregate tok/s, prefill excluded), batch 1 and 16,
base and adapter alternating for --rounds rounds; reported: medians with min/max, the
captured graph's GPU time per step, and the ratio adapter / base.
Writes benchmarks/results/lora_decode.json.
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


def parity(path: Path, adapter: Path, tok_cache: str) -> dict:
    """CUDA (default precision) against the CPU reference, both serving the adapter."""
    from runtime.sampling import SamplingParams
    ref = samevm.engine(path, tok_cache, backend="cpu", kv_cache_mb=64, lora=str(adapter))
    gpu = samevm.engine(path, tok_cache, kv_cache_mb=256, lora=str(adapter))
    p = samevm.parity_prompt(ref.spec.vocab)
    params = SamplingParams(max_tokens=samevm.PARITY_TOKENS, temperature=0, ignore_eos=True)
    tokens = ref.generate([p], params)[0].token_ids
    got = gpu.generate([p], params)[0].token_ids
    a, b = ref.prompt_logits(p + tokens), gpu.prompt_logits(p + tokens)
    equal = next((i for i, (x, y) in enumerate(zip(got, tokens)) if x != y), len(tokens))
    return {"greedy_tokens_equal": equal, "of": len(tokens),
            "logits_max_rel_err": float(np.abs(a - b).max() / np.abs(a).max()),
            "argmax_agree": float((a.argmax(1) == b.argmax(1)).mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="a GGUF (default: a random one in --shape)")
    ap.add_argument("--shape", default="0.6B", choices=["0.6B", "1.7B"])
    ap.add_argument("--qtype", default="Q4_K", help="weights of the random GGUF (Q4_K, Q8_0, F16)")
    ap.add_argument("--models", type=Path, default=Path("/tmp/samevm-bench-models"))
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-parity", action="store_true")
    ap.add_argument("--tokenizer-cache", default="/tmp/samevm-bench-tokenizers")
    args = ap.parse_args()
    from benchmarks.decode import environment
    from runtime.gguf import load_gguf

    path = args.model or write_model(args.models, args.shape, args.qtype)
    spec = load_gguf(path).spec
    adapter = write_adapter(args.models / f"lora-r{args.rank}-{path.stem}", spec, args.rank)
    batches = [int(b) for b in args.batches.split(",")]
    out = {"model": path.name, "arch": spec.arch, "layers": spec.n_layers, "hidden": spec.hidden,
           "rank": args.rank, "modules": sorted(PROJECTIONS), "prompt": args.prompt, "new": args.new,
           "rounds": args.rounds, **environment(), "commit": commit()}
    if not args.skip_parity:
        out["parity"] = parity(path, adapter, args.tokenizer_cache)
        print("parity", out["parity"], flush=True)
    kv_mb = max(batches) * (args.prompt + args.new) * 150 // 1000 + 512
    engines = {name: samevm.engine(path, args.tokenizer_cache, max_num_seqs=max(batches), kv_cache_mb=kv_mb,
                                   lora=lora) for name, lora in (("base", None), ("lora", str(adapter)))}
    rng = np.random.default_rng(1)
    runs: dict = {(name, b): [] for name in engines for b in batches}
    for name, e in engines.items():           # warm-up: captures each bucket's graph
        for b in batches:
            samevm.decode(e, samevm.prompts(rng, spec.vocab, b, args.prompt), 8)
    for _ in range(args.rounds):
        for b in batches:
            for name, e in engines.items():   # alternating, so drift hits both alike
                runs[name, b].append(samevm.decode(e, samevm.prompts(rng, spec.vocab, b, args.prompt), args.new))
    out["decode"] = []
    for b in batches:
        row = {"batch": b}
        for name, e in engines.items():
            rates = [r[0] for r in runs[name, b]]
            row[name] = {"decode_tok_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                         "step_ms": statistics.median(r[1] for r in runs[name, b]),
                         "graph_gpu_ms": samevm.graph_ms(e, b)}
        row["lora_vs_base"] = row["lora"]["decode_tok_s"] / row["base"]["decode_tok_s"]
        if row["base"]["graph_gpu_ms"] and row["lora"]["graph_gpu_ms"]:
            row["graph_gpu_ms_added"] = row["lora"]["graph_gpu_ms"] - row["base"]["graph_gpu_ms"]
        out["decode"].append(row)
        print(f"batch {b}: base {row['base']['decode_tok_s']:.0f} tok/s, lora {row['lora']['decode_tok_s']:.0f} "
              f"tok/s, ratio {row['lora_vs_base']:.3f}", flush=True)
    out["date"] = time.strftime("%Y-%m-%d %H:%M")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lora_decode.json").write_text(json.dumps(out, indent=1))
    print(f"wrote {RESULTS / 'lora_decode.json'}")


if __name__ == "__main__":
    main()
