"""Where a default RAG search spends its time, stage by stage, at an earlier commit and at this checkout.

    nice -n 10 python benchmarks/rag_stages.py --before b32a4ec [--rounds 2] [--home DIR]

Over the eval collection that `benchmarks/rag_eval.py` indexed under --home (pdftotext, the
six manuals in one collection) and its 117 questions, torch on one thread as there, each
question is timed through the stages of `RagIndex.search` in the order search runs them: the
store's change check with the cached corpus (`corpus()`), the query embedding, BM25, the
cosine against the stored vectors, convex fusion with the contents penalty, the per-page
cut, and then the whole `search` call. The stages are run in a copy of the `--before`
commit (git archive) and in this checkout by turns, `--rounds` times each, so both see the
same load. Writes benchmarks/results/rag_stages.json: per side and stage the median over
runs of the run medians and p95s (ms), with each run's load average.
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

COLLECTION = "eval-pdftotext"


def measure(home: Path, threads: int) -> dict:
    """Stage timings of this interpreter's `rag` (whichever tree sys.path names first)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from rag.index import _per_page
    from worker.services import Services
    from worker.settings import WorkerSettings
    torch.set_num_threads(threads)
    index = Services(WorkerSettings(home=home, runtime_url=None)).rag
    questions = [q["question"] for q in json.loads((ROOT / "benchmarks/data/rag_questions.json").read_text())["questions"]]
    index.search(questions[0], COLLECTION, k=10)         # builds the corpus, loads the model
    stages: dict[str, list[float]] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        out = fn()
        stages.setdefault(name, []).append(1000 * (time.perf_counter() - t0))
        return out

    load = os.getloadavg()[0]
    for q in questions:
        corpus = timed("corpus()", lambda: index.corpus(COLLECTION))
        vector = timed("query embedding", lambda: index.embedder.embed([q])[0])
        bm = timed("bm25", lambda: corpus.bm25.scores(q))
        cos = timed("cosine", lambda: corpus.cosine(vector))
        fused = timed("convex fusion", lambda: index._fuse(corpus, "hybrid", "convex", cos, bm, 10))
        timed("rank, one chunk a page", lambda: _per_page(np.argsort(-fused, kind="stable"), corpus.metas,
                                                          index.settings.per_page, 10))
        timed("search (whole call)", lambda: index.search(q, COLLECTION, k=10))
    pick = lambda xs, f: round(sorted(xs)[int(f * (len(xs) - 1))], 2)  # noqa: E731
    return {"stages": {k: {"median_ms": pick(v, 0.5), "p95_ms": pick(v, 0.95)} for k, v in stages.items()},
            "chunks": index.corpus(COLLECTION).count, "load_average_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", help="the commit to compare against")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--home", type=Path, default=ROOT / ".samevm" / "rag_eval", help="where rag_eval.py indexed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rag_stages.json")
    p.add_argument("--tree", type=Path, help=argparse.SUPPRESS)     # one side's run: import rag from there
    args = p.parse_args()
    if args.tree:
        sys.path.insert(0, str(args.tree))
        print(json.dumps(measure(args.home, args.threads)))
        return 0
    if not args.before:
        p.error("--before is required")

    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"before": unpack(args.before, Path(tmp)), "after": head_commit(short=False)}
        trees = {"before": Path(tmp), "after": ROOT}
        for i in range(args.rounds):
            for side, tree in trees.items():
                got = subprocess.run([sys.executable, __file__, "--tree", str(tree), "--home", str(args.home),
                                      "--threads", str(args.threads)], cwd=tree, capture_output=True, text=True,
                                     check=True, env={**os.environ, "PYTHONPATH": str(tree)})
                runs[side].append(json.loads(got.stdout.strip().splitlines()[-1]))
                print(f"round {i + 1} {side}: " + ", ".join(f"{k} {v['median_ms']}" for k, v in
                                                            runs[side][-1]["stages"].items()), file=sys.stderr)
    summary = {side: {stage: {m: round(statistics.median(r["stages"][stage][m] for r in rs), 2)
                              for m in ("median_ms", "p95_ms")} for stage in rs[0]["stages"]}
               for side, rs in runs.items()}
    report = {"benchmark": "rag_stages", "collection": COLLECTION, "threads": args.threads, "rounds": args.rounds,
              "commits": sides, "summary": summary, "runs": runs, "machine": {"cpus": os.cpu_count()},
              "caveat": "CPU shared with other jobs; the sides ran by turns (see each run's load average)",
              "date": time.strftime("%Y-%m-%d")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    whole = {side: summary[side]["search (whole call)"]["median_ms"] for side in summary}
    print(f"wrote {args.out}: whole search {whole['before']} -> {whole['after']} ms median", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
