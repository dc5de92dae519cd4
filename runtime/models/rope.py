"""Rotary position tables: inverse frequencies and the cos/sin scale, plain, linear or YaRN.

Both backends build their cos/sin caches from `rope_tables`, so scaling is decided once,
by `scaling_for`: the GGUF's own scaling if it declares one; else, when the engine serves
more positions than the model was trained on, YaRN over the trained context for the
families whose authors document it (Qwen2.5 and Qwen3: YaRN, factor 4 over 32K), with the
factor the served length needs; other families refuse positions past their training.
YaRN follows Peng et al. 2023 (arXiv:2309.00071), section 3.2, as transformers and
llama.cpp compute it (beta_fast 32, beta_slow 1, attention factor 0.1 ln s + 1).
"""
from __future__ import annotations

import math

import numpy as np

from runtime.gguf import ModelLoadError, ModelSpec, RopeScaling

YARN_FAMILIES = ("qwen2", "qwen3")


def scaling_for(spec: ModelSpec, max_positions: int) -> RopeScaling | None:
    """The rope scaling to serve `max_positions` positions with (see the module docstring)."""
    if spec.rope_scaling is not None or max_positions <= spec.context_length:
        return spec.rope_scaling
    if spec.arch not in YARN_FAMILIES:
        raise ModelLoadError(f"{spec.name}: {max_positions} positions is past the trained context of "
                             f"{spec.context_length}, and {spec.arch} documents no rope scaling to reach it")
    return RopeScaling("yarn", max_positions / spec.context_length, spec.context_length)


def inverse_frequencies(head_dim: int, base: float, scaling: RopeScaling | None) -> tuple[np.ndarray, float]:
    """Return (inv_freq [head_dim/2] float64, attention factor for cos/sin)."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    inv_freq = 1.0 / base ** exponents
    if scaling is None:
        return inv_freq, 1.0
    if scaling.kind == "linear":
        return inv_freq / scaling.factor, 1.0
    if scaling.kind != "yarn":
        raise ValueError(f"unsupported rope scaling {scaling.kind!r}")

    def correction_dim(rotations: float) -> float:
        return head_dim * math.log(scaling.original_context / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(32.0)), 0)
    high = min(math.ceil(correction_dim(1.0)), head_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(head_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolate = 1.0 - ramp
    inv_freq = (inv_freq / scaling.factor) * (1.0 - extrapolate) + inv_freq * extrapolate
    return inv_freq, 0.1 * math.log(scaling.factor) + 1.0


def rope_tables(head_dim: int, base: float, scaling: RopeScaling | None, max_positions: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin tables of shape [max_positions, head_dim/2] in float32, already scaled."""
    inv_freq, attn_factor = inverse_frequencies(head_dim, base, scaling)
    angles = np.outer(np.arange(max_positions, dtype=np.float64), inv_freq)
    return ((np.cos(angles) * attn_factor).astype(np.float32),
            (np.sin(angles) * attn_factor).astype(np.float32))
