"""The CPU sampler against a plain numpy reference, row by row."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.backends.cpu import CPUOps
from runtime.sampling import SamplingBatch, SamplingParams, uniform

V = 50


def reference(logits: np.ndarray, p: SamplingParams, history: list[int], n_prompt: int, mask=None) -> int:
    x = logits.astype(np.float64).copy()
    if mask is not None:
        x[~mask] = -np.inf
    for t in set(history):
        if p.repetition_penalty != 1:
            x[t] = x[t] / p.repetition_penalty if x[t] > 0 else x[t] * p.repetition_penalty
    outputs = history[n_prompt:]
    for t in set(outputs):
        x[t] -= p.frequency_penalty * outputs.count(t) + p.presence_penalty
    if p.temperature == 0:
        return int(np.argmax(x))
    probs = np.exp((x - x.max()) / p.temperature)
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    keep = np.zeros(V, bool)
    mass = 0.0
    for rank, t in enumerate(order):
        if rank > 0 and ((p.top_k and rank >= p.top_k) or mass >= p.top_p or probs[t] < p.min_p * probs[order[0]]):
            continue
        keep[t] = True
        mass += probs[t]
    filtered = np.where(keep, probs, 0.0)
    cdf = np.cumsum(filtered)
    return int(np.searchsorted(cdf, uniform(p.seed, len(outputs)) * cdf[-1], side="right"))


CASES = [
    SamplingParams(temperature=0),
    SamplingParams(temperature=0.7, seed=1),
    SamplingParams(temperature=1.0, top_k=5, seed=2),
    SamplingParams(temperature=1.3, top_p=0.6, seed=3),
    SamplingParams(temperature=0.9, min_p=0.2, seed=4),
    SamplingParams(temperature=1.0, top_k=10, top_p=0.9, min_p=0.05, seed=5),
    SamplingParams(temperature=0, repetition_penalty=1.5),
    SamplingParams(temperature=0.8, presence_penalty=1.5, frequency_penalty=0.5, seed=6),
]


@pytest.mark.parametrize("trial", range(5))
def test_batch_matches_reference_row_by_row(trial):
    rng = np.random.default_rng(trial)
    logits = rng.standard_normal((len(CASES), V)).astype(np.float32) * 3
    histories = [list(rng.integers(0, V, 12)) for _ in CASES]
    rows = [(p, h, 6) for p, h in zip(CASES, histories)]
    out = CPUOps().sample(torch.from_numpy(logits.copy()), SamplingBatch.build(rows, V))
    expected = [reference(logits[i], p, h, 6) for i, (p, h, _) in enumerate(rows)]
    assert out.token_ids.tolist() == expected
    raw = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    np.testing.assert_allclose(out.logprobs, raw[np.arange(len(CASES)), expected], atol=1e-5)
    probs = np.exp(raw)
    np.testing.assert_allclose(out.entropy, -(probs * raw).sum(1), atol=1e-4)


def test_constraint_mask_is_respected():
    class OnlyEven:
        def allowed(self):
            bits = np.zeros(V, bool)
            bits[::2] = True
            return np.packbits(np.pad(bits, (0, 64 - V)), bitorder="little").view(np.int32)

        def advance(self, token_id): ...
        def is_terminated(self): return False

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, V)).astype(np.float32)
    logits[:, 1] = 50.0                        # the unconstrained favourite is odd
    rows = [(SamplingParams(temperature=0, constraint=OnlyEven()), [3], 1),
            (SamplingParams(temperature=1.0, seed=9, constraint=OnlyEven()), [3], 1)]
    out = CPUOps().sample(torch.from_numpy(logits), SamplingBatch.build(rows, V))
    assert all(t % 2 == 0 for t in out.token_ids)
    assert out.token_ids[0] == 2 * int(np.argmax(logits[0, ::2]))


def test_sampling_frequencies_follow_the_distribution():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05] + [1e-9] * (V - 4), dtype=np.float32))
    rows = [(SamplingParams(temperature=1.0, seed=s), [0], 1) for s in range(4000)]
    out = CPUOps().sample(torch.from_numpy(np.tile(logits, (len(rows), 1))), SamplingBatch.build(rows, V))
    freq = np.bincount(out.token_ids, minlength=4)[:4] / len(rows)
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.03)


def test_top_logprobs_are_the_best_alternatives():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((1, V)).astype(np.float32)
    out = CPUOps().sample(torch.from_numpy(logits), SamplingBatch.build(
        [(SamplingParams(temperature=0, logprobs=4), [1], 1)], V))
    assert out.top_ids[0].tolist() == np.argsort(-logits[0])[:4].tolist()
    assert np.all(np.diff(out.top_logprobs[0]) <= 0)
