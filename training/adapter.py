"""A trained LoRA adapter on disk: PEFT's own directory format, named by its weights' sha256.

    DIR/adapter_config.json          PEFT's LoraConfig (r, alpha, target modules), base = the GGUF's name
    DIR/adapter_model.safetensors    the A and B matrices, float32

`merged_gguf` writes the same adapter merged into the base weights as a GGUF (export.py),
the fallback for a runtime that does not serve adapters.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:                       # adapter_label needs neither torch nor peft (benchmarks use it)
    from peft import PeftModel

WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"


def save_adapter(model: PeftModel, out: str | Path, base_gguf: str | Path) -> Path:
    """Writes the adapter, unless a weight is not finite (a run that diverged: the runtime would
    refuse it anyway, and `samevm tune` must not report it as trained)."""
    import torch

    from training.sft import TrainingDiverged
    bad = [n for n, p in model.named_parameters() if "lora_" in n and not torch.isfinite(p).all()]
    if bad:
        raise TrainingDiverged(f"{len(bad)} adapter tensors are not finite (first: {bad[0]}): nothing written "
                               f"to {out}; lower the learning rate")
    out = Path(out)
    model.peft_config["default"].base_model_name_or_path = Path(base_gguf).name
    model.save_pretrained(out, safe_serialization=True, save_embedding_layers=False)   # no hub look-up
    assert (out / WEIGHTS).is_file() and (out / CONFIG).is_file(), f"PEFT wrote no adapter into {out}"
    return out


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def adapter_label(adapter_dir: str | Path) -> str:
    """How records name an adapter: its directory's name and its weights' sha256."""
    path = Path(adapter_dir)
    return f"{path.resolve().name}@sha256:{sha256(path / WEIGHTS)}"


def merged_gguf(model: PeftModel, base_gguf: str | Path, target: str | Path, export_type: str = "q8_0") -> Path:
    """The adapter merged into the base weights, written as a GGUF shaped like `base_gguf`.
    Merging changes `model`'s base weights: save the adapter first."""
    import torch

    from training.export import export_gguf

    dense = model.merge_and_unload().to("cpu", torch.float32)
    return export_gguf(dense, base_gguf, target, export_type)
