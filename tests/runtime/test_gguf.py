"""Reading GGUF files: the spec, and clear errors for files we cannot serve."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.gguf import ModelLoadError, load_gguf
from dev.synthetic import Shape, write_random_gguf


def test_spec_from_metadata(tiny_gguf):
    m = load_gguf(tiny_gguf("qwen2"))
    s = m.spec
    assert (s.arch, s.n_layers, s.hidden, s.n_heads, s.n_kv_heads, s.head_dim) == ("qwen2", 2, 64, 4, 2, 16)
    assert s.eos_ids and s.chat_template and "<|im_start|>" in s.chat_template
    assert not s.tied_embeddings and not s.rope_interleaved
    assert m.tensor("blk.0.attn_q.weight").shape == (64, 64)
    assert load_gguf(tiny_gguf("llama")).spec.rope_interleaved


def test_tied_embeddings_detected(tmp_path):
    s = load_gguf(write_random_gguf(tmp_path / "t.gguf", "llama", Shape(), tied=True)).spec
    assert s.tied_embeddings


def test_unknown_architecture_is_named(tmp_path):
    path = tmp_path / "mamba.gguf"
    w = GGUFWriter(str(path), "mamba")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(ModelLoadError, match="unsupported architecture 'mamba'"):
        load_gguf(path)


def rewrite(src: str, dst, drop: str = "", retype: str = ""):
    """Copy a GGUF, dropping one tensor or storing one as I32 (a type we do not serve)."""
    from gguf import GGUFReader
    reader = GGUFReader(src)
    w = GGUFWriter(str(dst), "qwen2")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub = field.types[-1] if len(field.types) > 1 else None
        w.add_key_value(key, field.contents(), field.types[0], sub)
    for t in reader.tensors:
        if t.name == retype:
            w.add_tensor(t.name, np.zeros(t.data.shape, np.int32), raw_dtype=Q.I32)
        elif t.name != drop:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return dst


def test_unsupported_tensor_type_is_named(tiny_gguf, tmp_path):
    path = rewrite(tiny_gguf("qwen2"), tmp_path / "i32.gguf", retype="blk.0.attn_q.weight")
    with pytest.raises(ModelLoadError, match="blk.0.attn_q.weight has unsupported type I32"):
        load_gguf(path)


def test_truncated_file(tiny_gguf, tmp_path):
    src = tiny_gguf("qwen2")
    data = open(src, "rb").read()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        load_gguf(cut)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 100)
    with pytest.raises(ModelLoadError):
        load_gguf(junk)
    with pytest.raises(ModelLoadError, match="no such model file"):
        load_gguf(tmp_path / "absent.gguf")


def test_missing_tensor_is_named(tiny_gguf, tmp_path):
    path = rewrite(tiny_gguf("qwen2"), tmp_path / "partial.gguf", drop="blk.1.ffn_down.weight")
    with pytest.raises(ModelLoadError, match="missing tensor 'blk.1.ffn_down.weight'"):
        LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", kv_cache_mb=8))
