"""Attention over the paged KV cache: one fused kernel for decode steps (q/k norm, RoPE,
the cache write and split-K flash-decoding), rope_kv + a tiled causal kernel otherwise (both
on the tensor cores for an f16 cache).

KV cache: [layers, 2, (blocks + 1) * block_size, Hkv, D] in f16, bf16 (stored as u16) or
f32; the extra block takes the writes of padded rows in graph buckets. Kernel choices follow
`CudaOptions` (attention_tc, decode_tc_max_seqs, min_split_positions): the tensor-core decode
kernel wins at few sequences and loses at batch 64 (one split a sequence, 3 blocks an SM).
"""
from __future__ import annotations

import numpy as np

from runtime.backends import AttentionParams
from runtime.backends.cuda.batch import CUDABatch
from runtime.config import CudaOptions

KV_TYPES = {"float16": ("__half", np.float16), "bfloat16": ("__nv_bfloat16", np.uint16),
            "float32": ("float", np.float32)}


def _tc_shape(kv_ctype: str, head_dim: int) -> bool:
    """What the tensor-core kernels take: an f16 cache (f16 products; a bf16 or f32 cache keeps
    its precision on the CUDA-core kernels) and head sizes of 32 to 128 in steps of 32."""
    return kv_ctype == "__half" and head_dim % 32 == 0 and head_dim <= 128


def prefill_kernel(opts: CudaOptions, kv_ctype: str, head_dim: int) -> str:
    """attention_prefill_tc.cu (tensor cores) where it applies, else attention_prefill.cu (f32)."""
    return "attention_prefill_tc" if opts.attention_tc and _tc_shape(kv_ctype, head_dim) else "attention_prefill"


def decode_kernel(opts: CudaOptions, kv_ctype: str, head_dim: int, seqs: int) -> str:
    """attention_decode_tc.cu (tensor cores) where it applies and the step has few sequences,
    else attention_decode.cu (f32)."""
    tc = opts.attention_tc and seqs <= opts.decode_tc_max_seqs and _tc_shape(kv_ctype, head_dim)
    return "attention_decode_tc" if tc else "attention_decode"


def decode_smem(name: str, head_dim: int) -> int:
    """Dynamic shared memory of a decode kernel: attention_decode_tc's four warps' K and V
    slices, two stages of 16 rows of D + 8 halves each."""
    return 512 * (head_dim + 8) if name == "attention_decode_tc" else 0


def tile_queries(opts: CudaOptions, kv_ctype: str, head_dim: int, group: int) -> int:
    """Queries a prefill tile (batch.prefill_tiles): the kernel's (query, head) rows, 64 for the
    tensor-core kernel and 32 for the f32 one, over the `group` query heads a KV head."""
    rows = 64 if prefill_kernel(opts, kv_ctype, head_dim) == "attention_prefill_tc" else 32
    return max(1, rows // group)


def splits(ops, num_seqs: int, n_kv_heads: int) -> int:
    """Split-K factor of the grid: enough blocks to cover the GPU twice, at most 32 (the
    kernel uses fewer for a context shorter than min_split_positions a split)."""
    blocks = num_seqs * n_kv_heads
    return max(1, min(32, -(-2 * ops.dev.sm_count // blocks)))


def attention(ops, qkv, kv, layer: int, fb: CUDABatch, rope, p: AttentionParams):
    D, Hq, Hkv = p.head_dim, p.n_heads, p.n_kv_heads
    assert Hq % Hkv == 0 and Hq // Hkv <= 16, "attention kernels take up to 16 query heads a KV head"
    mods = ops.attention_kernels(D, Hq // Hkv, fb.num_tokens)
    k_cache, v_cache = kv[layer, 0], kv[layer, 1]
    T = fb.num_tokens
    # a padded prefill (graph bucket) has rows no tile writes: zeros, not NaN, flow on from them
    out = ops.alloc((T, Hq * D), np.float32, zero=not fb.is_decode and T > len(fb.host.input_ids))
    common = (rope.cos, rope.sin, p.q_norm, p.k_norm, np.float32(p.norm_eps), np.int32(p.interleaved))
    if fb.is_decode:
        S = splits(ops, T, Hkv)
        assert 1 <= S <= 32, "the decode kernels combine at most 32 splits"
        part_acc = ops.alloc((T * Hq * S * D,), np.float32) if S > 1 else None
        part_ml = ops.alloc((T * Hq * S * 2,), np.float32) if S > 1 else None
        counters = ops.alloc((T * Hkv,), np.int32, zero=True)
        name = decode_kernel(ops.options, ops.kv_ctype, D, T)
        getattr(mods[name], name)((S, Hkv, T), (128,), (
            qkv, np.int32(Hq), np.int32(Hkv), fb.ctx, fb.slots, fb.tables, fb.stride,
            np.int32(fb.host.block_size), *common, np.float32(p.scale), k_cache, v_cache, out,
            part_acc, part_ml, counters), decode_smem(name, D))
        return out
    q = ops.alloc((T, Hq * D), np.float32)
    mods["rope_kv"].rope_kv((T,), (128,), (
        qkv, np.int32(Hq), np.int32(Hkv), fb.positions, fb.slots, *common, q, k_cache, v_cache))
    assert ops.tile_queries == tile_queries(ops.options, ops.kv_ctype, D, Hq // Hkv), \
        "prefill tiles packed for another kernel"
    name = prefill_kernel(ops.options, ops.kv_ctype, D)
    getattr(mods[name], name)((fb.num_tiles, Hkv), (128,), (
        q, np.int32(Hq), np.int32(Hkv), fb.tiles, fb.tables, fb.stride, np.int32(fb.host.block_size),
        np.float32(p.scale), k_cache, v_cache, out))
    return out
