"""Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): score(d) =
sum over rankings of 1 / (k + rank(d)), rank from 1. It needs no score calibration
between BM25 and cosine, which live on different scales.
"""
from __future__ import annotations


def rrf(rankings: list[list[str]], k: int = 60) -> list[tuple[str, float]]:
    """[(id, fused score)], best first; ties keep the order of first appearance."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: -kv[1])
