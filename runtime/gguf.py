"""Read a GGUF file into a typed ModelSpec and its raw, still-quantized tensors.

The file is memory-mapped and parsed by hand (GGUF v2/v3, little-endian): gguf.GGUFReader
builds a numpy view for every string of a 150k-token vocabulary, which took 8-16 s per
open. Here arrays of strings stay undecoded (a count and a byte range) and tensor data
stays a view of the file until a backend uploads or dequantizes it. Anything we cannot
serve (architecture, tensor type, a truncated file) raises ModelLoadError naming the problem.
"""
from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as QType
from gguf import quants

SUPPORTED_ARCHS = ("qwen2", "qwen3", "llama")
SUPPORTED_QTYPES = frozenset({
    QType.F32, QType.F16, QType.BF16, QType.Q4_0, QType.Q4_1, QType.Q5_0, QType.Q5_1,
    QType.Q8_0, QType.Q4_K, QType.Q5_K, QType.Q6_K,
})


class ModelLoadError(ValueError):
    """A model file that cannot be served, with the reason."""


# ---- the file format ---------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
STRING, ARRAY = 8, 9                       # GGUF value type codes with variable length
SCALAR_FORMATS = {                         # the other value type codes -> struct format
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}
# Tensor types GGUFReader returns as typed arrays of the logical shape; every other type
# comes back as raw blocks, uint8 [rows, bytes_per_row]. We return the same.
TYPED_TENSORS = {
    QType.F32: np.float32, QType.F16: np.float16, QType.F64: np.float64, QType.I8: np.int8,
    QType.I16: np.int16, QType.I32: np.int32, QType.I64: np.int64,
}
_U64 = struct.Struct("<Q")


class _Corrupt(Exception):
    """Raised inside the parser; load_gguf turns it into a ModelLoadError."""


@dataclass(frozen=True, slots=True)
class StringArray:
    """An array of strings left undecoded: its length and the bytes of its elements."""
    count: int
    start: int      # file offset of the first element's u64 length
    end: int        # file offset just past the last element

    def __len__(self) -> int:
        return self.count


class Metadata:
    """The key/values of a GGUF file. Scalars and strings are Python values, numeric arrays
    numpy views of the file, arrays of strings StringArray (decode with strings())."""

    def __init__(self, buf: memoryview, values: dict[str, Any], spans: dict[str, tuple[int, int]]):
        self._buf = buf
        self._values = values
        self._spans = spans     # key -> (start, end) of its type code and value in the file

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def keys(self) -> Iterator[str]:
        return iter(self._values)

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def raw(self, key: str) -> bytes:
        """The value as stored (type code included), for fingerprints."""
        start, end = self._spans[key]
        return bytes(self._buf[start:end])

    def strings(self, key: str) -> list[str]:
        """Decode an array of strings (a 150k vocabulary and its merges: ~0.1 s; a _Reader per
        string took 1.3 s). The parse already checked every length against the file."""
        arr = self._values[key]
        if not isinstance(arr, StringArray):
            raise TypeError(f"{key} is not an array of strings")
        raw, pos, out, length = bytes(self._buf[arr.start:arr.end]), 0, [], _U64.unpack_from
        try:
            for _ in range(arr.count):
                n = length(raw, pos)[0]
                pos += 8 + n
                out.append(raw[pos - n:pos].decode())
        except UnicodeDecodeError as e:
            raise _Corrupt(f"a string in {key} is not UTF-8") from e
        return out


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    qtype: int          # a GGMLQuantizationType value, checked by the caller
    dims: tuple[int, ...]   # as stored: the fastest-varying dimension first
    offset: int         # absolute file offset of the data


@dataclass(slots=True)
class GGUFFile:
    """A parsed GGUF: its metadata, tensor directory and the mapped bytes."""
    path: Path
    version: int
    metadata: Metadata
    tensors: list[TensorInfo]
    mapped: np.memmap


class _Reader:
    """A cursor over the mapped file; every read checks the end of the file."""

    def __init__(self, buf: memoryview, pos: int = 0):
        self.buf, self.pos = buf, pos

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise _Corrupt(f"a {n}-byte read at offset {self.pos} runs past the end of the file")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def u32(self) -> int:
        return self.scalar("<I")

    def u64(self) -> int:
        return self.scalar("<Q")

    def string(self) -> str:
        raw = self.take(self.u64())
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise _Corrupt(f"a string at offset {self.pos - len(raw)} is not UTF-8") from e

    def value(self, vtype: int) -> Any:
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            return self.array()
        fmt = SCALAR_FORMATS.get(vtype)
        if fmt is None:
            raise _Corrupt(f"unknown value type {vtype} at offset {self.pos}")
        return self.scalar(fmt)

    def array(self) -> Any:
        item, count = self.u32(), self.u64()
        if item == STRING:
            return self.skip_strings(count)
        if item == ARRAY:
            return [self.array() for _ in range(count)]
        fmt = SCALAR_FORMATS.get(item)
        if fmt is None:
            raise _Corrupt(f"unknown array item type {item} at offset {self.pos}")
        dtype = np.dtype(fmt)
        return np.frombuffer(self.take(count * dtype.itemsize), dtype)

    def skip_strings(self, count: int) -> StringArray:
        """Step over `count` strings reading only their lengths (the vocabulary: 150k)."""
        start, pos, buf = self.pos, self.pos, self.buf
        try:
            for _ in range(count):
                pos += 8 + _U64.unpack_from(buf, pos)[0]
        except (struct.error, OverflowError):   # a length past the end, or past any offset
            raise _Corrupt(f"an array of {count} strings at offset {start} runs past the end of the file") from None
        if pos > len(buf):
            raise _Corrupt(f"an array of {count} strings at offset {start} runs past the end of the file")
        self.pos = pos
        return StringArray(count, start, pos)


def _parse(buf: memoryview) -> tuple[int, Metadata, list[TensorInfo]]:
    r = _Reader(buf)
    if bytes(r.take(4)) != GGUF_MAGIC:
        raise _Corrupt("no GGUF magic")
    version = r.u32()
    if version not in (2, 3):
        raise _Corrupt(f"GGUF version {version} (supported: 2, 3, little-endian)")
    n_tensors, n_kv = r.u64(), r.u64()
    values: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    for _ in range(n_kv):
        key = r.string()
        if key in values:
            raise _Corrupt(f"duplicate key {key!r}")
        start = r.pos
        values[key] = r.value(r.u32())
        spans[key] = (start, r.pos)
    infos = [_tensor_info(r) for _ in range(n_tensors)]
    alignment = values.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0:
        raise _Corrupt(f"bad general.alignment {alignment!r}")
    data_start = (r.pos + alignment - 1) // alignment * alignment
    names: set[str] = set()
    tensors = []
    for name, qtype, dims, offset in infos:
        if name in names:
            raise _Corrupt(f"duplicate tensor {name!r}")
        names.add(name)
        tensors.append(TensorInfo(name, qtype, dims, data_start + offset))
    return version, Metadata(buf, values, spans), tensors


def _tensor_info(r: _Reader) -> tuple[str, int, tuple[int, ...], int]:
    name = r.string()
    n_dims = r.u32()
    if n_dims > 8:
        raise _Corrupt(f"tensor {name!r} claims {n_dims} dimensions")
    dims = tuple(r.u64() for _ in range(n_dims))
    return name, r.u32(), dims, r.u64()


def read_gguf(path: str | Path) -> GGUFFile:
    """Map `path` and parse its header, metadata and tensor directory (no tensor data read)."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"no such model file: {path}")
    try:
        mapped = np.memmap(path, np.uint8, mode="r")
        version, metadata, tensors = _parse(memoryview(mapped))
    except (_Corrupt, ValueError, OSError, RecursionError) as e:  # ValueError: an empty file
        raise _unreadable(path, e) from e
    return GGUFFile(path, version, metadata, tensors, mapped)


def _unreadable(path: Path, reason: Any) -> ModelLoadError:
    return ModelLoadError(f"{path.name}: not a readable GGUF file (truncated or corrupt): {reason}")


def tensor_data(file: GGUFFile, info: TensorInfo, qtype: QType) -> np.ndarray:
    """A zero-copy view of one tensor: typed for float/int types, else uint8 [rows, bytes_per_row]."""
    shape = tuple(reversed(info.dims))
    block, type_size = GGML_QUANT_SIZES[qtype]
    n_elems = math.prod(shape)
    dtype = TYPED_TENSORS.get(qtype)
    if dtype is None:
        if shape and shape[-1] % block:
            raise ModelLoadError(f"{file.path.name}: tensor {info.name} has rows of {shape[-1]} values, "
                                 f"not a whole number of {qtype.name} blocks of {block}")
        dtype = np.uint8
        shape = (*shape[:-1], shape[-1] // block * type_size) if shape else shape
    nbytes = n_elems * type_size // block
    end = info.offset + nbytes
    if end > len(file.mapped):
        raise _unreadable(file.path, f"tensor {info.name} ends at byte {end}, past the end ({len(file.mapped)})")
    return file.mapped[info.offset:end].view(dtype).reshape(shape)


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

    def dequantize(self, rows: list[int] | None = None) -> np.ndarray:
        """float32 values of the tensor's logical shape (gguf-py's own dequantize), or of the
        matrix rows `rows` only ([len(rows), in_features])."""
        if rows is None:
            return np.asarray(quants.dequantize(self.data, self.qtype), dtype=np.float32).reshape(self.shape)
        return np.asarray(quants.dequantize(self.data[rows], self.qtype), dtype=np.float32).reshape(len(rows), -1)


@dataclass(slots=True)
class GGUFModel:
    path: Path
    spec: ModelSpec
    tensors: dict[str, GGUFTensor]
    metadata: Metadata | None = None    # the parsed key/values, so the tokenizer need not parse again

    def tensor(self, name: str) -> GGUFTensor:
        t = self.tensors.get(name)
        if t is None:
            raise ModelLoadError(f"{self.path.name}: missing tensor {name!r}")
        return t

    def has(self, name: str) -> bool:
        return name in self.tensors


def read_spec(meta: Metadata, tensor_names: set[str], path: Path) -> ModelSpec:
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelLoadError(
            f"{path.name}: unsupported architecture {arch!r} (supported: {', '.join(SUPPORTED_ARCHS)})")

    def need(key: str):
        v = meta.get(f"{arch}.{key}")
        if v is None:
            raise ModelLoadError(f"{path.name}: missing metadata {arch}.{key}")
        return v

    hidden = int(need("embedding_length"))
    n_heads = int(need("attention.head_count"))
    n_kv = int(meta.get(f"{arch}.attention.head_count_kv", n_heads))
    head_dim = int(meta.get(f"{arch}.attention.key_length", hidden // n_heads))
    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = int(meta.get(f"{arch}.vocab_size", len(tokens) if tokens is not None else 0))
    scaling = None
    kind = meta.get(f"{arch}.rope.scaling.type")
    factor = meta.get(f"{arch}.rope.scaling.factor")
    if kind and kind != "none" and factor and float(factor) != 1.0:
        scaling = RopeScaling(str(kind), float(factor), int(meta.get(
            f"{arch}.rope.scaling.original_context_length", need("context_length"))))
    eos = meta.get("tokenizer.ggml.eos_token_id")
    eot = meta.get("tokenizer.ggml.eot_token_id")
    eos_ids = tuple(sorted({int(t) for t in (eos, eot) if t is not None}))
    bos = meta.get("tokenizer.ggml.bos_token_id")
    return ModelSpec(
        arch=arch,
        name=str(meta.get("general.name", path.stem)),
        n_layers=int(need("block_count")),
        hidden=hidden,
        ffn=int(need("feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        vocab=vocab,
        context_length=int(need("context_length")),
        rope_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_scaling=scaling,
        norm_eps=float(need("attention.layer_norm_rms_epsilon")),
        tied_embeddings="output.weight" not in tensor_names,
        bos_id=None if bos is None else int(bos),
        eos_ids=eos_ids,
        chat_template=meta.get("tokenizer.chat_template"),
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
    file = read_gguf(path)
    spec = read_spec(file.metadata, {t.name for t in file.tensors}, path)
    tensors: dict[str, GGUFTensor] = {}
    for t in file.tensors:
        try:
            qtype = QType(t.qtype)
        except ValueError:
            raise ModelLoadError(f"{path.name}: tensor {t.name} has unknown type {t.qtype}") from None
        if qtype not in SUPPORTED_QTYPES:
            raise ModelLoadError(f"{path.name}: tensor {t.name} has unsupported type {qtype.name}")
        shape = tuple(reversed(t.dims))  # ggml lists the fastest dim first
        tensors[t.name] = GGUFTensor(t.name, qtype, shape, tensor_data(file, t, qtype))
    return GGUFModel(path, spec, tensors, file.metadata)
