"""The engine against transformers loading the same GGUF: logits close, greedy tokens equal."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from transformers import AutoModelForCausalLM

from runtime.backends.cpu import Int8Weight
from runtime.backends.cpu_kernels import BlockWeight
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
from tests.conftest import ARCHS, KQUANT_SHAPE

PROMPT = [{"role": "user", "content": "What is 2+2? Answer in JSON."}]


def compare(path: str, tokenizer_cache: str, steps: int = 32, atol: float = 2e-3):
    engine = LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=32, tokenizer_cache=tokenizer_cache))
    ids = engine.tokenizer.encode(engine.tokenizer.render_chat(PROMPT))
    hf = AutoModelForCausalLM.from_pretrained(Path(path).parent, gguf_file=Path(path).name, dtype=torch.float32)
    hf.generation_config.eos_token_id = None     # like ignore_eos: EOS is an ordinary token here
    with torch.no_grad():
        ref_logits = hf(torch.tensor([ids])).logits[0].numpy()
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=steps, do_sample=False, pad_token_id=0)
    ours = engine.prompt_logits(ids)
    scale = np.abs(ref_logits).max()
    assert np.abs(ours - ref_logits).max() <= atol * max(scale, 1.0)
    out = engine.generate([ids], SamplingParams(max_tokens=steps, temperature=0, ignore_eos=True))[0]
    assert out.token_ids == ref[0, len(ids):].tolist()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0])
def test_each_architecture_matches_transformers(tiny_gguf, tokenizer_cache, arch, qtype):
    compare(tiny_gguf(arch, qtype), tokenizer_cache)


@pytest.mark.parametrize("qtype", [Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K])
def test_each_tensor_type_matches_transformers(tiny_gguf, tokenizer_cache, qtype):
    compare(tiny_gguf("qwen2", qtype, KQUANT_SHAPE, embed_qtype=qtype), tokenizer_cache)


def test_tied_embeddings_and_kquant_qwen3(tiny_gguf, tokenizer_cache):
    compare(tiny_gguf("qwen3", Q.Q4_K, KQUANT_SHAPE, tied=True, embed_qtype=Q.Q6_K), tokenizer_cache)


@pytest.mark.parametrize("dtype", ["int8", "bfloat16"])
def test_fast_cpu_modes_stay_close_to_the_reference(tiny_gguf, tokenizer_cache, dtype):
    path = tiny_gguf("qwen2", Q.Q8_0)
    make = lambda d: LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", cpu_dtype=d, kv_cache_mb=16,  # noqa: E731
                                                      tokenizer_cache=tokenizer_cache))
    ref, fast = make("float32"), make(dtype)
    ids = ref.tokenizer.encode(ref.tokenizer.render_chat(PROMPT))
    a, b = ref.prompt_logits(ids), fast.prompt_logits(ids)
    head = fast.model.lm_head
    assert isinstance(head, (Int8Weight, BlockWeight)) if dtype == "int8" else head.dtype == torch.bfloat16
    assert not np.array_equal(a, b)
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.999
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.9
