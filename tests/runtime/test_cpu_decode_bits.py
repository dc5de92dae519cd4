"""The decode kernels (kern.inc decode_rows) against AVX512's numerics written out in numpy.

A decode product on Q5_0 / Q8_0 / Q4_K / Q6_K blocks gives every (row, token) the same bits on
AVX512-VNNI and on AVX2: the integer sum of each 4 products, each times its 16's scale s xh into
one of 16 float lanes by fused multiply-add, 64 values at a time, then the mins m xsd into the
lanes by h mod 16, then the lanes added as gcc's _mm512_reduce_add_ps adds them. The reference
below does that arithmetic in numpy (a fused multiply-add exact through float64 rounded to odd),
so the bits are checked on a machine with either instruction set.
"""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from tests.runtime.test_cpu_kernels import as_weight, kernels, level, random_blocks  # noqa: F401 (a fixture)

FUSED = (Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q6_K)
pytestmark = pytest.mark.skipif(kernels is None, reason="CPU block kernels not built (pip install -e .)")


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 a * b + c rounded once: the product is exact in float64, the sum is rounded to
    odd there (its exact error from TwoSum), and that rounds to float32 as the exact value would."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c = c.astype(np.float64)
    s = p + c
    v = s - p
    err = (p - (s - v)) + (c - v)
    bits = s.view(np.int64)
    even = (err != 0) & ((bits & 1) == 0)
    bits = np.where(even, bits + np.where((err > 0) == (s > 0), 1, -1), bits)
    return bits.view(np.float64).astype(np.float32)


def quantize(x: np.ndarray):
    """kern.inc quantize: x [T, K] -> xq int, xh, xsd [T, K / 16] float32."""
    T, K = x.shape
    b = x.reshape(T, K // 32, 32)
    amax = np.abs(b).max(-1, keepdims=True)
    d = amax / np.float32(127)
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), np.float32(0)).astype(np.float32)
    xq = np.rint(b * inv).astype(np.int64)
    xh = np.repeat(d[..., 0], 2, -1)
    sums = xq.reshape(T, K // 16, 16).sum(-1)
    return xq.reshape(T, K), xh, (xh * sums.astype(np.float32)).astype(np.float32)


def fp16(raw: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)[..., 0]


def unpack(qtype: Q, raw: np.ndarray, K: int):
    """unpack.h: rows [N, bytes] -> q [N, K] (unsigned), s, m [N, K / 16] float32."""
    N = raw.shape[0]
    if qtype in (Q.Q5_0, Q.Q8_0):
        blk = raw.reshape(N, K // 32, -1)
        d = fp16(blk[..., 0:2])
        if qtype == Q.Q8_0:
            q = blk[..., 2:].view(np.int8).astype(np.int64) + 128
            mins = np.float32(-128) * d
        else:
            qs = blk[..., 6:22].astype(np.int64)
            qh = blk[..., 2:6].copy().view(np.uint32).astype(np.int64)          # [N, B, 1]
            q = np.concatenate([qs & 15, qs >> 4], -1) | (((qh >> np.arange(32)) & 1) << 4)
            mins = np.float32(-16) * d
        return q.reshape(N, K), np.repeat(d, 2, -1), np.repeat(mins, 2, -1)
    blk = raw.reshape(N, K // 256, -1)
    if qtype == Q.Q4_K:
        d, dmin, sc = fp16(blk[..., 0:2]), fp16(blk[..., 2:4]), blk[..., 4:16].astype(np.int64)
        j = np.arange(4)
        scale = np.concatenate([sc[..., j] & 63, (sc[..., j + 8] & 15) | ((sc[..., j] >> 6) << 4)], -1)
        mn = np.concatenate([sc[..., j + 4] & 63, (sc[..., j + 8] >> 4) | ((sc[..., j + 4] >> 6) << 4)], -1)
        s = np.repeat(d[..., None] * scale.astype(np.float32), 2, -1)
        m = np.repeat(-dmin[..., None] * mn.astype(np.float32), 2, -1)
        qs = blk[..., 16:144].astype(np.int64).reshape(N, K // 256, 4, 32)
        q = np.concatenate([qs & 15, qs >> 4], -1)
    else:
        d = fp16(blk[..., 208:210])
        s = d[..., None] * blk[..., 192:208].view(np.int8).astype(np.float32)
        m = np.float32(-32) * s
        ql = blk[..., 0:128].astype(np.int64).reshape(N, K // 256, 2, 64)
        qh = blk[..., 128:192].astype(np.int64).reshape(N, K // 256, 2, 1, 32)
        lo = np.concatenate([ql & 15, ql >> 4], -1).reshape(N, K // 256, 2, 4, 32)
        q = lo | (((qh >> (2 * np.arange(4)[:, None])) & 3) << 4)
    return q.reshape(N, K), s.reshape(N, K // 16).astype(np.float32), m.reshape(N, K // 16).astype(np.float32)


def avx512_decode(qtype: Q, raw: np.ndarray, K: int, x: np.ndarray) -> np.ndarray:
    """rowsn_fused / rowsn_super (kern.inc, AVX512): x [T, K] against rows [N, bytes] -> [T, N]."""
    q, s, m = unpack(qtype, raw, K)
    xq, xh, xsd = quantize(x)
    N, T, H = q.shape[0], x.shape[0], K // 16
    acc = np.zeros((T, N, 16), np.float32)
    for c in range(0, K, 64):                  # a chunk: lane l holds values c + 4l .. c + 4l + 3
        n = min(64, K - c) // 4                # K = 32 mod 64: the last chunk fills lanes 0-7
        ints = (q[:, c:c + 4 * n].reshape(N, n, 4)[None] * xq[:, c:c + 4 * n].reshape(T, 1, n, 4)).sum(-1)
        h = c // 16 + np.arange(n) // 4
        sc = s[None, :, h] * xh[:, None, h]
        acc[..., :n] = fma32(ints.astype(np.float32), sc, acc[..., :n])
    for h0 in range(0, H, 16):
        n = min(16, H - h0)
        acc[..., :n] = fma32(np.broadcast_to(m[None, :, h0:h0 + n], (T, N, n)), xsd[:, None, h0:h0 + n], acc[..., :n])
    a = acc[..., 8:] + acc[..., :8]
    b = a[..., 4:] + a[..., :4]
    return (b[..., 0] + b[..., 2]) + (b[..., 1] + b[..., 3])


@pytest.fixture
def simd(level):
    """The instruction sets that have AVX512's decode numerics (portable C sums in its own order)."""
    if level == 0:
        pytest.skip("portable C has its own order of sums")
    return level


@pytest.mark.parametrize("tokens", [1, 3, 9])
@pytest.mark.parametrize("qtype", FUSED, ids=lambda q: q.name)
def test_decode_products_have_avx512s_bits(qtype, tokens, simd):
    rng = np.random.default_rng(int(qtype) * 7 + tokens)
    cols = 1280 if qtype in (Q.Q4_K, Q.Q6_K) else 864    # 80 mins (5 x 16), 54 (a partial 16, a half chunk)
    raw, ref = random_blocks(qtype, 150, cols, rng)
    x = rng.standard_normal((tokens, cols)).astype(np.float32) * rng.uniform(0.1, 10, (tokens, 1)).astype(np.float32)
    x[0, :32] = 0                                          # a block of zero activations
    y, expect = as_weight([(qtype, raw, cols)]).matmul(x), avx512_decode(qtype, raw, cols, x)
    assert np.abs(expect - x @ ref.T).max() < 0.02 * np.abs(x @ ref.T).max()     # the reference itself
    np.testing.assert_array_equal(y, expect)


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("qtype", FUSED, ids=lambda q: q.name)
def test_decode_of_the_largest_bytes_does_not_saturate(qtype, sign, simd):
    """AVX2 adds products in pairs in int16: the largest bytes of each type (Q8_0 -128 and 127,
    the others all bits set) against activations that all quantize to +-127."""
    rng = np.random.default_rng(3)
    cols = 768 if qtype in (Q.Q4_K, Q.Q6_K) else 864
    raw, _ = random_blocks(qtype, 32, cols, rng)
    if qtype == Q.Q8_0:
        blk = raw.reshape(32, -1, 34)
        blk[:16, :, 2:] = 0x80
        blk[16:, :, 2:] = 0x7F
    elif qtype == Q.Q5_0:
        raw.reshape(32, -1, 22)[:, :, 2:] = 0xFF
    elif qtype == Q.Q4_K:
        raw.reshape(32, -1, 144)[:, :, 16:] = 0xFF
    else:
        raw.reshape(32, -1, 210)[:, :, :192] = 0xFF
    x = np.full((2, cols), sign, np.float32)
    x[1, ::2] *= -1
    np.testing.assert_array_equal(as_weight([(qtype, raw, cols)]).matmul(x), avx512_decode(qtype, raw, cols, x))
