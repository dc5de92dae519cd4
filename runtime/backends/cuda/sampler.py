"""Sampling on the device: only ids and a few numbers per row come back to the host.

`stats` (one kernel, part of the captured decode graph) gives every row its log-sum-exp,
entropy and argmax, which is all greedy decoding needs. Masks, penalties, temperature,
top-k/top-p/min-p and top logprobs add eager kernels on the same logits. The choices match
cpu.py's sampler for the same logits and uniforms (sample_select.cu says how).

`launch` queues all of it and the copy of the results to the host, and returns at once: the
engine queues the next step before it waits (llm_engine.py). The chosen ids also go to the
ops' `feed` on the device, where the next step's embedding finds the tokens the host has
not read yet (dequant.cu).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runtime.sampling import SampleOutput, SamplingBatch


STATS_CHUNK = 256 * 16          # columns a sample_stats block takes (SS_CHUNK)


@dataclass(slots=True)
class Logits:
    values: object              # device f32 [R, V] (R >= rows: graph buckets pad)
    rows: int                   # real rows
    stats: tuple | None = None  # (out [3, R], lse [R]) from sample_stats when already run


@dataclass(slots=True)
class PendingSample:
    """A launched sampling step; result() waits for its copy to the host (only that)."""
    wait: Callable[[], list]
    rows: int
    num_top: int

    def result(self) -> SampleOutput:
        host, n = self.wait(), self.rows
        out = host[0]
        top_ids, top_lp = (host[1].astype(np.int64), host[2].copy()) if self.num_top else (None, None)
        return SampleOutput(out[0, :n].view(np.int32).astype(np.int64), out[1, :n].copy(),
                            out[2, :n].copy(), top_ids, top_lp)


class Sampler:
    def __init__(self, ops):
        self.ops, self.dev = ops, ops.dev

    def stats(self, logits):
        """(out [3, R] = ids as int bits, logprobs, entropies; lse [R]) for every row."""
        R, V = logits.shape
        nb = -(-V // STATS_CHUNK)
        out = self.ops.alloc((3, R), np.float32)
        lse = self.ops.alloc((R,), np.float32)
        part_m, part_id = self.ops.alloc((R, nb), np.float32), self.ops.alloc((R, nb), np.int32)
        part_sw = self.ops.alloc((R, nb, 2), np.float64)
        counters = self.ops.alloc((R,), np.int32, zero=True)
        self.dev.kernels("sample_stats").sample_stats((nb, R), (256,), (
            logits, np.int32(V), np.int32(V), out, lse, part_m, part_id, part_sw, counters, self.feed(R)))
        return out, lse

    def feed(self, rows: int):
        """The ops' feed for `rows` sampled rows (None past its size: those steps are not overlapped)."""
        return self.ops.feed if rows <= self.ops.feed.size else None

    def launch(self, logits: Logits, sb: SamplingBatch) -> PendingSample:
        dev, xp = self.dev, self.dev.xp
        x, n = logits.values, logits.rows
        V = x.shape[1]
        out, lse = logits.stats or self.stats(x[:n])
        if sb.masks is not None or sb.any_penalty or not sb.all_greedy:
            out = xp.ascontiguousarray(out[:, :n])
            up = lambda a, dt: dev.upload(np.ascontiguousarray(a, dtype=dt))  # noqa: E731
            chosen = x[:n]
            if sb.any_penalty:              # on a copy: logprobs and top ids read the raw logits
                chosen = chosen.copy()
                self._penalize(chosen, sb, up)
            masks = None if sb.masks is None else up(sb.masks, np.int32)
            probs = xp.empty((n, V), np.float32)
            dev.kernels("sample_select").sample_select((n,), (1024,), (
                chosen, x[:n], np.int32(V), np.int32(V), masks,
                np.int32(0 if sb.masks is None else sb.masks.shape[1]), up(sb.temperature, np.float32),
                up(sb.top_k, np.int32), up(sb.top_p, np.float32), up(sb.min_p, np.float32),
                up(sb.uniforms, np.float32), lse[:n],
                probs, out, self.feed(n)))
        top = ()
        if sb.num_top:
            k = sb.num_top
            top = (xp.empty((n, k), np.int32), xp.empty((n, k), np.float32))
            dev.kernels("topk_logprobs").topk_logprobs((n,), (1024,), (
                x[:n], np.int32(V), np.int32(V), lse[:n], np.int32(k), *top))
        return PendingSample(dev.to_host_async(out, *top), n, sb.num_top)

    def _penalize(self, logits, sb: SamplingBatch, up) -> None:
        kern = self.dev.kernels("penalize").penalize
        V = logits.shape[1]
        rep, freq, pres = up(sb.repetition, np.float32), up(sb.frequency, np.float32), up(sb.presence, np.float32)
        for mode, rows, ids, counts in ((0, sb.seen_rows, sb.seen_ids, None),
                                        (1, sb.out_rows, sb.out_ids, sb.out_counts)):
            if len(ids) == 0:
                continue
            kern(((len(ids) + 255) // 256,), (256,), (
                logits, np.int32(V), up(rows, np.int32), up(ids, np.int32),
                None if counts is None else up(counts, np.float32), np.int32(len(ids)), rep, freq, pres,
                np.int32(mode)))
