"""samevm's side of benchmarks/decode.py: the CUDA engine timed on a GGUF, the CPU
reference it is checked against first, and the cold start in a fresh process.

Decode is timed through engine.step(), what the server runs: scheduling, the forward pass,
sampling, detokenization and stop checks, with the next step queued before the host reads
this one's tokens (llm_engine.py). Batch 1 is timed with that overlap off too.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

PARITY_PROMPT, PARITY_TOKENS = 32, 8


def engine(path: Path, tok_cache: str, backend: str = "cuda", **kw) -> LLMEngine:
    return LLMEngine.from_gguf(EngineConfig(model=str(path), backend=backend, tokenizer_cache=tok_cache, **kw))


def prompts(rng, vocab: int, b: int, n: int) -> list[list[int]]:
    return [rng.integers(1000, vocab - 1000, n).tolist() for _ in range(b)]


def decode(e: LLMEngine, ps: list[list[int]], new: int) -> tuple[float, float]:
    """(aggregate decode tok/s after every sequence has its first token, mean step ms)."""
    seqs = [e.add_request(p, SamplingParams(max_tokens=new, temperature=0, ignore_eos=True)) for p in ps]
    while any(s.first_token_time is None for s in seqs):
        e.step()
    # the step queued before t0 (overlap) is partly outside the window: its tokens are not counted
    t0, steps, tokens = time.perf_counter(), 0, -(len(e.in_flight.sampled) if e.in_flight else 0)
    while e.has_unfinished():
        tokens += len(e.step())
        steps += 1
    dt = time.perf_counter() - t0
    return tokens / dt, 1e3 * dt / max(steps, 1)


def prefill(e: LLMEngine, p: list[int]) -> float:
    """Seconds from adding a request to its first token (one prefill step + sampling)."""
    t0 = time.perf_counter()
    seq = e.add_request(p, SamplingParams(max_tokens=1, temperature=0, ignore_eos=True))
    while not seq.is_finished:
        e.step()
    return time.perf_counter() - t0


def graph_ms(e: LLMEngine, size: int) -> float | None:
    """GPU time of one replay of a bucket's decode graph (CUDA events, median of 20)."""
    bucket = e.ops.graphs.buckets.get(e.ops.graphs.decode_key(size))
    if bucket is None:
        return None
    cp, dev = e.ops.xp, e.ops.dev
    times = []
    for _ in range(20):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(dev.stream)
        bucket.graph.replay()
        b.record(dev.stream)
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def run(path: Path, batches: list[int], prompt: int, new: int, prefill_lens: list[int], tok_cache: str,
        vocab: int) -> dict:
    import cupy
    pool = cupy.get_default_memory_pool()
    t0 = time.perf_counter()
    e = engine(path, tok_cache, max_num_seqs=max(batches), max_num_batched_tokens=max(4096, *prefill_lens),
               kv_cache_mb=max(batches) * (prompt + new) * 150 // 1000 + 512)
    load_s, rng, out = time.perf_counter() - t0, np.random.default_rng(1), {"decode": {}, "prefill": {}}
    for n in prefill_lens:
        prefill(e, prompts(rng, vocab, 1, n)[0])                   # warm-up (cuBLAS, kernels)
        ts = [prefill(e, prompts(rng, vocab, 1, n)[0]) for _ in range(5)]
        out["prefill"][n] = {"tok_s": n / statistics.median(ts), "ms": 1e3 * statistics.median(ts),
                             "min_ms": 1e3 * min(ts), "max_ms": 1e3 * max(ts)}
    for b in batches:
        decode(e, prompts(rng, vocab, b, prompt), 8)               # warm-up: captures the bucket's graph
        runs = [decode(e, prompts(rng, vocab, b, prompt), new) for _ in range(3)]
        rates = [r[0] for r in runs]
        gpu = graph_ms(e, b)
        step = statistics.median(r[1] for r in runs)
        out["decode"][b] = {"decode_tok_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                            "step_ms": step, "graph_gpu_ms": gpu, "host_ms": None if gpu is None else step - gpu}
    e.overlap = False                                              # each step waits for its tokens
    sync = [decode(e, prompts(rng, vocab, 1, prompt), new) for _ in range(3)]
    out["sync_b1"] = {"decode_tok_s": statistics.median(r[0] for r in sync),
                      "step_ms": statistics.median(r[1] for r in sync)}
    out.update(load_s=load_s, peak_pool_mib=pool.total_bytes() / 2**20, weights_mib=sum(
        w.nbytes for w in e.ops._loaded.values()) / 2**20)
    del e
    pool.free_all_blocks()
    return out


def parity_prompt(vocab: int) -> list[int]:
    return np.random.default_rng(7).integers(1000, vocab - 1000, PARITY_PROMPT).tolist()


def cpu_reference(path: Path, tok_cache: str, out: Path) -> None:
    """Greedy tokens and teacher-forced logits of the CPU reference, saved for parity()."""
    e = engine(path, tok_cache, backend="cpu", kv_cache_mb=64)
    p = parity_prompt(e.spec.vocab)
    tokens = e.generate([p], SamplingParams(max_tokens=PARITY_TOKENS, temperature=0, ignore_eos=True))[0].token_ids
    np.save(out, e.prompt_logits(p + tokens))
    out.with_suffix(".json").write_text(json.dumps(tokens))


def parity(path: Path, tok_cache: str, ref: Path) -> dict:
    """samevm CUDA (default precision) against the CPU reference's saved outputs."""
    tokens, ref_logits = json.loads(ref.with_suffix(".json").read_text()), np.load(ref)
    e = engine(path, tok_cache, kv_cache_mb=256)
    p = parity_prompt(e.spec.vocab)
    got = e.generate([p], SamplingParams(max_tokens=PARITY_TOKENS, temperature=0, ignore_eos=True))[0].token_ids
    logits = e.prompt_logits(p + tokens)
    equal = next((i for i, (a, b) in enumerate(zip(got, tokens)) if a != b), len(tokens))
    return {"greedy_tokens_equal": equal, "of": len(tokens),
            "logits_max_rel_err": float(np.abs(logits - ref_logits).max() / np.abs(ref_logits).max()),
            "argmax_agree": float((logits.argmax(1) == ref_logits.argmax(1)).mean())}


def cold_start(path: Path, tok_cache: str) -> dict:
    """Seconds from spawning a Python process to its first token (warm kernel and tokenizer
    caches), and when it had imported the runtime and built the engine."""
    t0 = time.time()
    done = subprocess.run([sys.executable, __file__, str(path), tok_cache], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cold-start child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stamps = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: v - t0 for k, v in stamps.items()}


if __name__ == "__main__":              # the cold-start child
    imported = time.time()
    e = engine(Path(sys.argv[1]), sys.argv[2])
    ready = time.time()
    e.generate([parity_prompt(e.spec.vocab)[:16]], SamplingParams(max_tokens=1, temperature=0))
    print(json.dumps({"first_token": time.time(), "imported": imported, "engine_ready": ready}))
