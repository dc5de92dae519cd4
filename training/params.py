"""ORPO + LoRA hyperparameters with defaults chosen for small models (0.1B-1.5B) and small
preference sets (tens to hundreds of pairs), validated where they enter (HTTP, CLI).

Why these defaults, not TRL's (which are for full fine-tuning of 7B models):
- learning_rate 5e-4, not 1e-6: only the LoRA adapters train, and an adapter starting at
  zero needs a rate ~100x a full fine-tune's to move in tens of steps; 1e-6 leaves the
  answers of a 0.5B model unchanged after 60 steps.
- beta (the paper's lambda) 0.5, not 0.1: with a few dozen pairs the NLL term is quickly
  small, and a larger weight keeps the rejected answer pushed down; the paper found the
  odds-ratio term stable across lambda in [0.1, 1] (§6.1).
- LoRA r 16, alpha 32, on every projection (q k v o gate up down): the usual small-model
  setting; about 1% of a 0.5B model's weights. No LoRA dropout: TRL disables dropout
  for ORPO anyway, and a tiny set has no noise to regularise against.
- max_steps 60, batch 4, constant rate after 3 warm-up steps: a few epochs over a small set,
  minutes on a GPU, tens of minutes on two CPU cores for a 0.5B model.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EXPORT_TYPES = ("f16", "q8_0")


class OrpoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(5e-4, gt=0, le=1e-2)
    beta: float = Field(0.5, gt=0, le=10, description="weight of the odds-ratio term (lambda in the paper)")
    max_steps: int = Field(60, ge=1, le=100_000)
    batch_size: int = Field(4, ge=1, le=256)
    gradient_accumulation_steps: int = Field(1, ge=1, le=256)
    warmup_steps: int = Field(3, ge=0)
    lr_scheduler: Literal["constant_with_warmup", "linear", "cosine"] = "constant_with_warmup"
    weight_decay: float = Field(0.0, ge=0, le=1)
    max_length: int = Field(512, ge=16, le=32_768, description="prompt + completion tokens; longer examples are refused")
    lora_r: int = Field(16, ge=1, le=512)
    lora_alpha: int = Field(32, ge=1, le=4096)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        min_length=1)
    seed: int = 0
    export_type: Literal["f16", "q8_0"] = "q8_0"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    logging_steps: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _consistent(self):
        if self.warmup_steps >= self.max_steps and self.max_steps > 1:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be below max_steps ({self.max_steps})")
        return self
