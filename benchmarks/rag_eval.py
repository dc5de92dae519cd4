"""Retrieval quality over PDFs: recall@k and MRR for vector-only, BM25-only, hybrid, and hybrid
followed by each reranker, on a question file of {question, source, pages}.

    python benchmarks/rag_eval.py benchmarks/data/rag_questions.json \
        [--cross-encoder DIR] [--llm-url http://127.0.0.1:8081 --llm-model NAME]

Ingests the question file's documents into a data directory (default
.samevm/rag_eval, reused between runs: unchanged PDFs are not re-embedded),
runs every configuration on the same questions, and writes benchmarks/results/rag_eval.json.
A hit counts when its file name equals the question's source and its page is in `pages`.
A reranker that is not configured or not reachable is recorded as not measured, with why.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import commit as head_commit  # noqa: E402

from rag import sources  # noqa: E402
from worker.services import Services  # noqa: E402
from worker.settings import WorkerSettings  # noqa: E402

KS = (1, 3, 5, 10)


def rank_of(hits, question: dict) -> int | None:
    """1-based rank of the first hit on an expected page, None if none in the list."""
    for rank, hit in enumerate(hits, 1):
        if Path(hit.source).name == question["source"] and hit.page in question["pages"]:
            return rank
    return None


def evaluate(index, questions, collection, mode, rerank) -> dict:
    ranks, seconds = [], []
    for q in questions:
        t0 = time.perf_counter()
        hits = index.search(q["question"], collection, k=max(KS), mode=mode, rerank=rerank)
        seconds.append(time.perf_counter() - t0)
        ranks.append(rank_of(hits, q))
    n = len(questions)
    return {"mode": mode, "rerank": rerank,
            **{f"recall@{k}": round(sum(r is not None and r <= k for r in ranks) / n, 4) for k in KS},
            "mrr@10": round(sum(1 / r for r in ranks if r) / n, 4),
            "median_query_s": round(sorted(seconds)[n // 2], 4), "ranks": ranks}


def run(index, questions, collection, mode, rerank) -> dict:
    r = evaluate(index, questions, collection, mode, rerank)
    print(f"{len(questions)} questions  {mode:>6} + {rerank or 'none':<13} " +
          "  ".join(f"{k} {v}" for k, v in r.items() if k.startswith(("recall", "mrr"))), file=sys.stderr)
    return r


def reachable(url: str) -> str | None:
    import httpx
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=2).raise_for_status()
        return None
    except httpx.HTTPError as e:
        return f"the runtime at {url} is not reachable ({type(e).__name__})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("questions", type=Path)
    p.add_argument("--home", type=Path, default=ROOT / ".samevm" / "rag_eval")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rag_eval.json")
    p.add_argument("--cross-encoder", type=Path, default=None, help="a local HF cross-encoder folder")
    p.add_argument("--llm-url", default=None, help="OpenAI-compatible runtime for the llm reranker")
    p.add_argument("--llm-model", default=None, help="default: the first model the runtime lists")
    p.add_argument("--llm-questions", type=int, default=0,
                   help="run the llm comparison on the first N questions only (0: all); on a CPU "
                        "runtime each scored passage costs seconds")
    p.add_argument("--llm-rerank-top", type=int, default=20, help="passages the llm rescores per query")
    p.add_argument("--chunk-tokens", type=int, default=200)
    p.add_argument("--chunk-overlap", type=int, default=40)
    args = p.parse_args()

    spec = json.loads(args.questions.read_text())
    missing = [d["path"] for d in spec["documents"] if not Path(d["path"]).is_file()]
    if missing:
        print(f"missing documents (install their Debian packages): {missing}", file=sys.stderr)
        return 2
    settings = WorkerSettings(home=args.home, cross_encoder_path=args.cross_encoder,
                              runtime_url=args.llm_url, runtime_model=args.llm_model,
                              chunk_tokens=args.chunk_tokens, chunk_overlap=args.chunk_overlap)
    index = Services(settings).rag
    collection = "eval-" + args.questions.stem.replace("_", "-")
    t0 = time.perf_counter()
    for d in spec["documents"]:
        print(index.ingest(sources.from_path(Path(d["path"]), 1 << 30), collection), file=sys.stderr)
    ingest_s = time.perf_counter() - t0

    questions = spec["questions"]
    configs = [("vector", None), ("bm25", None), ("hybrid", None), ("hybrid", "embedding")]
    not_measured = {}
    if args.cross_encoder:
        configs.append(("hybrid", "cross-encoder"))
    else:
        not_measured["cross-encoder"] = "no local cross-encoder given (--cross-encoder); none ships on PyPI"
    why = reachable(args.llm_url) if args.llm_url else "no runtime URL given (--llm-url)"
    if why:
        not_measured["llm"] = why
    results = [run(index, questions, collection, mode, rerank) for mode, rerank in configs]
    llm = None
    if not why:    # the llm beside the rerankers it competes with, on the same (sub)set and depth
        from rag.rerank_llm import LlmReranker   # a CPU runtime needs minutes per query: wait for it
        index.rerankers.backends["llm"] = LlmReranker(args.llm_url, args.llm_model, timeout=900)
        subset = questions[:args.llm_questions or len(questions)]
        index.rerank_top = args.llm_rerank_top
        llm = {"questions": len(subset), "rerank_top": args.llm_rerank_top, "model": args.llm_model,
               "results": [run(index, subset, collection, "hybrid", r) for r in (None, "embedding", "llm")]}
    report = {
        "benchmark": "rag_eval", "questions_file": str(args.questions), "questions": len(questions),
        "documents": spec["documents"], "chunks": index.store.collection(collection).count(),
        "ingest_seconds": round(ingest_s, 1),
        "settings": {"embedding": index.embedder.name, "chunk_tokens": index.chunk_tokens,
                     "chunk_overlap": index.chunk_overlap, "candidates": index.candidates,
                     "rerank_top": index.rerank_top, "fusion": "reciprocal rank, k=60"},
        "results": results, "llm_comparison": llm, "not_measured": not_measured,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "versions": {m: version(m) for m in ("chromadb", "bm25s", "pypdf", "sentence-transformers", "torch")},
        "git_commit": head_commit(short=False),
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
