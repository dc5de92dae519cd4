"""A collection held in memory for searching: chunk ids, texts, metadata, stored vectors,
the BM25 index (over heading path + text) and which chunks come from contents pages.

Built from the store once per change of the collection (RagIndex drops it on its own
writes; the collection's id and chunk count catch other writers'). With the vectors here a query costs one
matrix-vector product ([n, dim] @ [dim]) instead of a round trip to the store, and the
prf rerank reads the best chunks' vectors without embedding anything again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rag.bm25 import B, K1, Bm25Index
from rag.hubs import hubness
from rag.pages import page_groups


@dataclass(slots=True)
class Corpus:
    count: int
    ids: list[str]
    texts: list[str]
    metas: list[dict]
    vectors: np.ndarray          # [n, dim] float32, unit length
    bm25: Bm25Index
    contents: np.ndarray         # [n] 1.0 where the chunk comes from a contents or index page, else 0.0
    pages: np.ndarray            # [n] an id per (document, page): rag.pages' groups
    sections: bool               # BM25 was built over heading path + text
    bm25_params: tuple[float, float]   # (k1, b) it was built with
    chunk_terms: dict[int, list[int]] = field(default_factory=dict)   # rag.phrase's: terms of chunks read so far
    hub_scores: np.ndarray | None = None   # [n] rag.hubs' r(x), computed on first use

    @classmethod
    def build(cls, ids: list[str], texts: list[str], metas: list[dict], vectors, sections: bool = True,
              bm25_params: tuple[float, float] = (K1, B)) -> "Corpus":
        """`sections`: BM25 reads each chunk's heading path (metadata "section") before its text."""
        n = len(ids)
        vectors = np.asarray(vectors, np.float32).reshape(n, -1) if n else np.zeros((0, 1), np.float32)
        keywords = [f"{m['section']}\n{t}" if sections and m.get("section") else t for t, m in zip(texts, metas)]
        contents = np.array([bool(m.get("contents")) for m in metas], np.float32)
        return cls(n, list(ids), list(texts), list(metas), vectors, Bm25Index(ids, keywords, *bm25_params),
                   contents, page_groups(metas), sections, bm25_params)

    def cosine(self, query_vector: np.ndarray) -> np.ndarray:
        """[n] cosine of every chunk with a unit query vector.

        einsum rather than `@`: numpy's BLAS splits this one product over its threads; on a
        busy 2-core machine waking them cost 5 ms at the median and 27 ms at p95, against
        0.4 ms for one thread, and while they spin after it they take the core the next
        query's embedding needs (23 -> 14 ms median: benchmarks/results/rag_stages.json)."""
        return np.einsum("ij,j->i", self.vectors, query_vector) if self.count else np.zeros(0, np.float32)

    def hubs(self) -> np.ndarray:
        """[n] each chunk's hubness within its document (rag.hubs), computed once per corpus."""
        if self.hub_scores is None:
            documents = np.unique([m["doc_id"] for m in self.metas], return_inverse=True)[1]
            self.hub_scores = hubness(self.vectors, documents.reshape(-1))
        return self.hub_scores
