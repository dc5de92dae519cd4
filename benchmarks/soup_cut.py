"""How far the shipped soup (cut to a lower rank to stay under 16 MB) is from the exact mean of
its parts, the adapter the suites measured on the H100: per module, the share of the exact
mean delta's energy in the directions the cut dropped, and the relative change of the delta
(Frobenius norm). The parts come from the commits that shipped them.

    python benchmarks/soup_cut.py [--parts 26bdac5 a0e0595] [--out benchmarks/results/soup_cut.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.provenance import ROOT, save  # noqa: E402
from training.soup import deltas  # noqa: E402

SHIPPED = "runtime/adapters/qwen2.5-coder-0.5b-tools"


def part(commit: str, dest: Path) -> Path:
    """The shipped adapter as of `commit`, written to `dest`."""
    dest.mkdir(parents=True)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        data = subprocess.run(["git", "show", f"{commit}:{SHIPPED}/{name}"], cwd=ROOT, capture_output=True,
                              check=True).stdout
        (dest / name).write_bytes(data)
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", default=["26bdac5", "a0e0595"], help="commits whose shipped adapter is a part")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "soup_cut.json")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        parts = [deltas(part(c, Path(tmp) / c)) for c in args.parts]
    cut = deltas(ROOT / SHIPPED)
    rank = json.loads((ROOT / SHIPPED / "adapter_config.json").read_text())["r"]
    dropped, moved = [], []
    for k, d in cut.items():
        exact = sum(x[k] for x in parts) / len(parts)
        energy = torch.linalg.svdvals(exact).square()
        dropped.append(float(energy[rank:].sum() / energy.sum()))
        moved.append(float(torch.linalg.norm(d - exact) / torch.linalg.norm(exact)))
    stat = lambda xs: {"mean": round(sum(xs) / len(xs), 5), "max": round(max(xs), 5)}   # noqa: E731
    report = {"benchmark": "soup_cut", "parts": args.parts, "modules": len(cut), "shipped_rank": rank,
              "dropped_energy_share": stat(dropped), "relative_delta_change": stat(moved),
              "versions": {"torch": torch.__version__}, "machine": "cpu"}
    print(report)
    save(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
