"""Fusing the vector and keyword rankings.

- `convex` (the default, chosen by measurement in benchmarks/results/rag_eval.json):
  alpha * cosine + (1 - alpha) * BM25 / best BM25 of the query, over every chunk. Scores,
  not ranks: a chunk with a strong cosine keeps it even when BM25 misses it completely,
  where rank fusion would push it below every chunk both lists found.
- `rrf`: reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): score(d) =
  sum over rankings of 1 / (k + rank(d)), rank from 1.
"""
from __future__ import annotations

import numpy as np

FUSIONS = ("convex", "rrf")


def convex(cosine: np.ndarray, bm25: np.ndarray, alpha: float) -> np.ndarray:
    """[n] fused scores; BM25 scaled to [0, 1] by its best score for this query."""
    top = float(bm25.max()) if bm25.size else 0.0
    return alpha * cosine + (1 - alpha) * (bm25 / top if top > 0 else bm25)


def rrf(rankings: list[list[str]], k: int = 60) -> list[tuple[str, float]]:
    """[(id, fused score)], best first; ties keep the order of first appearance."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: -kv[1])
