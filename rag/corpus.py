"""A collection held in memory for searching: chunk ids, texts, metadata, stored vectors,
the BM25 index, and each chunk's neighbours on its page.

Built from the store once per change of the collection (RagIndex drops it on its own
writes; the chunk count catches other writers). With the vectors here a query costs one
matrix-vector product ([n, dim] @ [dim]) instead of a round trip to the store, and the
context rerank reads neighbours' scores without embedding anything again.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag.bm25 import Bm25Index


@dataclass(slots=True)
class Corpus:
    count: int
    ids: list[str]
    texts: list[str]
    metas: list[dict]
    vectors: np.ndarray          # [n, dim] float32, unit length
    bm25: Bm25Index
    prev: np.ndarray             # [n] index of the chunk before on the same page, or -1
    next: np.ndarray             # [n] the chunk after, or -1

    @classmethod
    def build(cls, ids: list[str], texts: list[str], metas: list[dict], vectors) -> "Corpus":
        n = len(ids)
        vectors = np.asarray(vectors, np.float32).reshape(n, -1) if n else np.zeros((0, 1), np.float32)
        prev, nxt = np.full(n, -1), np.full(n, -1)
        order = sorted(range(n), key=lambda i: (metas[i]["doc_id"], metas[i]["chunk"]))
        for a, b in zip(order, order[1:]):
            ma, mb = metas[a], metas[b]
            if ma["doc_id"] == mb["doc_id"] and ma.get("page") == mb.get("page"):
                nxt[a], prev[b] = b, a
        return cls(n, list(ids), list(texts), list(metas), vectors, Bm25Index(ids, texts), prev, nxt)

    def cosine(self, query_vector: np.ndarray) -> np.ndarray:
        return self.vectors @ query_vector if self.count else np.zeros(0, np.float32)

    def neighbour_best(self, scores: np.ndarray) -> np.ndarray:
        """For each chunk, the better score of its two neighbours on the page (0 without any)."""
        padded = np.append(scores, 0.0)          # index -1 reads the 0 at the end
        return np.maximum(padded[self.prev], padded[self.next])
