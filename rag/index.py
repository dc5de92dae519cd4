"""RagIndex: ingest Documents into a collection and search it (vector, BM25 or hybrid, then rerank).

Ingest contract: a document is keyed by its source (doc_id = hash of the source) and its
content hash. The same content again is a no-op ("unchanged"); new content under a known
source replaces the old chunks ("replaced"); otherwise "added". The chunks of all the
documents of one call are embedded together (one batch stream: many small documents cost
what one large one does), before the first write; each document's add is all-or-nothing,
so a failure leaves that document as it was. Writes are serialised by a lock. A Budget
bounds each document's chunks and the call's time, and stops it when the caller cancels.

Each chunk's stored vector is its text's, moved a little toward the vector of its heading
path (`with_headings`): the headings are embedded once each, beside the chunks. With
`context_prefix` the embedded text is instead the chunk's text under its document's title
and heading path (`context_text`; measured worse on the eval manuals, kept as a control);
the stored text, which hits quote, is the chunk's own either way.

Search scores every chunk of the collection in memory (rag.corpus): cosine against the
stored vectors, BM25 (over each chunk's text and its section heading path), fused
(rag.fusion; chunks of contents and index pages lose `contents_penalty`); with convex fusion
the best `rerank_top` chunks then gain `phrase_weight` times their query-phrase score
(rag.phrase: a run of three or more query terms in the question's order), then optionally
reranked. "prf" (pseudo-relevance
feedback, Rocchio 1971) moves the query vector toward the stored vectors of the best fused
chunks and scores again: no text is embedded again, the cost is one more matrix-vector
product. Other names go to rag.rerank's backends over the top candidates' texts. No rerank
is the default: on the eval manuals none of them (prf, embedding, a neighbour-context one)
beat convex fusion alone (benchmarks/results/rag_eval.json), nor did other signals read from
stored vectors or term statistics (benchmarks/results/rag_rerank_study.json); the phrase
bonus was the one that lowered no manual's scores. Two controls are off by default for the
same reason: `hub_weight` (cosine less the chunk's hubness, rag.hubs) lifted Auto-Multiple-
Choice and ReportLab but lowered three other manuals, and R@1 and MRR@10 overall;
`page_share` (rag.pages, the page's other chunks as evidence) lowered MRR. A result
list holds at most `per_page` chunks of one page, so k hits show k places to look.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import PurePath
from typing import Callable

import numpy as np

from rag.bm25 import B, K1
from rag.budget import Budget
from rag.chunking import chunk_pages
from rag.corpus import Corpus
from rag.embedding import Embedder
from rag.errors import InputError
from rag.fusion import FUSIONS, convex, rrf
from rag.outline import SEPARATOR
from rag.pages import with_page_evidence
from rag.phrase import candidate_phrases
from rag.rerank import Rerankers
from rag.store import ChromaStore, check_collection_name
from rag.types import Chunk, Document, Hit

MODES = ("hybrid", "vector", "bm25")
PRF = "prf"
EMBED_BATCH = 256          # texts per embed call: the budget is checked between calls
HEADING_WEIGHT = 0.1       # share of a chunk's heading-path vector in its stored vector


def doc_id_for(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclass(slots=True)
class SearchSettings:
    fusion: str = "convex"
    alpha: float = 0.7           # convex: the cosine's weight
    prf_weight: float = 0.5      # prf: the share of the feedback centroid in the new query vector
    prf_top: int = 5             # prf: how many of the best chunks make the centroid
    per_page: int = 1            # chunks of one page in a result list (0: no limit)
    candidates: int = 50         # rrf list depth
    rerank_top: int = 20         # chunks a text reranker rescores, and the phrase bonus reads
    phrase_weight: float = 0.1   # convex: weight of the query-phrase score (rag.phrase; 0: off)
    contents_penalty: float = 0.1   # convex: subtracted from chunks of contents/index pages
    page_share: float = 0.0      # share of a page's best other chunk added to a chunk (rag.pages; 0: off)
    hub_weight: float = 0.0      # cosine minus this times the chunk's hubness (rag.hubs; 0.5 is CSLS; 0: off)
    section_keywords: bool = True   # BM25 reads each chunk's heading path with its text
    bm25_k1: float = K1
    bm25_b: float = B


class RagIndex:
    def __init__(self, store: ChromaStore, embedder: Embedder, rerankers: Rerankers,
                 chunk_tokens: int = 128, chunk_overlap: int = 32, search: SearchSettings | None = None,
                 heading_weight: float = HEADING_WEIGHT, context_prefix: bool = False):
        self.store, self.embedder, self.rerankers = store, embedder, rerankers
        self.heading_weight, self.context_prefix = heading_weight, context_prefix
        self.chunk_tokens = min(chunk_tokens, embedder.max_tokens)
        self.chunk_overlap = min(chunk_overlap, self.chunk_tokens // 2)
        self.settings = search or SearchSettings()
        self._write = threading.Lock()
        self._corpora: dict[str, tuple[tuple, Corpus]] = {}   # name -> (what it was built from, corpus)

    # ---- writing
    def ingest(self, doc: Document, collection: str = "default",
               progress: Callable[[int, int], None] | None = None, budget: Budget | None = None) -> dict:
        """Add or replace one document; `progress(chunks_done, chunks)` follows the embedding."""
        return self.ingest_many([doc], collection, progress, budget)[0]

    def ingest_many(self, docs: list[Document], collection: str = "default",
                    progress: Callable[[int, int], None] | None = None,
                    budget: Budget | None = None) -> list[dict]:
        check_collection_name(collection)
        budget = budget or Budget()
        with self._write:
            known = collection in self.store.collections()
            plans, rows = [], []
            for doc in docs:
                same = self.store.metadatas(collection, {"content_hash": doc.content_hash})[1] if known else []
                if same:
                    rows.append({"doc_id": same[0]["doc_id"], "source": same[0]["source"], "collection": collection,
                                 "status": "unchanged", "pages": same[0].get("pages", len(doc.pages)),
                                 "chunks": len(same)})
                    continue
                chunks = chunk_pages(doc.pages, self.embedder.offsets, self.chunk_tokens, self.chunk_overlap)
                if not chunks:
                    raise InputError(f"{doc.source}: no text to index")
                budget.check_chunks(len(chunks), doc.source)
                plans.append((doc, chunks))
                rows.append(None)
            every = [c for _, cs in plans for c in cs]
            texts = ([context_text(doc, c) for doc, cs in plans for c in cs] if self.context_prefix
                     else [c.text for c in every])
            mix = self.heading_weight and not self.context_prefix
            headings = sorted({c.section for c in every if c.section}) if mix else []
            vectors = self._embed(texts + headings, progress, budget)
            vectors = with_headings(vectors[:len(every)], [c.section for c in every],
                                    dict(zip(headings, vectors[len(every):])), self.heading_weight)
            done, start = iter(range(len(plans))), 0
            for r, row in enumerate(rows):
                if row is not None:
                    continue
                doc, chunks = plans[next(done)]
                rows[r] = self._write_doc(doc, chunks, vectors[start:start + len(chunks)], collection, known)
                start += len(chunks)
                known = True
        return rows

    def _embed(self, texts: list[str], progress, budget: Budget) -> np.ndarray:
        out = []
        for start in range(0, len(texts), EMBED_BATCH):
            budget.check()
            out.append(self.embedder.embed(texts[start:start + EMBED_BATCH]))
            if progress:
                progress(min(start + EMBED_BATCH, len(texts)), len(texts))
        budget.check()
        return np.concatenate(out) if out else np.zeros((0, self.embedder.dim), np.float32)

    def _write_doc(self, doc: Document, chunks, vectors: np.ndarray, collection: str, known: bool) -> dict:
        doc_id = doc_id_for(doc.source)
        old_ids = self.store.metadatas(collection, {"doc_id": doc_id})[0] if known else []
        now = time.time()
        ids = [f"{doc.content_hash[:16]}-{c.index}" for c in chunks]
        metas = [{"doc_id": doc_id, "source": doc.source, "content_hash": doc.content_hash,
                  "kind": doc.kind, "chunk": c.index, "ingested_at": now, "pages": len(doc.pages),
                  **({"page": c.page} if c.page is not None else {}),
                  **({"section": c.section} if c.section else {}), **({"contents": True} if c.contents else {})}
                 for c in chunks]
        self.store.add(collection, ids, [c.text for c in chunks], metas, vectors)
        try:
            self.store.delete(collection, old_ids)
        except BaseException:
            self.store.delete(collection, ids)     # keep the old version whole rather than both
            raise
        finally:
            self._corpora.pop(collection, None)
        return {"doc_id": doc_id, "source": doc.source, "collection": collection,
                "status": "replaced" if old_ids else "added", "pages": len(doc.pages), "chunks": len(ids)}

    def delete(self, collection: str, doc_id: str | None = None, source: str | None = None) -> int:
        """Delete one document (by id or source) or, with neither, the whole collection.
        Returns the number of chunks removed."""
        with self._write:
            self._corpora.pop(collection, None)
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
                "ingested_at": meta["ingested_at"], "page_count": meta.get("pages")})
            d["chunks"] += 1
            if "page" in meta:
                d["pages"].add(meta["page"])
        return [{**{k: v for k, v in d.items() if k != "page_count"},
                 "pages": d["page_count"] if d["page_count"] is not None else len(d["pages"])}
                for d in sorted(docs.values(), key=lambda d: d["source"])]

    def corpus(self, collection: str) -> Corpus:
        state = self.store.state(collection)      # other clients' writes change it
        built = (state, self.settings.section_keywords, self.settings.bm25_k1, self.settings.bm25_b)
        cached = self._corpora.get(collection)
        if cached is None or cached[0] != built:
            cached = built, Corpus.build(*self.store.texts(collection), sections=self.settings.section_keywords,
                                         bm25_params=built[2:])
            self._corpora[collection] = cached
        return cached[1]

    def search(self, query: str, collection: str = "default", k: int = 5, mode: str = "hybrid",
               rerank: str | None = None, fusion: str | None = None) -> list[Hit]:
        s = self.settings
        fusion = fusion or s.fusion
        if not query.strip():
            raise InputError("the query is empty")
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if fusion not in FUSIONS:
            raise InputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
        reranker = self.rerankers.get(rerank) if rerank and rerank != PRF else None
        corpus = self.corpus(collection)               # NotFoundError before any model work
        if corpus.count == 0:
            return []
        query_vector = self.embedder.embed([query])[0] if mode != "bm25" else None
        bm = corpus.bm25.scores(query) if mode != "vector" else None
        cos = corpus.cosine(query_vector) if query_vector is not None else None
        if cos is not None and s.hub_weight:
            cos = cos - s.hub_weight * corpus.hubs()
        score = self._fuse(corpus, mode, fusion, cos, bm, k)
        final = score
        if rerank == PRF and query_vector is not None:
            top = np.argsort(-score, kind="stable")[:s.prf_top]
            moved = query_vector + s.prf_weight * corpus.vectors[top].mean(axis=0)
            final = self._fuse(corpus, mode, fusion, corpus.cosine(moved / np.linalg.norm(moved)), bm, k)
        paged = with_page_evidence(final, corpus.pages, s.page_share)
        phrase, ranked = None, paged
        if mode == "hybrid" and fusion == "convex" and s.phrase_weight:
            phrase = candidate_phrases(corpus, query, np.argsort(-paged, kind="stable")[:s.rerank_top])
            ranked = paged + s.phrase_weight * phrase    # >= 0: no chunk outside the top overtakes one inside
        order = _per_page(np.argsort(-ranked, kind="stable"), corpus.metas, s.per_page,
                          max(k, s.rerank_top if reranker else k))
        if mode == "bm25":
            order = [i for i in order if bm[i] > 0]
        hits = []
        for i in order:
            stage = {"vector": cos, "bm25": bm, "fused": score if mode == "hybrid" else None,
                     PRF: final if final is not score else None, "page": paged if paged is not final else None,
                     "phrase": phrase}
            scores = {name: float(v[i]) for name, v in stage.items() if v is not None}
            meta = corpus.metas[i]
            hits.append(Hit(corpus.ids[i], meta["doc_id"], corpus.texts[i], meta["source"], meta.get("page"),
                            meta.get("section"), float(ranked[i]), scores))
        if reranker and hits:
            for hit, r in zip(hits, reranker.score(query, [h.text for h in hits])):
                hit.scores["rerank"] = hit.score = r
            hits.sort(key=lambda h: -h.score)
        return hits[:k]


    def _fuse(self, corpus: Corpus, mode: str, fusion: str, cos, bm, k: int) -> np.ndarray:
        if mode == "vector":
            return cos
        if mode == "bm25":
            return bm
        if fusion == "convex":
            return convex(cos, bm, self.settings.alpha) - self.settings.contents_penalty * corpus.contents
        depth = max(k, self.settings.candidates)
        fused = dict(rrf([_top(cos, depth, corpus.ids), _top(bm, depth, corpus.ids, positive=True)]))
        return np.array([fused.get(cid, 0.0) for cid in corpus.ids], np.float32)


def context_text(doc: Document, chunk: Chunk) -> str:
    """The text embedded for a chunk with `context_prefix`: "title > heading path" (the
    title from the document, else its file name) on a line above the chunk's text."""
    title = doc.title or PurePath(doc.source).stem
    return f"{SEPARATOR.join(filter(None, (title, chunk.section)))}\n{chunk.text}"


def with_headings(vectors: np.ndarray, sections: list[str], heading_vectors: dict[str, np.ndarray],
                  weight: float) -> np.ndarray:
    """[n, dim] unit vectors of the chunk texts moved toward their heading path's vector:
    normalise(text + weight * heading). A chunk cut from the middle of a section rarely
    says what the section is about; its heading does. Chunks without a heading keep theirs."""
    if not weight or not heading_vectors:
        return vectors
    out = vectors.copy()
    for i, section in enumerate(sections):
        if section in heading_vectors:
            out[i] += weight * heading_vectors[section]
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _per_page(order: np.ndarray, metas: list[dict], per_page: int, n: int) -> list[int]:
    """The first n of `order`, at most per_page of them from one (document, page)."""
    if not per_page:
        return list(order[:n])
    taken: dict[tuple, int] = {}
    out = []
    for i in order:
        key = (metas[i]["doc_id"], metas[i].get("page"), None if metas[i].get("page") is not None else i)
        if taken.get(key, 0) < per_page:
            taken[key] = taken.get(key, 0) + 1
            out.append(int(i))
            if len(out) == n:
                break
    return out


def _top(scores: np.ndarray, n: int, ids: list[str], positive: bool = False) -> list[str]:
    order = np.argsort(-scores, kind="stable")[:n]
    return [ids[i] for i in order if not positive or scores[i] > 0]
