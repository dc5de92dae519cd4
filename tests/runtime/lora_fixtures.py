"""PEFT adapters for tiny GGUFs, made by peft itself on transformers' reading of the GGUF
(the model a real adapter is trained on), with lora_B set to random nonzero values (peft
initialises it to zero, which would hide every mistake)."""
from __future__ import annotations

from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def hf_model(gguf: str):
    path = Path(gguf)
    return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)


def make_adapter(gguf: str, out: Path, seed: int = 0, r: int = 8, alpha: float = 16, **config):
    """Save a random adapter for `gguf` to `out`; returns the PEFT model (the reference)."""
    torch.manual_seed(seed)
    peft_model = get_peft_model(hf_model(gguf), LoraConfig(
        r=r, lora_alpha=alpha, target_modules=config.pop("target_modules", ALL_PROJECTIONS), lora_dropout=0.0,
        **config))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.05)
    peft_model.save_pretrained(out)
    return peft_model.eval()


def reference_logits(peft_model, ids: list[int]):
    with torch.no_grad():
        return peft_model(torch.tensor([ids])).logits[0].numpy()
