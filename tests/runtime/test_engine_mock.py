"""The scheduler, block manager and prefix cache through LLMEngine with a mock model and a byte
tokenizer (as nanochat's tests/test_engine.py): no GGUF, milliseconds a test.

The mock's "K/V" at position p is a chained hash of tokens 0..p, computed from the value the
cache holds at p - 1 (as attention reads earlier positions from the cache), and its next
token is a function of every cached value of the context. So a block that holds the wrong
positions (a prefix-cache hit on a different prefix, a preempted sequence's block reused,
a stale block table) changes the tokens, which are checked against the same function
computed directly on the token list."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from runtime.backends.cpu import CPUOps
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

EOS, VOCAB, MOD = 256, 257, 1_000_003       # values stay below 2**24: exact in the f32 cache


def chain(previous: int, token: int) -> int:
    return (previous * 31 + token + 1) % MOD


def next_token(values: list[int]) -> int:
    return (7 * values[-1] + sum(values)) % 256


def reference(ids: list[int], n: int) -> list[int]:
    """The n greedy tokens the mock gives after ids, without a cache."""
    ids, out = list(ids), []
    for _ in range(n):
        values, v = [], 0
        for t in ids:
            v = chain(v, t)
            values.append(v)
        out.append(next_token(values))
        ids.append(out[-1])
    return out


class ChainModel:
    def __init__(self, context: int = 1024):
        self.spec = SimpleNamespace(arch="mock", name="chain", n_layers=1, n_heads=1, n_kv_heads=1, head_dim=1,
                                    vocab=VOCAB, context_length=context, eos_ids=(EOS,))

    def run(self, batch, kv):
        cache = kv[0, 0, :, 0, 0].numpy()           # CPUOps.kv_cache: [1, 2, slots, 1, 1] f32
        bs = batch.block_size

        def slot(b: int, p: int) -> int:
            return int(batch.block_tables[b, p // bs]) * bs + p % bs

        for b in range(batch.num_seqs):
            for row in range(batch.query_starts[b], batch.query_starts[b + 1]):
                p = int(batch.positions[row])
                assert batch.slot_mapping[row] == slot(b, p), "the runner's slot disagrees with the block table"
                previous = int(cache[slot(b, p - 1)]) if p else 0
                cache[batch.slot_mapping[row]] = chain(previous, int(batch.input_ids[row]))
        logits = torch.full((len(batch.logits_indices), VOCAB), -10.0)
        for i, row in enumerate(batch.logits_indices):
            b = int(np.searchsorted(batch.query_starts, row, side="right")) - 1
            values = [int(cache[slot(b, p)]) for p in range(batch.context_lens[b])]
            logits[i, next_token(values)] = 10.0
        return logits


class ByteTokenizer:
    eos_token_id = EOS

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def make_engine(**kw) -> LLMEngine:
    config = EngineConfig(model="mock.gguf", backend="cpu", **{"block_size": 8, "num_kv_blocks": 64, **kw})
    return LLMEngine(config, ChainModel(), ByteTokenizer(), CPUOps())


def run(engine: LLMEngine, prompts: list[list[int]], n: int, max_steps: int = 5000) -> list:
    """Every prompt at once; the completions, after at most max_steps steps."""
    params = SamplingParams(max_tokens=n, temperature=0, ignore_eos=True)
    seqs = [engine.add_request(p, params) for p in prompts]
    for _ in range(max_steps):
        if all(s.is_finished for s in seqs):
            return [engine.completion(s) for s in seqs]
        engine.step()
    raise AssertionError(f"not finished after {max_steps} steps: {engine.stats()}")


def prompts(n: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, int(rng.integers(3, 60))).tolist() for _ in range(n)]


def test_the_mock_depends_on_every_earlier_token():
    p = prompts(1)[0]
    assert reference(p, 6) != reference([p[0] ^ 1] + p[1:], 6)


def test_continuous_batching_with_chunked_prefill_equals_each_alone():
    engine = make_engine(max_num_batched_tokens=24, max_num_seqs=5)
    ps = prompts(12)
    got = run(engine, ps, 20)
    assert [c.token_ids for c in got] == [reference(p, 20) for p in ps]
    assert engine.blocks.num_used == 0 and not engine.has_unfinished()


def test_prefix_cache_reuses_blocks_of_the_same_prefix_only():
    engine = make_engine()
    system = np.random.default_rng(1).integers(0, 256, 40).tolist() + [65] * 8     # 6 full blocks of 8
    first = run(engine, [system + [1, 2, 3]], 10)[0]
    again = run(engine, [system + [9, 8, 7, 6]], 10)[0]
    # the same blocks after another first block: equal block contents, another prefix
    other = run(engine, [[66] * 8 + system[8:] + [9, 8, 7, 6]], 10)[0]
    assert first.cached_tokens == 0 and again.cached_tokens == 48 and other.cached_tokens == 0
    assert again.token_ids == reference(system + [9, 8, 7, 6], 10)
    assert other.token_ids == reference([66] * 8 + system[8:] + [9, 8, 7, 6], 10)
    stats = engine.stats()
    assert stats["prefix_cache_hit_tokens"] == 48 and engine.blocks.num_used == 0


def test_a_cached_block_is_found_only_after_the_same_blocks():
    """A = X Y Z, then B = X Z: B's second block holds Z's tokens, cached at A's third
    position, after other blocks: only X may come from the cache."""
    engine = make_engine()
    x, y, z = (np.random.default_rng(i).integers(0, 256, 8).tolist() for i in (5, 6, 7))
    run(engine, [x + y + z + [1]], 3)
    b = run(engine, [x + z + [2, 3]], 6)[0]
    assert b.cached_tokens == 8 and b.token_ids == reference(x + z + [2, 3], 6)


def test_evicted_blocks_are_not_served_from_the_cache():
    """A small pool: a prompt's freed blocks are taken by later requests (least recently
    freed first); the prompt again must not find its old hashes pointing at their content."""
    engine = make_engine(num_kv_blocks=12)
    a = np.random.default_rng(8).integers(0, 256, 40).tolist()
    run(engine, [a], 4)
    for p in prompts(6, seed=9):
        run(engine, [p + [0] * 40], 4)
    again = run(engine, [a], 8)[0]
    assert again.token_ids == reference(a, 8)


def test_a_whole_cached_prompt_still_computes_its_last_token():
    engine = make_engine()
    p = np.random.default_rng(2).integers(0, 256, 32).tolist()     # exactly 4 blocks
    run(engine, [p], 4)
    again = run(engine, [p], 4)[0]
    assert again.token_ids == reference(p, 4) and again.cached_tokens < len(p)


def test_preemption_by_recompute_keeps_every_output():
    engine = make_engine(num_kv_blocks=16, max_num_batched_tokens=64)
    ps = [p[:20] for p in prompts(30, seed=3) if len(p) >= 20][:6]
    got = run(engine, ps, 30)                                    # 6 x 50 tokens want 42 blocks of 8
    assert engine.scheduler.num_preemptions > 0
    assert [c.token_ids for c in got] == [reference(p, 30) for p in ps]
    assert engine.blocks.num_used == 0


def test_abort_mid_decode_frees_its_blocks_and_spares_the_others():
    engine = make_engine()
    ps = prompts(3, seed=4)
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    seqs = [engine.add_request(p, params, request_id=f"r{i}") for i, p in enumerate(ps)]
    for _ in range(4):
        engine.step()
    assert engine.abort("r1") and not engine.abort("r1")
    while engine.has_unfinished():
        engine.step()
    assert seqs[1].finish_reason == "abort" and len(seqs[1].output_ids) < 12
    assert [seqs[i].output_ids for i in (0, 2)] == [reference(ps[i], 12) for i in (0, 2)]
    assert engine.blocks.num_used == 0


def test_max_num_seqs_bounds_every_step():
    engine = make_engine(max_num_seqs=3)
    sizes, step = [], engine.runner.run

    def counting(scheduled):
        sizes.append(len(scheduled))
        return step(scheduled)
    engine.runner.run = counting
    ps = prompts(8, seed=5)
    assert [c.token_ids for c in run(engine, ps, 5)] == [reference(p, 5) for p in ps]
    assert max(sizes) == 3


@pytest.mark.parametrize("too_long", [False, True])
def test_a_prompt_at_the_context_limit_is_refused(too_long):
    from runtime.engine.llm_engine import RequestError
    engine = make_engine(max_model_len=32)
    ids = [1] * (32 if too_long else 31)
    if too_long:
        with pytest.raises(RequestError):
            engine.add_request(ids, SamplingParams(max_tokens=4))
    else:
        out = run(engine, [ids], 4)[0]
        assert out.finish_reason == "length" and len(out.token_ids) == 1
