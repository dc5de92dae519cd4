"""The ORPO loss alone, against the paper's equations computed independently in float64,
and against TRL's own odds_ratio_loss (whose contract our trainer subclass keeps)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from training.loss import log1mexp, orpo_loss


def paper_orpo(chosen_logps, rejected_logps, sft, lam):
    """Hong et al. 2024 written out literally: P = exp(mean log-likelihood), odds = P / (1 - P),
    L_OR = -log sigmoid(log(odds_w / odds_l)), L_ORPO = L_SFT + lambda * mean L_OR."""
    pw, pl = np.exp(np.float64(chosen_logps)), np.exp(np.float64(rejected_logps))
    odds_w, odds_l = pw / (1 - pw), pl / (1 - pl)
    log_or = np.log(odds_w / odds_l)
    l_or = -np.log(1 / (1 + np.exp(-log_or)))
    return sft + lam * l_or.mean(), l_or, log_or


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
def test_orpo_loss_matches_the_papers_equation(seed, beta):
    rng = np.random.default_rng(seed)
    chosen = -rng.uniform(1e-3, 6.0, 16)
    rejected = -rng.uniform(1e-3, 6.0, 16)
    sft = float(rng.uniform(0.5, 3.0))
    want_loss, want_l_or, want_log_or = paper_orpo(chosen, rejected, sft, beta)
    got = orpo_loss(torch.tensor(chosen, dtype=torch.float32), torch.tensor(rejected, dtype=torch.float32),
                    torch.tensor(sft), beta)
    np.testing.assert_allclose(got.log_odds.numpy(), want_log_or, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got.odds_ratio_loss.numpy(), want_l_or, rtol=1e-4, atol=1e-5)
    assert abs(float(got.loss) - want_loss) < 1e-4 * max(1.0, abs(want_loss))
    np.testing.assert_allclose(got.chosen_rewards.numpy(), beta * chosen, rtol=1e-6)


def test_stable_where_the_likelihood_is_near_one():
    # P = exp(-1e-6): 1 - P cancels in float32 done naively; log1mexp keeps it finite and right
    c = torch.tensor([-1e-6, -1e-3, -0.5, -30.0])
    want = np.log(-np.expm1(np.float64(c.numpy())))
    np.testing.assert_allclose(log1mexp(c).numpy(), want, rtol=1e-5, atol=1e-12)
    out = orpo_loss(c, torch.full_like(c, -2.0), torch.tensor(0.0), 0.1)
    assert torch.isfinite(out.loss) and torch.isfinite(out.log_odds).all()


def test_a_likelihood_of_exactly_one_gives_finite_loss_and_gradients():
    # A completion the model already predicts token for token (an adapter going on with ORPO
    # on replies it was trained on) has mean log P = 0 in bfloat16: log(1 - P) is -inf there,
    # and one such pair turned a whole ORPO run's adapter into NaN (tune --from-adapter on the H100).
    c = torch.tensor([0.0, -0.5], requires_grad=True)
    r = torch.tensor([0.0, -2.0], requires_grad=True)
    out = orpo_loss(c, r, torch.tensor(0.0), 0.1)
    out.loss.backward()
    assert torch.isfinite(out.loss) and torch.isfinite(c.grad).all() and torch.isfinite(r.grad).all()
    assert c.grad[1] < 0 < r.grad[1]             # the ordinary pair still trains


def test_gradient_raises_chosen_and_lowers_rejected():
    c = torch.tensor([-2.0, -1.0], requires_grad=True)
    r = torch.tensor([-1.5, -1.0], requires_grad=True)
    orpo_loss(c, r, torch.tensor(0.0), 0.5).loss.backward()
    assert (c.grad < 0).all() and (r.grad > 0).all()   # descent raises log P(chosen), lowers log P(rejected)


def test_our_trainer_keeps_trls_odds_ratio_contract():
    from training.orpo import OrpoTrainer  # first: it imports trl.experimental without TRL's warning
    from trl.experimental.orpo import ORPOTrainer
    me = SimpleNamespace(beta=0.3, accelerator=SimpleNamespace(device=torch.device("cpu")))
    rng = np.random.default_rng(7)
    c = torch.tensor(-rng.uniform(0.01, 5, 8), dtype=torch.float32)
    r = torch.tensor(-rng.uniform(0.01, 5, 8), dtype=torch.float32)
    for ours, theirs in zip(OrpoTrainer.odds_ratio_loss(me, c, r), ORPOTrainer.odds_ratio_loss(me, c, r)):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
