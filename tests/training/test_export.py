"""Export to GGUF: the file the runtime loads computes what the HF model computes.

For qwen2 (Q/K/V biases), qwen3 (Q/K norms) and llama (Q/K rows permuted for interleaved
RoPE), an HF model with changed weights is exported as F16 and Q8_0, loaded by samevm's
own engine, and its logits at every position compared with the HF model's."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.gguf import load_gguf, read_gguf
from runtime.tokenizer import tokenizer_fingerprint
from training.export import ExportError, export_gguf
from training.hf_model import load_model, load_tokenizer

TEXT = "The quick brown fox jumps over the lazy dog. What is 2+2? The answer is 4."
TOLERANCE = {"f16": 5e-3, "q8_0": 5e-2}           # max |error| / max |logit|


def engine_logits(path, ids) -> np.ndarray:
    engine = LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", kv_cache_mb=16))
    return engine.prompt_logits(ids)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "llama"])
def test_exported_gguf_matches_the_hf_model(arch, tiny_gguf, tmp_path):
    base = tiny_gguf(arch)
    model = load_model(base)
    torch.manual_seed(0)
    with torch.no_grad():                       # stand-in for training: every weight moves
        for p in model.parameters():
            p.add_(0.05 * p.abs().mean() * torch.randn_like(p))
    ids = load_tokenizer(base)(TEXT)["input_ids"]
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].numpy()
    moved = rel_err(engine_logits(base, ids), want)   # how far the base is: the errors must be far below
    for export_type, qtype in (("f16", Q.F16), ("q8_0", Q.Q8_0)):
        out = export_gguf(model, base, tmp_path / f"{export_type}.gguf", export_type)
        err = rel_err(engine_logits(out, ids), want)
        assert err < TOLERANCE[export_type] and err < moved / 5, (export_type, err, moved)
        exported = load_gguf(out)
        assert exported.tensor("blk.0.ffn_up.weight").qtype == qtype
        assert exported.tensor("blk.0.attn_norm.weight").qtype == Q.F32
        assert set(exported.tensors) == set(load_gguf(base).tensors)
        # same tokenizer metadata: the runtime's reload check compares exactly this
        assert tokenizer_fingerprint(read_gguf(out).metadata) == tokenizer_fingerprint(read_gguf(base).metadata)
        assert exported.spec.chat_template == load_gguf(base).spec.chat_template


def test_a_model_that_does_not_fit_the_base_is_refused_and_leaves_no_file(tiny_gguf, tmp_path):
    from dev.synthetic import Shape
    other = load_model(tiny_gguf("qwen2", shape=Shape(layers=3)))
    target = tmp_path / "out.gguf"
    with pytest.raises(ExportError, match="model.layers.2"):    # a layer the base does not have
        export_gguf(other, tiny_gguf("qwen2"), target)
    assert list(tmp_path.iterdir()) == []
