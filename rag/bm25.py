"""Keyword scores with bm25s (Lucene BM25, English stop words, Snowball stemming), over the
terms rag.words finds: identifiers split at their humps, glued words split apart.

k1 = 0.9, b = 0.4 are Anserini's BM25 defaults for passages: a term repeated in a chunk
saturates sooner than with bm25s' 1.5 / 0.75, so a chunk naming each question word once
is not outscored by one that repeats a single word (benchmarks/results/rag_eval.json).

An index is built from a collection's chunk texts and kept until the collection changes
(RagIndex drops it on every write); rebuilding ~1,000 chunks takes well under a second.
"""
from __future__ import annotations

import logging

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from rag.words import Splitter, vocabulary
_STEMMER = Stemmer.Stemmer("english")
K1, B = 0.9, 0.4
logging.getLogger("bm25s").setLevel(logging.WARNING)   # it sets DEBUG on itself and logs every index build


def _tokenizer(texts: list[str]) -> Tokenizer:
    return Tokenizer(lower=False, splitter=Splitter(vocabulary(texts)), stopwords="en", stemmer=_STEMMER.stemWord)


class Bm25Index:
    def __init__(self, ids: list[str], texts: list[str], k1: float = K1, b: float = B):
        self.ids = list(ids)
        self._tok = _tokenizer(texts)
        corpus = self._tok.tokenize(texts, show_progress=False, return_as="ids")
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        if self.ids:
            self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed text, in index order (zeros when no query word is known)."""
        if not self.ids:
            return np.zeros(0, np.float32)
        # Term ids straight from the tokenizer: asking for strings made bm25s invert the whole
        # vocabulary on every query (most of the time BM25 took). Words the collection lacks
        # get no id; a query of stop words alone gets the empty term's, which no chunk has.
        terms = self._tok.tokenize([query], update_vocab=False, show_progress=False, return_as="ids")[0]
        if not terms:
            return np.zeros(len(self.ids), np.float32)
        return self._bm25.get_scores(terms).astype(np.float32)

    def terms(self, texts: list[str]) -> list[list[int]]:
        """Each text's known term ids in reading order (stop words dropped, stemmed): what the
        index matches a query with, for signals that look at where terms sit."""
        return [list(t) for t in self._tok.tokenize(texts, update_vocab=False, show_progress=False, return_as="ids")]

    def term_scores(self, term: int) -> np.ndarray:
        """BM25 of one term id against every indexed text: its share of `scores`."""
        return self._bm25.get_scores([term]).astype(np.float32)

    def idf(self, term: int) -> float:
        """Lucene's idf of one term id: log(1 + (N - df + 0.5) / (df + 0.5))."""
        df = int((self.term_scores(term) > 0).sum())
        return float(np.log(1 + (len(self.ids) - df + 0.5) / (df + 0.5)))

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """[(id, score)] of the k best texts with a score above zero."""
        s = self.scores(query)
        order = np.argsort(-s, kind="stable")[:k]
        return [(self.ids[i], float(s[i])) for i in order if s[i] > 0]


def scores_for(query: str, texts: list[str]) -> np.ndarray:
    """BM25 of `query` against just these texts (their own statistics): for reranking."""
    return Bm25Index([str(i) for i in range(len(texts))], texts).scores(query)
