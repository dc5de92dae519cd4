"""rag.phrase's runs of query terms, against hand-counted runs."""
from __future__ import annotations

import pytest

from rag.bm25 import Bm25Index
from rag.phrase import best_run, phrase_scores

WEIGHT = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}


def test_a_run_keeps_the_query_order_and_allows_one_term_between():
    chunk = [9, 1, 2, 7, 3, 4]                        # 1 2 _ 3 4: one foreign term inside
    assert best_run([1, 2, 3, 4], WEIGHT, chunk) == 10.0
    assert best_run([1, 2, 3, 4], WEIGHT, chunk, gap=1) == 0.0          # runs 1 2 and 3 4 are too short
    assert best_run([1, 2, 3, 4], WEIGHT, chunk, min_run=2, gap=1) == 7.0   # the heavier pair
    assert best_run([1, 2, 3, 4], WEIGHT, [4, 3, 2, 1]) == 0.0             # reversed: no run
    assert best_run([1, 2, 3], WEIGHT, [1, 9, 9, 2, 3]) == 0.0             # two between breaks it
    assert best_run([1, 2, 3, 4], WEIGHT, [2, 3, 4, 1]) == 9.0             # a run may start mid-query


def test_phrase_scores_are_the_best_runs_share_of_the_query_idf():
    texts = ["translate scale rotate the canvas", "rotate scale translate the canvas", "an unrelated line"]
    bm25 = Bm25Index(["a", "b", "c"], texts)
    got = phrase_scores(bm25, "translate, scale and rotate the canvas", bm25.terms(texts))
    assert got[0] == pytest.approx(1.0) and got[1] == 0.0 and got[2] == 0.0
    terms = bm25.terms(["translate scale rotate"])[0]
    idf = [bm25.idf(t) for t in terms]
    part = phrase_scores(bm25, "translate scale rotate the canvas", bm25.terms(["translate scale rotate, then the page"]))
    assert part[0] == pytest.approx(sum(idf) / (sum(idf) + bm25.idf(bm25.terms(["canvas"])[0][0])))
    assert phrase_scores(bm25, "the canvas", bm25.terms(texts)).tolist() == [0.0, 0.0, 0.0]   # fewer than three terms
