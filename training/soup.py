"""One adapter from several LoRA fine-tunes of one base: the weighted mean of their weight
deltas (a "model soup", Wortsman et al. 2022): exactly, as one adapter of the summed rank, or
cut to `rank` by SVD. PEFT's add_weighted_adapter does the arithmetic; this names the recipe.

Why: the agent suites turn on a few decisions that one adapter makes the same way in every
seed, so two training runs of one recipe differ suite by suite (v11 and v13: 57 and 36 of 110
seeds), and averaging their deltas keeps what they agree on. On one H100 run (af10ad7) the
mean of v9 and v11 passed 65/110 and the mean of v11 and v13 64/110, beside v11's 57/110.
The mean of two rank-8 adapters is exactly a rank-16 one (17.6 MB as float16); the shipped one
is cut to rank 14 (15.4 MB, under the 16 MB a shipped adapter may take), which moves its
modules' deltas by 1.9% on average (6% at most; `benchmarks/soup_cut.py`): the suites measured
the exact mean on the H100 and the cut one on the CPU (three suites so far).

    python -m training.soup OUT ADAPTER ADAPTER [...] --base model.gguf [--rank R] [--weights 1,1,2]

The weights are ratios, scaled to sum to one: a soup is a mean, and weights taken as given would
scale every delta by their sum.

OUT is a PEFT adapter folder in float32; `python -m training.ship OUT ...` makes it the shipped form.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def deltas(folder: Path) -> dict:
    """Each module's weight delta, scaling * B @ A in float64, read from a PEFT adapter folder's
    own files (not through PEFT): what a soup is checked and measured against."""
    import torch
    from safetensors.torch import load_file

    cfg = json.loads((Path(folder) / "adapter_config.json").read_text())
    t = load_file(str(Path(folder) / "adapter_model.safetensors"))
    scale = cfg["lora_alpha"] / cfg["r"]
    return {k.removesuffix(".lora_A.weight"): scale * t[k.replace("lora_A", "lora_B")].double() @ t[k].double()
            for k in t if k.endswith(".lora_A.weight")}


def soup(model, adapters: list[Path], weights: list[float] | None = None, rank: int | None = None):
    """`model`: the base (transformers); returns it as a PeftModel holding the soup alone, as
    its "default" adapter. rank None: the sum of the adapters' ranks (exact)."""
    from peft import PeftModel

    if len(adapters) < 2:
        raise ValueError("a soup needs two adapters or more")
    weights = weights or [1.0] * len(adapters)
    if len(weights) != len(adapters):
        raise ValueError(f"{len(weights)} weights for {len(adapters)} adapters")
    if min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f"weights {weights}: a mean takes weights of zero or more, not all zero")
    weights = [w / sum(weights) for w in weights]
    names = [f"part{i}" for i in range(len(adapters))]
    peft = PeftModel.from_pretrained(model, str(adapters[0]), adapter_name=names[0])
    for name, folder in zip(names[1:], adapters[1:]):
        peft.load_adapter(str(folder), adapter_name=name)
    full = sum(json.loads((Path(a) / "adapter_config.json").read_text())["r"] for a in adapters)
    if rank is None or rank >= full:        # A stacked, B side by side: the mean exactly
        peft.add_weighted_adapter(names, weights, "default", combination_type="cat")
    else:
        peft.add_weighted_adapter(names, weights, "default", combination_type="svd", svd_rank=rank,
                                  svd_full_matrices=False)
    for name in names:
        peft.delete_adapter(name)
    peft.set_adapter("default")
    return peft


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("adapters", type=Path, nargs="+", help="PEFT adapter folders trained on --base")
    p.add_argument("--base", required=True, help="the base GGUF the adapters were trained on")
    p.add_argument("--rank", type=int, help="rank of the soup (default: the sum of theirs, exact)")
    p.add_argument("--weights", help="comma-separated ratios, one per adapter, scaled to sum to one (default: equal)")
    args = p.parse_args(argv)
    from training.hf_model import load_model

    weights = [float(w) for w in args.weights.split(",")] if args.weights else None
    peft = soup(load_model(args.base), args.adapters, weights, args.rank)
    peft.save_pretrained(str(args.out))
    print(f"{args.out}: rank {peft.peft_config['default'].r} soup of {len(args.adapters)} adapters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
