"""Cheap rerank signals for RAG search: what a stage after convex fusion could add without
embedding any text again (rag_rerank_study.py measures them).

Each signal is an [n] array over the collection's chunks for one query, read where the
fused ranking put its best candidates; a reranked score is `fused + weight * signal`.
They come from three places:
- stored vectors: the page's other chunks (`page_other`: the best fused score of another
  chunk of the same page; `neighbour`: the better of the chunks before and after),
  the page centroid's cosine (`page_cosine`), the document's best chunks (`document`);
- keyword statistics: idf-weighted share of the query's terms in the chunk (`coverage`)
  and anywhere on its page (`page_coverage`);
- where the terms sit in the text: pairs of different query terms at most 4 terms apart
  (`proximity`), the query's own adjacent term pairs found in the same order with
  at most `gap` - 1 terms between (`pairs`, `pairs_gap2`), both idf-weighted shares, and
  runs of three or more query terms in order (`query_run`: rag.phrase, what search uses);
- where the chunk sits on its page, as controls for how the questions were written, never
  for search (a page break is no evidence of relevance): 1 for a page's first chunk
  (`page_start`), and the fused score of the previous page's last chunk given to the
  next page's first (`previous_page_end`).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rag.corpus import Corpus
from rag.phrase import candidate_phrases

PROXIMITY_WINDOW = 4


@dataclass(slots=True)
class Layout:
    """Where each chunk sits: its page, the chunks before and after it, its document, and
    every chunk's terms in reading order."""
    page_of: np.ndarray         # [n] page number within the collection
    prev: np.ndarray            # [n] the document's previous chunk, -1 at its start
    next: np.ndarray            # [n] the document's next chunk, -1 at its end
    doc_of: np.ndarray          # [n]
    page_vectors: np.ndarray    # [pages, dim] unit centroid of each page's stored vectors
    terms: list[list[int]]      # per chunk: BM25 term ids in reading order

    @classmethod
    def build(cls, corpus: Corpus) -> "Layout":
        keys = [(m["doc_id"], m.get("page")) for m in corpus.metas]
        pages = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        docs = {d: i for i, d in enumerate(dict.fromkeys(m["doc_id"] for m in corpus.metas))}
        page_of = np.array([pages[k] for k in keys])
        prev, nxt = np.full(corpus.count, -1), np.full(corpus.count, -1)
        order = sorted(range(corpus.count), key=lambda i: (corpus.metas[i]["doc_id"], corpus.metas[i]["chunk"]))
        for a, b in zip(order, order[1:]):
            if corpus.metas[a]["doc_id"] == corpus.metas[b]["doc_id"]:
                nxt[a], prev[b] = b, a
        centroids = np.zeros((len(pages), corpus.vectors.shape[1]), np.float32)
        np.add.at(centroids, page_of, corpus.vectors)
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        return cls(page_of, prev, nxt, np.array([docs[m["doc_id"]] for m in corpus.metas]), centroids,
                   corpus.bm25.terms(corpus.texts))


def _page_max(layout: Layout, x: np.ndarray) -> np.ndarray:
    out = np.full(len(layout.page_vectors), -np.inf, np.float32)
    np.maximum.at(out, layout.page_of, x)
    return out


def _page_other(layout: Layout, fused: np.ndarray) -> np.ndarray:
    """[n] the best fused score among the other chunks of each chunk's page (0 where alone)."""
    best = _page_max(layout, fused)[layout.page_of]
    second = _page_max(layout, np.where(fused >= best, -np.inf, fused))[layout.page_of]
    other = np.where(fused >= best, second, best)
    return np.where(np.isfinite(other), other, 0.0)


def _idf(term_scores: np.ndarray) -> np.ndarray:
    n = term_scores.shape[1]
    df = (term_scores > 0).sum(1)
    return np.log(1 + (n - df + 0.5) / (df + 0.5))


def _pairs(layout: Layout, candidates, weight: dict, pairs: list[tuple[int, int]], gap: int | None) -> np.ndarray:
    """[n] idf-weighted share of `pairs` found in each candidate's terms: in that order at
    most `gap` apart, or (gap None) in either order at most PROXIMITY_WINDOW apart."""
    out = np.zeros(len(layout.terms), np.float32)
    total = sum(weight[a] + weight[b] for a, b in pairs)
    if not total:
        return out
    for i in candidates:
        where = defaultdict(list)
        for p, t in enumerate(layout.terms[i]):
            if t in weight:
                where[t].append(p)
        found = sum(weight[a] + weight[b] for a, b in pairs
                    if any((0 < pb - pa <= gap) if gap else abs(pb - pa) <= PROXIMITY_WINDOW
                           for pa in where.get(a, ()) for pb in where.get(b, ())))
        out[i] = found / total
    return out


def signals(corpus: Corpus, layout: Layout, query: str, query_vector: np.ndarray, fused: np.ndarray,
            candidates: np.ndarray) -> dict[str, np.ndarray]:
    """Every signal for one query; the text ones are filled for `candidates` only."""
    terms = corpus.bm25.terms([query])[0]
    per_term = np.stack([corpus.bm25.term_scores(t) for t in terms]) if terms else np.zeros((0, corpus.count))
    idf = _idf(per_term) if terms else np.zeros(0)
    found = per_term > 0
    page_found = np.zeros((len(terms), len(layout.page_vectors)), bool)
    for t in range(len(terms)):
        np.logical_or.at(page_found[t], layout.page_of, found[t])
    share = (lambda hits: (idf[:, None] * hits).sum(0) / idf.sum()) if idf.sum() else (lambda hits: hits.sum(0) * 0.0)
    weight = dict(zip(terms, idf))
    adjacent = [(a, b) for a, b in zip(terms, terms[1:]) if a != b]
    every_pair = list({(a, b) for i, a in enumerate(terms) for b in terms[i + 1:] if a != b})
    neighbour = np.maximum(np.where(layout.prev >= 0, fused[layout.prev], 0.0),
                           np.where(layout.next >= 0, fused[layout.next], 0.0))
    page_start = (layout.prev < 0) | (layout.page_of[np.maximum(layout.prev, 0)] != layout.page_of)
    docs = np.array([np.sort(fused[layout.doc_of == d])[-5:].mean() for d in range(layout.doc_of.max() + 1)])
    return {
        "page_other": _page_other(layout, fused),
        "neighbour": neighbour,
        "page_cosine": (layout.page_vectors @ query_vector)[layout.page_of],
        "document": (docs - docs.max())[layout.doc_of],
        "coverage": share(found),
        "page_coverage": share(page_found)[layout.page_of],
        "proximity": _pairs(layout, candidates, weight, every_pair, None),
        "pairs": _pairs(layout, candidates, weight, adjacent, 1),
        "pairs_gap2": _pairs(layout, candidates, weight, adjacent, 2),
        "query_run": candidate_phrases(corpus, query, candidates),
        "page_start": page_start.astype(np.float32),
        "previous_page_end": np.where(page_start & (layout.prev >= 0), fused[layout.prev], 0.0),
    }
