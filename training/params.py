"""ORPO + LoRA hyperparameters with defaults chosen for small models (0.1B-1.5B) and small
preference sets (tens to hundreds of pairs), validated where they enter (HTTP, CLI).

Why these defaults, not TRL's (lr 1e-6, beta 0.1, which are for full fine-tuning of 7B models):
- learning_rate 5e-4: only the LoRA adapters train, and an adapter that starts at zero needs
  a rate about 100x a full fine-tune's to move in tens of steps. Measured on the default
  0.5B model with demos/data/identity_pairs.jsonl (8 pairs, CPU): the reward margin went from
  -1.8 to +0.03 in 2 steps (no warm-up), and after 6 steps the model answered the probe the chosen way.
- beta (the paper's lambda) 0.5: with a few dozen pairs the NLL term alone soon makes the
  chosen answer likely; a larger weight on the odds-ratio term keeps pushing the rejected
  answer down rather than only pulling the chosen one up.
- LoRA r 16, alpha 32 (scale 2) on every projection (q k v o gate up down): 8.8M trainable
  weights on the 0.5B model, 1.8% of it. No LoRA dropout: TRL turns dropout off for ORPO,
  and a tiny set has little noise to regularise against.
- max_steps 60, batch 4, constant rate after 3 warm-up steps: several epochs of a set of
  tens of pairs; 23 s of training for the 0.5B model on an H100, about a minute a step on
  two busy CPU cores (demos/orpo_reload.py runs fewer steps there).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LoraParams(BaseModel):
    """The adapter both trainers put on the model."""
    model_config = ConfigDict(extra="forbid")

    lora_r: int = Field(16, ge=1, le=512)
    lora_alpha: int = Field(32, ge=1, le=4096)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1)


class OrpoParams(LoraParams):
    learning_rate: float = Field(5e-4, gt=0, le=1e-2)
    beta: float = Field(0.5, gt=0, le=10, description="weight of the odds-ratio term (lambda in the paper)")
    max_steps: int = Field(60, ge=1, le=100_000)
    batch_size: int = Field(4, ge=1, le=256)
    gradient_accumulation_steps: int = Field(1, ge=1, le=256)
    warmup_steps: int = Field(3, ge=0, le=100_000)
    lr_scheduler: Literal["constant_with_warmup", "linear", "cosine"] = "constant_with_warmup"
    weight_decay: float = Field(0.0, ge=0, le=1)
    max_length: int = Field(512, ge=16, le=32_768, description="prompt + completion tokens; longer examples are refused")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    export_type: Literal["f16", "q8_0"] = "q8_0"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    logging_steps: int = Field(1, ge=1, le=100_000)

    @model_validator(mode="after")
    def _consistent(self):
        if self.warmup_steps >= self.max_steps and self.max_steps > 1:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be below max_steps ({self.max_steps})")
        return self


class SftParams(LoraParams):
    """LoRA SFT on agent steps (training/sft.py): r 16 / alpha 32 on every projection, the
    usual LoRA setting for 0.5B-1.5B models. On 3,601 generated steps of the 0.5B (H200,
    bf16) lr 2e-4 took the completion loss from 0.76 to 0.03 in 120 steps and went NaN near
    step 200, so the default is half that and one epoch; the steps come from the data
    (`epochs` passes over it) unless `max_steps` is given."""

    learning_rate: float = Field(1e-4, gt=0, le=1e-2)
    epochs: float = Field(1.0, gt=0, le=100)
    max_steps: int | None = Field(None, ge=1, le=1_000_000, description="overrides epochs")
    batch_size: int = Field(4, ge=1, le=256)
    gradient_accumulation_steps: int = Field(1, ge=1, le=256)
    warmup_steps: int = Field(5, ge=0, le=100_000)
    weight_decay: float = Field(0.0, ge=0, le=1)
    max_grad_norm: float = Field(1.0, gt=0)
    max_length: int = Field(4096, ge=16, le=32_768, description="prompt + completion tokens; longer steps are dropped")
    eval_every: int | None = Field(None, ge=1, description="optimizer steps between losses on the held-out "
                                   "steps (None: about 10 times a run, so scoring stays a small share of it)")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
