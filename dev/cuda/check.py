"""python -m dev.cuda.check [--emulator] [--no-timing]   (from the repository root)

Checks every kernel, through the op that launches it, against the CPU reference (cpu.py on
gguf-dequantized weights) on fresh random inputs of several shapes, every output buffer
poisoned with NaN first; then (on a GPU) times the memory-bound kernels and prints their
GB/s against the measured device-to-device copy bandwidth. Exits 1 if a check fails.
"""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import quants

from dev.synthetic import random_kquant
from runtime.backends import AttentionParams, ForwardBatch
from runtime.backends.cpu import CPUOps
from runtime.backends.cuda import CUDAOps
from runtime.backends.cuda import attention as attn
from runtime.backends.cuda import linear as linear_mod
from runtime.backends.cuda.batch import pack, views
from runtime.backends.cuda.linear import Normed
from runtime.backends.cuda.weights import QuantLinear
from runtime.gguf import GGUFTensor
from runtime.models.rope import rope_tables
from runtime.sampling import SamplingBatch, SamplingParams

QTYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K]


@dataclass
class Result:
    name: str
    err: float
    tol: float

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.err) and self.err <= self.tol)


@contextmanager
def options(ops: CUDAOps, **values):
    """ops' CudaOptions changed for the block (kernel choices: stage_weights, matvec_split,
    norm_once_rows), restored after."""
    keep = ops.options
    ops.options = replace(keep, **values)
    try:
        yield
    finally:
        ops.options = keep


def rel_err(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got.shape != ref.shape or not np.isfinite(got).all():
        return float("inf")
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def poison(ops: CUDAOps) -> None:
    """Every buffer an op takes starts as NaN (or -1), so an unwritten element fails."""
    plain = ops.alloc

    def alloc(shape, dtype, zero=False):
        buf = plain(shape, dtype, zero)
        if not zero:
            buf.fill(np.nan if np.dtype(dtype).kind == "f" else -1)
        return buf
    ops.alloc = alloc


def random_tensor(name: str, qtype: Q, rows: int, cols: int, rng) -> GGUFTensor:
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        data = random_kquant(rows, cols, qtype, rng, 0.5)
    else:
        values = rng.standard_normal((rows, cols)).astype(np.float32) * 0.5
        data = {Q.F32: values, Q.F16: values.astype(np.float16)}.get(qtype)
        if data is None:
            data = quants.quantize(values, qtype)
    return GGUFTensor(name, qtype, (rows, cols), data)


def dequant(t: GGUFTensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(quants.dequantize(t.data, t.qtype), np.float32).reshape(t.shape))


def q8_round(x: torch.Tensor) -> torch.Tensor:
    """x as matvec.cu's int8 path (Q8X) multiplies it: rounded in blocks of 16 columns to
    multiples of d = max|x| / 127 (half to even, as the kernel's rounding add), so that path is checked
    as exactly as the f32 one and not against the rounding's own error (~0.5%)."""
    blocks = x.float().reshape(*x.shape[:-1], -1, 16)
    amax = blocks.abs().amax(-1, keepdim=True)
    q = torch.round(blocks * torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax)))
    return (q * (amax / 127.0)).reshape(x.shape)


def ref_x(kind: str, x: torch.Tensor) -> torch.Tensor:
    """The input a reference linear of `kind` (path()) multiplies."""
    return q8_round(x) if kind in ("matvec_q8", "staged_q8") else x


def ref_normed(kind: str, w: QuantLinear, a: np.ndarray, b: np.ndarray | None, nw: np.ndarray, h: torch.Tensor,
               fused: bool = True) -> torch.Tensor:
    """The normed x (h = rmsnorm(a + b) * nw) a launch of `kind` multiplies (fused: the norm in
    its prologue; else run first, as for the lm_head). One token
    with int8 x over a weight of int8 formats only is matvec.cu's one-pass prologue: it rounds
    (a + b) * nw by its own block maxima and scales the sums by rstd, so the reference rounds
    that, not h, and no value near a rounding tie goes the other way than in the kernel."""
    if not fused or kind not in ("matvec_q8", "staged_q8") or a.shape[0] != 1 or any(int(q) not in linear_mod.Q8_QTYPES for q in w.qtypes):
        return ref_x(kind, h)
    s = torch.from_numpy(a) + (0 if b is None else torch.from_numpy(b))
    rstd = torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6)
    return q8_round(s * torch.from_numpy(nw)) * rstd


def check_linear(ops: CUDAOps, rng, qtypes=QTYPES) -> list[Result]:
    """matvec.cu (plain + bias, fused norm + residual, SiLU gate/up), matmul.cu (one and two
    token tiles, K split or not), dequant.cu + cuBLAS."""
    out, cpu, dev = [], CPUOps(), ops.dev
    keep, ops.matmul_max_tokens = ops.matmul_max_tokens, 128    # all three token tiles of matmul.cu
    for qtype, K in [(q, k) for q in qtypes for k in ((512, 4096) if q in (Q.Q4_K, Q.Q5_K, Q.Q6_K) else (160, 1024))]:
        gate_up = [random_tensor("g", qtype, 96, K, rng), random_tensor("u", qtype, 96, K, rng)]
        plain = random_tensor("w", qtype, 75, K, rng)
        W, Wgu = dequant(plain), torch.cat([dequant(t) for t in gate_up])
        # one token twice: weights staged in shared memory (matvec_t1_stage) and not
        for T, stage in [(1, True), (1, False)] + [(T, True) for T in (2, 3, 5, 8, 11, 30, 40, 100, 300)]:
            a = rng.standard_normal((T, K)).astype(np.float32)
            b = rng.standard_normal((T, K)).astype(np.float32)
            nw = (1 + 0.1 * rng.standard_normal(K)).astype(np.float32)
            bias = rng.standard_normal(75).astype(np.float32)
            h_ref, s_ref = cpu.rms_norm(torch.from_numpy(a), torch.from_numpy(nw), 1e-6, torch.from_numpy(b))
            with options(ops, stage_weights=stage):
                for gdt in ("float32", "float16"):
                    ops.gemm_dtype = np.dtype(gdt)
                    ops._loaded.clear()
                    s_out = ops.alloc((T, K), np.float32)
                    x = Normed(dev.upload(a), dev.upload(b), dev.upload(nw), 1e-6, s_out)
                    wq = ops.linear_weight([plain])
                    y = ops.linear(x, wq, dev.upload(bias))
                    kind = path(ops, T, w=wq)
                    ref_plain = cpu.linear(ref_normed(kind, wq, a, b, nw, h_ref), W, torch.from_numpy(bias)).numpy()
                    tag = f"linear {qtype.name} K={K} T={T} {kind}"
                    out.append(Result(f"{tag} norm+bias", rel_err(dev.to_host(y), ref_plain), TOL[kind]))
                    out.append(Result(f"{tag} residual sum", rel_err(dev.to_host(s_out), s_ref.numpy()), 1e-6))
                    wgu = ops.linear_weight(gate_up)
                    y = ops.linear(dev.upload(a), wgu, act="silu_mul")
                    kind_gu = path(ops, T, w=wgu, normed=False, mode=1)
                    ref_gu = cpu.linear(ref_x(kind_gu, torch.from_numpy(a)), Wgu, act="silu_mul").numpy()
                    out.append(Result(f"linear {qtype.name} K={K} T={T} {kind_gu} silu(gate)*up",
                                      rel_err(dev.to_host(y), ref_gu), TOL[kind_gu]))
    tall = random_tensor("tall", Q.Q6_K, 9001, 256, rng)     # more row groups than the grid: blocks loop
    result, a, wq = check_normed(ops, tall, 2, rng, "linear Q6_K 9001x256", "blocks loop over row groups")
    out.append(result)
    # One plain token row: the f32 dot in a block a row group; then staged (int8 x), 35 teams a block.
    for stage in (False, True):
        with options(ops, stage_weights=stage):
            y = ops.linear(dev.upload(a[:1]), wq)
            kind = path(ops, 1, w=wq, normed=False)
        out.append(Result(f"linear Q6_K 9001x256 T=1 {kind} plain x (blocks loop over row groups)",
                          rel_err(dev.to_host(y), cpu.linear(ref_x(kind, torch.from_numpy(a[:1])), dequant(tall)).numpy()),
                          TOL[kind]))
    # 6 rows of a 1536-wide norm: exactly 48 KiB of dynamic shared memory next to the kernel's
    # static arrays, which needs the launch attribute raised (the 1.5B's lm_head failed here).
    wide = random_tensor("wide", Q.Q8_0, 40, 1536, rng)
    result, a, _ = check_normed(ops, wide, 6, rng, "linear Q8_0 K=1536 T=6", "48 KiB dynamic shared memory")
    out.append(result)
    # A prefill chunk that ends no prompt asks the lm_head for zero rows.
    y = ops.linear(Normed(dev.upload(a[:0]), None, dev.upload(np.ones(1536, np.float32)), 1e-6, None), ops.linear_weight([wide]))
    out.append(Result("linear with 0 token rows: shape (0, 40)", 0.0 if tuple(y.shape) == (0, 40) else 1.0, 0.0))
    # Enough rows (4 tiles an SM) for matmul.cu's 64-token tile, one short K step (K = 64).
    wide = random_tensor("wide", Q.Q8_0, 4 * dev.sm_count * linear_mod.MATMUL_ROWS + 40, 64, rng)
    a = rng.standard_normal((40, 64)).astype(np.float32)
    ops._loaded.clear()
    y = ops.linear(dev.upload(a), ops.linear_weight([wide]))
    ref = cpu.linear(torch.from_numpy(a), dequant(wide)).numpy()
    out.append(Result(f"linear Q8_0 {wide.shape[0]}x64 T=40 {path(ops, 40, wide.shape[0])} (64-token tiles)",
                      rel_err(dev.to_host(y), ref), 4e-3))
    mixed = [random_tensor("g", Q.Q4_K, 64, 512, rng), random_tensor("u", Q.Q6_K, 64, 512, rng)]
    ops._loaded.clear()
    for T in (3, 20):
        a = rng.standard_normal((T, 512)).astype(np.float32)
        ref = cpu.linear(torch.from_numpy(a), torch.cat([dequant(t) for t in mixed]), act="silu_mul").numpy()
        wq = ops.linear_weight(mixed)
        y = ops.linear(dev.upload(a), wq, act="silu_mul")
        kind = path(ops, T, w=wq)
        out.append(Result(f"linear Q4_K|Q6_K gate/up T={T} {kind}", rel_err(dev.to_host(y), ref), TOL[kind]))
    out += check_t1_segments(ops, rng)
    out += check_matvec_splits(ops, rng)
    ops.gemm_dtype, ops.matmul_max_tokens = np.dtype(np.float16), keep
    return out


def check_normed(ops: CUDAOps, t: GGUFTensor, T: int, rng, label: str, note: str):
    """T random rows, normed (unit weight, no residual) into the linear of t, against the CPU
    reference: (the Result, the rows, the uploaded weight)."""
    cpu, dev, K = CPUOps(), ops.dev, t.shape[1]
    a = rng.standard_normal((T, K)).astype(np.float32)
    ops._loaded.clear()
    wq = ops.linear_weight([t])
    y = ops.linear(Normed(dev.upload(a), None, dev.upload(np.ones(K, np.float32)), 1e-6, None), wq)
    ref = cpu.linear(cpu.rms_norm(torch.from_numpy(a), torch.ones(K), 1e-6)[0], dequant(t)).numpy()
    kind = path(ops, T, w=wq)
    return Result(f"{label} norm {kind} ({note})", rel_err(dev.to_host(y), ref), TOL[kind]), a, wq


def check_matvec_splits(ops: CUDAOps, rng) -> list[Result]:
    """matvec.cu (f32) and matvec_tc.cu (f16) with each team size forced: a row count that
    ends mid-tile (the last team reads rows again and stores none of them), norm-fused and
    plain, gate/up, at 1, 5 and 8 tokens."""
    with options(ops, stage_weights=False):     # forced splits: the unstaged kernels (matvec_t1_stage has none)
        out, cpu, dev = [], CPUOps(), ops.dev
        K = 1024
        plain = random_tensor("w", Q.Q6_K, 301, K, rng)
        gate_up = [random_tensor("g", Q.Q4_K, 130, K, rng), random_tensor("u", Q.Q4_K, 130, K, rng)]
        W, Wgu = dequant(plain), torch.cat([dequant(t) for t in gate_up])
        keep = ops.gemm_dtype
        for T in (1, 5, 8):
            a, b = rng.standard_normal((2, T, K)).astype(np.float32)
            nw = (1 + 0.1 * rng.standard_normal(K)).astype(np.float32)
            h_ref, _ = cpu.rms_norm(torch.from_numpy(a), torch.from_numpy(nw), 1e-6, torch.from_numpy(b))
            for gdt in ("float32", "float16"):
                ops.gemm_dtype = np.dtype(gdt)
                ops._loaded.clear()
                wp, wgu = ops.linear_weight([plain]), ops.linear_weight(gate_up)
                kind = path(ops, T, w=wp)
                ref_plain = cpu.linear(ref_normed(kind, wp, a, b, nw, h_ref), W).numpy()
                ref_gu = cpu.linear(ref_normed(kind, wgu, a, b, nw, h_ref), Wgu, act="silu_mul").numpy()
                kind_p = path(ops, T, w=wp, normed=False)
                ref_p = cpu.linear(ref_x(kind_p, torch.from_numpy(a)), W).numpy()
                # one token: norm-fused launches in blocks of 8 warps (MV_PROLOGUE_WARPS), plain ones of 4
                for split in (1, 2, 4, 8):
                    tag = f"T={T} split={split}"
                    with options(ops, matvec_split=split):
                        y = ops.linear(Normed(dev.upload(a), dev.upload(b), dev.upload(nw), 1e-6, None), wp)
                        out.append(Result(f"{kind} Q6_K 301x{K} {tag} norm", rel_err(dev.to_host(y), ref_plain), TOL[kind]))
                        y = ops.linear(Normed(dev.upload(a), dev.upload(b), dev.upload(nw), 1e-6, None), wgu, act="silu_mul")
                        out.append(Result(f"{kind} Q4_K gate/up 2x130x{K} {tag} norm", rel_err(dev.to_host(y), ref_gu), TOL[kind]))
                        if T > 1 or split <= linear_mod.MV_WARPS[1]:
                            y = ops.linear(dev.upload(a), wp)
                            out.append(Result(f"{kind_p} Q6_K 301x{K} {tag} plain x", rel_err(dev.to_host(y), ref_p), TOL[kind_p]))
        ops.gemm_dtype = keep
        return out


TOL = {"matvec": 2e-5, "matvec_q8": 5e-4, "staged": 2e-5, "staged_q8": 5e-4, "matvec_tc": 4e-3, "matmul": 4e-3, "cublas-float32": 2e-5, "cublas-float16": 4e-3}


def path(ops: CUDAOps, T: int, rows: int = 75, w: QuantLinear | None = None, normed: bool = True, mode: int = 0) -> str:
    """Which kernels linear.py runs for T token rows (of weight w, or a 1024-column one; x
    norm-fused or not; mode 1: gate/up)."""
    if T <= ops.matvec_max_tokens:
        if w is not None and linear_mod.use_tc(ops, T, w, w.cols):
            return "matvec_tc"
        if T == 1 and w is not None:
            q8, _, plan = linear_mod.t1_stage(ops, w, normed, mode)
            if plan is not None:
                return "staged_q8" if q8 else "staged"
        if w is not None and linear_mod.use_q8(ops, T, w, normed):
            return "matvec_q8"
        return "matvec"
    if linear_mod.use_matmul(ops, T, 1024, rows):
        return "matmul"
    return f"cublas-{ops.gemm_dtype.name}"


def check_t1_segments(ops: CUDAOps, rng) -> list[Result]:
    """T = 1 (the split decode) over fused weights whose formats change on and off an even
    row, short and long rows, with the norm run once first (the lm_head path) or not, with no
    residual (the first layer), a zero input, and blocks that walk several row groups."""
    out, cpu, dev = [], CPUOps(), ops.dev
    cases = [("aligned", [(Q.Q4_K, 64), (Q.Q6_K, 32), (Q.Q4_K, 24)], 512, 1 << 30, {}),
             ("aligned, long rows", [(Q.Q4_K, 64), (Q.Q6_K, 40)], 4096, 1 << 30, {}),
             ("misaligned", [(Q.Q4_K, 36), (Q.Q6_K, 24), (Q.Q8_0, 9)], 512, 1 << 30, {}),
             ("with float rows", [(Q.Q4_K, 64), (Q.F16, 32)], 512, 1 << 30, {}),     # not matvec.cu's one_pass
             ("no residual", [(Q.Q4_K, 64), (Q.Q6_K, 32)], 1536, 1 << 30, {"b": False}),
             ("zero input", [(Q.Q4_K, 64)], 512, 1 << 30, {"b": False, "zero": True}),
             ("norm once", [(Q.Q6_K, 200)], 512, 64, {"f32": True}),    # the lm_head with f32 dots: normed first
             ("wide, int8", [(Q.Q6_K, 200)], 512, 64, {}),    # the lm_head with int8 x: normed in its prologue
             ("wide, int8, one SM", [(Q.Q6_K, 200)], 512, 64, {"sm": 1}),   # 3 blocks walk 13 row groups
             ("4 SMs", [(Q.Q4_K, 64), (Q.Q6_K, 40)], 512, 1 << 30, {"sm": 4}),   # staged: 13 teams a block
             ("scale rows of 12 bytes", [(Q.Q8_0, 50)], 192, 1 << 30, {})]       # staged in 4-byte copies
    # each case staged in shared memory (where it fits: linear.py t1_stage) and not
    for (name, parts, K, norm_once, opt), stage in [(c, st) for c in cases for st in (True, False)]:
        ts = [random_tensor(f"w{i}", qt, n, K, rng) for i, (qt, n) in enumerate(parts)]
        a, b = rng.standard_normal((2, 1, K)).astype(np.float32) * (0 if opt.get("zero") else 1)
        b = b if opt.get("b", True) else None
        nw = (1 + 0.1 * rng.standard_normal(K)).astype(np.float32)
        h_ref, s_ref = cpu.rms_norm(torch.from_numpy(a), torch.from_numpy(nw), 1e-6,
                                    None if b is None else torch.from_numpy(b))
        ops._loaded.clear()
        keep, keep_dtype = dev.sm_count, ops.gemm_dtype
        dev.sm_count = opt.get("sm", dev.sm_count)
        ops.gemm_dtype = np.dtype(np.float32) if opt.get("f32") else keep_dtype
        try:
            with options(ops, stage_weights=stage, norm_once_rows=norm_once):
                s_out = ops.alloc((1, K), np.float32)
                wq = ops.linear_weight(ts)
                y = ops.linear(Normed(dev.upload(a), None if b is None else dev.upload(b), dev.upload(nw), 1e-6, s_out), wq)
                fused = wq.rows < norm_once or linear_mod.use_q8(ops, 1, wq)    # int8 x keeps the norm in its prologue
                kind = path(ops, 1, w=wq, normed=fused)     # norm run once: plain x
        finally:
            dev.sm_count, ops.gemm_dtype = keep, keep_dtype
        # int8 x for the rows of int8-dotted formats only: float rows are dotted with x as it is
        ref = torch.cat([cpu.linear(ref_normed(kind, wq, a, b, nw, h_ref, fused) if int(t.qtype) in linear_mod.Q8_QTYPES else h_ref, dequant(t))
                         for t in ts], -1).numpy()
        out.append(Result(f"linear T=1 {name} {'|'.join(f'{q.name}x{n}' for q, n in parts)} K={K} norm {kind}",
                          rel_err(dev.to_host(y), ref), TOL[kind]))
        if b is not None:
            out.append(Result(f"linear T=1 {name} residual sum", rel_err(dev.to_host(s_out), s_ref.numpy()), 1e-6))
    # staged, 301 rows over 8 SMs: 19 teams a block of 16 warps (warps taking one or two), the
    # last team reading its one row twice; gate/up plain and norm-fused (the exclusive launch).
    # The emulator copies cp.async at once: a missing wait before the dot shows on a GPU only.
    plain, gate_up = random_tensor("w", Q.Q6_K, 301, 1024, rng), [random_tensor(n, Q.Q4_K, 130, 1024, rng) for n in "gu"]
    a, b = rng.standard_normal((2, 1, 1024)).astype(np.float32)
    nw = (1 + 0.1 * rng.standard_normal(1024)).astype(np.float32)
    h_ref, _ = cpu.rms_norm(torch.from_numpy(a), torch.from_numpy(nw), 1e-6, torch.from_numpy(b))
    ops._loaded.clear()
    wp, wgu = ops.linear_weight([plain]), ops.linear_weight(gate_up)
    Wgu = torch.cat([dequant(t) for t in gate_up])
    keep = dev.sm_count
    dev.sm_count = 8
    try:
        with options(ops, stage_weights=True):
            y, ygu = ops.linear(dev.upload(a), wp), ops.linear(dev.upload(a), wgu, act="silu_mul")
            ygn = ops.linear(Normed(dev.upload(a), dev.upload(b), dev.upload(nw), 1e-6, None), wgu, act="silu_mul")
            kind, kind_gu = path(ops, 1, w=wp, normed=False), path(ops, 1, w=wgu, normed=False, mode=1)
            kind_gn = path(ops, 1, w=wgu, mode=1)
    finally:
        dev.sm_count = keep
    ref = cpu.linear(ref_x(kind, torch.from_numpy(a)), dequant(plain)).numpy()
    ref_gu = cpu.linear(ref_x(kind_gu, torch.from_numpy(a)), Wgu, act="silu_mul").numpy()
    ref_gn = cpu.linear(ref_normed(kind_gn, wgu, a, b, nw, h_ref), Wgu, act="silu_mul").numpy()
    out.append(Result(f"linear T=1 Q6_K 301x1024 {kind} over 8 SMs", rel_err(dev.to_host(y), ref), TOL[kind]))
    out.append(Result(f"linear T=1 Q4_K gate/up 2x130x1024 {kind_gu} over 8 SMs", rel_err(dev.to_host(ygu), ref_gu), TOL[kind_gu]))
    out.append(Result(f"linear T=1 Q4_K gate/up 2x130x1024 {kind_gn} norm over 8 SMs", rel_err(dev.to_host(ygn), ref_gn),
                      TOL[kind_gn]))
    return out


def check_embed(ops: CUDAOps, rng) -> list[Result]:
    out = []
    for qtype in QTYPES:
        table = random_tensor("embd", qtype, 300, 256, rng)
        ids = rng.integers(0, 300, size=9).astype(np.int32)
        fb = ForwardBatch(ids, np.arange(9, dtype=np.int32), np.arange(9, dtype=np.int32),
                          np.array([0, 9], np.int32), np.array([9], np.int32), np.zeros((1, 1), np.int32),
                          np.array([8], np.int32), 16)
        ops._loaded.clear()
        got = ops.embed(ops.embedding(table), ops.prepare(fb))
        out.append(Result(f"embed {qtype.name}", rel_err(ops.dev.to_host(got), dequant(table)[ids].numpy()), 1e-6))
    return out


def kv_round(x: np.ndarray, kv_dtype: str) -> np.ndarray:
    """Values as the cache stores them, back in f32."""
    if kv_dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if kv_dtype == "bfloat16":
        return torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    return x


def kv_store(x: np.ndarray, kv_dtype: str) -> np.ndarray:
    if kv_dtype == "bfloat16":
        return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return x.astype(attn.KV_TYPES[kv_dtype][1])


def check_attention(ops: CUDAOps, rng, kv_dtype: str, Hq: int, Hkv: int, D: int, qk_norm: bool,
                    interleaved: bool, seqs: list[tuple[int, int]], bs: int = 16) -> list[Result]:
    """seqs: (tokens this step, context after it) per sequence; all 1-token: the decode kernel."""
    cpu, dev = CPUOps(), ops.dev
    nblocks = sum(-(-ctx // bs) for _, ctx in seqs) + 3
    perm = rng.permutation(nblocks).astype(np.int32)
    width = max(-(-ctx // bs) for _, ctx in seqs)
    tables, at = np.zeros((len(seqs), width), np.int32), 0
    for i, (_, ctx) in enumerate(seqs):
        n = -(-ctx // bs)
        tables[i, :n] = perm[at:at + n]
        at += n
    ids, pos, slots, starts, rows = [], [], [], [0], []
    for i, (n, ctx) in enumerate(seqs):
        p = np.arange(ctx - n, ctx, dtype=np.int32)
        pos.append(p)
        slots.append(tables[i, p // bs] * bs + p % bs)
        starts.append(starts[-1] + n)
        rows.append(starts[-1] - 1)
        ids += [0] * n
    fb = ForwardBatch(np.array(ids, np.int32), np.concatenate(pos), np.concatenate(slots).astype(np.int32),
                      np.array(starts, np.int32), np.array([c for _, c in seqs], np.int32), tables,
                      np.array(rows, np.int32), bs)
    T = len(ids)
    qkv = rng.standard_normal((T, (Hq + 2 * Hkv) * D)).astype(np.float32)
    cache = kv_round(rng.standard_normal((1, 2, nblocks * bs, Hkv, D)).astype(np.float32), kv_dtype)
    qn = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32) if qk_norm else None
    kn = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32) if qk_norm else None
    cos, sin = rope_tables(D, 10000.0, None, 4096)
    params = dict(n_heads=Hq, n_kv_heads=Hkv, head_dim=D, scale=D ** -0.5, interleaved=interleaved, norm_eps=1e-6)
    ref_kv = torch.from_numpy(cache.copy())
    ref = cpu.attention(torch.from_numpy(qkv), ref_kv, 0, cpu.prepare(fb), cpu.rope_cache(cos, sin), AttentionParams(
        **params, q_norm=None if qn is None else torch.from_numpy(qn), k_norm=None if kn is None else torch.from_numpy(kn)))
    gpu_cache = np.zeros((1, 2, (nblocks + 1) * bs, Hkv, D), np.float32)
    gpu_cache[:, :, :nblocks * bs] = cache
    kv = dev.upload(kv_store(gpu_cache, kv_dtype))
    ops.kv_ctype = attn.KV_TYPES[kv_dtype][0]
    ops.tile_queries = attn.tile_queries(ops.options, ops.kv_ctype, D, Hq // Hkv)
    host, where, nrows = pack(fb, ops.tile_queries)
    cfb = views(fb, dev.upload(host), where, nrows, fb.is_decode)
    got = ops.attention(dev.upload(qkv), kv, 0, cfb, ops.rope_cache(cos, sin), AttentionParams(
        **params, q_norm=None if qn is None else dev.upload(qn), k_norm=None if kn is None else dev.upload(kn)))
    written = dev.to_host(kv)[:, :, fb.slot_mapping]
    if kv_dtype == "bfloat16":
        written = torch.from_numpy(written.view(np.int16)).view(torch.bfloat16).float().numpy()
    kind = "decode" if fb.is_decode else "prefill"
    tag = f"attention {kind} {kv_dtype} Hq={Hq} Hkv={Hkv} D={D} norm={int(qk_norm)} inter={int(interleaved)} seqs={seqs}"
    # the reference keeps this step's K/V in f32; ours are rounded to the cache type first
    tol_out, tol_write = {"float32": (2e-5, 2e-6), "float16": (3e-3, 1e-3), "bfloat16": (1.5e-2, 8e-3)}[kv_dtype]
    return [Result(tag, rel_err(dev.to_host(got), ref.numpy()), tol_out),
            Result(tag + " cache write", rel_err(written, kv_round(ref_kv.numpy()[:, :, fb.slot_mapping], kv_dtype)),
                   tol_write)]


def check_sampling(ops: CUDAOps, rng, V: int = 5000) -> list[Result]:
    class Mask:
        def __init__(self, words):
            self.words = words

        def allowed(self):
            return self.words
    rows = [(SamplingParams(temperature=t, top_k=k, top_p=tp, min_p=mp, seed=int(rng.integers(1 << 40))),
             list(rng.integers(0, V, 30)), 12)
            for t, k, tp, mp in ((1.0, 0, 1.0, 0.0), (0.7, 5, 1.0, 0.0), (1.2, 0, 0.8, 0.0), (1.0, 0, 1.0, 0.1))]
    for i in range(16):
        p = SamplingParams(temperature=float(rng.choice([0, 0.6, 1.0, 1.4])), top_k=int(rng.choice([0, 3, 40])),
                           top_p=float(rng.choice([1.0, 0.9, 0.4])), min_p=float(rng.choice([0.0, 0.02])),
                           repetition_penalty=float(rng.choice([1.0, 1.2])), presence_penalty=float(rng.choice([0, 0.4])),
                           frequency_penalty=float(rng.choice([0, 0.3])), logprobs=int(rng.choice([0, 5])),
                           seed=int(rng.integers(1 << 40)),
                           constraint=Mask(rng.integers(0, 2**31, (V + 31) // 32).astype(np.int32)) if i % 5 == 4 else None)
        rows.append((p, list(rng.integers(0, V, 30)), 12))
    sb = SamplingBatch.build(rows, V)
    logits = (rng.standard_normal((len(rows), V)) * 4).astype(np.float32)
    ref = CPUOps().sample(torch.from_numpy(logits.copy()), sb)
    got = ops.sample(ops.dev.upload(logits), sb)
    raw = torch.log_softmax(torch.from_numpy(logits).double(), -1)
    exact_entropy = -(raw.exp() * raw).sum(-1).numpy()
    # Rows with no finite logit (a model gone to NaN, a mask that allows nothing), greedy and
    # sampled: still a token of the vocabulary (the embedding of the next step reads its row).
    # An all-greedy batch takes its ids from sample_stats.cu alone, a mixed one from sample_select.cu.
    nonfinite = np.full((4, V), np.nan, np.float32)
    nonfinite[2:] = -np.inf
    ids_nf = []
    for temps in ((0.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 1.0)):
        sb_nf = SamplingBatch.build([(SamplingParams(temperature=t, seed=7), [1, 2], 1) for t in temps], V)
        ids_nf.append(np.asarray(ops.sample(ops.dev.upload(nonfinite), sb_nf).token_ids))
    ids_nf = np.concatenate(ids_nf)
    return [Result("sample ids (all params)", float((ref.token_ids != got.token_ids).sum()), 0),
            Result("sample ids of rows with no finite logit within the vocabulary",
                   float(((ids_nf < 0) | (ids_nf >= V)).sum()), 0),
            Result("sample logprobs", rel_err(got.logprobs, ref.logprobs), 1e-5),
            Result("sample entropy (vs float64)", rel_err(got.entropy, exact_entropy), 1e-6),
            Result("sample entropy (vs cpu.py)", rel_err(got.entropy, ref.entropy), 1e-4),
            Result("sample top logprob ids", float((ref.top_ids != got.top_ids).sum()), 0)]


def run_checks(ops: CUDAOps, seed: int = 0) -> list[Result]:
    rng = np.random.default_rng(seed)
    poison(ops)
    results = check_linear(ops, rng) + check_embed(ops, rng) + check_sampling(ops, rng)
    for kv_dtype in ("float16", "bfloat16", "float32"):
        for Hq, Hkv, D, norm, inter in ((4, 2, 16, False, False), (16, 8, 128, True, False),
                                        (14, 2, 64, False, True), (8, 8, 32, True, True)):
            # decode; a mixed step with a prompt continuing after 23 cached positions; prompts of
            # several query tiles and key steps, one after 60 cached positions
            for seqs in ([(1, 1), (1, 37), (1, 300), (1, 2000)], [(5, 5), (17, 40), (1, 30)], [(70, 70), (40, 100)]):
                results += check_attention(ops, rng, kv_dtype, Hq, Hkv, D, norm, inter, seqs)
    # attention_decode_tc.cu (an f16 cache's decode kernel): G = 4 and 16 with an empty last split
    # (L = 400), one split (L = 21) and the new row in a split's fifth chunk or later (L = 1100,
    # 4096); 16 sequences of 32 KV heads: one split each, several chunks a warp (as at batch 64)
    for Hq, Hkv, D, seqs in ((32, 8, 128, [(1, 400), (1, 21), (1, 1100)]), (16, 1, 96, [(1, 400), (1, 4096)]),
                             (64, 32, 64, [(1, int(n)) for n in rng.integers(1, 400, 16)])):
        results += check_attention(ops, rng, "float16", Hq, Hkv, D, True, False, seqs)
    for kv_dtype in ("bfloat16", "float32"):    # attention_decode.cu at D = 96 (24 lanes a V row)
        results += check_attention(ops, rng, kv_dtype, 16, 2, 96, True, False, [(1, 400), (1, 37)])
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emulator", action="store_true", help="run the kernels on the CPU emulator")
    ap.add_argument("--no-timing", action="store_true")
    args = ap.parse_args()
    if args.emulator:
        from dev.cuda.emulator import EmuDevice
        ops = CUDAOps(device=EmuDevice())
    else:
        ops = CUDAOps()
    results = run_checks(ops)
    bad = [r for r in results if not r.ok]
    for r in bad:
        print(f"FAIL {r.name}: error {r.err:.3g} > {r.tol:.3g}")
    print(f"{len(results) - len(bad)}/{len(results)} kernel checks passed "
          f"(worst relative error {max(r.err / r.tol for r in results if r.tol) :.2f} of tolerance)")
    if not args.emulator and not args.no_timing:
        from dev.cuda.timing import report
        report(CUDAOps())
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
