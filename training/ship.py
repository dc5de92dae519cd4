"""An adapter made ready to ship with the runtime (runtime/adapters/NAME/): the PEFT folder
`samevm tune` wrote, its weights cast to float16 (half the bytes; the runtime computes in
float32 either way) and its config naming the base GGUF it was trained on. Prints the
sha256 that runtime/catalog.py checks before serving it.

float16, not bfloat16: v11's float16 cast passed the same seeds as its float32 form on every
suite (59/110 both, one run), while v9's bfloat16 cast measured 51-55 in runs at later commits
against its float32's 58 (542389a): not side by side, so a hint, not a measurement. LoRA factors
are small numbers, well inside float16's range, and its 10 mantissa bits keep more of them.

    python -m training.ship OUT/adapter --name qwen2.5-coder-0.5b-tools --base qwen2.5-coder-0.5b-instruct.gguf
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from runtime.catalog import ADAPTERS
from runtime.lora import weights_sha256
from training.adapter import CONFIG, WEIGHTS


def ship(adapter: Path, target: Path, base: str) -> str:
    import torch
    from safetensors.torch import load_file, save_file

    tensors = {k: v.to(torch.float16).contiguous() for k, v in load_file(str(adapter / WEIGHTS)).items()}
    config = json.loads((adapter / CONFIG).read_text())
    config["base_model_name_or_path"] = base
    target.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(target / WEIGHTS), metadata={"format": "pt"})
    (target / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return weights_sha256(target)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("adapter", type=Path, help="the PEFT adapter folder (samevm tune's OUT/adapter)")
    p.add_argument("--name", required=True, help="folder name under runtime/adapters/")
    p.add_argument("--base", required=True, help="file name of the base GGUF it was trained on")
    args = p.parse_args(argv)
    digest = ship(args.adapter, ADAPTERS / args.name, args.base)
    size = (ADAPTERS / args.name / WEIGHTS).stat().st_size
    print(f"{ADAPTERS / args.name}: {size / 1e6:.1f} MB, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
