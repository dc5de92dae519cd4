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
        bs = self.block_size
        ids, positions, starts, ctx, logits_rows, sampling = [], [], [0], [], [], []
        for seq, n in scheduled:
            s = seq.num_computed
            ids.extend(seq.token_ids[s:s + n])
            positions.append(np.arange(s, s + n, dtype=np.int32))
            starts.append(starts[-1] + n)
            ctx.append(s + n)
            if s + n == len(seq):
                logits_rows.append(starts[-1] - 1)
                sampling.append(seq)
        width = max(len(seq.block_table) for seq, _ in scheduled)
        tables = np.zeros((len(scheduled), width), dtype=np.int32)
        for i, (seq, _) in enumerate(scheduled):
            tables[i, :len(seq.block_table)] = seq.block_table
        pos = np.concatenate(positions)
        row = np.repeat(np.arange(len(scheduled)), [n for _, n in scheduled])
        slots = tables[row, pos // bs] * bs + pos % bs
        batch = ForwardBatch(
            input_ids=np.asarray(ids, dtype=np.int32), positions=pos, slot_mapping=slots.astype(np.int32),
            query_starts=np.asarray(starts, dtype=np.int32), context_lens=np.asarray(ctx, dtype=np.int32),
            block_tables=tables, logits_indices=np.asarray(logits_rows, dtype=np.int32), block_size=bs)
        return batch, sampling

    def run(self, scheduled: list[tuple[Sequence, int]]) -> tuple[list[Sequence], SampleOutput | None]:
        batch, sampling = self.build_batch(scheduled)
        logits = self.model.run(batch, self.kv)
        if not sampling:
            return sampling, None
        sb = SamplingBatch.build([(s.params, s.token_ids, s.num_prompt_tokens) for s in sampling], self.vocab)
        return sampling, self.ops.sample(logits, sb)
