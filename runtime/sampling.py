"""Sampling parameters, the per-step sampling batch, and the uncertainty summary.

The backends do the sampling on their device (`Ops.sample`); this module holds what is
shared and host-side. Randomness is counter-based: the uniform that picks token n of a
request is a hash of (seed, n), computed here, so a seed gives the same tokens on every
backend, batch composition and restart.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

LOW_CONFIDENCE_PROB = 0.5   # a sampled token below this probability counts as low-confidence
MAX_TOP_LOGPROBS = 20


class TokenConstraint(Protocol):
    """Grammar state for constrained decoding (tool calls, response_format)."""

    def allowed(self) -> np.ndarray | None:
        """Bitmask of allowed next tokens, int32 [ceil(vocab/32)], or None for any."""

    def advance(self, token_id: int) -> None:
        """Consume the sampled token."""

    def is_terminated(self) -> bool:
        """True once the grammar accepts and allows nothing more."""


@dataclass(slots=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0                    # 0 = off
    min_p: float = 0.0
    repetition_penalty: float = 1.0   # HF/vLLM style: over prompt and output tokens
    presence_penalty: float = 0.0     # OpenAI style: over output tokens
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None       # None: none; 0: the sampled token's; k: plus k alternatives
    constraint: TokenConstraint | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.seed is None:
            self.seed = random.getrandbits(63)
        self.stop = tuple(self.stop)
        self.stop_token_ids = tuple(self.stop_token_ids)
        checks = [
            (self.max_tokens >= 1, "max_tokens must be at least 1"),
            (0.0 <= self.temperature <= 100.0, "temperature must be in [0, 100]"),
            (0.0 < self.top_p <= 1.0, "top_p must be in (0, 1]"),
            (0 <= self.top_k < 2**31, "top_k must be in [0, 2^31) (0 disables it)"),
            (0.0 <= self.min_p <= 1.0, "min_p must be in [0, 1]"),
            (0.0 < self.repetition_penalty <= 10.0, "repetition_penalty must be in (0, 10]"),
            (-2.0 <= self.presence_penalty <= 2.0, "presence_penalty must be in [-2, 2]"),
            (-2.0 <= self.frequency_penalty <= 2.0, "frequency_penalty must be in [-2, 2]"),
            (self.logprobs is None or 0 <= self.logprobs <= MAX_TOP_LOGPROBS,
             f"logprobs must be in [0, {MAX_TOP_LOGPROBS}]"),
            (all(s for s in self.stop), "stop strings must not be empty"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def uniform(seed: int, step: int) -> float:
    """The uniform in [0, 1) that draws output token `step` of a request seeded `seed`."""
    return (_splitmix64(_splitmix64(seed) ^ step) >> 11) / float(1 << 53)


@dataclass(slots=True)
class SamplingBatch:
    """One row per sequence that samples this step; host arrays, uploaded by the backend."""
    temperature: np.ndarray    # [S] f32 (0 = greedy)
    top_k: np.ndarray          # [S] i32 (0 = off)
    top_p: np.ndarray          # [S] f32
    min_p: np.ndarray          # [S] f32
    repetition: np.ndarray     # [S] f32
    presence: np.ndarray       # [S] f32
    frequency: np.ndarray      # [S] f32
    uniforms: np.ndarray       # [S] f32
    seen_rows: np.ndarray      # [N] i32 row of each (row, token) seen in prompt or output
    seen_ids: np.ndarray       # [N] i32
    out_rows: np.ndarray       # [M] i32 row of each distinct output token
    out_ids: np.ndarray        # [M] i32
    out_counts: np.ndarray     # [M] f32 how often it was generated
    masks: np.ndarray | None   # [S, ceil(V/32)] i32 allowed-token bits, or None
    num_top: int               # alternatives to return per row

    @property
    def any_penalty(self) -> bool:
        return bool((self.repetition != 1).any() or self.presence.any() or self.frequency.any())

    @property
    def all_greedy(self) -> bool:
        return bool((self.temperature == 0).all())

    @classmethod
    def build(cls, rows: list[tuple[SamplingParams, list[int], int]], vocab: int) -> SamplingBatch:
        """rows: (params, all token ids so far, number of prompt tokens) per sampling sequence."""
        f32 = lambda xs: np.asarray(xs, dtype=np.float32)  # noqa: E731
        seen_r, seen_i, out_r, out_i, out_c, masks = [], [], [], [], [], []
        any_mask = False
        for r, (p, tokens, n_prompt) in enumerate(rows):
            if p.repetition_penalty != 1.0:
                ids = np.unique(np.asarray(tokens, dtype=np.int32))
                seen_i.append(ids)
                seen_r.append(np.full(len(ids), r, np.int32))
            if p.presence_penalty or p.frequency_penalty:
                ids, counts = np.unique(np.asarray(tokens[n_prompt:], dtype=np.int32), return_counts=True)
                out_i.append(ids)
                out_r.append(np.full(len(ids), r, np.int32))
                out_c.append(counts.astype(np.float32))
            mask = p.constraint.allowed() if p.constraint is not None else None
            any_mask |= mask is not None
            masks.append(mask)
        if any_mask:
            words = (vocab + 31) // 32
            full = np.full(words, -1, dtype=np.int32)
            masks = np.stack([full if m is None else m[:words] for m in masks])
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa: E731
        ps = [p for p, _, _ in rows]
        return cls(
            temperature=f32([p.temperature for p in ps]),
            top_k=np.asarray([p.top_k for p in ps], dtype=np.int32),
            top_p=f32([p.top_p for p in ps]),
            min_p=f32([p.min_p for p in ps]),
            repetition=f32([p.repetition_penalty for p in ps]),
            presence=f32([p.presence_penalty for p in ps]),
            frequency=f32([p.frequency_penalty for p in ps]),
            uniforms=f32([uniform(p.seed, len(t) - n) if p.temperature > 0 else 0.0 for p, t, n in rows]),
            seen_rows=cat(seen_r, np.int32), seen_ids=cat(seen_i, np.int32),
            out_rows=cat(out_r, np.int32), out_ids=cat(out_i, np.int32), out_counts=cat(out_c, np.float32),
            masks=masks if any_mask else None,
            num_top=max((p.logprobs or 0) for p in ps),
        )


@dataclass(slots=True)
class SampleOutput:
    """What comes back to the host per sampling row: ids and a few numbers, never logits."""
    token_ids: np.ndarray            # [S] i64
    logprobs: np.ndarray             # [S] f32 log-prob of the sampled token (raw distribution)
    entropy: np.ndarray              # [S] f32 entropy of the raw distribution, nats
    top_ids: np.ndarray | None       # [S, k] i64
    top_logprobs: np.ndarray | None  # [S, k] f32


@dataclass(slots=True)
class Awareness:
    """Running uncertainty summary of one generation."""
    count: int = 0
    sum_logprob: float = 0.0
    max_entropy: float = 0.0
    low_confidence: int = 0

    def add(self, logprob: float, entropy: float) -> None:
        self.count += 1
        self.sum_logprob += logprob
        self.max_entropy = max(self.max_entropy, entropy)
        self.low_confidence += logprob < math.log(LOW_CONFIDENCE_PROB)

    def summary(self) -> dict:
        mean = self.sum_logprob / self.count if self.count else 0.0
        return {
            "mean_logprob": round(mean, 6),
            "perplexity": round(math.exp(-mean), 6),
            "max_entropy": round(self.max_entropy, 6),
            "low_confidence_tokens": self.low_confidence,
            "tokens": self.count,
        }
