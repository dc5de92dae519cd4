"""Serving past a model's trained context: YaRN for the Qwen families, checked against
transformers' own YaRN on a tiny model, refused for a family that documents none, and
reported by /v1/models (what Hermes agent reads to size its context)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from transformers import AutoConfig, AutoModelForCausalLM

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.gguf import ModelLoadError
from runtime.server.app import create_app
from runtime.server.config import ServerConfig
from dev.synthetic import Shape

TRAINED = 32


def engine(path: str, tokenizer_cache: str, max_model_len: int) -> LLMEngine:
    return LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", kv_cache_mb=16, max_model_len=max_model_len,
                                            tokenizer_cache=tokenizer_cache))


def hf_logits(path: str, ids: list[int], rope: dict | None) -> np.ndarray:
    p = Path(path)
    config = AutoConfig.from_pretrained(p.parent, gguf_file=p.name)
    if rope:
        config.rope_parameters = {**config.rope_parameters, **rope}
        config.max_position_embeddings = int(TRAINED * rope["factor"])
    hf = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, config=config, dtype=torch.float32)
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0].numpy()


def test_qwen_past_its_trained_context_uses_yarn_like_transformers(tiny_gguf, tokenizer_cache):
    path = tiny_gguf("qwen2", shape=Shape(context=TRAINED))
    e = engine(path, tokenizer_cache, max_model_len=4 * TRAINED)
    assert (e.model.rope_scaling.kind, e.model.rope_scaling.factor, e.max_model_len) == ("yarn", 4.0, 128)
    ids = e.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 8)[:100]
    assert len(ids) > 2 * TRAINED
    ours = e.prompt_logits(ids)
    yarn = hf_logits(path, ids, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED})
    plain = hf_logits(path, ids, None)
    scale = np.abs(yarn).max()
    assert np.abs(ours - yarn).max() <= 2e-3 * scale
    assert np.abs(ours - plain).max() > 0.1 * scale          # the scaling really changed the model


def test_within_the_trained_context_nothing_is_scaled(tiny_gguf, tokenizer_cache):
    assert engine(tiny_gguf("qwen2", shape=Shape(context=TRAINED)), tokenizer_cache, TRAINED).model.rope_scaling is None


def test_a_family_without_documented_scaling_refuses(tiny_gguf, tokenizer_cache):
    with pytest.raises(ModelLoadError, match="past the trained context of 32"):
        engine(tiny_gguf("llama", shape=Shape(context=TRAINED)), tokenizer_cache, 2 * TRAINED)


def test_models_reports_the_served_context_and_its_scaling(tiny_gguf, tmp_path):
    path = tiny_gguf("qwen2", shape=Shape(context=TRAINED))
    cfg = EngineConfig(model=path, backend="cpu", kv_cache_mb=16, max_model_len=2 * TRAINED,
                       tokenizer_cache=str(tmp_path / "tok"))
    with TestClient(base_url="http://127.0.0.1", app=create_app(ServerConfig(engine=cfg, model_id="tiny", home=tmp_path))) as client:
        deadline = time.monotonic() + 120
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        card = client.get("/v1/models").json()["data"][0]
    assert card["context_length"] == card["max_model_len"] == 64
    assert card["rope_scaling"] == {"type": "yarn", "factor": 2.0, "original_context": TRAINED}
