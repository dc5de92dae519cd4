"""Turns a scheduled batch into one forward pass and one sampling call."""
from __future__ import annotations

import numpy as np

from runtime.backends import ForwardBatch, Ops
from runtime.engine.sequence import Sequence
from runtime.models.decoder import DecoderLM
from runtime.sampling import SampleOutput, SamplingBatch


class ModelRunner:
    def __init__(self, model: DecoderLM, ops: Ops, kv, block_size: int):
        self.model, self.ops, self.kv, self.block_size = model, ops, kv, block_size
        self.vocab = model.spec.vocab

    def build_batch(self, scheduled: list[tuple[Sequence, int]]) -> tuple[ForwardBatch, list[Sequence]]:
        """The step's ForwardBatch (whole-batch numpy, one Python pass over the sequences:
        at batch 64 this host work sits between two GPU steps) and the sequences that sample."""
        bs, ids, done, tables = self.block_size, [], [], []
        for seq, n in scheduled:
            s = seq.num_computed
            ids += seq.token_ids[s:s + n]
            done.append(s + n == len(seq))
            tables.append(seq.block_table)
        counts = np.fromiter((n for _, n in scheduled), np.int32, len(scheduled))
        ctx = np.fromiter((seq.num_computed + n for seq, n in scheduled), np.int32, len(scheduled))
        starts = np.zeros(len(scheduled) + 1, np.int32)
        np.cumsum(counts, out=starts[1:])
        row = np.repeat(np.arange(len(scheduled)), counts)
        pos = (np.arange(starts[-1], dtype=np.int32) - starts[row] + (ctx - counts)[row]).astype(np.int32)
        width = max(len(t) for t in tables)
        table = np.array([t + [0] * (width - len(t)) for t in tables], dtype=np.int32)
        slots = table[row, pos // bs] * bs + pos % bs
        done = np.asarray(done, dtype=bool)
        batch = ForwardBatch(
            input_ids=np.asarray(ids, dtype=np.int32), positions=pos, slot_mapping=slots.astype(np.int32),
            query_starts=starts, context_lens=ctx, block_tables=table,
            logits_indices=(starts[1:] - 1)[done].astype(np.int32), block_size=bs)
        return batch, [seq for (seq, _), d in zip(scheduled, done) if d]

    def run(self, scheduled: list[tuple[Sequence, int]]) -> tuple[list[Sequence], SampleOutput | None]:
        sampling, logits, sb = self._forward(scheduled)
        return sampling, self.ops.sample(logits, sb) if sampling else None

    def launch(self, scheduled: list[tuple[Sequence, int]]) -> tuple[list[Sequence], object]:
        """As run(), returning as soon as the work is queued (backends with overlaps_steps):
        the second item's result() gives the SampleOutput."""
        sampling, logits, sb = self._forward(scheduled)
        return sampling, self.ops.sample_async(logits, sb) if sampling else None

    def _forward(self, scheduled):
        batch, sampling = self.build_batch(scheduled)
        logits = self.model.run(batch, self.kv)
        sb = SamplingBatch.build([(s.params, s.token_ids, s.num_prompt_tokens) for s in sampling],
                                 self.vocab) if sampling else None
        return sampling, logits, sb
