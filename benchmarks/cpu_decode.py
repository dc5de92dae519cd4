"""Decode speed on the CPU: samevm's CPU backend against transformers on the same GGUF.

    python benchmarks/cpu_decode.py [--model NAME_OR_PATH] [--new-tokens 64] [--reps 3]

Both engines decode greedily from the same chat prompt; decode tok/s counts the tokens
after the first (prefill excluded), median over repetitions of one loaded model.
transformers runs with eager attention in bf16 and in f32; the faster of the two is the
baseline of the ratios. Writes benchmarks/results/cpu_decode.json (list of records).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch

from runtime import catalog
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

RESULTS = Path(__file__).parent / "results"
PROMPT = [{"role": "user", "content": "Write a Python function that checks whether a number is prime, "
                                      "then explain how it works step by step."}]


def samevm_runs(path: Path, ids: list[int], new_tokens: int, reps: int, dtype: str, tok_cache: str) -> list[dict]:
    """Load once, then `reps` timed generations (each without prefix-cache help)."""
    t0 = time.perf_counter()
    engine = LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", cpu_dtype=dtype, kv_cache_mb=256,
                                              tokenizer_cache=tok_cache))
    load = time.perf_counter() - t0
    params = SamplingParams(max_tokens=new_tokens, temperature=0, ignore_eos=True)
    engine.generate([ids], SamplingParams(max_tokens=4, temperature=0))       # warm-up
    runs = []
    for _ in range(reps):
        engine.blocks.hash_to_block.clear()                                   # no prefix-cache help
        stamps, start = [], time.perf_counter()
        seq = engine.add_request(ids, params)
        while not seq.is_finished:
            engine.step()
            stamps.append(time.perf_counter())
        runs.append({"load_s": load, "prefill_s": stamps[0] - start, "decode_s": stamps[-1] - stamps[0],
                     "tokens": seq.output_ids})
    return runs


def transformers_runs(path: Path, ids: list[int], new_tokens: int, reps: int, dtype: torch.dtype) -> list[dict]:
    from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype,
                                                 attn_implementation="eager")
    load = time.perf_counter() - t0
    stamps: list[float] = []

    class Clock(LogitsProcessor):
        def __call__(self, input_ids, scores):
            stamps.append(time.perf_counter())
            return scores

    x = torch.tensor([ids])
    runs = []
    with torch.no_grad():
        model.generate(x, max_new_tokens=4, do_sample=False)                 # warm-up
        for _ in range(reps):
            stamps.clear()
            start = time.perf_counter()
            out = model.generate(x, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                 logits_processor=LogitsProcessorList([Clock()]))
            runs.append({"load_s": load, "prefill_s": stamps[0] - start, "decode_s": stamps[-1] - stamps[0],
                         "tokens": out[0, len(ids):].tolist()})
    return runs


def environment() -> dict:
    import transformers
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "commit": commit,
            "date": time.strftime("%Y-%m-%d")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=catalog.DEFAULT_MODEL)
    ap.add_argument("--home", default=os.environ.get("SAMEVM_HOME", ".samevm"))
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dtypes", default="float32,int8", help="samevm CPU dtypes to run, comma-separated")
    ap.add_argument("--transformers-dtypes", default="bfloat16,float32",
                    help="transformers dtypes to run; the fastest is the baseline of the ratios")
    args = ap.parse_args()
    path = catalog.resolve(args.model, args.home)
    tok_cache = str(Path(args.home) / "cache" / "tokenizers")
    probe = LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", kv_cache_mb=16, tokenizer_cache=tok_cache))
    ids = probe.tokenizer.encode(probe.tokenizer.render_chat(PROMPT))
    del probe

    env, records = environment(), []
    runners = [(f"transformers-{d}-eager", lambda d=d: transformers_runs(path, ids, args.new_tokens, args.reps,
                                                                          getattr(torch, d)))
               for d in args.transformers_dtypes.split(",")]
    runners += [(f"samevm-cpu-{d}", lambda d=d: samevm_runs(path, ids, args.new_tokens, args.reps, d, tok_cache))
                for d in args.dtypes.split(",")]
    tokens = {}
    for name, fn in runners:
        runs = fn()
        rates = [(args.new_tokens - 1) / r["decode_s"] for r in runs]
        tokens[name] = runs[0]["tokens"]
        records.append({
            "engine": name, "model": path.name, "prompt_tokens": len(ids), "new_tokens": args.new_tokens,
            "decode_tok_s": statistics.median(rates), "decode_tok_s_min": min(rates),
            "decode_tok_s_max": max(rates), "prefill_tok_s": len(ids) / statistics.median(r["prefill_s"] for r in runs),
            "load_s": statistics.median(r["load_s"] for r in runs), **env})
        print(f"{name:28s} decode {records[-1]['decode_tok_s']:6.2f} tok/s  (min {min(rates):.2f}, max {max(rates):.2f})")
    base = max((r for r in records if r["engine"].startswith("transformers")), key=lambda r: r["decode_tok_s"])
    for r in records:
        if r["engine"].startswith("transformers"):
            continue
        r["baseline"] = base["engine"]
        r["ratio_vs_transformers"] = r["decode_tok_s"] / base["decode_tok_s"]
        ours, theirs = tokens[r["engine"]], tokens[base["engine"]]
        same = sum(a == b for a, b in zip(ours, theirs))
        r["greedy_tokens_equal_prefix"] = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                                               args.new_tokens)
        print(f"{r['engine']:28s} {r['ratio_vs_transformers']:.2f}x {base['engine']}; "
              f"first divergence at token {r['greedy_tokens_equal_prefix']} ({same} equal)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu_decode.json").write_text(json.dumps(records, indent=2))


if __name__ == "__main__":
    main()
