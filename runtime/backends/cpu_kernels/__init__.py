"""Quantized matrix products on the GGUF blocks themselves, from the compiled `_qmatmul`
extension (qmatmul.c, built by setup.py at install). Weights stay in their blocks (the
mmap of the file); activations are quantized to int8 per 32 values and multiplied with
int8 dot products (AVX512-VNNI, else AVX2, else portable C).

`load(threads)` returns the `Kernels`, or None with a log line when the extension is not
built; the CPU backend then dequantizes at load as before.
"""
from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
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

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernels.matmul(x, self)


c_int, c_long, c_float, c_ptr = ctypes.c_int, ctypes.c_long, ctypes.c_float, ctypes.c_void_p


class _Part(ctypes.Structure):
    _fields_ = [("type", c_int), ("rows", c_int), ("row_bytes", c_long), ("w", c_ptr)]


class _Weight(ctypes.Structure):
    _fields_ = [("nparts", c_int), ("K", c_int), ("N", c_int), ("part", _Part * 3)]


class DecodeLayer(ctypes.Structure):
    """layer.c's sv_layer: one layer's weights and cache, built once per model."""
    _fields_ = [("attn_norm", c_ptr), ("qkv_bias", c_ptr), ("ffn_norm", c_ptr), ("qkv", _Weight), ("o", _Weight),
                ("gate_up", _Weight), ("down", _Weight), ("k", c_ptr), ("v", c_ptr)]


class DecodeStep(ctypes.Structure):
    """layer.c's sv_step: what every layer of one decode step shares."""
    _fields_ = [("S", c_int), ("H", c_int), ("n_heads", c_int), ("n_kv_heads", c_int), ("head_dim", c_int),
                ("interleaved", c_int), ("eps", c_float), ("scale", c_float), ("slots", c_ptr), ("positions", c_ptr),
                ("ctx", c_ptr), ("ctx_start", c_ptr), ("cos", c_ptr), ("sin", c_ptr)]


class Kernels:
    def __init__(self, lib: ctypes.CDLL, threads: int):
        self.lib = lib
        p, i, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
        lib.sv_init.argtypes, lib.sv_init.restype = [i], i
        lib.sv_quantize.argtypes, lib.sv_quantize.restype = [p, i, i], i
        lib.sv_matmul.argtypes, lib.sv_matmul.restype = [i, p, L, i, i, i, p, L], i
        lib.sv_dequantize.argtypes, lib.sv_dequantize.restype = [i, p, L, i, i, p], i
        lib.sv_set_level.argtypes, lib.sv_set_level.restype = [i], i
        lib.sv_rmsnorm.argtypes, lib.sv_rmsnorm.restype = [p, p, p, ctypes.c_float, i, i, p, p], None
        lib.sv_attention_decode.argtypes = [p, i, i, i, i, p, p, p, p, p, p, i, p, p, ctypes.c_float, p]
        lib.sv_attention_decode.restype = i
        lib.sv_decode_layer.argtypes, lib.sv_decode_layer.restype = [p, p, p, p], i
        lib.sv_attention_prefill.argtypes = [p, p, p, i, i, i, i, i, ctypes.c_float, p]
        lib.sv_attention_prefill.restype = i
        self.best = lib.sv_init(threads)
        self.level = LEVELS[self.best]
        self.threads = lib.sv_threads()

    def use_level(self, level: int) -> int:
        """Run on instruction set `level` (0 portable, 1 AVX2, 2 AVX512-VNNI) or the best below it."""
        got = self.lib.sv_set_level(min(level, self.best))
        self.level = LEVELS[got]
        return got

    def supports(self, t) -> bool:
        return t.qtype in BLOCK_TYPES and t.shape[1] % 32 == 0 and t.data.ndim == 2

    def weight(self, parts) -> BlockWeight:
        """GGUF tensors [out_i, in] (all supported) -> one weight, no copy of the blocks."""
        return BlockWeight([BlockPart(Q(t.qtype), np.ascontiguousarray(t.data), t.shape[1]) for t in parts], self)

    def matmul(self, x: torch.Tensor, w: BlockWeight) -> torch.Tensor:
        """x [T, in] float -> [T, out] float32."""
        x = x.float().contiguous()
        T, K = x.shape
        if self.lib.sv_quantize(x.data_ptr(), T, K):
            raise MemoryError(f"no memory for {T} x {K} quantized activations")
        N = w.out_features
        y = torch.empty(T, N)
        col = 0
        for p in w.parts:
            assert p.cols == K, (p.cols, K)
            rc = self.lib.sv_matmul(int(p.qtype), p.raw.ctypes.data, p.raw.shape[1], p.rows, K, T,
                                    y.data_ptr() + 4 * col, N)
            assert rc == 0, f"sv_matmul failed on {p.qtype.name} [{p.rows}, {K}]"
            col += p.rows
        return y

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float,
                 residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(normed, x + residual) of float32 rows [T, K], as CPUOps.rms_norm."""
        x = x.contiguous()
        residual = residual.contiguous() if residual is not None else None
        T, K = x.shape
        total, out = torch.empty(T, K), torch.empty(T, K)
        self.lib.sv_rmsnorm(x.data_ptr(), residual.data_ptr() if residual is not None else None,
                            weight.data_ptr(), eps, T, K, total.data_ptr(), out.data_ptr())
        return out, total

    def attention_decode(self, qkv: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor,
                         positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
                         ctx: torch.Tensor, ctx_start: torch.Tensor, n_heads: int, n_kv_heads: int,
                         head_dim: int, scale: float) -> torch.Tensor:
        """One query a sequence (qkv [S, (Hq + 2 Hkv) D] float32): RoPE, cache write, attention
        over ctx (int64 cache slots, sequence s at ctx_start[s]:ctx_start[s + 1]) -> [S, Hq D]."""
        S = qkv.shape[0]
        out = torch.empty(S, n_heads * head_dim)
        ptr = lambda t: t.data_ptr()  # noqa: E731
        rc = self.lib.sv_attention_decode(ptr(qkv), S, n_heads, n_kv_heads, head_dim, ptr(k), ptr(v), ptr(slots),
                                          ptr(positions), ptr(cos), ptr(sin), int(interleaved), ptr(ctx),
                                          ptr(ctx_start), scale, ptr(out))
        if rc:
            raise MemoryError("no memory for the attention scores")
        return out

    def attention_prefill(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float) -> torch.Tensor:
        """Causal attention of one sequence, its heads over the pool: q [n_q, Hq, D] (roped) are
        the last n_q of the n_ctx positions of keys / values [n_ctx, Hkv, D] -> [n_q, Hq, D]."""
        q, keys, values = q.float().contiguous(), keys.float().contiguous(), values.float().contiguous()
        (n_q, hq, d), n_ctx, hkv = q.shape, keys.shape[0], keys.shape[1]
        out = torch.empty(n_q, hq, d)
        if self.lib.sv_attention_prefill(q.data_ptr(), keys.data_ptr(), values.data_ptr(), n_q, n_ctx - n_q, hq, hkv, d,
                                         scale, out.data_ptr()):
            raise MemoryError("no memory for prefill attention")
        return out

    def decode_layer(self, attn_norm: torch.Tensor, qkv: BlockWeight, qkv_bias: torch.Tensor | None,
                     o: BlockWeight, ffn_norm: torch.Tensor, gate_up: BlockWeight, down: BlockWeight,
                     k: torch.Tensor, v: torch.Tensor) -> DecodeLayer:
        """A layer for run_layer; holds pointers only: the caller keeps the tensors alive."""
        def weight(w: BlockWeight) -> _Weight:
            assert len(w.parts) <= 3 and len({p.cols for p in w.parts}) == 1
            parts = [_Part(int(p.qtype), p.rows, p.raw.shape[1], p.raw.ctypes.data) for p in w.parts]
            return _Weight(len(parts), w.parts[0].cols, w.out_features, (_Part * 3)(*parts))
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        assert k.is_contiguous() and v.is_contiguous() and k.dtype == torch.float32
        return DecodeLayer(ptr(attn_norm), ptr(qkv_bias), ptr(ffn_norm), weight(qkv), weight(o), weight(gate_up),
                           weight(down), ptr(k), ptr(v))

    def run_layer(self, layer: DecodeLayer, step: DecodeStep, x: torch.Tensor, residual: torch.Tensor) -> None:
        """x, residual [S, H] float32 through one decoder layer, in place (layer.c)."""
        if self.lib.sv_decode_layer(ctypes.byref(layer), ctypes.byref(step), x.data_ptr(), residual.data_ptr()):
            raise MemoryError("no memory for a decode layer's activations")

    def pool_totals(self) -> dict:
        """Tiles the pool ran since start, how many its workers finished, and the products the
        caller ran alone because they helped too little (a loaded machine)."""
        out = (ctypes.c_long * 3)()
        self.lib.sv_pool_totals(out)
        return {"tiles": out[0], "by_workers": out[1], "jobs_alone": out[2]}

    def dequantize(self, qtype: Q, raw: np.ndarray, cols: int) -> np.ndarray:
        """Raw rows [n, bytes] -> float32 [n, cols]: the blocks as the kernels read them."""
        raw = np.ascontiguousarray(raw)
        out = np.empty((raw.shape[0], cols), dtype=np.float32)
        assert self.lib.sv_dequantize(int(qtype), raw.ctypes.data, raw.shape[1], raw.shape[0], cols,
                                      out.ctypes.data) == 0
        return out


_loaded: Kernels | None = None


def load(threads: int = 0) -> Kernels | None:
    """The kernels (started once a process), or None if the extension was not built."""
    global _loaded
    if _loaded is None:
        path = library_path()
        if path is None:
            log.warning("CPU block kernels not built (no runtime/backends/cpu_kernels/_qmatmul*.so; "
                        "`pip install -e .` builds them with gcc): int8 weights dequantized at load instead")
            return None
        _loaded = Kernels(ctypes.CDLL(str(path)), threads)
        log.info("CPU block kernels: %s, %d threads", _loaded.level, _loaded.threads)
    return _loaded


def library_path() -> Path | None:
    found = sorted(Path(__file__).parent.glob("_qmatmul*.so"))
    return found[0] if found else None
