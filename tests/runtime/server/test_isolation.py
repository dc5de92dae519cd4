"""One request that breaks the engine step fails alone: the streams beside it finish with
the tokens each gives alone (greedy), through the engine thread the server uses."""
from __future__ import annotations

import asyncio
import dataclasses

import pytest

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from runtime.server.bridge import EngineLoop

GREEDY = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
N = 8


class BrokenGrammar:
    """A constraint whose mask works for a while, then raises (a bug in one request's grammar)."""

    def __init__(self, fail_at: int, where: str):
        self.steps, self.fail_at, self.where = 0, fail_at, where

    def allowed(self):
        if self.where == "mask" and self.steps >= self.fail_at:
            raise RuntimeError("grammar state corrupted")
        return None

    def advance(self, token_id: int) -> None:
        self.steps += 1
        if self.where == "advance" and self.steps >= self.fail_at:
            raise RuntimeError("grammar refused the token")

    def is_terminated(self) -> bool:
        return False


def poisons() -> dict[str, SamplingParams]:
    top_k = dataclasses.replace(GREEDY, temperature=0.7)
    top_k.top_k = 2**31                  # past validation: the int32 sampling batch overflows
    return {"top_k overflow": top_k,
            "mask raises": dataclasses.replace(GREEDY, constraint=BrokenGrammar(3, "mask")),
            "advance raises": dataclasses.replace(GREEDY, constraint=BrokenGrammar(2, "advance"))}


@pytest.fixture(scope="module")
def engine(tiny_gguf, tokenizer_cache):
    return LLMEngine.from_gguf(EngineConfig(model=tiny_gguf("qwen2"), backend="cpu", tokenizer_cache=tokenizer_cache,
                                  kv_cache_mb=16))


def prompt(engine, i: int) -> list[int]:
    return engine.tokenizer.encode(f"Request {i}: the quick brown fox " * (1 + i % 3))


async def consume(gen) -> tuple[list[int], str | None, int]:
    ids = []
    while True:
        delta = await gen.next()
        if delta.error is not None:
            return ids, delta.error, delta.status
        ids += delta.token_ids
        if delta.finished:
            return ids, None, 200


@pytest.fixture(scope="module")
def alone(engine) -> list[list[int]]:
    return [engine.generate([prompt(engine, i)], GREEDY)[0].token_ids for i in range(N)]


@pytest.mark.parametrize("poison", list(poisons()))
def test_a_poisoned_request_among_8_streams_fails_alone(engine, alone, poison):

    async def together():
        loop = EngineLoop(engine)
        try:
            gens = [loop.submit(prompt(engine, i), GREEDY) for i in range(N // 2)]
            gens.append(loop.submit(prompt(engine, 99), poisons()[poison]))
            gens += [loop.submit(prompt(engine, i), GREEDY) for i in range(N // 2, N)]
            return await asyncio.wait_for(asyncio.gather(*(consume(g) for g in gens)), 120)
        finally:
            loop.close()

    results = asyncio.run(together())
    bad = results.pop(N // 2)
    assert bad[1] is not None and bad[2] == 500, bad
    for i, (ids, error, _) in enumerate(results):
        assert error is None, f"stream {i} failed with the poisoned one: {error}"
        assert ids == alone[i], f"stream {i} changed"
    assert engine.blocks.num_used == 0 and not engine.has_unfinished()
