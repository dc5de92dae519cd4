"""The peers of benchmarks/decode.py: llama.cpp (its own bench tools, as BENCHMARKS.md runs
them) and transformers (bf16, static cache with its automatic torch.compile). Each returns
records in decode.py's format; llama.cpp reads the quantized GGUFs, transformers the F16 one.
"""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from pathlib import Path


def llama_cpp(bin_dir: Path, model: Path, batches: list[int], prompt: int, new: int,
              prefill_lens: list[int]) -> dict:
    """Decode tok/s per batch (llama-batched-bench), prefill tok/s (llama-bench), cold start
    (llama-simple: process start to exit after one token) and the buffers it reports."""
    n_ctx = max(batches) * (prompt + new) + 256
    cmd = [str(bin_dir / "llama-batched-bench"), "-m", str(model), "-ngl", "99", "-fa", "on",
           "-npp", str(prompt), "-ntg", str(new), "-npl", ",".join(map(str, batches)), "-c", str(n_ctx),
           "--output-format", "jsonl"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in (done.stdout + done.stderr).splitlines() if line.startswith('{"n_kv_max"')]
    decode = {r["pl"]: {"decode_tok_s": r["speed_tg"], "ttft_ms": 1e3 * r["t_pp"] if r["pl"] == 1 else None}
              for r in rows}
    mib = sum(float(m) for m in re.findall(r"(?:model|KV|compute) buffer size =\s+([\d.]+) MiB", done.stderr))
    cmd = [str(bin_dir / "llama-bench"), "-m", str(model), "-ngl", "99", "-fa", "1", "-p",
           ",".join(map(str, prefill_lens)), "-n", str(new), "-r", "5", "-o", "json"]
    bench = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    prefill = {b["n_prompt"]: {"tok_s": b["avg_ts"], "std": b["stddev_ts"]} for b in bench if b["n_gen"] == 0}
    tg = [b for b in bench if b["n_prompt"] == 0]
    cold = None
    simple = bin_dir / "llama-simple"
    if simple.exists():
        t0 = time.perf_counter()
        subprocess.run([str(simple), "-m", str(model), "-n", "1", "-ngl", "99", "Hello"], capture_output=True, check=True)
        cold = time.perf_counter() - t0
    return {"decode": decode, "prefill": prefill, "tg_bench": tg[0]["avg_ts"] if tg else None,
            "cold_start_s": cold, "gpu_buffers_mib": mib}


def transformers_run(f16: Path, batches: list[int], prompt: int, new: int, prefill_lens: list[int],
                     vocab: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList

    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(f16.parent, gguf_file=f16.name, dtype=torch.bfloat16)
    model.hf_quantizer, model.is_quantized = None, False     # weights are plain bf16 now; lets generate compile
    model.config.__dict__.pop("quantization_config", None)
    model = model.cuda().eval()
    load_s = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(0)
    ids = lambda b, n: torch.randint(1000, vocab - 1000, (b, n), generator=gen).cuda()  # noqa: E731

    prefill = {}
    with torch.no_grad():
        for n in prefill_lens:
            x = ids(1, n)
            model(x)
            times = []
            for _ in range(5):
                torch.cuda.synchronize()
                t = time.perf_counter()
                model(x)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t)
            prefill[n] = {"tok_s": n / statistics.median(times), "ms": 1e3 * statistics.median(times)}

    stamps: list[float] = []

    class Clock(LogitsProcessor):
        def __call__(self, input_ids, scores):
            torch.cuda.synchronize()
            stamps.append(time.perf_counter())
            return scores

    decode = {}
    for b in batches:
        x = ids(b, prompt)
        kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, cache_implementation="static",
                  pad_token_id=0, eos_token_id=None, logits_processor=LogitsProcessorList([Clock()]))
        with torch.no_grad():
            model.generate(x, **kw)                  # compiles for this batch size
            stamps.clear()
            start = time.perf_counter()
            model.generate(x, **kw)
        decode[b] = {"decode_tok_s": b * (new - 1) / (stamps[-1] - stamps[0]),
                     "ttft_ms": 1e3 * (stamps[0] - start) if b == 1 else None}
    return {"decode": decode, "prefill": prefill, "load_s": load_s,
            "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20}
