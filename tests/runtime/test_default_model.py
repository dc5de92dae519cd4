"""The real default model (slow; runs when it is installed): greedy parity with transformers
on the same GGUF, and a sensible chat answer."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from runtime import catalog
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

pytestmark = pytest.mark.slow
HOME = Path(os.environ.get("SAMEVM_HOME", ".samevm"))
PATH = catalog.installed_path(catalog.DEFAULT_MODEL, HOME)
PROMPTS = ["What is 2+2?", "Write a Python function that reverses a string.", "Name three primary colors."]


@pytest.fixture(scope="module")
def engine():
    if PATH is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    return LLMEngine.from_gguf(EngineConfig(model=str(PATH), backend="cpu", kv_cache_mb=256,
                                            tokenizer_cache=str(HOME / "cache" / "tokenizers")))


def test_greedy_tokens_equal_transformers(engine):
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(PATH.parent, gguf_file=PATH.name, dtype=torch.float32)
    for text in PROMPTS:
        ids = engine.tokenizer.encode(engine.tokenizer.render_chat([{"role": "user", "content": text}]))
        ours = engine.generate([ids], SamplingParams(max_tokens=32, temperature=0, ignore_eos=True))[0]
        with torch.no_grad():
            ref = hf.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
        n = min(len(ref), 32)
        assert ours.token_ids[:n] == ref[:n], text


def test_two_plus_two(engine):
    prompt = engine.tokenizer.render_chat([{"role": "user", "content": "What is 2+2?"}])
    out = engine.generate([prompt], SamplingParams(max_tokens=32, temperature=0))[0]
    assert "4" in out.text
    assert out.finish_reason == "stop"
