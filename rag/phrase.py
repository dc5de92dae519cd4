"""Query phrases: a bonus for chunks that hold a run of the question's own terms in the
question's order.

BM25 reads a chunk as a bag of terms and the embedding nearly so: "translate, scale and
rotate" scores the same in a chunk that lists the three methods together as in one that
names them in three different paragraphs. Term order and closeness are the evidence
Metzler and Croft's sequential dependence model (SIGIR 2005) adds to bag-of-words
retrieval; this is its cheapest form. A run is MIN_RUN or more consecutive query terms
(after stop words and stemming, as BM25 reads them) found in the chunk in the same order,
each at most GAP terms after the one before. A chunk's phrase score is its best run's
share of the query's idf: 0 without a run, 1 when the whole question appears in order.
Chunks of contents and index pages get none: they list headings verbatim, so a run there
names a topic and answers nothing.

Pairs (runs of two) measured worse on the six-manual eval: two common words side by side
("question shuffling") promoted the wrong page as often as the right one; runs of three
or more moved only right pages up (benchmarks/results/rag_rerank_study.json).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from rag.bm25 import Bm25Index
from rag.corpus import Corpus

MIN_RUN = 3
GAP = 2


def best_run(query: list[int], weight: dict[int, float], chunk: list[int],
             min_run: int = MIN_RUN, gap: int = GAP) -> float:
    """The summed weight of the heaviest run of >= min_run consecutive `query` terms that
    occur in `chunk` in that order, each at most `gap` positions after the previous; 0 if none."""
    where: dict[int, list[int]] = defaultdict(list)
    for position, term in enumerate(chunk):
        where[term].append(position)
    best = 0.0
    for start, first in enumerate(query):
        for position in where.get(first, ()):
            length, total = 1, weight[first]
            for term in query[start + 1:]:
                position = next((p for p in where.get(term, ()) if 0 < p - position <= gap), None)
                if position is None:
                    break
                length, total = length + 1, total + weight[term]
            if length >= min_run:
                best = max(best, total)
    return best


def phrase_scores(bm25: Bm25Index, query: str, chunks: list[list[int]]) -> np.ndarray:
    """[len(chunks)] each chunk's (its BM25 term ids, `bm25.terms`) best query run as a share
    of the query's idf, in [0, 1]."""
    terms = bm25.terms([query])[0]
    if len(terms) < MIN_RUN:
        return np.zeros(len(chunks), np.float32)
    weight = {t: bm25.idf(t) for t in set(terms)}
    total = sum(weight[t] for t in terms)
    if total <= 0:
        return np.zeros(len(chunks), np.float32)
    return np.array([best_run(terms, weight, chunk) / total for chunk in chunks], np.float32)


def candidate_phrases(corpus: Corpus, query: str, candidates: np.ndarray) -> np.ndarray:
    """[n] the phrase score of each candidate chunk; 0 for the others and for contents pages.
    A chunk's terms are read once and kept with the corpus: reading 20 chunks' terms took
    4 of the stage's 5 ms a query."""
    missing = [int(i) for i in candidates if i not in corpus.chunk_terms]
    corpus.chunk_terms.update(zip(missing, corpus.bm25.terms([corpus.texts[i] for i in missing])))
    out = np.zeros(corpus.count, np.float32)
    out[candidates] = phrase_scores(corpus.bm25, query, [corpus.chunk_terms[int(i)] for i in candidates])
    return out * (1 - corpus.contents)
