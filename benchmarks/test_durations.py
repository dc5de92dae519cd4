"""Wall time of test files at this checkout against a baseline commit, side by side.

    python -m benchmarks.test_durations [--base REV] [--name NAME] FILE_OR_DIR ...

Each tree runs `python -m pytest -p no:cacheprovider` on the files with the default marks, in
a fresh process with a fresh kernel-emulator cache (SAMEVM_EMU_CACHE), as on a CI machine;
base first, then this checkout. The baseline is unpacked from git (provenance.unpack) with
this checkout's CPU kernels library where their sources are the same, else built. Writes each
tree's per-file seconds (setup + call + teardown, from pytest's JUnit XML), its 20 slowest tests,
its wall time, and the load average before and after, to benchmarks/results/test_durations[-NAME].json.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from benchmarks.provenance import ROOT, commit, save, unpack

KERNELS = "runtime/backends/cpu_kernels"


def prepare_base(rev: str, dest: Path) -> str:
    full = unpack(rev, dest)
    same = subprocess.run(["git", "diff", "--quiet", full, "HEAD", "--", KERNELS, "setup.py"], cwd=ROOT).returncode == 0
    built = list((ROOT / KERNELS).glob("_qmatmul*.so"))
    if same and built:
        shutil.copy2(built[0], dest / KERNELS)
    else:
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=dest, check=True,
                       stdout=subprocess.DEVNULL)
    return full


def run(tree: Path, files: list[str], scratch: Path) -> dict:
    xml, cache = scratch / "junit.xml", scratch / "emu-cache"
    env = {**os.environ, "PYTHONPATH": str(tree), "SAMEVM_EMU_CACHE": str(cache)}
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *files],
                          cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    per_file, per_test = Counter(), {}
    for case in ET.parse(xml).iter("testcase"):
        seconds = float(case.get("time"))
        per_file[case.get("classname")] += seconds
        per_test[f"{case.get('classname')}::{case.get('name')}"] = seconds
    return {"wall_s": round(wall, 1), "returncode": done.returncode, "summary": done.stdout.strip().splitlines()[-1],
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
            "files_s": {f: round(s, 1) for f, s in per_file.most_common()},
            "slowest_s": {t: round(s, 1) for t, s in sorted(per_test.items(), key=lambda kv: -kv[1])[:20]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="test files or folders, relative to the repository root")
    ap.add_argument("--base", default="main", help="the baseline commit (default main)")
    ap.add_argument("--name", help="results file suffix")
    args = ap.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        base_tree.mkdir()
        base = prepare_base(args.base, base_tree)
        for label, tree in (("base", base_tree), ("head", ROOT)):
            scratch = Path(tmp) / f"scratch-{label}"
            scratch.mkdir()
            runs[label] = run(tree, args.files, scratch)
            print(f"{label}: {runs[label]['wall_s']} s, {runs[label]['summary']}", file=sys.stderr)
    out = ROOT / "benchmarks" / "results" / f"test_durations{'-' + args.name if args.name else ''}.json"
    save({"benchmark": "test_durations", "files": args.files, "base_commit": base, "head_commit": commit(short=False),
          "python": platform.python_version(), "machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)),
          "wall_ratio_head_over_base": round(runs["head"]["wall_s"] / runs["base"]["wall_s"], 3), **runs}, out)


if __name__ == "__main__":
    main()
