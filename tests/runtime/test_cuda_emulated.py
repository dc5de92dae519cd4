"""The CUDA kernels on the CPU, through runtime/backends/cuda/emulator: CI has no GPU, so this
is where indexing, block formats, barriers, split-K, sampling and the graph/arena glue of the
CUDA backend are checked against the CPU reference on every change (timing and races need a GPU:
tests/runtime/test_cuda_engine.py, `pytest -m gpu`)."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from runtime.backends.cuda import CUDAOps, check
from runtime.backends.cuda import emulator
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

pytestmark = pytest.mark.skipif(not emulator.available(), reason="needs g++ and the CUDA headers")


@pytest.fixture(scope="module")
def ops():
    ops = CUDAOps(device=emulator.EmuDevice())
    check.poison(ops)
    return ops


def assert_ok(results):
    bad = [r for r in results if not r.ok]
    assert results and not bad, bad[:5]


def test_linear_formats(ops):
    results = check.check_linear(ops, np.random.default_rng(0), qtypes=[Q.Q4_K, Q.Q6_K, Q.Q8_0, Q.BF16])
    assert_ok(results)
    # 2-8 tokens at f16 ran the tensor-core matvec, with every team size
    tc = [r.name for r in results if r.name.startswith("matvec_tc") or " matvec_tc" in r.name]
    assert any("T=2 matvec_tc" in n for n in tc) and all(any(f"split={s}" in n for n in tc) for s in (1, 2, 4, 8)), tc[:5]


def test_attention_decode_split_k_and_prefill_after_prefix(ops):
    rng = np.random.default_rng(1)
    assert_ok(check.check_attention(ops, rng, "float16", 16, 8, 128, True, False, [(1, 5), (1, 300), (1, 1100)]))
    assert_ok(check.check_attention(ops, rng, "bfloat16", 6, 2, 64, False, True, [(7, 7), (9, 40), (1, 19)]))


def test_sampler_matches_cpu(ops):
    assert_ok(check.check_sampling(ops, np.random.default_rng(2), V=1500))


def test_engine_greedy_matches_cpu_through_decode_graphs(tiny_gguf, tokenizer_cache):
    path = tiny_gguf("qwen3", Q.Q8_0)
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache)
    cpu = LLMEngine(config)
    gpu = LLMEngine(config, ops=CUDAOps(device=emulator.EmuDevice(), kv_dtype="float32", gemm_dtype="float32"))
    ids = cpu.tokenizer.encode("What is 2+2? The quick brown fox")
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    assert gpu.generate([ids], params)[0].token_ids == cpu.generate([ids], params)[0].token_ids
    assert gpu.ops.graphs.buckets


def test_prefill_chunks_that_end_no_prompt_match_cpu(tiny_gguf, tokenizer_cache):
    """With a 16-token step budget a 40-token prompt takes three steps, the first two wanting no
    logits: the lm_head gets zero rows, which must launch nothing (a grid of 0 blocks is refused
    by CUDA, and a block with no rows read x at row -1)."""
    path = tiny_gguf("qwen2", Q.Q8_0)
    cpu = LLMEngine(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache))
    gpu = LLMEngine(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache,
                                 max_num_batched_tokens=16),
                    ops=CUDAOps(device=emulator.EmuDevice(), kv_dtype="float32", gemm_dtype="float32"))
    ids = cpu.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 4)[:40]
    params = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    assert len(ids) == 40
    assert gpu.generate([ids, ids[:23]], params)[0].token_ids == cpu.generate([ids], params)[0].token_ids


def test_batch_of_twelve_decodes_through_matmul_in_the_graphs(tiny_gguf, tokenizer_cache):
    """Twelve sequences decode 12 token rows a step: beyond matvec.cu's 8, so the captured
    graph runs matmul.cu (tensor-core tiles, f16 inputs). Each sequence's greedy tokens must
    equal what the CPU reference gives it alone."""
    path = tiny_gguf("qwen3", Q.Q8_0)
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache)
    cpu = LLMEngine(config)
    ops = CUDAOps(device=emulator.EmuDevice(), kv_dtype="float32")
    gpu = LLMEngine(config, ops=ops)
    base = cpu.tokenizer.encode("Count the apples and the pears in the basket, then add three more")
    prompts = [base[i % 5:] + base[:i % 3] for i in range(12)]
    params = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    got = [r.token_ids for r in gpu.generate(prompts, params)]
    assert got == [r.token_ids for r in cpu.generate(prompts, params)]
    assert ops.graphs.buckets and any(key[0] == "matmul" for key in ops.dev._modules)
