"""The CPU backend's grouped attention against torch's SDPA (an independent reference) on
random inputs: decode queries, whole prompts, prompts continuing after cached positions, GQA
groups 1-7, and prompts long enough to be computed in several score slices."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from runtime.backends import cpu


def reference(q, keys, values, scale):
    n_q, n_ctx = q.shape[0], keys.shape[0]
    mask = torch.arange(n_ctx)[None, :] <= (torch.arange(n_q)[:, None] + n_ctx - n_q)
    o = F.scaled_dot_product_attention(q.transpose(0, 1), keys.transpose(0, 1), values.transpose(0, 1),
                                       attn_mask=mask, scale=scale, enable_gqa=True)
    return o.transpose(0, 1)


@pytest.mark.parametrize("n_heads,n_kv", [(4, 4), (14, 2), (7, 1)])
@pytest.mark.parametrize("n_q,n_ctx", [(1, 1), (1, 37), (5, 5), (9, 40), (64, 64)])
@pytest.mark.parametrize("slices", [False, True])
def test_grouped_attention_equals_sdpa(n_heads, n_kv, n_q, n_ctx, slices, monkeypatch):
    if slices:                                   # a few query rows a slice
        monkeypatch.setattr(cpu, "SCORE_ELEMENTS", n_heads * n_ctx * 2)
    g = torch.Generator().manual_seed(n_heads * 1000 + n_q * 10 + n_ctx)
    q = torch.randn(n_q, n_heads, 16, generator=g)
    keys, values = torch.randn(2, n_ctx, n_kv, 16, generator=g)
    out = cpu._grouped_attention(q, keys, values, 0.25)
    torch.testing.assert_close(out, reference(q, keys, values, 0.25), rtol=1e-5, atol=1e-5)
