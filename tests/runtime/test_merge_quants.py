"""runtime/merge_quants.py against gguf-py's quants (the reference), bit for bit: Q5_0 and Q8_0
rows unpacked from every byte pattern, Q8_0 made from values that round at exact halves, from
all-zero blocks and from wide magnitudes, and a merged projection (rows past the last whole
chunk included) equal to gguf-py's quantize of W + B A, in numpy and in the CPU kernels' C
(merge.inc) from every block type they read, on every instruction set this CPU runs; and the
merge takes the C where the kernels have FMA."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import quants

from dev.synthetic import random_kquant
from runtime.backends import cpu_kernels
from runtime.gguf import GGUFTensor
from runtime.lora import Factors
from runtime.lora_merge import ROWS, merge_into, merge_tensor, stored
from runtime.merge_quants import dequantize_rows, quantize_q8_0

BLOCK_BYTES = {Q.Q5_0: 22, Q.Q8_0: 34}


def raw_rows(qtype: Q, rows: int, cols: int, rng) -> np.ndarray:
    """Random blocks: every quant byte pattern, finite f16 scales of both signs."""
    raw = rng.integers(0, 256, (rows * cols // 32, BLOCK_BYTES[qtype]), dtype=np.uint8)
    raw[:, :2] = rng.normal(0, 0.05, (len(raw), 1)).astype(np.float16).view(np.uint8)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("qtype", [Q.Q5_0, Q.Q8_0])
def test_rows_dequantize_as_gguf_does(qtype):
    raw = raw_rows(qtype, 48, 256, np.random.default_rng(1))
    want = quants.dequantize(raw, qtype)
    assert np.array_equal(dequantize_rows(qtype, raw, 256).view(np.uint32), want.view(np.uint32))


def test_other_types_are_gguf_s_own():
    w = np.random.default_rng(2).normal(size=(8, 64)).astype(np.float32)
    raw = quants.quantize(w, Q.F16)
    assert np.array_equal(dequantize_rows(Q.F16, raw, 64), quants.dequantize(raw, Q.F16))


def test_q8_0_quantizes_as_gguf_does():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(64, 256)).astype(np.float32) * np.logspace(-30, 30, 64, dtype=np.float32)[:, None]
    w[0, :32] = 0                                               # d = 0
    w[1, :32] = np.arange(-16, 16) + np.float32(0.5)            # amax 15.5: halves after scaling
    w[2, :32] = [127.0, -127.0, 2.5, -2.5, 0.5, -0.5, 1.5, np.nextafter(np.float32(0.5), 0)] * 4   # d = 1: exact halves
    w[3, :32] = -0.0
    w[4, 32:64] = np.float32(1e-38)                             # subnormal scale
    assert np.array_equal(quantize_q8_0(w), quants.quantize(w, Q.Q8_0))


@pytest.mark.parametrize("qtype", [Q.Q5_0, Q.Q8_0])
def test_a_merged_projection_is_gguf_s_quantize_of_w_plus_ba(qtype):
    rng = np.random.default_rng(4)
    rows, cols, r = ROWS * 2 + 22, 128, 8
    base = GGUFTensor("blk.0.attn_q.weight", qtype, (rows, cols), raw_rows(qtype, rows, cols, rng))
    f = Factors(rng.normal(0, 0.1, (r, cols)).astype(np.float32), rng.normal(0, 0.1, (rows, r)).astype(np.float32))
    merged = merge_tensor(base, f, Q.Q8_0, "+lora")
    want = quants.quantize(quants.dequantize(base.data, qtype) + f.b @ f.a, Q.Q8_0)
    assert (merged.name, merged.qtype, merged.shape) == ("blk.0.attn_q.weight+lora", Q.Q8_0, (rows, cols))
    assert np.array_equal(merged.data, want)


kernels = cpu_kernels.load()


def c_merge_cases():
    """(qtype, raw, factors): random blocks of each type the kernels read, the first rows zero
    (d = 0 where B A is 0 too); and Q8_0 rows of scale 1 that B A moves onto exact halves."""
    rng = np.random.default_rng(5)
    rows, cols, r = 300, 512, 8                     # 300 rows: two of the C's 256-row tiles
    for qtype in cpu_kernels.BLOCK_TYPES:
        if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
            raw = random_kquant(rows, cols, qtype, rng, 0.05)
        else:
            raw = quants.quantize(rng.normal(0, 0.05, (rows, cols)).astype(np.float32), qtype)
        raw[:3] = 0                             # zero scales: rows of zeros
        f = Factors(rng.normal(0, 0.1, (r, cols)).astype(np.float32), rng.normal(0, 0.1, (rows, r)).astype(np.float32))
        f.b[:2] = 0
        yield pytest.param(qtype, raw, f, id=qtype.name)
    q = np.tile(np.array([127, -127, 2, -3, 0, 1, -1, 5], np.int8), 4 * cols // 32)[None, :cols]
    raw = quants.quantize(q.astype(np.float32), Q.Q8_0)                  # d = 1: the quants themselves
    halves = np.tile(np.array([0, 0, 0.5, -0.5, 0.5, -0.5, 0.5, 0.5], np.float32), cols // 8)[None]
    yield pytest.param(Q.Q8_0, raw, Factors(halves, np.ones((1, 1), np.float32)), id="Q8_0-halves")


@pytest.mark.skipif(kernels is None, reason="CPU block kernels not built (pip install -e .)")
@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512-vnni", "avx2", "portable"])
@pytest.mark.parametrize("qtype, raw, f", list(c_merge_cases()))
def test_the_c_merge_is_gguf_s_quantize_of_w_plus_ba(qtype, raw, f, level):
    if kernels.use_level(level) != level:
        kernels.use_level(2)
        pytest.skip(f"this CPU has no level {level} path")
    try:
        rows, cols = raw.shape[0], f.a.shape[1]
        got = np.empty((rows, cols // 32 * 34), np.uint8)
        kernels.merge_q8_0([(qtype, raw, cols, f.b, f.a, got)])
        assert np.array_equal(got, quants.quantize(quants.dequantize(raw, qtype) + f.b @ f.a, Q.Q8_0))
    finally:
        kernels.use_level(2)


@pytest.mark.skipif(kernels is None, reason="CPU block kernels not built (pip install -e .)")
def test_one_c_call_merges_every_projection_on_its_threads():
    cases = [p.values for p in c_merge_cases()]
    outs = [np.empty((raw.shape[0], f.a.shape[1] // 32 * 34), np.uint8) for _, raw, f in cases]
    kernels.merge_q8_0([(qtype, raw, f.a.shape[1], f.b, f.a, out) for (qtype, raw, f), out in zip(cases, outs)])
    for (qtype, raw, f), out in zip(cases, outs):
        assert np.array_equal(out, quants.quantize(quants.dequantize(raw, qtype) + f.b @ f.a, Q.Q8_0)), qtype.name


@pytest.mark.skipif(kernels is None, reason="CPU block kernels not built (pip install -e .)")
def test_projections_merge_in_one_c_call_where_the_kernels_have_fma(monkeypatch):
    calls = []
    monkeypatch.setattr(type(kernels), "merge_q8_0", lambda self, jobs: calls.append([j[0] for j in jobs]))
    rng = np.random.default_rng(6)
    bases = [GGUFTensor("blk.0.attn_q.weight", Q.Q5_0, (8, 64), raw_rows(Q.Q5_0, 8, 64, rng)),
             GGUFTensor("blk.0.attn_k.weight", Q.Q8_0, (8, 64), raw_rows(Q.Q8_0, 8, 64, rng)),
             GGUFTensor("blk.0.attn_v.weight", Q.F32, (8, 48), rng.normal(size=(8, 48)).astype(np.float32))]
    jobs = [(t, Factors(rng.normal(0, 0.1, (2, t.shape[1])).astype(np.float32),
                        rng.normal(0, 0.1, (8, 2)).astype(np.float32))) for t in bases]
    outs = [np.empty(*stored(t, Q.Q8_0)) for t in bases]               # 48 columns: not Q8_0 blocks, F32
    merge_into(jobs, outs, Q.Q8_0)
    assert calls == ([[Q.Q5_0, Q.Q8_0]] if kernels.fused_multiply_add else [])
    want = jobs[2][0].data + jobs[2][1].b @ jobs[2][1].a                 # the F32 one, in numpy
    assert np.array_equal(outs[2], want)
