"""The hand-written GGUF parser against gguf.GGUFReader: same metadata, same tensor views."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from runtime.gguf import ModelLoadError, StringArray, load_gguf, read_gguf
from dev.synthetic import Shape
from runtime.tokenizer import tokenizer_fingerprint
from tests.conftest import KQUANT_SHAPE

MODELS = [
    ("qwen2", Q.F32, None, {}),
    ("qwen3", Q.F16, None, {}),
    ("llama", Q.BF16, None, {}),
    ("qwen2", Q.Q8_0, None, {"tied": True}),
    ("llama", Q.Q4_0, None, {"embed_qtype": Q.Q5_1}),
    ("qwen3", Q.Q4_K, KQUANT_SHAPE, {"embed_qtype": Q.Q6_K}),
    ("qwen2", Q.Q5_K, KQUANT_SHAPE, {}),
]


def assert_same_metadata(path) -> None:
    """Every key GGUFReader sees, with the same value (strings arrays: count and elements)."""
    ref = GGUFReader(path)
    meta = read_gguf(path).metadata
    keys = [k for k in ref.fields if not k.startswith("GGUF.")]   # GGUF.*: the reader's header pseudo-keys
    assert list(meta.keys()) == keys
    for key in keys:
        field, ours = ref.fields[key], meta.get(key)
        if field.types[0] == GGUFValueType.ARRAY and field.types[-1] == GGUFValueType.STRING:
            assert isinstance(ours, StringArray) and len(ours) == len(field.data), key
            assert meta.strings(key) == field.contents(), key
        elif field.types[0] == GGUFValueType.ARRAY:
            assert np.asarray(ours).tolist() == field.contents(), key
        else:
            assert ours == field.contents(), key


@pytest.mark.parametrize("arch,qtype,shape,kw", MODELS, ids=lambda v: getattr(v, "name", None))
def test_same_as_gguf_reader(tiny_gguf, arch, qtype, shape, kw):
    path = tiny_gguf(arch, qtype, shape, **kw)
    assert_same_metadata(path)
    ref = GGUFReader(path)
    model = load_gguf(path)
    assert list(model.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        ours = model.tensors[t.name]
        assert ours.qtype == t.tensor_type
        assert ours.shape == tuple(reversed(t.shape.tolist()))
        assert (ours.data.dtype, ours.data.shape) == (t.data.dtype, t.data.shape), t.name
        assert ours.data.tobytes() == t.data.tobytes(), t.name
        assert not ours.data.flags.owndata and not ours.data.flags.writeable   # a view of the mapped file


def test_every_value_type(tmp_path):
    path = tmp_path / "kv.gguf"
    w = GGUFWriter(str(path), "llama")
    values = {
        "t.u8": (7, GGUFValueType.UINT8), "t.i8": (-7, GGUFValueType.INT8),
        "t.u16": (65535, GGUFValueType.UINT16), "t.i16": (-300, GGUFValueType.INT16),
        "t.u32": (1 << 31, GGUFValueType.UINT32), "t.i32": (-(1 << 30), GGUFValueType.INT32),
        "t.f32": (0.1, GGUFValueType.FLOAT32), "t.bool": (True, GGUFValueType.BOOL),
        "t.str": ("héllo", GGUFValueType.STRING), "t.u64": (1 << 60, GGUFValueType.UINT64),
        "t.i64": (-(1 << 60), GGUFValueType.INT64), "t.f64": (0.1, GGUFValueType.FLOAT64),
    }
    for key, (v, vt) in values.items():
        w.add_key_value(key, v, vt)
    w.add_key_value("t.a.i8", [-1, 2, -3], GGUFValueType.ARRAY, GGUFValueType.INT8)
    w.add_key_value("t.a.f64", [0.5, 1.5], GGUFValueType.ARRAY, GGUFValueType.FLOAT64)
    w.add_key_value("t.a.bool", [True, False], GGUFValueType.ARRAY, GGUFValueType.BOOL)
    w.add_array("t.a.str", ["a", "", "ünïcode"])
    w.add_array("t.a.empty", [])
    w.add_custom_alignment(64)
    w.add_tensor("x", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()

    assert_same_metadata(path)
    f = read_gguf(path)
    assert f.version == 3 and f.tensors[0].offset % 64 == 0
    assert np.asarray(f.metadata.get("t.a.i8")).dtype == np.int8
    assert f.metadata.raw("t.str") == struct.pack("<IQ", 8, 6) + "héllo".encode()
    assert f.tensors[0].dims == (3, 2)


def test_fingerprint_follows_tokenizer_metadata(tiny_gguf):
    a = read_gguf(tiny_gguf("qwen2")).metadata
    b = read_gguf(tiny_gguf("qwen2", Q.F16)).metadata             # same tokenizer, other weights
    c = read_gguf(tiny_gguf("qwen2", shape=Shape(num_merges=150))).metadata
    assert tokenizer_fingerprint(a) == tokenizer_fingerprint(b) != tokenizer_fingerprint(c)


def test_every_truncation_is_a_load_error(tiny_gguf, tmp_path):
    """Cutting the file anywhere in its header, metadata or tensor data gives ModelLoadError."""
    data = open(tiny_gguf("qwen2"), "rb").read()
    meta_end = read_gguf(tiny_gguf("qwen2")).tensors[0].offset
    cuts = [*range(0, 64), *range(64, meta_end, 97), meta_end, len(data) - 1]
    path = tmp_path / "cut.gguf"
    for cut in cuts:
        path.write_bytes(data[:cut])
        with pytest.raises(ModelLoadError, match="truncated or corrupt"):
            load_gguf(path)


def test_garbled_lengths(tiny_gguf, tmp_path):
    data = bytearray(open(tiny_gguf("qwen2"), "rb").read())
    tokens = read_gguf(tiny_gguf("qwen2")).metadata.get("tokenizer.ggml.tokens")
    data[tokens.start:tokens.start + 8] = b"\xff" * 8   # the first token's length
    path = tmp_path / "garbled.gguf"
    for bad in (bytes(data), b"GGUF" + struct.pack("<I", 1) + bytes(64), b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
                + struct.pack("<Q", 3) + b"abc" + struct.pack("<I", 99)):
        path.write_bytes(bad)
        with pytest.raises(ModelLoadError, match="truncated or corrupt"):
            load_gguf(path)
