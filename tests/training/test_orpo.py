"""A few ORPO steps on a tiny random model, end to end through the real pieces: TRL's trainer
with our loss and LoRA, merge, export, and samevm's engine as the independent judge.

The mean log-odds of chosen over rejected completions on the training pairs must rise,
both as the trainer measures it (ORPO's reward margin) and as samevm's engine measures it
on the exported GGUF; the exported GGUF's logits must equal the trained model's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from tests.training.conftest import PAIRS
from training.dataset import from_records
from training.export import export_gguf
from training.hf_model import load_model, load_tokenizer
from training.orpo import train_orpo
from training.params import OrpoParams

STEPS = OrpoParams(max_steps=8, warmup_steps=0, batch_size=4, learning_rate=2e-3, export_type="f16")


def mean_log_odds(engine: LLMEngine) -> float:
    """mean over pairs of log odds(chosen) - log odds(rejected), with P the length-normalised
    likelihood of the completion given the prompt, from the engine's own logits."""
    def logp(prompt: str, completion: str) -> float:
        n, ids = len(engine.tokenizer.encode(prompt)), engine.tokenizer.encode(prompt + completion)
        logits = engine.prompt_logits(ids).astype(np.float64)
        logprobs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
        return float(np.mean([logprobs[t - 1, ids[t]] for t in range(n, len(ids))]))

    def log_odds(lp: float) -> float:
        return lp - np.log(-np.expm1(lp))
    return float(np.mean([log_odds(logp(p["prompt"], p["chosen"])) - log_odds(logp(p["prompt"], p["rejected"]))
                          for p in PAIRS]))


def engine(path) -> LLMEngine:
    return LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", kv_cache_mb=16))


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "llama"])
def test_orpo_steps_raise_the_preference_and_export_keeps_it(arch, tiny_gguf, tmp_path):
    base = tiny_gguf(arch)
    events = []
    result = train_orpo(load_model(base), load_tokenizer(base), from_records(PAIRS), STEPS, events.append)
    before, after = result.metrics["before"], result.metrics["after"]
    assert after["reward_margin"] > before["reward_margin"] + 0.05, result.metrics
    assert after["log_odds"] > before["log_odds"] + 0.5, result.metrics
    assert [e["step"] for e in events] == list(range(1, STEPS.max_steps + 1))
    assert events[-1]["reward_margin"] > events[0]["reward_margin"]
    assert all(e["eta_s"] >= 0 and np.isfinite(e["loss"]) for e in events) and events[-1]["eta_s"] == 0

    out = export_gguf(result.model, base, tmp_path / "trained.gguf", "f16")
    trained = engine(out)
    ids = trained.tokenizer.encode(PAIRS[0]["prompt"] + PAIRS[0]["chosen"])
    with torch.no_grad():
        want = result.model(torch.tensor([ids])).logits[0].numpy()
    got = trained.prompt_logits(ids)
    assert np.abs(got - want).max() / np.abs(want).max() < 5e-3
    # the engine, not the trainer, judges: the preference moved in the served model
    assert mean_log_odds(trained) > mean_log_odds(engine(base)) + 0.5
