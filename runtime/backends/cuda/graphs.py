"""One CUDA graph per decode batch-size bucket, replayed over static inputs.

The first decode step of a bucket runs the forward pass eagerly with an `Arena` recording
every buffer it takes, then captures the same pass (the arena hands back the same buffers in
the same order, so nothing is allocated inside the capture). Later steps copy their packed
inputs into the bucket's static buffer and replay: one Python call per step.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from runtime.backends import ForwardBatch
from runtime.backends.cuda.batch import CUDABatch, layout, pack, views
from runtime.backends.cuda.device import CaptureError

log = logging.getLogger(__name__)


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
    size: int
    dev_buf: object             # static packed inputs (capacity for the longest table)
    fb: CUDABatch
    arena: Arena
    graph: object = None
    logits: object = None       # outputs of the captured pass
    stats: object = None
    fallback: str | None = None  # why the bucket was captured with matvec.cu only


class DecodeGraphs:
    def __init__(self, ops, max_blocks_per_seq: int, max_bucket: int):
        self.ops, self.max_blocks, self.max_bucket = ops, max_blocks_per_seq, max_bucket
        self.buckets: dict[int, Bucket] = {}

    @staticmethod
    def bucket_for(num_seqs: int) -> int:
        return 1 << (num_seqs - 1).bit_length()

    def bucket_size(self, batch: ForwardBatch) -> int:
        """Padded size for a decode batch, or 0 when it runs eagerly."""
        b = batch.num_seqs
        if not batch.is_decode or b > self.max_bucket or batch.block_tables.shape[1] > self.max_blocks:
            return 0
        return self.bucket_for(b)

    def run(self, forward, batch: ForwardBatch, kv, size: int):
        ops, dev = self.ops, self.ops.dev
        host, where, rows = pack(batch, pad_to=size, trash=ops.trash_block)
        bucket = self.buckets.get(size)
        if bucket is None:
            capacity = layout(size, size, size, self.max_blocks)["tables"][1]
            dev_buf = dev.xp.zeros(capacity, np.int32)
            bucket = Bucket(size, dev_buf, views(batch, dev_buf, where, rows, True), Arena(dev.xp))
        bucket.fb.host = batch
        dev.copy_in(bucket.dev_buf, host)
        if bucket.graph is not None:
            bucket.graph.replay()
            return bucket.logits, bucket.stats
        try:
            self._capture(bucket, forward, kv)
        except CaptureError as e:       # e.g. cuBLAS refusing capture: matvec.cu runs every row
            log.warning("decode bucket %d: %s; capturing it with matvec.cu only", size, e)
            bucket.fallback = str(e)
            keep, ops.matvec_max_tokens = ops.matvec_max_tokens, max(ops.matvec_max_tokens, size)
            try:
                bucket.arena = Arena(dev.xp)
                self._capture(bucket, forward, kv)
            finally:
                ops.matvec_max_tokens = keep
        self.buckets[size] = bucket
        return bucket.logits, bucket.stats

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
