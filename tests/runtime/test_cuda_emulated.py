"""The CUDA kernels on the CPU, through dev/cuda/emulator: CI has no GPU, so this
is where indexing, block formats, barriers, split-K, sampling and the graph/arena glue of the
CUDA backend are checked against the CPU reference on every change (timing and races need a GPU:
tests/runtime/test_cuda_engine.py, `pytest -m gpu`)."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from runtime.backends.cuda import CUDAOps
from dev.cuda import check
from dev.cuda import emulator
from runtime.backends.cuda.graphs import Arena
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
import tests.runtime.test_engine as engine_tests
from tests.runtime.test_engine import model_path  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(not emulator.available(), reason="needs g++ and the CUDA headers")


@pytest.fixture(scope="module")
def ops():
    ops = CUDAOps(device=emulator.EmuDevice())
    check.poison(ops)
    return ops


ENGINE_SMS = 8


def engine_ops(**kw) -> CUDAOps:
    """The emulated CUDA backend of the engine-level tests, on a device of ENGINE_SMS SMs. A tiny
    model's linears have a few dozen row pairs: over an H100's 132 SMs each block of a one-token
    launch takes one team and runs the whole prologue for it (most of these tests' time went to
    emulating those blocks); over 8 a block takes several teams, as a real model's do over 132.
    The H100's launch shapes are checked kernel by kernel above and through the decode graphs
    in test_engine_greedy_matches_cpu_through_decode_graphs."""
    return CUDAOps(device=emulator.EmuDevice(sm_count=ENGINE_SMS), **kw)


def cpu_and_emulated(path, tokenizer_cache, ops=None):
    """The CPU reference engine and an emulated CUDA engine computing in f32, on one model."""
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache)
    return LLMEngine.from_gguf(config), LLMEngine.from_gguf(
        config, ops=ops or engine_ops(kv_dtype="float32", gemm_dtype="float32"))


def assert_ok(results):
    bad = [r for r in results if not r.ok]
    assert results and not bad, bad[:5]


def test_linear_formats(ops):
    results = check.check_linear(ops, np.random.default_rng(0), qtypes=[Q.Q4_K, Q.Q6_K, Q.Q8_0, Q.Q5_0, Q.Q5_K, Q.BF16])
    assert_ok(results)
    # 2-8 tokens at f16 ran the tensor-core matvec, with every team size
    tc = [r.name for r in results if r.name.startswith("matvec_tc") or " matvec_tc" in r.name]
    assert any("T=2 matvec_tc" in n for n in tc) and all(any(f"split={s}" in n for n in tc) for s in (1, 2, 4, 8)), tc[:5]
    # one token at f16: the int8 dot (checked against x rounded as it rounds it), every team size
    q8 = [r.name for r in results if "matvec_q8" in r.name]
    assert all(any(f"linear {q.name} K=" in n and "T=1 matvec_q8" in n for n in q8) for q in (Q.Q4_K, Q.Q6_K, Q.Q8_0)), q8[:5]
    assert all(any(f"T=1 split={s}" in n for n in q8) for s in (1, 2, 4)), q8[:5]
    assert any("gate/up" in n and "split=1 norm" in n for n in q8), q8
    assert any(dict(key[1]).get("Q8X") == 1 for key in ops.dev._modules if key[0] == "matvec")
    # one token with the weight staged in shared memory (matvec_t1_stage): int8 and f32 dots,
    # norm-fused, plain and gate/up, every format, and blocks of more teams than warps
    staged = [r.name for r in results if " staged" in r.name]
    assert all(any(f"linear {q.name} K=" in n and f"T=1 {k} norm" in n for n in staged)
               for q in (Q.Q4_K, Q.Q6_K, Q.Q8_0, Q.Q5_0, Q.Q5_K) for k in ("staged", "staged_q8")), staged[:5]
    assert any("T=1 staged_q8 silu" in n for n in staged) and any("over 8 SMs" in n for n in staged), staged
    # ...and the staged kernel is what ran (the names come from linear.py's plan, not the launch)
    assert any("matvec_t1_stage" in m._cache for key, m in ops.dev._modules.items() if key[0] == "matvec")


def test_attention_decode_split_k_and_prefill_after_prefix(ops):
    rng = np.random.default_rng(1)
    # attention_decode.cu (bf16 and f32 caches; f16 goes to attention_decode_tc.cu) over several
    # splits, at D = 96 too (24 lanes a V row)
    assert_ok(check.check_attention(ops, rng, "float32", 16, 8, 128, True, False, [(1, 5), (1, 300), (1, 1100)]))
    assert_ok(check.check_attention(ops, rng, "bfloat16", 16, 2, 96, True, False, [(1, 400), (1, 1100)]))
    assert_ok(check.check_attention(ops, rng, "bfloat16", 6, 2, 64, False, True, [(7, 7), (9, 40), (1, 19)]))


def test_prefill_attention_of_an_f16_cache_runs_on_the_tensor_core_kernel(ops):
    """Prompts of several 64-row tiles and 32-key steps, one after cached positions, through
    attention_prefill_tc.cu (the f16 cache's kernel), against the CPU reference."""
    rng = np.random.default_rng(2)
    before = set(ops.dev._modules)
    assert_ok(check.check_attention(ops, rng, "float16", 16, 8, 128, True, False, [(70, 70), (40, 100)]))
    assert_ok(check.check_attention(ops, rng, "float16", 14, 2, 64, False, True, [(33, 33), (1, 9)]))
    built = {key[0] for key in set(ops.dev._modules) - before}
    assert "attention_prefill_tc" in built and "attention_prefill" not in built, built


def test_decode_attention_of_an_f16_cache_runs_on_the_tensor_core_kernel():
    """G = 2 and 4 query heads a KV head, an empty last split (L = 400), one split (L = 21) and
    the new token's row in a split's fifth chunk (L = 1100) through attention_decode_tc.cu (the
    f16 cache's decode kernel), against the CPU reference."""
    ops = CUDAOps(device=emulator.EmuDevice())      # a device of its own: no kernel built before
    check.poison(ops)
    rng = np.random.default_rng(3)
    assert_ok(check.check_attention(ops, rng, "float16", 16, 8, 128, True, False, [(1, 5), (1, 400), (1, 1100)]))
    assert_ok(check.check_attention(ops, rng, "float16", 32, 8, 64, False, True, [(1, 70), (1, 21)]))
    built = {key[0] for key in ops.dev._modules}
    assert "attention_decode_tc" in built and "attention_decode" not in built, built


def test_sampler_matches_cpu(ops):
    assert_ok(check.check_sampling(ops, np.random.default_rng(2), V=1500))


def test_engine_greedy_matches_cpu_through_decode_graphs(tiny_gguf, tokenizer_cache):
    path = tiny_gguf("qwen3", Q.Q8_0)
    h100 = CUDAOps(device=emulator.EmuDevice(), kv_dtype="float32", gemm_dtype="float32")   # its launch shapes
    cpu, gpu = cpu_and_emulated(path, tokenizer_cache, h100)
    ids = cpu.tokenizer.encode("What is 2+2? The quick brown fox")
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    assert gpu.generate([ids], params)[0].token_ids == cpu.generate([ids], params)[0].token_ids
    assert gpu.ops.graphs.captured(decode=True)


def test_default_precision_decode_follows_cpu(tiny_gguf, tokenizer_cache):
    default_precision_decode_scenario(tiny_gguf("qwen3", Q.Q8_0), tokenizer_cache, engine_ops)


def default_precision_decode_scenario(path, tokenizer_cache, make_ops, steps=16):
    """Greedy decode through the graphs at the default precision (f16 KV cache, one-token
    linears on int8 activations) against the CPU in f32: the same tokens while the CPU's top
    two log-probs are 0.25 apart, and each sampled token's log-prob within 0.1 of the CPU's."""
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache)
    cpu, gpu = LLMEngine.from_gguf(config), LLMEngine.from_gguf(config, ops=make_ops())
    ids = cpu.tokenizer.encode("What is 2+2? The quick brown fox jumps over the lazy dog.")
    params = SamplingParams(max_tokens=steps, temperature=0, ignore_eos=True, logprobs=2)
    ref, got = cpu.generate([ids], params)[0].logprobs, gpu.generate([ids], params)[0].logprobs
    assert gpu.ops.graphs.captured(decode=True)
    for step, ((tok_ref, lp_ref, top), (tok, lp, _)) in enumerate(zip(ref, got)):
        if tok != tok_ref:
            assert top[0][1] - top[1][1] < 0.25, (step, ref, got)
            break
        assert abs(lp - lp_ref) < 0.1, (step, lp, lp_ref)
    else:
        assert len(got) == steps


def test_prefill_chunks_that_end_no_prompt_match_cpu(tiny_gguf, tokenizer_cache):
    """With a 16-token step budget a 40-token prompt takes three steps, the first two wanting no
    logits: the lm_head gets zero rows, which must launch nothing (a grid of 0 blocks is refused
    by CUDA, and a block with no rows read x at row -1)."""
    path = tiny_gguf("qwen2", Q.Q8_0)
    cpu = LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache))
    gpu = LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache,
                                           max_num_batched_tokens=16),
                              ops=engine_ops(kv_dtype="float32", gemm_dtype="float32"))
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
    cpu = LLMEngine.from_gguf(config)
    ops = engine_ops(kv_dtype="float32")
    gpu = LLMEngine.from_gguf(config, ops=ops)
    base = cpu.tokenizer.encode("Count the apples and the pears in the basket, then add three more")
    prompts = [base[i % 5:] + base[:i % 3] for i in range(12)]
    params = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    got = [r.token_ids for r in gpu.generate(prompts, params)]
    assert got == [r.token_ids for r in cpu.generate(prompts, params)]
    assert (16, 16) in ops.graphs.captured(decode=True) and any(key[0] == "matmul" for key in ops.dev._modules)


def test_overlapped_steps_match_the_synchronous_engine(tiny_gguf, tokenizer_cache):
    overlap_scenario(tiny_gguf("qwen3", Q.Q8_0), tokenizer_cache,
                     lambda: engine_ops(kv_dtype="float32", gemm_dtype="float32"))


def overlap_scenario(path, tokenizer_cache, make_ops):
    """The CUDA engine queues step k + 1 before it reads step k's tokens: the next inputs come
    from the sampler's rows on the device. Against the same backend stepping synchronously,
    with requests joining mid-decode, one stopping on a token while the next step for it is
    already queued, seeded sampling, penalties (not overlapped), an abort and prompt scoring
    mid-decode, every request gets the same tokens, and each step() returns the tokens of the
    step before."""
    def engine(overlap):
        config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache,
                              overlap=overlap)
        return LLMEngine.from_gguf(config, ops=make_ops())

    sync, fast = engine(False), engine(True)
    base = sync.tokenizer.encode("Count the apples and the pears in the basket, then add three more")
    greedy = SamplingParams(max_tokens=9, temperature=0, ignore_eos=True)
    first = sync.generate([base], greedy)[0].token_ids
    stop_on = SamplingParams(max_tokens=9, temperature=0, ignore_eos=True, stop_token_ids=[first[3]])
    requests = {  # request id: (step it joins at, prompt, params)
        "a": (0, base, greedy),
        "stop": (0, base, stop_on),
        "seeded": (0, base[3:], SamplingParams(max_tokens=7, temperature=0.9, top_p=0.9, seed=11)),
        "penalty": (2, base[5:], SamplingParams(max_tokens=5, temperature=0, repetition_penalty=1.3)),
        "late": (3, base[:9], SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)),
        "aborted": (1, base[2:], greedy),
    }
    results = {}
    for e in (sync, fast):
        seqs, steps, returned = {}, 0, []
        while steps < 4 or e.has_unfinished():
            for rid, (at, prompt, params) in requests.items():
                if at == steps:
                    seqs[rid] = e.add_request(prompt, params, request_id=f"{rid}-{e.overlap}")
            if steps == 4:
                e.abort(f"aborted-{e.overlap}")
            if steps == 8:                  # scoring between steps collects the step in flight first
                assert np.isfinite(e.prompt_logits(base[:1])).all()   # a decode-shaped pass: its graph samples
            outs = e.step()
            returned.append(sorted(o.request_id.split("-")[0] for o in outs))
            assert all(o.num_output == sum(t >= 0 for t in o.seq.output_ids) for o in outs)
            steps += 1
        results[e.overlap] = ({rid: s.output_ids for rid, s in seqs.items()}, returned)
    (want, want_steps), (got, got_steps) = results[False], results[True]
    aborted = got.pop("aborted")
    assert aborted == want.pop("aborted")[:len(aborted)]
    assert got == want
    assert want["stop"] == first[:4] and len(want["a"]) == 9
    assert want_steps[0] and not got_steps[0]      # the first step's tokens come with the second
    assert not any(t < 0 for ids in got.values() for t in ids)
    config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache,
                          max_num_seqs=fast.ops.feed_rows + 1)
    assert not LLMEngine.from_gguf(config, ops=make_ops()).overlap     # a step could sample past the feed


def test_a_failed_capture_leaves_no_bucket_behind(tiny_gguf, tokenizer_cache, monkeypatch):
    """Out of memory halfway through recording a graph's buffers fails that request; the next
    step of the same shape records and captures afresh (not on top of the partial arena)."""
    path = tiny_gguf("qwen3", Q.Q8_0)
    cpu, gpu = cpu_and_emulated(path, tokenizer_cache)
    ids = cpu.tokenizer.encode("The quick brown fox jumps")
    params = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    takes, take = [], Arena.take

    def failing(self, *args, **kw):
        takes.append(args)
        if len(takes) == 10:
            raise MemoryError("out of memory (test)")
        return take(self, *args, **kw)
    monkeypatch.setattr(Arena, "take", failing)
    failed = gpu.generate([ids], params)[0]       # the engine fails that request alone, not the process
    assert failed.finish_reason == "error" and not gpu.requests
    assert gpu.generate([ids], params)[0].token_ids == cpu.generate([ids], params)[0].token_ids
    assert (16, 1) in gpu.ops.graphs.captured(decode=False)


def test_prefill_graphs_replay_like_the_cpu(tiny_gguf, tokenizer_cache):
    """One-sequence prefills up to 128 tokens replay a graph per padded length. A 20-token
    prompt captures the 32 bucket; a 27-token one, its first 16 tokens cached, prefills 11 at
    positions 16-26 and captures the 16 bucket; a 40-token one (16 cached) replays the 32
    bucket with 24 tokens at positions 16-39, and a 3-token one replays the 16 bucket: other
    positions, tiles, padding and sampled row than captured. qwen2's q/k/v biases at f32 go
    through cuBLAS and epilogue.cu inside the graph. Every greedy token equals the CPU's."""
    path = tiny_gguf("qwen2", Q.Q8_0)
    cpu, gpu = cpu_and_emulated(path, tokenizer_cache)
    ops = gpu.ops
    base = cpu.tokenizer.encode("Count the apples and the pears in the basket, then add three more. " * 3)
    params = SamplingParams(max_tokens=3, temperature=0, ignore_eos=True)
    replays = {}
    for n in (20, 27, 40, 3):
        for key, bucket in ops.graphs.buckets.items():
            if bucket.graph is not None and not hasattr(bucket.graph, "counted"):
                bucket.graph.counted, replay = True, bucket.graph.replay
                bucket.graph.replay = lambda key=key, replay=replay: (replays.__setitem__(key, replays.get(key, 0) + 1), replay())
        got = gpu.generate([base[:n]], params)[0]
        want = cpu.generate([base[:n]], params)[0]
        assert got.token_ids == want.token_ids, n
        if n == 40:
            assert got.cached_tokens == 16
    assert replays.get((32, 1)) == 1 and replays.get((16, 1)) == 1, replays


@pytest.fixture
def on_emulator(monkeypatch):
    """test_engine.py's tests on emulated CUDA engines (f32 GEMMs, as on the GPU), so the
    overlapped steps and graphs meet preemption, prefix caching, stops and aborts in CI."""
    monkeypatch.setattr(engine_tests, "make_engine", lambda path, tok, **kw: LLMEngine.from_gguf(
        EngineConfig(model=path, backend="cpu", tokenizer_cache=tok, **{"kv_cache_mb": 16, **kw}),
        ops=engine_ops(gemm_dtype="float32")))


SLOW_ON_EMULATOR = ("test_concurrent_requests_equal_each_alone", "test_preemption_with_tiny_pool_keeps_outputs")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ON_EMULATOR else n
                                  for n in engine_tests.BEHAVIOUR])
def test_engine_behaviour_on_emulator(name, on_emulator, model_path, tokenizer_cache):  # noqa: F811
    assert engine_tests.make_engine(model_path, tokenizer_cache).overlap
    engine_tests.run_behaviour(name, model_path, tokenizer_cache)


def test_a_failing_sequence_fails_alone_while_steps_overlap(tiny_gguf, tokenizer_cache):
    """The overlapped engine isolates too: the step that cannot be built (one request's top_k
    overflows the int32 sampling batch) resolves the step in flight first, then runs each
    sequence alone; the others keep the tokens the synchronous engine gives them."""
    path = tiny_gguf("qwen3", Q.Q8_0)

    def engine(overlap):
        config = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, tokenizer_cache=tokenizer_cache,
                              overlap=overlap)
        return LLMEngine.from_gguf(config, ops=engine_ops(kv_dtype="float32", gemm_dtype="float32"))

    sync, fast = engine(False), engine(True)
    assert fast.overlap
    greedy = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    prompts = [sync.tokenizer.encode(f"Count {i} pears") for i in range(2)]
    alone = [sync.generate([p], greedy)[0].token_ids for p in prompts]
    seqs = [fast.add_request(prompts[0], greedy)]
    fast.step()                                       # a step in flight when the poison joins
    poison = SamplingParams(max_tokens=4, temperature=0.7)
    poison.top_k = 2**31
    bad = fast.add_request(prompts[1], poison)
    seqs.append(fast.add_request(prompts[1], greedy))
    errors = []
    while fast.has_unfinished():
        errors += [out.error for out in fast.step() if out.error]
    assert bad.finish_reason == "error" and len(errors) == 1 and "OverflowError" in errors[0]
    assert [s.output_ids for s in seqs] == alone and fast.blocks.num_used == 0
