"""Quantized matrix products on the GGUF blocks themselves, from the compiled `_qmatmul`
extension (qmatmul.c, built by setup.py at install). Weights stay in their blocks (the
mmap of the file); activations are quantized to int8 per 32 values and multiplied with
int8 dot products (AVX512-VNNI, else AVX2, else portable C).

Arrays in and out are numpy (float32, C order), so serving on the kernels needs no torch
(importing it was about half of a later start). `load(threads)` returns the `Kernels`, or
None with a log line when the extension is not built; the torch CPU backend then makes int8
weights at load instead.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q

log = logging.getLogger(__name__)

BLOCK_TYPES = (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K)
LEVELS = {0: "portable C", 1: "AVX2", 2: "AVX512-VNNI"}


@dataclass(slots=True)
class BlockPart:
    qtype: Q
    raw: np.ndarray        # [rows, bytes_per_row] uint8, the GGUF blocks (often a view of the mmap)
    cols: int

    @property
    def rows(self) -> int:
        return self.raw.shape[0]


@dataclass(slots=True)
class BlockWeight:
    """A linear weight [out, in] as GGUF block parts stacked along out (q, k, v or gate, up)."""
    parts: list[BlockPart]
    kernels: Kernels

    @property
    def out_features(self) -> int:
        return sum(p.rows for p in self.parts)

    def matmul(self, x: np.ndarray) -> np.ndarray:
        return self.kernels.matmul(x, self)


c_int, c_long, c_float, c_ptr = ctypes.c_int, ctypes.c_long, ctypes.c_float, ctypes.c_void_p


class _Part(ctypes.Structure):
    _fields_ = [("type", c_int), ("rows", c_int), ("row_bytes", c_long), ("w", c_ptr)]


class _Weight(ctypes.Structure):
    _fields_ = [("nparts", c_int), ("K", c_int), ("N", c_int), ("part", _Part * 3)]


class _MergeJob(ctypes.Structure):
    """merge.c's merge_job: one projection's blocks, its LoRA factors and where its Q8_0 goes."""
    _fields_ = [("type", c_int), ("N", c_int), ("K", c_int), ("R", c_int), ("row_bytes", c_long), ("w", c_ptr),
                ("b", c_ptr), ("a", c_ptr), ("out", c_ptr)]


class DecodeLayer(ctypes.Structure):
    """layer.c's sv_layer: one layer's weights and cache, built once per model."""
    _fields_ = [("attn_norm", c_ptr), ("qkv_bias", c_ptr), ("ffn_norm", c_ptr), ("qkv", _Weight), ("o", _Weight),
                ("gate_up", _Weight), ("down", _Weight), ("k", c_ptr), ("v", c_ptr)]


class DecodeStep(ctypes.Structure):
    """layer.c's sv_step: what every layer of one decode step shares."""
    _fields_ = [("S", c_int), ("H", c_int), ("n_heads", c_int), ("n_kv_heads", c_int), ("head_dim", c_int),
                ("interleaved", c_int), ("eps", c_float), ("scale", c_float), ("slots", c_ptr), ("positions", c_ptr),
                ("ctx", c_ptr), ("ctx_start", c_ptr), ("cos", c_ptr), ("sin", c_ptr)]


def _serial(method):
    """One caller at a time: the library keeps the quantized activations of sv_quantize for the
    sv_matmul calls after it, and one thread pool, in globals; ctypes lets go of the GIL, so two
    engines in one process (a reload warming up beside the live one, tests one after another)
    could free each other's buffers (a segfault in CI)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)
    return wrapper


class Kernels:
    def __init__(self, lib: ctypes.CDLL, threads: int):
        self.lib = lib
        self.lock = threading.RLock()
        p, i, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
        lib.sv_init.argtypes, lib.sv_init.restype = [i], i
        lib.sv_quantize.argtypes, lib.sv_quantize.restype = [p, i, i], i
        lib.sv_matmul.argtypes, lib.sv_matmul.restype = [i, p, L, i, i, i, p, L], i
        lib.sv_dequantize.argtypes, lib.sv_dequantize.restype = [i, p, L, i, i, p], i
        lib.sv_set_level.argtypes, lib.sv_set_level.restype = [i], i
        lib.sv_merge_q8_0.argtypes, lib.sv_merge_q8_0.restype = [p, i, i], i
        lib.sv_rmsnorm.argtypes, lib.sv_rmsnorm.restype = [p, p, p, ctypes.c_float, i, i, p, p], None
        lib.sv_attention_decode.argtypes = [p, i, i, i, i, p, p, p, p, p, p, i, p, p, ctypes.c_float, p]
        lib.sv_attention_decode.restype = i
        lib.sv_decode_layer.argtypes, lib.sv_decode_layer.restype = [p, p, p, p], i
        lib.sv_attention_prefill.argtypes = [p, p, p, i, i, i, i, i, ctypes.c_float, p]
        lib.sv_attention_prefill.restype = i
        self.best = lib.sv_init(threads)
        self.level = LEVELS[self.best]
        self.threads = lib.sv_threads()

    @_serial
    def use_level(self, level: int) -> int:
        """Run on instruction set `level` (0 portable, 1 AVX2, 2 AVX512-VNNI) or the best below it."""
        got = self.lib.sv_set_level(min(level, self.best))
        self.level = LEVELS[got]
        return got

    @property
    def fused_multiply_add(self) -> bool:
        """Whether the instruction set in use has FMA (AVX2, AVX512): without it merge_q8_0 calls
        libm's fmaf for every product, slower than numpy."""
        return self.level != LEVELS[0]

    def supports(self, t) -> bool:
        return t.qtype in BLOCK_TYPES and t.shape[1] % 32 == 0 and t.data.ndim == 2

    def weight(self, parts) -> BlockWeight:
        """GGUF tensors [out_i, in] (all supported) -> one weight, no copy of the blocks."""
        return BlockWeight([BlockPart(Q(t.qtype), np.ascontiguousarray(t.data), t.shape[1]) for t in parts], self)

    @_serial
    def matmul(self, x: np.ndarray, w: BlockWeight) -> np.ndarray:
        """x [T, in] float -> [T, out] float32."""
        x = _f32(x)
        T, K = x.shape
        if self.lib.sv_quantize(x.ctypes.data, T, K):
            raise MemoryError(f"no memory for {T} x {K} quantized activations")
        N = w.out_features
        y = np.empty((T, N), np.float32)
        col = 0
        for p in w.parts:
            assert p.cols == K, (p.cols, K)
            rc = self.lib.sv_matmul(int(p.qtype), p.raw.ctypes.data, p.raw.shape[1], p.rows, K, T,
                                    y.ctypes.data + 4 * col, N)
            assert rc == 0, f"sv_matmul failed on {p.qtype.name} [{p.rows}, {K}]"
            col += p.rows
        return y

    @_serial
    def rms_norm(self, x: np.ndarray, weight: np.ndarray, eps: float,
                 residual: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(normed, x + residual) of float32 rows [T, K], as CPUOps.rms_norm."""
        # every converted array is named until the call returns: a temporary's pointer taken
        # inline is freed before the call, and numpy hands its buffer to the next conversion
        x, weight = _f32(x), _f32(weight)
        residual = _f32(residual) if residual is not None else None
        T, K = x.shape
        total, out = np.empty((T, K), np.float32), np.empty((T, K), np.float32)
        self.lib.sv_rmsnorm(x.ctypes.data, residual.ctypes.data if residual is not None else None,
                            weight.ctypes.data, eps, T, K, total.ctypes.data, out.ctypes.data)
        return out, total

    @_serial
    def attention_decode(self, qkv: np.ndarray, k: np.ndarray, v: np.ndarray, slots: np.ndarray,
                         positions: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool,
                         ctx: np.ndarray, ctx_start: np.ndarray, n_heads: int, n_kv_heads: int,
                         head_dim: int, scale: float) -> np.ndarray:
        """One query a sequence (qkv [S, (Hq + 2 Hkv) D] float32): RoPE, cache write, attention
        over ctx (int64 cache slots, sequence s at ctx_start[s]:ctx_start[s + 1]) -> [S, Hq D]."""
        qkv, cos, sin = _f32(qkv), _f32(cos), _f32(sin)            # named until the call returns (rms_norm)
        slots, positions, ctx, ctx_start = _i64(slots), _i64(positions), _i64(ctx), _i64(ctx_start)
        S = qkv.shape[0]
        out = np.empty((S, n_heads * head_dim), np.float32)
        assert k.flags.c_contiguous and v.flags.c_contiguous and k.dtype == np.float32
        ptr = lambda a: a.ctypes.data  # noqa: E731
        rc = self.lib.sv_attention_decode(ptr(qkv), S, n_heads, n_kv_heads, head_dim, ptr(k), ptr(v), ptr(slots),
                                          ptr(positions), ptr(cos), ptr(sin), int(interleaved), ptr(ctx),
                                          ptr(ctx_start), scale, ptr(out))
        if rc:
            raise MemoryError("no memory for the attention scores")
        return out

    @_serial
    def attention_prefill(self, q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float) -> np.ndarray:
        """Causal attention of one sequence, its heads over the pool: q [n_q, Hq, D] (roped) are
        the last n_q of the n_ctx positions of keys / values [n_ctx, Hkv, D] -> [n_q, Hq, D]."""
        q, keys, values = _f32(q), _f32(keys), _f32(values)
        (n_q, hq, d), n_ctx, hkv = q.shape, keys.shape[0], keys.shape[1]
        out = np.empty((n_q, hq, d), np.float32)
        if self.lib.sv_attention_prefill(q.ctypes.data, keys.ctypes.data, values.ctypes.data, n_q, n_ctx - n_q, hq, hkv,
                                         d, scale, out.ctypes.data):
            raise MemoryError("no memory for prefill attention")
        return out

    def decode_layer(self, attn_norm: np.ndarray, qkv: BlockWeight, qkv_bias: np.ndarray | None,
                     o: BlockWeight, ffn_norm: np.ndarray, gate_up: BlockWeight, down: BlockWeight,
                     k: np.ndarray, v: np.ndarray) -> DecodeLayer:
        """A layer for run_layer; holds pointers only: the caller keeps the arrays alive."""
        def weight(w: BlockWeight) -> _Weight:
            assert len(w.parts) <= 3 and len({p.cols for p in w.parts}) == 1
            parts = [_Part(int(p.qtype), p.rows, p.raw.shape[1], p.raw.ctypes.data) for p in w.parts]
            return _Weight(len(parts), w.parts[0].cols, w.out_features, (_Part * 3)(*parts))
        for a in (attn_norm, qkv_bias, ffn_norm, k, v):
            assert a is None or (a.flags.c_contiguous and a.dtype == np.float32)
        ptr = lambda a: a.ctypes.data if a is not None else None  # noqa: E731
        return DecodeLayer(ptr(attn_norm), ptr(qkv_bias), ptr(ffn_norm), weight(qkv), weight(o), weight(gate_up),
                           weight(down), ptr(k), ptr(v))

    @_serial
    def run_layer(self, layer: DecodeLayer, step: DecodeStep, x: np.ndarray, residual: np.ndarray) -> None:
        """x, residual [S, H] float32 through one decoder layer, in place (layer.c)."""
        assert x.flags.c_contiguous and residual.flags.c_contiguous
        if self.lib.sv_decode_layer(ctypes.byref(layer), ctypes.byref(step), x.ctypes.data, residual.ctypes.data):
            raise MemoryError("no memory for a decode layer's activations")

    @_serial
    def pool_totals(self) -> dict:
        """Tiles the pool ran since start, how many its workers finished, and the products the
        caller ran alone because they helped too little (a loaded machine)."""
        out = (ctypes.c_long * 3)()
        self.lib.sv_pool_totals(out)
        return {"tiles": out[0], "by_workers": out[1], "jobs_alone": out[2]}

    def merge_q8_0(self, jobs: list[tuple[Q, np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]],
                   threads: int = 0) -> None:
        """For each (qtype, raw [n, bytes], cols, b [n, r], a [r, cols], out [n, cols / 32 * 34]
        uint8): out = the Q8_0 rows of dequantize(raw) + b a, bit for bit gguf-py's quantize of
        numpy's (merge.inc). One call on threads of its own, the GIL let go throughout; not
        serialized (it shares nothing with the matmul pool). threads: 0, the kernels' own count."""
        keep, structs = [], []
        for qtype, raw, cols, b, a, out in jobs:
            raw, b, a = np.ascontiguousarray(raw), _f32(b), _f32(a)
            n, r = b.shape
            assert raw.shape[0] == n and a.shape == (r, cols) and out.shape == (n, cols // 32 * 34)
            assert out.dtype == np.uint8 and out.flags.c_contiguous
            keep += [raw, b, a]                  # alive until the call returns (see rms_norm)
            structs.append(_MergeJob(int(qtype), n, cols, r, raw.shape[1], raw.ctypes.data, b.ctypes.data,
                                     a.ctypes.data, out.ctypes.data))
        array = (_MergeJob * len(structs))(*structs)
        if self.lib.sv_merge_q8_0(array, len(structs), threads or self.threads):
            raise MemoryError(f"no memory to merge {len(structs)} projections")

    @_serial
    def dequantize(self, qtype: Q, raw: np.ndarray, cols: int) -> np.ndarray:
        """Raw rows [n, bytes] -> float32 [n, cols]: the blocks as the kernels read them."""
        raw = np.ascontiguousarray(raw)
        out = np.empty((raw.shape[0], cols), dtype=np.float32)
        assert self.lib.sv_dequantize(int(qtype), raw.ctypes.data, raw.shape[1], raw.shape[0], cols,
                                      out.ctypes.data) == 0
        return out


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


_loaded: Kernels | None = None


def load(threads: int = 0) -> Kernels | None:
    """The kernels (started once a process, on `threads` threads, 0: one a physical core), or
    None if the extension was not built or SAMEVM_CPU_KERNELS=off asks for the dequantized int8
    path (what served before the kernels: a way round a kernel fault, and the baseline the agent
    suite's CPU step latency is measured against)."""
    global _loaded
    if os.environ.get("SAMEVM_CPU_KERNELS", "on").lower() in ("off", "0", "no", "false"):
        log.info("CPU block kernels off (SAMEVM_CPU_KERNELS): int8 weights dequantized at load")
        return None
    if _loaded is None:
        path = library_path()
        if path is None:
            log.warning("CPU block kernels not built (no runtime/backends/cpu_kernels/_qmatmul*.so; "
                        "`pip install -e .` builds them with gcc): int8 weights dequantized at load instead")
            return None
        try:
            _loaded = Kernels(ctypes.CDLL(str(path)), threads or physical_cores())
        except AttributeError as e:         # a function the Python here calls is missing from the library
            raise RuntimeError(f"{path.name} was built from older sources ({e}); rebuild it: "
                               "pip install -e . (or make setup)") from e
        log.info("CPU block kernels: %s, %d threads", _loaded.level, _loaded.threads)
    return _loaded


def library_path() -> Path | None:
    found = sorted(Path(__file__).parent.glob("_qmatmul*.so"))
    return found[0] if found else None


def physical_cores() -> int:
    """Cores this process may run on, hyperthreads of one core counted once: two threads on one
    core share its vector units, and a thread left waiting on its sibling slows every product."""
    cpus = os.sched_getaffinity(0)
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topology / "physical_package_id").read_text(), (topology / "core_id").read_text()))
        except OSError:
            return len(cpus)
    return len(cores)
