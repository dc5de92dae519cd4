"""Which commit a benchmark ran at, for its JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit(short: bool = True) -> str:
    """HEAD of this checkout, or SAMEVM_COMMIT where set: the device tool sends the working tree
    with a .git from earlier in the session, so a copied tree names its commit there."""
    if os.environ.get("SAMEVM_COMMIT"):
        return os.environ["SAMEVM_COMMIT"]
    return subprocess.run(["git", "rev-parse", *(["--short"] if short else []), "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()


def save(report: dict, out: Path) -> None:
    """Write a benchmark's JSON report, with the commit and the date it ran at last."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**report, "git_commit": commit(short=False), "date": time.strftime("%Y-%m-%d")},
                              indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)


def unpack(rev: str, dest: Path) -> str:
    """The files of commit `rev` of this repository, unpacked under `dest` (to run an earlier
    version beside this checkout); returns the commit's full hash."""
    import tarfile
    from io import BytesIO
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    data = subprocess.run(["git", "archive", full], cwd=ROOT, capture_output=True, check=True).stdout
    tarfile.open(fileobj=BytesIO(data), mode="r:").extractall(dest, filter="data")
    return full
