"""Weights on the GPU in their GGUF block formats, never expanded whole.

Each tensor goes up as its raw bytes and is split on the device into a 16-byte-aligned
payload array and, where the block header breaks that alignment, a small scale array
(the layouts kernels/quant.cuh decodes). A linear weight is a list of segments along its
output rows (fused QKV or gate+up may mix formats, e.g. Q4_K q/k with a Q6_K v), described
to the kernels by one int64 table: {qtype, row0, rows, q, s, q_row_bytes, s_row_bytes, 0}.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType as Q

from runtime.gguf import GGUFTensor


@dataclass(frozen=True, slots=True)
class Layout:
    qk: int                         # values per block
    block_bytes: int                # bytes per block in the file
    payload: tuple[int, int]        # byte range of a block kept in q
    scales: tuple[tuple[int, int] | None, ...] = ()   # byte ranges (None: 2 zero bytes) for s


LAYOUTS = {
    Q.F32: Layout(32, 128, (0, 128)),
    Q.F16: Layout(32, 64, (0, 64)),
    Q.BF16: Layout(32, 64, (0, 64)),
    Q.Q4_0: Layout(32, 18, (2, 18), ((0, 2),)),
    Q.Q4_1: Layout(32, 20, (4, 20), ((0, 4),)),
    Q.Q5_0: Layout(32, 22, (6, 22), ((0, 2), None, (2, 6))),
    Q.Q5_1: Layout(32, 24, (8, 24), ((0, 8),)),
    Q.Q8_0: Layout(32, 34, (2, 34), ((0, 2),)),
    Q.Q4_K: Layout(256, 144, (0, 144)),
    Q.Q5_K: Layout(256, 176, (0, 176)),
    Q.Q6_K: Layout(256, 210, (0, 208), ((208, 210),)),
}


@dataclass(slots=True)
class Segment:
    qtype: Q
    row0: int
    rows: int
    q: object                       # device u8 [rows, nb * payload bytes]
    s: object | None                # device u8 [rows, nb * scale bytes] or None


@dataclass(slots=True)
class QuantLinear:
    """A weight [rows, cols] = its segments stacked along rows; `table` feeds the kernels."""
    segments: list[Segment]
    rows: int
    cols: int
    table: object                   # device int64 [nseg, 8]

    @property
    def qtypes(self) -> set[Q]:
        return {s.qtype for s in self.segments}

    @property
    def nbytes(self) -> int:
        return sum(s.q.nbytes + (0 if s.s is None else s.s.nbytes) for s in self.segments)


def upload_segment(dev, t: GGUFTensor, row0: int) -> Segment:
    layout = LAYOUTS.get(t.qtype)
    if layout is None:
        raise ValueError(f"{t.name}: no CUDA layout for {t.qtype.name}")
    rows, cols = (t.shape[0], t.shape[1]) if len(t.shape) == 2 else (1, t.shape[0])
    if cols % layout.qk:
        raise ValueError(f"{t.name}: {cols} columns is not a multiple of {layout.qk} ({t.qtype.name})")
    nb = cols // layout.qk
    raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(rows * nb, layout.block_bytes)
    xp = dev.xp
    blocks = dev.upload(raw)
    a, b = layout.payload
    if (a, b) == (0, layout.block_bytes):
        q = blocks.reshape(rows, -1)
    else:
        q = xp.ascontiguousarray(blocks[:, a:b]).reshape(rows, -1)
    s = None
    if layout.scales:
        parts = [blocks[:, r[0]:r[1]] if r else xp.zeros((rows * nb, 2), np.uint8) for r in layout.scales]
        s = xp.ascontiguousarray(xp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]).reshape(rows, -1)
    del blocks
    return Segment(t.qtype, row0, rows, q, s)


def upload_linear(dev, parts: list[GGUFTensor]) -> QuantLinear:
    """Stack `parts` along their output rows; all must share the input width."""
    segments, row0 = [], 0
    cols = parts[0].shape[-1]
    for t in parts:
        if t.shape[-1] != cols:
            raise ValueError(f"{t.name}: {t.shape[-1]} columns, expected {cols}")
        seg = upload_segment(dev, t, row0)
        segments.append(seg)
        row0 += seg.rows
    table = np.zeros((len(segments), 8), np.int64)
    for i, seg in enumerate(segments):
        s = seg.s if seg.s is not None else seg.q
        table[i] = (int(seg.qtype), seg.row0, seg.rows, dev.ptr(seg.q), dev.ptr(s),
                    seg.q.shape[1], 0 if seg.s is None else seg.s.shape[1], 0)
    return QuantLinear(segments, row0, cols, dev.upload(table))
