"""Search latency of the default RAG setting at an earlier commit and at this checkout, side by side.

    nice -n 10 python benchmarks/rag_latency.py --before b32a4ec [--rounds 3] [--home DIR]

On a CPU shared with other jobs a latency alone says more about the load than about the
code, so this runs `benchmarks/rag_eval.py --default-only` (pdftotext, the 117 questions,
the collection already indexed under --home reused) in a copy of the `--before` commit
(git archive into a temporary folder) and in this checkout by turns, `--rounds` times each,
and reports each run's median and p95 with the load average around it, the median of the
runs per side and the ratio. Recall@5 and MRR@10 of every run are kept beside them: a
faster search must find the same pages. Writes benchmarks/results/rag_latency.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import commit as head_commit, unpack  # noqa: E402


def run_eval(tree: Path, commit: str, home: Path, threads: int) -> dict:
    """One `rag_eval.py --default-only` run in `tree`: its default record and the load around it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval.json"
        load = os.getloadavg()
        subprocess.run([sys.executable, str(tree / "benchmarks" / "rag_eval.py"), "--default-only", "--home", str(home),
                        "--out", str(out), "--extractors", "pdftotext", "--measure", "pdftotext",
                        "--threads", str(threads)], cwd=tree, check=True, stderr=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONPATH": str(tree), "SAMEVM_COMMIT": commit})
        record = next(r for r in json.loads(out.read_text())["results"] if r.get("default"))
    return {"commit": commit, "search_ms_median": record["search_ms_median"], "search_ms_p95": record["search_ms_p95"],
            "recall@5": record["recall@5"], "mrr@10": record["mrr@10"], "ranks": record["ranks"],
            "chunks": record["chunks"], "load_average_1min": [round(load[0], 2), round(os.getloadavg()[0], 2)]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the commit to compare against")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--home", type=Path, default=ROOT / ".samevm" / "rag_eval",
                   help="rag_eval.py's folder (PDF cache, indexed collection): shared by both sides")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rag_latency.json")
    args = p.parse_args()

    after = head_commit(short=False)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp)
        before = unpack(args.before, old)
        for i in range(args.rounds):
            for side, tree, commit in (("before", old, before), ("after", ROOT, after)):
                runs[side].append(run_eval(tree, commit, args.home, args.threads))
                r = runs[side][-1]
                print(f"round {i + 1} {side:6s} median {r['search_ms_median']} ms p95 {r['search_ms_p95']} ms "
                      f"load {r['load_average_1min']} R@5 {r['recall@5']} MRR {r['mrr@10']}", file=sys.stderr)
    median = {side: statistics.median(r["search_ms_median"] for r in rs) for side, rs in runs.items()}
    p95 = {side: statistics.median(r["search_ms_p95"] for r in rs) for side, rs in runs.items()}
    report = {
        "benchmark": "rag_latency", "setting": "default (rag_eval.py --default-only, pdftotext)",
        "threads": args.threads, "rounds": args.rounds, "before": before, "after": after,
        "median_of_run_medians_ms": median, "median_of_run_p95s_ms": p95,
        "speedup_median": round(median["before"] / median["after"], 2),
        "speedup_p95": round(p95["before"] / p95["after"], 2),
        "same_ranks": all(r["ranks"] == runs["before"][0]["ranks"] for rs in runs.values() for r in rs),
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "caveat": "CPU shared with other jobs; the sides ran by turns so "
                                                      "both saw the same load (see each run's load average)"},
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}: median {median['before']} -> {median['after']} ms, "
          f"{report['speedup_median']}x; p95 {report['speedup_p95']}x", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
