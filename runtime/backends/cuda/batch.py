"""A step's inputs on the device, packed into one int32 buffer so a step costs one copy.

Layout (n = tokens, b = sequences, s = sampled rows, k = prefill tiles, w = block-table width):
    [table width][ids n][positions n][slots n][context lengths b][sampled rows s][tiles 4k][tables b*w]
The tables come last, so for a fixed padded shape every offset is fixed and a captured graph
can keep reading the same buffer while the table width grows. Padded rows (graph buckets)
run token 0 at position 0 into the spare cache block `trash`; padded prefill tiles are
empty (attention_prefill.cu skips a tile of no queries).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.backends import ForwardBatch


@dataclass(slots=True)
class CUDABatch:
    host: ForwardBatch
    num_tokens: int             # rows of the activations (padded for graph buckets)
    num_seqs: int
    num_rows: int               # rows whose logits are computed
    is_decode: bool             # one token per sequence: the graph-able path
    stride: object              # device views into the packed buffer
    ids: object
    positions: object
    slots: object
    ctx: object
    rows: object
    tiles: object               # [num_tiles, 4] attention_prefill.cu tiles (prefill steps)
    num_tiles: int
    tables: object

    @property
    def all_rows(self) -> bool:
        """Logits are wanted for every token row, in order (decode steps)."""
        return self.num_rows == self.num_tokens


def layout(n: int, b: int, s: int, k: int, w: int) -> dict[str, tuple[int, int]]:
    sizes = [("stride", 1), ("ids", n), ("positions", n), ("slots", n), ("ctx", b), ("rows", s),
             ("tiles", 4 * k), ("tables", b * w)]
    out, at = {}, 0
    for name, size in sizes:
        out[name] = (at, at + size)
        at += size
    return out


def pack(fb: ForwardBatch, tile_queries: int, pad_to: int = 0, trash: int = 0) -> tuple[np.ndarray, dict, int]:
    """fb as one int32 array. pad_to: a decode batch padded to that many sequences, or a
    one-sequence prefill padded to that many tokens (graph buckets). tile_queries: queries a
    prefill tile (attention.tile_queries)."""
    n, b, w = len(fb.input_ids), fb.num_seqs, fb.block_tables.shape[1]
    rows = fb.logits_indices
    tiles = np.zeros((0, 4), np.int32) if fb.is_decode else prefill_tiles(fb, tile_queries)
    k = len(tiles)
    if pad_to and fb.is_decode:
        assert pad_to >= b and len(rows) == b
        n = b = pad_to
        rows = np.arange(pad_to, dtype=np.int32)
    elif pad_to:
        assert b == 1 and pad_to >= n
        n, k = pad_to, max_tiles(pad_to, tile_queries)
    where = layout(n, b, len(rows), k, w)
    buf = np.zeros(where["tables"][1], np.int32)
    buf[0] = w
    fill = {"ids": fb.input_ids, "positions": fb.positions, "slots": fb.slot_mapping,
            "ctx": fb.context_lens, "rows": rows, "tiles": tiles.reshape(-1)}
    for name, values in fill.items():
        lo, _ = where[name]
        buf[lo:lo + len(values)] = values
    real_tokens, real = len(fb.input_ids), fb.num_seqs
    buf[where["slots"][0] + real_tokens:where["slots"][1]] = trash * fb.block_size
    buf[where["ctx"][0] + real:where["ctx"][1]] = 1
    tables = buf[where["tables"][0]:where["tables"][1]].reshape(b, w)
    tables[:real] = fb.block_tables
    tables[real:, 0] = trash
    return buf, where, len(rows)


def views(fb: ForwardBatch, dev_buf, where: dict, num_rows: int, is_decode: bool) -> CUDABatch:
    v = {name: dev_buf[lo:hi] for name, (lo, hi) in where.items()}
    size = {name: hi - lo for name, (lo, hi) in where.items()}
    return CUDABatch(fb, size["ids"], size["ctx"], num_rows, is_decode, v["stride"], v["ids"], v["positions"],
                     v["slots"], v["ctx"], v["rows"], v["tiles"], size["tiles"] // 4, v["tables"])


def max_tiles(tokens: int, per: int) -> int:
    """Prefill tiles of one sequence's `tokens` queries (prefill_tiles)."""
    return -(-tokens // per)


def prefill_tiles(fb: ForwardBatch, per: int) -> np.ndarray:
    """[tiles, 4] int32 {sequence, first query row, queries, first query position} for
    attention_prefill(_tc).cu: up to `per` queries a tile, in query order."""
    out = []
    for i in range(fb.num_seqs):
        q0, q1 = int(fb.query_starts[i]), int(fb.query_starts[i + 1])
        pos0 = int(fb.context_lens[i]) - (q1 - q0)
        for j in range(0, q1 - q0, per):
            out.append((i, q0 + j, min(per, q1 - q0 - j), pos0 + j))
    return np.asarray(out, np.int32).reshape(-1, 4)
