"""Continuous batching, prefix cache, preemption and abort through LLMEngine on a tiny model:
batched outputs must equal each request run alone (greedy)."""
from __future__ import annotations

import inspect

import pytest

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine, RequestError
from runtime.sampling import SamplingParams

GREEDY = SamplingParams(max_tokens=24, temperature=0, ignore_eos=True)


@pytest.fixture(scope="module")
def model_path(tiny_gguf):
    return tiny_gguf("qwen2")


# The tests below that other backends rerun with make_engine patched to build their engines
# (test_cuda_engine.py on the GPU, test_cuda_emulated.py on the kernel emulator).
BEHAVIOUR = ("test_concurrent_requests_equal_each_alone", "test_shared_prefix_reuses_blocks_and_keeps_output",
             "test_preemption_with_tiny_pool_keeps_outputs", "test_chunked_prefill_equals_single_pass",
             "test_abort_frees_every_block", "test_seed_reproducible_and_distinct",
             "test_stop_strings_max_tokens_and_logprobs", "test_stop_token_ids",
             "test_bad_requests_are_refused_and_engine_keeps_working")


def run_behaviour(name: str, model_path, tokenizer_cache) -> None:
    test = globals()[name]
    extra = {"cpu_dtype": "float32"} if "cpu_dtype" in inspect.signature(test).parameters else {}
    test(model_path, tokenizer_cache, **extra)


def make_engine(path, tokenizer_cache, **kw):
    kw.setdefault("kv_cache_mb", 16)
    return LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", tokenizer_cache=tokenizer_cache, **kw))


def prompts(engine, n):
    words = "the quick brown fox jumps over the lazy dog and then it rests".split()
    return [engine.tokenizer.encode(" ".join(words[: 2 + (3 * i) % len(words)]) * (1 + i % 3)) for i in range(n)]


@pytest.mark.parametrize("cpu_dtype", ["float32", "int8"])
def test_concurrent_requests_equal_each_alone(model_path, tokenizer_cache, cpu_dtype):
    """int8 too: the served default must not change a request's tokens with its company."""
    engine = make_engine(model_path, tokenizer_cache, max_num_batched_tokens=64, cpu_dtype=cpu_dtype)
    ps = prompts(engine, 8) + prompts(engine, 32)[12:]     # 28 at once: past any small-batch kernel
    alone = [engine.generate([p], GREEDY)[0].token_ids for p in ps]
    fresh = make_engine(model_path, tokenizer_cache, max_num_batched_tokens=256, cpu_dtype=cpu_dtype)
    together = fresh.generate(ps, GREEDY)
    assert [c.token_ids for c in together] == alone
    assert fresh.blocks.num_used == 0


def test_shared_prefix_reuses_blocks_and_keeps_output(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache, block_size=16)
    system = engine.tokenizer.encode("You are a careful assistant that stores facts. " * 6)
    first = engine.generate([system + engine.tokenizer.encode("Hello there")], GREEDY)[0]
    assert first.cached_tokens == 0
    prompt = system + engine.tokenizer.encode("What is 2+2?")
    second = engine.generate([prompt], GREEDY)[0]
    assert second.cached_tokens >= (len(system) // 16 - 1) * 16 > 0
    cold = make_engine(model_path, tokenizer_cache).generate([prompt], GREEDY)[0]
    assert cold.cached_tokens == 0
    assert second.token_ids == cold.token_ids


def test_preemption_with_tiny_pool_keeps_outputs(model_path, tokenizer_cache):
    ref_engine = make_engine(model_path, tokenizer_cache)
    ps = prompts(ref_engine, 6)
    params = SamplingParams(max_tokens=40, temperature=0, ignore_eos=True)
    expected = [c.token_ids for c in ref_engine.generate(ps, params)]
    small = make_engine(model_path, tokenizer_cache, block_size=8, num_kv_blocks=24, kv_cache_mb=0)
    got = [c.token_ids for c in small.generate(ps, params)]
    assert small.scheduler.num_preemptions > 0
    assert got == expected
    assert small.blocks.num_used == 0


def test_chunked_prefill_equals_single_pass(model_path, tokenizer_cache):
    long = prompts(make_engine(model_path, tokenizer_cache), 1)[0] * 12
    whole = make_engine(model_path, tokenizer_cache, max_num_batched_tokens=2048).generate([long], GREEDY)[0]
    chunked = make_engine(model_path, tokenizer_cache, max_num_batched_tokens=16).generate([long], GREEDY)[0]
    assert chunked.token_ids == whole.token_ids


def test_abort_frees_every_block(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache)
    seqs = [engine.add_request(p, SamplingParams(max_tokens=100, temperature=0, ignore_eos=True))
            for p in prompts(engine, 4)]
    for _ in range(3):
        engine.step()
    assert engine.blocks.num_used > 0
    for s in seqs:
        assert engine.abort(s.request_id)
    assert engine.blocks.num_used == 0 and not engine.has_unfinished()
    assert not engine.abort("nope")


def test_seed_reproducible_and_distinct(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache)
    p = prompts(engine, 1)[0]
    sample = lambda seed: engine.generate([p], SamplingParams(max_tokens=16, temperature=1.0, seed=seed,  # noqa: E731
                                                             ignore_eos=True))[0].token_ids
    assert sample(7) == sample(7)
    assert sample(7) != sample(8)
    # batch composition does not change a seeded request's tokens
    mixed = engine.generate([p, prompts(engine, 3)[2]], [
        SamplingParams(max_tokens=16, temperature=1.0, seed=7, ignore_eos=True), GREEDY])
    assert mixed[0].token_ids == sample(7)


def test_stop_strings_max_tokens_and_logprobs(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache)
    p = prompts(engine, 1)[0]
    full = engine.generate([p], SamplingParams(max_tokens=30, temperature=0, ignore_eos=True, logprobs=3))[0]
    assert full.finish_reason == "length" and len(full.token_ids) == 30
    assert len(full.logprobs) == 30
    token, lp, top = full.logprobs[0]
    assert token == full.token_ids[0] and len(top) == 3 and top[0][1] >= lp - 1e-5
    stop = full.text[5:8]
    cut = engine.generate([p], SamplingParams(max_tokens=30, temperature=0, ignore_eos=True, stop=[stop]))[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[:full.text.find(stop)]
    assert stop not in cut.text


def test_stop_token_ids(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache)
    p = prompts(engine, 1)[0]
    full = engine.generate([p], GREEDY)[0]
    stop_at = full.token_ids[3]
    out = engine.generate([p], SamplingParams(max_tokens=24, temperature=0, stop_token_ids=[stop_at]))[0]
    assert out.finish_reason == "stop"
    assert out.token_ids == full.token_ids[:full.token_ids.index(stop_at) + 1]


def test_bad_requests_are_refused_and_engine_keeps_working(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache, max_model_len=64)
    with pytest.raises(RequestError, match="context"):
        engine.add_request(list(range(100)), GREEDY)
    with pytest.raises(RequestError, match="empty"):
        engine.add_request([], GREEDY)
    with pytest.raises(RequestError, match="token ids"):
        engine.add_request([10**7], GREEDY)
    with pytest.raises(ValueError):
        SamplingParams(top_p=0)
    out = engine.generate([prompts(engine, 1)[0]], SamplingParams(max_tokens=100, temperature=0, ignore_eos=True))[0]
    assert out.finish_reason == "length"      # capped by the context, not a crash
    assert len(out.token_ids) + out.prompt_tokens == 64


def test_load_reports_its_phases(model_path, tokenizer_cache):
    engine = make_engine(model_path, tokenizer_cache)
    assert list(engine.load_phases) == ["gguf", "backend", "tokenizer", "weights", "kv_cache"]
    assert all(s >= 0 for s in engine.load_phases.values())
    assert sum(engine.load_phases.values()) <= engine.load_seconds + 1e-6
