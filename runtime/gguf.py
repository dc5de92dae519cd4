"""Read a GGUF file into a typed ModelSpec and its raw, still-quantized tensors.

The file is memory-mapped (gguf.GGUFReader); tensor data stays a view of the file until a
backend uploads or dequantizes it. Anything we cannot serve (architecture, tensor type, a
truncated file) raises ModelLoadError naming the problem.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as QType
from gguf import GGUFReader

SUPPORTED_ARCHS = ("qwen2", "qwen3", "llama")
SUPPORTED_QTYPES = frozenset({
    QType.F32, QType.F16, QType.BF16, QType.Q4_0, QType.Q4_1, QType.Q5_0, QType.Q5_1,
    QType.Q8_0, QType.Q4_K, QType.Q5_K, QType.Q6_K,
})


class ModelLoadError(ValueError):
    """A model file that cannot be served, with the reason."""


@dataclass(frozen=True, slots=True)
class RopeScaling:
    kind: str            # "linear" | "yarn"
    factor: float
    original_context: int


@dataclass(frozen=True, slots=True)
class ModelSpec:
    arch: str
    name: str
    n_layers: int
    hidden: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    context_length: int
    rope_base: float
    rope_scaling: RopeScaling | None
    norm_eps: float
    tied_embeddings: bool
    bos_id: int | None
    eos_ids: tuple[int, ...]
    chat_template: str | None

    @property
    def rope_interleaved(self) -> bool:
        # llama.cpp's converter permutes llama Q/K rows so rotation pairs are adjacent;
        # qwen2/qwen3 keep the NeoX layout (pairs half a head apart).
        return self.arch == "llama"


@dataclass(frozen=True, slots=True)
class GGUFTensor:
    name: str
    qtype: QType
    shape: tuple[int, ...]  # logical shape, row-major: (out_features, in_features) for matrices
    data: np.ndarray = field(repr=False)  # raw blocks as stored: [rows, bytes_per_row] uint8, or typed

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


@dataclass(slots=True)
class GGUFModel:
    path: Path
    spec: ModelSpec
    tensors: dict[str, GGUFTensor]

    def tensor(self, name: str) -> GGUFTensor:
        t = self.tensors.get(name)
        if t is None:
            raise ModelLoadError(f"{self.path.name}: missing tensor {name!r}")
        return t

    def has(self, name: str) -> bool:
        return name in self.tensors


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def read_spec(reader: GGUFReader, path: Path) -> ModelSpec:
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelLoadError(
            f"{path.name}: unsupported architecture {arch!r} (supported: {', '.join(SUPPORTED_ARCHS)})")

    def need(key: str):
        v = _field(reader, f"{arch}.{key}")
        if v is None:
            raise ModelLoadError(f"{path.name}: missing metadata {arch}.{key}")
        return v

    hidden = int(need("embedding_length"))
    n_heads = int(need("attention.head_count"))
    n_kv = int(_field(reader, f"{arch}.attention.head_count_kv", n_heads))
    head_dim = int(_field(reader, f"{arch}.attention.key_length", hidden // n_heads))
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = int(_field(reader, f"{arch}.vocab_size", len(tokens.data) if tokens else 0))
    scaling = None
    kind = _field(reader, f"{arch}.rope.scaling.type")
    factor = _field(reader, f"{arch}.rope.scaling.factor")
    if kind and kind != "none" and factor and float(factor) != 1.0:
        scaling = RopeScaling(str(kind), float(factor), int(_field(
            reader, f"{arch}.rope.scaling.original_context_length", need("context_length"))))
    eos = _field(reader, "tokenizer.ggml.eos_token_id")
    eot = _field(reader, "tokenizer.ggml.eot_token_id")
    eos_ids = tuple(sorted({int(t) for t in (eos, eot) if t is not None}))
    bos = _field(reader, "tokenizer.ggml.bos_token_id")
    names = {t.name for t in reader.tensors}
    return ModelSpec(
        arch=arch,
        name=str(_field(reader, "general.name", path.stem)),
        n_layers=int(need("block_count")),
        hidden=hidden,
        ffn=int(need("feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        vocab=vocab,
        context_length=int(need("context_length")),
        rope_base=float(_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        rope_scaling=scaling,
        norm_eps=float(need("attention.layer_norm_rms_epsilon")),
        tied_embeddings="output.weight" not in names,
        bos_id=None if bos is None else int(bos),
        eos_ids=eos_ids,
        chat_template=_field(reader, "tokenizer.chat_template"),
    )


def quick_digest(path: str | Path, sample: int = 1 << 20) -> str:
    """A short content fingerprint (size, head and tail) used as the default weights revision."""
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.blake2b(str(size).encode(), digest_size=6)
    with path.open("rb") as f:
        h.update(f.read(sample))
        f.seek(max(0, size - sample))
        h.update(f.read(sample))
    return h.hexdigest()


def load_gguf(path: str | Path) -> GGUFModel:
    """Open `path` memory-mapped and return its spec and raw tensors."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"no such model file: {path}")
    try:
        reader = GGUFReader(path, "r")
    except (ValueError, IndexError, OSError, KeyError) as e:  # short or garbled file
        raise ModelLoadError(f"{path.name}: not a readable GGUF file (truncated or corrupt): {e}") from e
    spec = read_spec(reader, path)
    tensors: dict[str, GGUFTensor] = {}
    for t in reader.tensors:
        qtype = QType(t.tensor_type)
        if qtype not in SUPPORTED_QTYPES:
            raise ModelLoadError(f"{path.name}: tensor {t.name} has unsupported type {qtype.name}")
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))  # ggml lists the fastest dim first
        tensors[t.name] = GGUFTensor(t.name, qtype, shape, t.data)
    return GGUFModel(path, spec, tensors)
