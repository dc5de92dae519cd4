"""y = W x on the GPU: fused dequantize-and-multiply kernels for a few tokens, cuBLAS for many.

Up to `matvec_max_tokens` rows, a matvec kernel reads each weight byte once per 8 tokens, with
the residual add + RMSNorm of a `Normed` input fused into its prologue and SiLU(gate) * up into
its epilogue; graph-capturable. At one token a weight whose rows fit half of each SM's shared
memory is copied there before the kernel's PDL wait (matvec_t1_stage: see stage_plan). With
f16 gemm_dtype (the default) Q4_K, Q6_K and Q8_0 weights go through matvec_tc.cu (f16 decode
into tensor-core products, f32 sums: the precision of the paths beyond it) from 2 tokens, and
at 1 token matvec.cu dots a norm-fused input (qkv, gate/up, the lm_head) rounded to int8 in
blocks of 16 with any quantized format (__dp4a, as llama.cpp's MMVQ); otherwise, and with f32
gemm_dtype, matvec.cu is exact in f32. Up to `matmul_max_tokens` rows (f16 gemm_dtype),
matmul.cu decodes the weight into shared memory and multiplies on the tensor cores, reading it
once per 64 tokens. Beyond that, the weight is dequantized into a reused scratch buffer and
multiplied by cuBLAS (f16 tensor cores with f32 accumulation, or f32), with the norm and SiLU
as separate kernels. The choices follow `ops.options` (config.CudaOptions); the measurements
behind the constants below are in benchmarks/NOTES-cuda.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.backends.cuda.weights import QuantLinear


@dataclass(slots=True)
class Normed:
    """rmsnorm(a + b) * weight, not yet computed; sum_out receives a + b when given (a buffer of
    its own: a kernel's block 0 writes it while the other blocks still read a and b)."""
    a: object                   # [T, K] f32
    b: object | None            # [T, K] f32
    weight: object              # [K] f32
    eps: float
    sum_out: object | None

    @property
    def shape(self) -> tuple[int, int]:
        return self.a.shape


def materialize(ops, x: Normed, dtype=np.float32):
    """Run the norm (rms_norm.cu): [T, K] of dtype, and fill x.sum_out."""
    T, K = x.a.shape
    out = ops.alloc((T, K), dtype)
    name = "rms_norm_f32" if np.dtype(dtype) == np.float32 else "rms_norm_f16"
    getattr(ops.dev.kernels("rms_norm"), name)((T,), (256,), (
        x.a, x.b, x.weight, np.float32(x.eps), np.int32(K), x.sum_out if x.b is not None else None, out))
    return out


def linear(ops, x, w: QuantLinear, bias=None, act: str | None = None):
    assert act in (None, "silu_mul"), act
    T, K = x.shape
    assert K == w.cols, (K, w.cols)
    if T == 0:      # a prefill chunk that ends no prompt wants no logits: nothing to launch
        return ops.alloc((0, w.rows // 2 if act else w.rows), np.float32)
    if T <= ops.matvec_max_tokens:
        return matvec(ops, x, w, bias, act)
    if use_matmul(ops, T, K, w.rows):
        return matmul(ops, x, w, bias, act)
    return gemm(ops, x, w, bias, act)


MV_WARPS = {1: 4, 2: 8, 4: 8, 8: 8}  # matvec.cu's matvec_t<T>: warps a block, 1-2 weight rows each
# A one-token launch with a prologue (norm-fused or int8 x) runs blocks of 8 warps
# (matvec_t1_w8): each block reads x, the residual and the norm weight from L2 again, and
# fewer, larger blocks halve that traffic. Launches without one keep MV_WARPS.
MV_PROLOGUE_WARPS = 8
# Blocks an SM of a launch with a prologue (of MV_WARPS warps; MV_PROLOGUE_WARPS keep the
# same warps an SM): each block pays the prologue, so beyond this grid they walk the row groups.
NORMED_BLOCKS_PER_SM = {1: 6, 2: 2, 4: 2, 8: 2}
NORMED_TC_BLOCKS_PER_SM = 3  # the same for matvec_tc.cu's blocks of 8 warps (24 warps an SM)
# Resident warps an SM that matvec.cu's split aims at. At one token, formats of 32 columns a
# 16-byte chunk (K-quants, Q4_*, Q5_*): the 24 that fit at matvec_t1's registers, one wave;
# Q8_0 and float rows have 2-8x the chunks and run faster with each warp walking less of a row.
MV_WARPS_PER_SM = {32: 24}
MV_WARPS_PER_SM_OTHER = 32
STAGE_SEGMENTS = 4          # matvec.cu's STAGE_PIECES / 2: each segment cut into a gate and an up range
STAGE_WARPS = 16            # matvec_t1_stage's blocks
STAGE_STATIC_SMEM = 1024    # its own shared arrays (red, pieces), rounded up
Q8_QTYPES = {2, 3, 6, 7, 8, 12, 13, 14}     # the formats with quant.cuh Int8<> decoders: all but F32/F16/BF16
# Columns a 16-byte chunk of each format decodes to (quant.cuh's QK / C): a row has K / this chunks.
CHUNK_COLS = {0: 4, 1: 8, 30: 8, 2: 32, 3: 32, 6: 32, 7: 32, 8: 16, 12: 32, 13: 32, 14: 32}


def mv_split(ops, warps: int, K: int, w: QuantLinear, teams: int, tokens: int) -> int:
    """Warps that share a weight row pair in matvec.cu (a power of two up to the block's warps):
    doubled while the launch stays within MV_WARPS_PER_SM and each warp keeps at least 16
    chunks a row, so narrow weights with long rows (o_proj, down: 1,024 row pairs) run 2-4
    times the warps, each walking 1/2-1/4 of the row."""
    if ops.options.matvec_split is not None:
        return ops.options.matvec_split
    cols = [CHUNK_COLS[int(q)] for q in w.qtypes]
    chunks = K // max(cols)
    per_sm = MV_WARPS_PER_SM.get(min(cols), MV_WARPS_PER_SM_OTHER) if tokens == 1 else MV_WARPS_PER_SM_OTHER
    split = 1
    while (2 * split <= warps and 16 * 2 * split <= chunks
           and teams * 2 * split <= per_sm * ops.dev.sm_count):
        split *= 2
    return split


def qtype_mask(w: QuantLinear) -> int:
    """The formats a kernel module must decode (quant.cuh's QTYPES): modules are compiled per
    mask, holding only those decoders (smaller code, fewer registers)."""
    return sum(1 << int(q) for q in w.qtypes)


TC_QTYPES = {8, 12, 14}     # Q8_0, Q4_K, Q6_K: the formats with quant.cuh Half<> decoders
TC_WARPS = 8                # matvec_tc.cu's TC_WARPS
TC_STEPS_PER_WARP = 2       # its TC_UNROLL: a team grows while each warp keeps this many steps


def use_tc(ops, T: int, w: QuantLinear, K: int) -> bool:
    """matvec_tc.cu for T tokens of this weight: 2 to 8 tokens at f16 gemm_dtype, formats it
    decodes, whole 4-chunk steps (K % 64 for Q8_0), and 8-row tiles of one format (segments
    starting at multiples of 8). At 1 token matvec.cu is as fast or faster: one token leaves
    it latency-bound, so its f32 decode costs little; from 2 tokens matvec.cu's FMAs grow with
    the tokens, the products on the tensor cores do not."""
    if not 2 <= T <= 8 or ops.gemm_dtype != np.float16 or K % 64 or any(int(q) not in TC_QTYPES for q in w.qtypes):
        return False
    return len(w.qtypes) == 1 or all(s.row0 % 8 == 0 for s in w.segments)


def use_q8(ops, T: int, w: QuantLinear, normed: bool = True) -> bool:
    """matvec.cu with int8 activations for this one-token launch: f16 gemm_dtype (f32 keeps the
    exact path the parity tests use), a format of the weight with an Int8 decoder (a mixed
    weight's other formats keep the f32 dot), and a norm-fused x, whose prologue each block
    runs anyway; a plain x (o_proj, down) only in the staged kernel (t1_stage), whose one
    block an SM quantizes it, where the unstaged kernel's many blocks would each load it."""
    return (T == 1 and ops.gemm_dtype == np.float16 and normed
            and any(int(q) in Q8_QTYPES for q in w.qtypes))


def stage_plan(ops, w: QuantLinear, n_out: int, mode: int, x_smem: int, exclusive: bool = False):
    """(grid, teams a block, shared bytes) of a matvec_t1_stage launch, or None where the
    weight does not stage: its rows of a block do not fit half an SM's shared memory (the
    lm_head; Q8_0 gate/up of a 1.7B), more segments than pieces, or rows not whole words; and
    on a device whose captured kernels do not overlap (no PDL: before Hopper, or the pdl
    option off), as the copy then runs alone before the dot (eager launches, outside the
    decode graphs, stage on Hopper too: the same kernels the graphs replay). An exclusive
    launch (norm-fused: qkv, gate/up) asks for half an SM, so no SM runs two of its blocks
    at half speed; the plain ones between them still fit beside it."""
    if not ops.options.stage_weights or not ops.dev.pdl or len(w.segments) > STAGE_SEGMENTS:
        return None
    row_bytes = [(s.q.shape[1], 0 if s.s is None else s.s.shape[1]) for s in w.segments]
    if any(q % 4 or r % 4 for q, r in row_bytes):
        return None
    teams = n_out if mode else (n_out + 1) // 2
    tpb = -(-teams // min(teams, ops.dev.sm_count))
    # x first (make_x), then each piece's payload and scale bytes, each rounded up to 16 bytes
    smem = -(-x_smem // 16) * 16 + tpb * 2 * max(q + r for q, r in row_bytes) + 2 * 2 * len(w.segments) * 16
    # two blocks fit an SM with their own shared arrays and the driver's reserve; an exclusive
    # one asks for half the SM less the reserve, which two never fit and one does beside any other
    half = ops.dev.smem_per_sm // 2 - ops.dev.smem_reserved
    if smem > half - 2 * STAGE_STATIC_SMEM:
        return None
    return -(-teams // tpb), tpb, half if exclusive else smem


def matvec(ops, x, w: QuantLinear, bias, act):
    T, K = x.shape
    assert not isinstance(x, Normed) or x.sum_out is None or x.sum_out is not x.a and x.sum_out is not x.b
    if act == "silu_mul" and len(w.qtypes) > 1:     # gate and up rows of different formats
        return epilogue(ops, matvec(ops, x, w, bias, None), act="silu_mul")
    mode = 1 if act == "silu_mul" else 0
    n_out = w.rows // 2 if mode else w.rows
    q8 = use_q8(ops, T, w, isinstance(x, Normed))
    if T == 1 and n_out >= ops.options.norm_once_rows and isinstance(x, Normed) and not q8:    # the lm_head
        x = materialize(ops, x)
    if use_tc(ops, T, w, K):
        return matvec_tc(ops, x, w, bias, mode, n_out)
    assert all(s.rows % 2 == 0 for s in w.segments[:-1]), "matvec pairs rows: segments must start at even rows"
    if T == 1:
        staged = matvec_staged(ops, x, w, bias, mode, n_out)
        if staged is not None:
            return staged
    tk = 1 if T == 1 else 2 if T == 2 else 4 if T <= 4 else 8
    smem = x_smem(w, tk, q8, isinstance(x, Normed))
    if isinstance(x, Normed) and smem > ops.dev.max_smem - 1024:     # the norm's floats do not fit
        x, smem = materialize(ops, x), x_smem(w, tk, q8, False)
    out = ops.alloc((T, n_out), np.float32)
    prologue = isinstance(x, Normed) or q8
    warps = MV_PROLOGUE_WARPS if tk == 1 and prologue else MV_WARPS[tk]
    teams = (n_out + (0 if mode else 1)) // (1 if mode else 2)      # row pairs, or gate/up pairs
    split = mv_split(ops, warps, K, w, teams, tk)
    per_block = warps // split * (1 if mode else 2)
    groups = (n_out + per_block - 1) // per_block
    if prologue and NORMED_BLOCKS_PER_SM[tk]:   # each block norms / quantizes x again
        groups = min(groups, NORMED_BLOCKS_PER_SM[tk] * MV_WARPS[tk] // warps * ops.dev.sm_count)
    grid = (groups, (T + tk - 1) // tk)
    if isinstance(x, Normed):
        inputs = (None, np.int32(K), np.int32(T), x.a, x.b, x.weight, np.float32(x.eps),
                  x.sum_out if x.b is not None else None)
    else:
        inputs = (x, np.int32(K), np.int32(T), None, None, None, np.float32(0), None)
    module = ops.dev.kernels("matvec", QTYPES=qtype_mask(w), MV_UNROLL=ops.options.matvec_unroll, Q8X=int(q8))
    getattr(module, f"matvec_t{tk}" if warps == MV_WARPS[tk] else f"matvec_t{tk}_w{warps}")(grid, (32 * warps,), (
        w.table, np.int32(len(w.segments)), np.int32(K), np.int32(n_out), np.int32(mode), np.int32(split), *inputs,
        bias, out, np.int32(n_out)), smem)
    return out


def x_smem(w: QuantLinear, tk: int, q8: bool, normed: bool) -> int:
    """Shared bytes of the x a matvec.cu launch makes (make_x): at one token with int8 x, the
    int8 values and a (scale, sum) pair a 16 columns; with a norm-fused input, the normed floats
    of its tk tokens, except where it norms and quantizes in one pass (every format of the
    weight int8-dotted: matvec.cu's q8_only)."""
    one_pass = q8 and all(int(q) in Q8_QTYPES for q in w.qtypes)
    return (w.cols * 3 // 2 if q8 else 0) + (tk * w.cols * 4 if normed and not one_pass else 0)


def t1_stage(ops, w: QuantLinear, normed: bool, mode: int):
    """(int8 x?, x's shared bytes, stage_plan) of a one-token launch of w through
    matvec_t1_stage; the plan is None where it does not stage."""
    q8 = use_q8(ops, 1, w, normed=True)        # the staged kernel quantizes a plain x too
    xs = x_smem(w, 1, q8, normed)
    return q8, xs, stage_plan(ops, w, w.rows // 2 if mode else w.rows, mode, xs, exclusive=normed)


def matvec_staged(ops, x, w: QuantLinear, bias, mode: int, n_out: int):
    """One token through matvec_t1_stage (see stage_plan); None where the weight does not stage."""
    q8, xs, plan = t1_stage(ops, w, isinstance(x, Normed), mode)
    if plan is None:
        return None
    grid, tpb, smem = plan
    out = ops.alloc((1, n_out), np.float32)
    if isinstance(x, Normed):
        inputs = (None, x.a, x.b, x.weight, np.float32(x.eps), x.sum_out if x.b is not None else None)
    else:
        inputs = (x, None, None, None, np.float32(0), None)
    module = ops.dev.kernels("matvec", QTYPES=qtype_mask(w), MV_UNROLL=ops.options.matvec_unroll, Q8X=int(q8))
    kernel = module.matvec_t1_stage
    kernel.prefer_shared()
    kernel((grid,), (32 * STAGE_WARPS,), (
        w.table, np.int32(len(w.segments)), np.int32(w.cols), np.int32(n_out), np.int32(mode), np.int32(tpb),
        np.int32(-(-xs // 16) * 16), *inputs, bias, out), smem)
    return out


def matvec_tc(ops, x, w: QuantLinear, bias, mode: int, n_out: int):
    """matvec_tc.cu: tiles of 8 weight rows (mode 1: 4 gate/up pairs), teams of up to 8 warps
    a tile, each warp taking every team-th step of 4 chunks a row."""
    T, K = x.shape
    tiles = -(-n_out // (8 if mode == 0 else 4))
    steps = min(K // CHUNK_COLS[int(q)] for q in w.qtypes) // 4     # the tile format with the fewest
    forced = ops.options.matvec_split
    split = forced or 1
    while forced is None and 2 * split <= TC_WARPS and steps >= 2 * split * TC_STEPS_PER_WARP:
        split *= 2
    groups = -(-tiles // (TC_WARPS // split))
    smem = 0
    if isinstance(x, Normed):
        smem = T * K * 4
        if smem > ops.dev.max_smem - 4096:
            x, smem = materialize(ops, x), 0
    if isinstance(x, Normed):
        groups = min(groups, NORMED_TC_BLOCKS_PER_SM * ops.dev.sm_count)
        inputs = (None, np.int32(K), np.int32(T), x.a, x.b, x.weight, np.float32(x.eps),
                  x.sum_out if x.b is not None else None)
    else:
        inputs = (x, np.int32(K), np.int32(T), None, None, None, np.float32(0), None)
    out = ops.alloc((T, n_out), np.float32)
    ops.dev.kernels("matvec_tc", QTYPES=qtype_mask(w)).matvec_tc((groups,), (32 * TC_WARPS,), (
        w.table, np.int32(len(w.segments)), np.int32(K), np.int32(n_out), np.int32(mode), np.int32(split),
        *inputs, bias, out, np.int32(n_out)), smem)
    return out


MATMUL_STEP = 256          # matmul.cu's KS: columns a K step, and the unit of a K split
MATMUL_ROWS = 64           # weight rows a tile (mode 1: 32 gate + 32 up)
MATMUL_MAX_SPLITS = 8


MATMUL_WIDE = (64, 8192)    # token rows up to which weights of this many rows still use matmul.cu


def use_matmul(ops, T: int, K: int, rows: int) -> bool:
    """matmul.cu for up to matmul_max_tokens rows (f16 gemm_dtype), and up to 64 for weights
    wide enough to fill the GPU without a K split, whose combine costs more as T grows
    (H100, 1.7B at T = 64: gate/up 50 us against cuBLAS's 62, lm_head 482 against 516, while
    qkv, o_proj and down were 15-25% slower than cuBLAS)."""
    if ops.gemm_dtype != np.float16 or K % 32 or ops.matmul_max_tokens <= 0:     # 0: matmul.cu off
        return False
    return T <= ops.matmul_max_tokens or (T <= MATMUL_WIDE[0] and rows >= MATMUL_WIDE[1])


def as_dtype(ops, x, dtype):
    """x as a [T, K] array of dtype (f32 or f16) for matmul.cu or cuBLAS: a Normed input
    is normed into it, an f32 one cast by to_f16.cu."""
    if isinstance(x, Normed):
        return materialize(ops, x, dtype)
    if x.dtype == dtype:
        return x
    h = ops.alloc(x.shape, dtype)
    if dtype == np.float16 and x.dtype == np.float32 and x.flags.c_contiguous and ops.dev.ptr(x) % 16 == 0:
        blocks = min(1024, (x.size // 4 + 255) // 256 + 1)
        ops.dev.kernels("to_f16").to_f16((blocks,), (256,), (x, np.int64(x.size), h))
    else:
        h[...] = x
    return h


def matmul(ops, x, w: QuantLinear, bias, act):
    """matmul.cu: tiles of 64 weight rows x 16-64 tokens, K split until the grid has about
    two blocks an SM (each split a whole number of 256-column steps)."""
    T, K = x.shape
    h = as_dtype(ops, x, np.float16)
    mode = 1 if act == "silu_mul" else 0
    n_out = w.rows // 2 if mode else w.rows
    tiles = (n_out + (MATMUL_ROWS // 2 if mode else MATMUL_ROWS) - 1) // (MATMUL_ROWS // 2 if mode else MATMUL_ROWS)
    # Tiles of 64 tokens read the weight once but fit 2 blocks an SM; a weight of fewer than
    # 4 tiles an SM runs faster as two passes of 32 (gate/up 1.7B T = 64: 50 against 60 us).
    bt = 16 if T <= 16 else 32 if T <= 32 or tiles < 4 * ops.dev.sm_count else 64
    nf = bt // 8
    ty = (T + bt - 1) // bt
    steps = (K + MATMUL_STEP - 1) // MATMUL_STEP
    splits = 1
    while splits * 2 <= min(steps, MATMUL_MAX_SPLITS) and tiles * ty * splits < 2 * ops.dev.sm_count:
        splits *= 2
    ksplit = (steps + splits - 1) // splits * MATMUL_STEP
    splits = (K + ksplit - 1) // ksplit
    part = count = None
    if splits > 1:      # partial tiles, and tickets that the kernel leaves at zero (graph replays)
        part = ops.alloc((splits * ty * tiles * bt * MATMUL_ROWS,), np.float32)
        count = ops.alloc((ty * tiles,), np.int32, zero=True)
    out = ops.alloc((T, n_out), np.float32)
    smem = (MATMUL_ROWS + 2 * bt) * (MATMUL_STEP + 8) * 2     # weights, tokens double-buffered
    getattr(ops.dev.kernels("matmul", QTYPES=qtype_mask(w)), f"matmul_t{nf}")((tiles, ty, splits), (128,), (
        w.table, np.int32(len(w.segments)), np.int32(K), np.int32(n_out), np.int32(mode), h, np.int32(K),
        np.int32(T), np.int32(ksplit), bias, out, np.int32(n_out), part, count), smem)
    return out


def gemm(ops, x, w: QuantLinear, bias, act):
    """Weight rows dequantized a scratch-full at a time (the scratch, about L2-sized, is
    fixed, so captured graphs keep valid pointers), each slice multiplied by cuBLAS."""
    T, K = x.shape
    dtype = ops.gemm_dtype
    h = as_dtype(ops, x, dtype)
    scratch = ops.scratch(dtype)
    step = max(2, scratch.size // K // 2 * 2)
    name = "dequant_f32" if dtype == np.float32 else "dequant_f16"
    y = ops.alloc((T, w.rows), np.float32)
    for r0 in range(0, w.rows, step):
        n = min(step, w.rows - r0)
        part = scratch[:n * K].reshape(n, K)
        getattr(ops.dev.kernels("dequant"), name)((n,), (64,), (
            w.table, np.int32(len(w.segments)), np.int32(K), None, None, np.int32(r0), part, np.int32(K)))
        ops.dev.gemm(h, part, y, out_col0=r0)
    return epilogue(ops, y, bias, act) if bias is not None or act else y


def epilogue(ops, y, bias=None, act: str | None = None):
    """y + bias (in place), then the SwiGLU product when act is "silu_mul" (epilogue.cu)."""
    T, N = y.shape
    out = ops.alloc((T, N // 2), np.float32) if act else y
    blocks = max(1, min(4096, (T * out.shape[1] + 255) // 256))
    ops.dev.kernels("epilogue").epilogue((blocks,), (256,), (
        y, np.int32(T), np.int32(N), bias, np.int32(act == "silu_mul"), out))
    return out
