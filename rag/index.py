"""RagIndex: ingest Documents into a collection and search it (vector, BM25 or hybrid, then rerank).

Ingest contract: a document is keyed by its source (doc_id = hash of the source) and its
content hash. The same content again is a no-op ("unchanged"); new content under a known
source replaces the old chunks ("replaced"); otherwise "added". Everything is chunked and
embedded before the first write, and the store's add is all-or-nothing, so a failure
leaves the collection as it was. Writes are serialised by a lock.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rag.bm25 import Bm25Index
from rag.chunking import chunk_pages
from rag.embedding import Embedder
from rag.errors import InputError
from rag.fusion import rrf
from rag.rerank import Rerankers
from rag.store import ChromaStore, check_collection_name
from rag.types import Document, Hit

MODES = ("hybrid", "vector", "bm25")


def doc_id_for(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Keywords:
    count: int
    ids: list[str]
    texts: list[str]
    metas: list[dict]
    index: Bm25Index


class RagIndex:
    def __init__(self, store: ChromaStore, embedder: Embedder, rerankers: Rerankers,
                 chunk_tokens: int = 200, chunk_overlap: int = 40, candidates: int = 50,
                 rerank_top: int = 20):
        self.store, self.embedder, self.rerankers = store, embedder, rerankers
        self.chunk_tokens = min(chunk_tokens, embedder.max_tokens)
        self.chunk_overlap = min(chunk_overlap, self.chunk_tokens // 2)
        self.candidates, self.rerank_top = candidates, rerank_top
        self._write = threading.Lock()
        self._keywords: dict[str, _Keywords] = {}

    # ---- writing
    def ingest(self, doc: Document, collection: str = "default",
               progress: Callable[[int, int], None] | None = None) -> dict:
        """Add or replace one document; `progress(pages_done, pages)` follows the embedding."""
        doc_id = doc_id_for(doc.source)
        check_collection_name(collection)
        with self._write:
            known = collection in self.store.collections()
            same = self.store.metadatas(collection, {"content_hash": doc.content_hash})[1] if known else []
            if same:
                return {"doc_id": same[0]["doc_id"], "source": same[0]["source"], "collection": collection,
                        "status": "unchanged", "pages": len(doc.pages), "chunks": len(same)}
            old_ids = self.store.metadatas(collection, {"doc_id": doc_id})[0] if known else []
            ids, texts, metas, vectors = self._embed(doc, doc_id, progress)
            self.store.add(collection, ids, texts, metas, vectors)
            try:
                self.store.delete(collection, old_ids)
            except BaseException:
                self.store.delete(collection, ids)     # keep the old version whole rather than both
                raise
            finally:
                self._keywords.pop(collection, None)
        return {"doc_id": doc_id, "source": doc.source, "collection": collection,
                "status": "replaced" if old_ids else "added", "pages": len(doc.pages), "chunks": len(ids)}

    def _embed(self, doc: Document, doc_id: str, progress):
        chunks = chunk_pages(doc.pages, self.embedder.offsets, self.chunk_tokens, self.chunk_overlap)
        if not chunks:
            raise InputError(f"{doc.source}: no text to index")
        pages = [p.number for p in doc.pages]
        vectors = []
        for start in range(0, len(chunks), 32):
            batch = chunks[start:start + 32]
            vectors.append(self.embedder.embed([c.text for c in batch]))
            if progress:   # pages before the next chunk's page are complete
                nxt = chunks[start + 32].page if start + 32 < len(chunks) else None
                progress(pages.index(nxt) if nxt in pages else len(pages), len(pages))
        now = time.time()
        ids = [f"{doc.content_hash[:16]}-{c.index}" for c in chunks]
        metas = [{"doc_id": doc_id, "source": doc.source, "content_hash": doc.content_hash,
                  "kind": doc.kind, "chunk": c.index, "ingested_at": now,
                  **({"page": c.page} if c.page is not None else {})} for c in chunks]
        return ids, [c.text for c in chunks], metas, np.concatenate(vectors)

    def delete(self, collection: str, doc_id: str | None = None, source: str | None = None) -> int:
        """Delete one document (by id or source) or, with neither, the whole collection.
        Returns the number of chunks removed."""
        with self._write:
            self._keywords.pop(collection, None)
            if doc_id is None and source is None:
                n = self.store.collection(collection).count()
                self.store.drop(collection)
                return n
            where = {"doc_id": doc_id} if doc_id else {"source": source}
            ids = self.store.metadatas(collection, where)[0]
            self.store.delete(collection, ids)
            return len(ids)

    # ---- reading
    def documents(self, collection: str) -> list[dict]:
        docs: dict[str, dict] = {}
        for meta in self.store.metadatas(collection)[1]:
            d = docs.setdefault(meta["doc_id"], {
                "doc_id": meta["doc_id"], "source": meta["source"], "kind": meta["kind"],
                "content_hash": meta["content_hash"], "chunks": 0, "pages": set(),
                "ingested_at": meta["ingested_at"]})
            d["chunks"] += 1
            if "page" in meta:
                d["pages"].add(meta["page"])
        return [{**d, "pages": len(d["pages"])} for d in sorted(docs.values(), key=lambda d: d["source"])]

    def _keyword_index(self, collection: str) -> _Keywords:
        count = self.store.collection(collection).count()
        cached = self._keywords.get(collection)
        if cached is None or cached.count != count:     # count catches writes by other clients
            ids, texts, metas = self.store.texts(collection)
            cached = _Keywords(count, ids, texts, metas, Bm25Index(ids, texts))
            self._keywords[collection] = cached
        return cached

    def search(self, query: str, collection: str = "default", k: int = 5, mode: str = "hybrid",
               rerank: str | None = "embedding") -> list[Hit]:
        if not query.strip():
            raise InputError("the query is empty")
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        reranker = self.rerankers.get(rerank) if rerank else None
        self.store.collection(collection)          # NotFoundError before any model work
        n = max(k, self.candidates)
        hits: dict[str, Hit] = {}
        rankings = []
        if mode in ("hybrid", "vector"):
            found = self.store.query(collection, self.embedder.embed([query])[0], n)
            for cid, text, meta, sim in found:
                hits[cid] = _hit(cid, text, meta, {"vector": sim})
            rankings.append([cid for cid, *_ in found])
        if mode in ("hybrid", "bm25"):
            kw = self._keyword_index(collection)
            found = kw.index.search(query, n)
            pos = {cid: i for i, cid in enumerate(kw.ids)}
            for cid, score in found:
                i = pos[cid]
                hits.setdefault(cid, _hit(cid, kw.texts[i], kw.metas[i], {})).scores["bm25"] = score
            rankings.append([cid for cid, _ in found])
        ordered = []
        for cid, fused in rrf(rankings):
            hits[cid].scores["fused"] = fused
            hits[cid].score = fused if mode == "hybrid" else next(iter(hits[cid].scores.values()))
            ordered.append(hits[cid])
        if reranker and ordered:
            top = ordered[:max(k, self.rerank_top)]
            for hit, s in zip(top, reranker.score(query, [h.text for h in top])):
                hit.scores["rerank"] = hit.score = s
            ordered = sorted(top, key=lambda h: -h.score) + ordered[len(top):]
        return ordered[:k]


def _hit(cid: str, text: str, meta: dict, scores: dict) -> Hit:
    return Hit(cid, meta["doc_id"], text, meta["source"], meta.get("page"), 0.0, scores)
