"""One CUDA graph per step shape, replayed over static inputs: decode batches by their
sequence count (padded to a power of two), one-sequence prefills by their token count.

A bucket is keyed (padded tokens, padded sequences). The first step of a bucket runs the
forward pass eagerly with an `Arena` recording every buffer it takes, then captures the same
pass (the arena hands back the same buffers in the same order, so nothing is allocated inside
the capture). Later steps copy their packed inputs into the bucket's static buffer and replay:
one Python call a step, where an eager prefill launches some 400 kernels from Python (a
128-token prefill of a 1.7B model was 24 ms of host time on the H100's machine).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from runtime.backends import ForwardBatch
from runtime.backends.cuda.batch import CUDABatch, layout, max_tiles, pack, views
from runtime.backends.cuda.device import CaptureError

log = logging.getLogger(__name__)
MIN_PREFILL_BUCKET = 16         # prefill buckets: 16, 32, ... tokens up to max_prefill


class Arena:
    """Buffers handed out in call order: recorded on the first pass, replayed after."""

    def __init__(self, xp):
        self.xp, self.buffers, self.at, self.recording = xp, [], 0, True

    def take(self, shape, dtype, zero: bool = False):
        shape, dtype = tuple(shape), np.dtype(dtype)
        if self.recording:
            buf = self.xp.zeros(shape, dtype) if zero else self.xp.empty(shape, dtype)
            self.buffers.append(buf)
            return buf
        buf = self.buffers[self.at]
        assert buf.shape == shape and buf.dtype == dtype, "the captured pass took different buffers"
        self.at += 1
        return buf

    def replay(self) -> None:
        self.recording, self.at = False, 0


@dataclass(slots=True)
class Bucket:
    key: tuple[int, int]        # (padded tokens, padded sequences)
    dev_buf: object             # static packed inputs (capacity for the longest table)
    fb: CUDABatch
    arena: Arena
    graph: object = None
    logits: object = None       # outputs of the captured pass
    stats: object = None
    fallback: str | None = None  # why the bucket was captured with matvec.cu only (decode) or runs eagerly (prefill)


def pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


class StepGraphs:
    def __init__(self, ops, max_blocks_per_seq: int, max_bucket: int, max_prefill: int):
        self.ops, self.max_blocks, self.max_bucket = ops, max_blocks_per_seq, max_bucket
        self.max_prefill = max_prefill
        self.buckets: dict[tuple[int, int], Bucket] = {}

    @staticmethod
    def decode_key(num_seqs: int) -> tuple[int, int]:
        b = pow2(num_seqs)
        return b, b

    def key(self, batch: ForwardBatch) -> tuple[int, int] | None:
        """The bucket a step replays, or None when it runs eagerly: decode batches up to
        max_bucket sequences; prefills of one sequence, up to max_prefill tokens, that sample."""
        n, b = len(batch.input_ids), batch.num_seqs
        if batch.block_tables.shape[1] > self.max_blocks:
            return None
        if batch.is_decode:
            return self.decode_key(b) if b <= self.max_bucket else None
        if b == 1 and n <= self.max_prefill and len(batch.logits_indices) == 1:
            bucket = (max(MIN_PREFILL_BUCKET, pow2(n)), 1)
            known = self.buckets.get(bucket)
            return None if known is not None and known.graph is None else bucket
        return None

    def run(self, forward, batch: ForwardBatch, kv, key: tuple[int, int]):
        ops, dev = self.ops, self.ops.dev
        tokens, seqs = key
        host, where, rows = pack(batch, ops.tile_queries, pad_to=seqs if batch.is_decode else tokens,
                                 trash=ops.trash_block)
        bucket = self.buckets.get(key)
        if bucket is None:
            tiles = 0 if batch.is_decode else max_tiles(tokens, ops.tile_queries)
            capacity = layout(tokens, seqs, rows, tiles, self.max_blocks)["tables"][1]
            dev_buf = dev.xp.zeros(capacity, np.int32)
            bucket = Bucket(key, dev_buf, views(batch, dev_buf, where, rows, batch.is_decode), Arena(dev.xp))
        bucket.fb.host = batch
        dev.copy_in(bucket.dev_buf, host)
        if bucket.graph is not None:
            bucket.graph.replay()
            return bucket.logits, bucket.stats
        try:        # any other failure (out of memory) leaves no bucket: the next step starts afresh
            self._capture(bucket, forward, kv)
        except CaptureError as e:       # e.g. cuBLAS refusing capture
            bucket.fallback = str(e)
            if not batch.is_decode:     # this step's result came from the eager pass; later ones run eagerly
                log.warning("prefill bucket %s: %s; prefills of this size run eagerly", key, e)
                self.buckets[key] = bucket
                return bucket.logits, bucket.stats
            log.warning("decode bucket %d: %s; capturing it with matvec.cu only", seqs, e)
            keep, ops.matvec_max_tokens = ops.matvec_max_tokens, max(ops.matvec_max_tokens, seqs)
            try:
                bucket.arena = Arena(dev.xp)
                self._capture(bucket, forward, kv)
            finally:
                ops.matvec_max_tokens = keep
        self.buckets[key] = bucket
        return bucket.logits, bucket.stats

    def captured(self, decode: bool) -> list[tuple[int, int]]:
        """Keys of the buckets that replay a graph: decode (tokens = sequences) or prefill."""
        return [k for k, b in self.buckets.items() if b.graph is not None and (k[0] == k[1]) == decode]

    def _capture(self, bucket: Bucket, forward, kv) -> None:
        """An eager pass (this step's result) recording its buffers, then the capture."""
        ops = self.ops
        with ops.arena(bucket.arena):
            bucket.logits = forward(bucket.fb, kv)
            bucket.stats = ops.sampler.stats(bucket.logits)
        bucket.arena.replay()
        with ops.arena(bucket.arena):
            (logits, _), bucket.graph = ops.dev.capture(
                lambda: (forward(bucket.fb, kv), ops.sampler.stats(bucket.logits)))
        assert logits is bucket.logits
