"""Sampling on the CPU, in numpy: both CPU backends (torch's and the block kernels') hand
their logits here, so serving on the kernels never imports torch.

Greedy rows take the argmax (the first of equal maxima); the others: penalties, temperature,
top-k, top-p, min-p, then the inverse CDF at the batch's uniforms (one a row, drawn by
runtime.sampling from each request's seed). The CUDA sampler makes the same choices.
"""
from __future__ import annotations

import numpy as np

from runtime.sampling import SampleOutput, SamplingBatch


def sample(logits: np.ndarray, sb: SamplingBatch) -> SampleOutput:
    """logits [S, vocab] -> the chosen ids, their log-probs, each row's entropy and the top
    log-probs asked for (all from the raw logits, before masks and penalties)."""
    logits = np.asarray(logits, dtype=np.float32)
    raw = log_softmax(logits)
    with np.errstate(invalid="ignore"):              # exp(-inf) * -inf: a token of probability 0
        entropy = -np.nan_to_num(np.exp(raw) * raw).sum(-1)
    if sb.masks is not None:
        logits = np.where(_unpack_mask(sb.masks, logits.shape[1]), logits, np.float32(-np.inf))
    if sb.any_penalty:
        logits = _apply_penalties(logits.copy(), sb)
    ids = logits.argmax(-1)
    if not sb.all_greedy:
        ids = np.where(sb.temperature == 0, ids, _sample_filtered(logits, sb))
    top_ids = top_lp = None
    if sb.num_top:
        top_ids = np.argpartition(-raw, sb.num_top - 1, axis=-1)[:, :sb.num_top]     # unordered
        top_lp = np.take_along_axis(raw, top_ids, 1)
        order = np.argsort(-top_lp, axis=-1, kind="stable")
        top_ids, top_lp = np.take_along_axis(top_ids, order, 1), np.take_along_axis(top_lp, order, 1)
    chosen = np.take_along_axis(raw, ids[:, None], 1)[:, 0]
    return SampleOutput(ids, chosen, entropy.astype(np.float32), top_ids, top_lp)


def log_softmax(x: np.ndarray) -> np.ndarray:
    top = x.max(-1, keepdims=True)
    shifted = x - top
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _unpack_mask(words: np.ndarray, vocab: int) -> np.ndarray:
    """[S, W] int32 bitmask (bit j of word w = token 32w + j) -> [S, vocab] bool."""
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")
    return bits[:, :vocab].astype(bool)


def _apply_penalties(logits: np.ndarray, sb: SamplingBatch) -> np.ndarray:
    if len(sb.seen_ids):
        rows, ids = sb.seen_rows.astype(np.int64), sb.seen_ids.astype(np.int64)
        pen = sb.repetition[rows]
        vals = logits[rows, ids]
        logits[rows, ids] = np.where(vals > 0, vals / pen, vals * pen)
    if len(sb.out_ids):
        rows, ids = sb.out_rows.astype(np.int64), sb.out_ids.astype(np.int64)
        logits[rows, ids] -= sb.frequency[rows] * sb.out_counts + sb.presence[rows]
    return logits


def _sample_filtered(logits: np.ndarray, sb: SamplingBatch) -> np.ndarray:
    """Temperature, top-k, top-p, min-p, then inverse-CDF with the batch's uniforms."""
    temp = np.where(sb.temperature > 0, sb.temperature, 1.0).astype(np.float32)[:, None]
    probs = softmax(logits / temp)
    if not ((sb.top_k > 0) & (sb.top_k < probs.shape[1]) | (sb.top_p < 1) | (sb.min_p > 0)).any():
        filtered = probs                                # no rule set: skip the sort of the vocabulary
    else:
        filtered = _filtered(probs, sb)
    cdf = filtered.cumsum(-1)
    target = sb.uniforms.astype(np.float32) * cdf[:, -1]
    ids = np.array([np.searchsorted(row, t, side="right") for row, t in zip(cdf, target)], dtype=np.int64)
    return np.minimum(ids, probs.shape[1] - 1)


def _filtered(probs: np.ndarray, sb: SamplingBatch) -> np.ndarray:
    """`probs` with the tokens outside each row's top-k / top-p / min-p set to zero."""
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, 1)
    rank = np.arange(probs.shape[1])[None, :]
    keep = rank < np.where(sb.top_k > 0, sb.top_k, probs.shape[1])[:, None]
    before = sorted_p.cumsum(-1) - sorted_p            # mass strictly ahead of each token
    keep &= before < sb.top_p[:, None]
    keep &= sorted_p >= sb.min_p[:, None] * sorted_p[:, :1]
    keep[:, 0] = True
    out = np.zeros_like(probs)
    np.put_along_axis(out, order, np.where(keep, sorted_p, 0.0), 1)
    return out
