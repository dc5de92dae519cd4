"""A collection held in memory for searching: chunk ids, texts, metadata, stored vectors and
the BM25 index.

Built from the store once per change of the collection (RagIndex drops it on its own
writes; the chunk count catches other writers). With the vectors here a query costs one
matrix-vector product ([n, dim] @ [dim]) instead of a round trip to the store, and the
prf rerank reads the best chunks' vectors without embedding anything again.
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

    @classmethod
    def build(cls, ids: list[str], texts: list[str], metas: list[dict], vectors) -> "Corpus":
        n = len(ids)
        vectors = np.asarray(vectors, np.float32).reshape(n, -1) if n else np.zeros((0, 1), np.float32)
        return cls(n, list(ids), list(texts), list(metas), vectors, Bm25Index(ids, texts))

    def cosine(self, query_vector: np.ndarray) -> np.ndarray:
        """[n] cosine of every chunk with a unit query vector."""
        return self.vectors @ query_vector if self.count else np.zeros(0, np.float32)
