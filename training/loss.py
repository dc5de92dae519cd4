"""The ORPO objective as one pure function (Hong, Lee, Thorne 2024, arXiv:2403.07691).

With P(y|x) the length-normalised likelihood exp(mean_t log p(y_t | x, y_<t)) of §3:

    odds(y|x) = P(y|x) / (1 - P(y|x))
    L_OR      = -log sigmoid( log( odds(y_w|x) / odds(y_l|x) ) )
    L_ORPO    = L_SFT + lambda * L_OR            (lambda is TRL's and our `beta`)

log(1 - P) is computed as log1mexp(log P) so that P close to 1 neither cancels nor
overflows. TRL's ORPOTrainer calls this through our subclass (training/orpo.py), so the
function tested alone is the one that trains.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

LN_HALF = -math.log(2.0)


class OrpoTerms(NamedTuple):
    loss: torch.Tensor             # [] L_SFT + beta * mean(L_OR)
    odds_ratio_loss: torch.Tensor  # [B] L_OR per pair
    log_odds: torch.Tensor         # [B] log odds(y_w|x) - log odds(y_l|x)
    chosen_rewards: torch.Tensor   # [B] beta * log P(y_w|x), detached (TRL's logged "reward")
    rejected_rewards: torch.Tensor  # [B] beta * log P(y_l|x), detached


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x < 0, switching form at -ln 2 to avoid cancellation (Maechler 2012)."""
    return torch.where(x < LN_HALF, torch.log1p(-torch.exp(x)), torch.log(-torch.expm1(x)))


def orpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, sft_loss: torch.Tensor,
              beta: float) -> OrpoTerms:
    """chosen_logps, rejected_logps: [B] mean per-token log-probabilities of each completion
    (log P(y|x), all < 0); sft_loss: [] the NLL of the chosen sequences."""
    assert chosen_logps.shape == rejected_logps.shape and chosen_logps.dim() == 1
    # a mean log P of 0 (every token certain, as bfloat16 rounds it) makes log(1 - P) -inf and
    # the gradient NaN; below -1e-6 the odds are finite, and the clamped pair adds no gradient
    c, r = chosen_logps.float().clamp(max=-1e-6), rejected_logps.float().clamp(max=-1e-6)
    log_odds = (c - r) - (log1mexp(c) - log1mexp(r))   # log odds(c) - log odds(r)
    l_or = -F.logsigmoid(log_odds)
    return OrpoTerms(
        loss=sft_loss + beta * l_or.mean(),
        odds_ratio_loss=l_or,
        log_odds=log_odds,
        chosen_rewards=beta * c.detach(),
        rejected_rewards=beta * r.detach(),
    )
