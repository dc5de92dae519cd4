"""training.soup through its command: the soup's deltas, read back from the files it writes
(B @ A of the files, not through PEFT), against the mean of the adapters' deltas computed here."""
from __future__ import annotations

import json

import pytest
import torch

from tests.runtime.lora_fixtures import make_adapter
from training.soup import deltas, main


@pytest.fixture(scope="module")
def parts(tiny_gguf, tmp_path_factory):
    root = tmp_path_factory.mktemp("soup")
    gguf = tiny_gguf("qwen2")
    make_adapter(gguf, root / "a", seed=0)
    make_adapter(gguf, root / "b", seed=1, r=4, alpha=4)          # ranks and scalings may differ
    return gguf, root / "a", root / "b"


def test_at_full_rank_the_soup_is_the_weighted_mean_of_the_deltas(parts, tmp_path):
    gguf, a, b = parts
    assert main([str(tmp_path / "s"), str(a), str(b), "--base", gguf, "--weights", "0.7,0.3"]) == 0
    da, db, ds = deltas(a), deltas(b), deltas(tmp_path / "s")
    assert set(ds) == set(da) and json.loads((tmp_path / "s" / "adapter_config.json").read_text())["r"] == 12
    for k, d in ds.items():
        want = 0.7 * da[k] + 0.3 * db[k]
        assert torch.allclose(d, want, atol=1e-5 * want.abs().max().item()), k


def test_weights_are_ratios_so_the_soup_stays_a_mean(parts, tmp_path):
    gguf, a, b = parts
    assert main([str(tmp_path / "s"), str(a), str(b), "--base", gguf, "--weights", "7,3"]) == 0
    da, db, ds = deltas(a), deltas(b), deltas(tmp_path / "s")
    for k, d in ds.items():
        want = 0.7 * da[k] + 0.3 * db[k]
        assert torch.allclose(d, want, atol=1e-5 * want.abs().max().item()), k
    with pytest.raises(ValueError, match="zero or more"):
        main([str(tmp_path / "t"), str(a), str(b), "--base", gguf, "--weights", "1,-1"])


def test_cut_to_a_lower_rank_it_is_the_best_approximation_of_that_rank(parts, tmp_path):
    gguf, a, b = parts
    assert main([str(tmp_path / "s"), str(a), str(b), "--base", gguf, "--rank", "6"]) == 0
    da, db, ds = deltas(a), deltas(b), deltas(tmp_path / "s")
    for k, d in ds.items():
        mean = (da[k] + db[k]) / 2
        tail = torch.linalg.svdvals(mean)[6:].square().sum().sqrt()      # Eckart-Young: the least error of rank 6
        assert torch.linalg.matrix_rank(d.float()) <= 6
        assert torch.linalg.norm(d - mean) == pytest.approx(tail.item(), rel=1e-3, abs=1e-9), k


def test_one_adapter_is_no_soup(parts, tmp_path):
    gguf, a, _ = parts
    with pytest.raises(ValueError, match="two adapters"):
        main([str(tmp_path / "s"), str(a), "--base", gguf])
