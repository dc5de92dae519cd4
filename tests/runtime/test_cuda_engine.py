"""The CUDA engine against the CPU engine on the same random GGUFs (needs a GPU).

With f32 KV cache and f32 cuBLAS, every kernel computes in f32 like the reference, so greedy
tokens must match for 64 steps. The default precision (f16 KV, f16 tensor-core GEMMs) is
checked teacher-forced: logits along the CPU's own continuation within tolerance, and the
same argmax wherever the CPU's top two are clearly apart. Batching, prefix cache,
preemption and sampling behaviour reuse test_engine.py's tests on GPU engines.
"""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import tests.runtime.test_engine as engine_tests
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from tests.conftest import ARCHS, KQUANT_SHAPE
from tests.runtime.test_engine import model_path  # noqa: F401  (fixture)

pytestmark = pytest.mark.gpu
PROMPT = "What is 2+2? The quick brown fox jumps over the lazy dog. Store the facts in the database."
STEPS = 64


def cpu_engine(path, tokenizer_cache):
    return LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=32, tokenizer_cache=tokenizer_cache))


def make_ops(**kw):
    from runtime.backends.cuda import CUDAOps
    return CUDAOps(**kw)


def cuda_engine(path, tokenizer_cache, ops_kw=None, **kw):
    kw.setdefault("kv_cache_mb", 32)
    return LLMEngine.from_gguf(EngineConfig(model=path, backend="cuda", tokenizer_cache=tokenizer_cache, **kw),
                               ops=make_ops(**(ops_kw or {})))


EXACT = {"kv_dtype": "float32", "gemm_dtype": "float32"}


def assert_greedy_parity(path, tokenizer_cache):
    cpu, gpu = cpu_engine(path, tokenizer_cache), cuda_engine(path, tokenizer_cache, EXACT)
    ids = cpu.tokenizer.encode(PROMPT)
    ref_logits, logits = cpu.prompt_logits(ids), gpu.prompt_logits(ids)
    assert np.abs(logits - ref_logits).max() <= 1e-4 * max(np.abs(ref_logits).max(), 1.0)
    params = SamplingParams(max_tokens=STEPS, temperature=0, ignore_eos=True)
    ref = cpu.generate([ids], params)[0].token_ids
    assert gpu.generate([ids], params)[0].token_ids == ref
    assert gpu.ops.graphs.captured(decode=True), "decode steps should have replayed a CUDA graph"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0])
def test_each_architecture_greedy_64_steps(tiny_gguf, tokenizer_cache, arch, qtype):
    assert_greedy_parity(tiny_gguf(arch, qtype), tokenizer_cache)


@pytest.mark.parametrize("qtype", [Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K])
def test_each_tensor_type_greedy_64_steps(tiny_gguf, tokenizer_cache, qtype):
    assert_greedy_parity(tiny_gguf("qwen2", qtype, KQUANT_SHAPE, embed_qtype=qtype), tokenizer_cache)


def test_tied_kquant_qwen3_greedy_64_steps(tiny_gguf, tokenizer_cache):
    assert_greedy_parity(tiny_gguf("qwen3", Q.Q4_K, KQUANT_SHAPE, tied=True, embed_qtype=Q.Q6_K), tokenizer_cache)


@pytest.mark.parametrize("arch", ARCHS)
def test_default_precision_teacher_forced(tiny_gguf, tokenizer_cache, arch):
    path = tiny_gguf(arch, Q.Q8_0)
    cpu, gpu = cpu_engine(path, tokenizer_cache), cuda_engine(path, tokenizer_cache)
    ids = cpu.tokenizer.encode(PROMPT)
    out = cpu.generate([ids], SamplingParams(max_tokens=32, temperature=0, ignore_eos=True))[0].token_ids
    seq = ids + out
    ref, got = cpu.prompt_logits(seq), gpu.prompt_logits(seq)
    tol = 1e-2 * np.abs(ref).max()
    assert np.abs(got - ref).max() <= tol
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * tol
    assert (got.argmax(1) == ref.argmax(1))[clear].all()


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.Q4_K])
def test_default_precision_decode_follows_cpu(tiny_gguf, tokenizer_cache, qtype):
    from tests.runtime.test_cuda_emulated import default_precision_decode_scenario
    kw = {"shape": KQUANT_SHAPE, "embed_qtype": Q.Q6_K} if qtype == Q.Q4_K else {}
    default_precision_decode_scenario(tiny_gguf("qwen3", qtype, **kw), tokenizer_cache, make_ops, steps=STEPS)


@pytest.mark.parametrize("arch,seqs,bucket,precision", [("qwen3", 5, 8, EXACT), ("qwen2", 20, 32, EXACT),
                                                          ("qwen3", 12, 16, {}), ("qwen2", 24, 32, {})])
def test_graph_replay_equals_eager(tiny_gguf, tokenizer_cache, arch, seqs, bucket, precision):
    """Graphs give the eager engine's tokens; the 32 bucket is past matvec.cu, so it captures
    dequantize + cuBLAS inside the graph (no fallback to matvec.cu); at default precision the
    16 and 32 buckets capture matmul.cu (and its K-split tickets) and the f16 casts."""
    path = tiny_gguf(arch, Q.Q8_0)
    graphed = cuda_engine(path, tokenizer_cache, precision)
    eager = cuda_engine(path, tokenizer_cache, {**precision, "graphs": False})
    ps = engine_tests.prompts(graphed, seqs)
    params = SamplingParams(max_tokens=16, temperature=0, ignore_eos=True)
    assert [c.token_ids for c in graphed.generate(ps, params)] == [c.token_ids for c in eager.generate(ps, params)]
    captured = graphed.ops.graphs.buckets[bucket, bucket]
    assert captured.graph is not None and captured.fallback is None, captured.fallback
    assert any(key[0] == "matmul" for key in graphed.ops.dev._modules) == (precision != EXACT)


def test_overlapped_steps_match_the_synchronous_engine(tiny_gguf, tokenizer_cache):
    from tests.runtime.test_cuda_emulated import overlap_scenario
    overlap_scenario(tiny_gguf("qwen3", Q.Q8_0), tokenizer_cache, lambda: make_ops(**EXACT))


def test_sampler_matches_cpu_sampler():
    from dev.cuda.check import check_sampling
    ops = make_ops()
    for seed in range(5):
        for r in check_sampling(ops, np.random.default_rng(seed), V=151936 if seed == 0 else 4000):
            assert r.ok, (seed, r)


def test_kernel_checks():
    from dev.cuda.check import run_checks
    bad = [r for r in run_checks(make_ops()) if not r.ok]
    assert not bad, bad[:5]


@pytest.fixture
def on_gpu(monkeypatch):
    """test_engine.py's tests, their engines built on the GPU (f32 GEMMs: recomputed and
    incremental K/V then agree as closely as on the CPU)."""
    monkeypatch.setattr(engine_tests, "make_engine", lambda path, tok, **kw: cuda_engine(
        path, tok, {"gemm_dtype": "float32"}, **{"kv_cache_mb": 16, **kw}))


@pytest.mark.parametrize("name", engine_tests.BEHAVIOUR)
def test_engine_behaviour_on_gpu(name, on_gpu, model_path, tokenizer_cache):  # noqa: F811
    engine = engine_tests.make_engine(model_path, tokenizer_cache)
    assert engine.ops.name == "cuda"
    engine_tests.run_behaviour(name, model_path, tokenizer_cache)
