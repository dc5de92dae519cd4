"""Reciprocal rank fusion against hand-computed values, and BM25 through bm25s."""
from __future__ import annotations

import pytest

from rag.bm25 import Bm25Index, scores_for
from rag.fusion import rrf


def test_rrf_matches_the_formula():
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf([["a", "b", "c"], ["c", "a"]])] == ["a", "c", "b"]
    assert rrf([]) == []


def test_bm25_stems_drops_stop_words_and_ranks_rare_terms_higher():
    index = Bm25Index(["cats", "dogs", "both"], ["The cat sat on the mat.", "Dogs were running in the park.",
                                                 "A running dog chased the cats."])
    assert [i for i, _ in index.search("running cats", 3)][0] == "both"
    assert index.search("the of and", 3) == []          # stop words only
    assert index.search("zebra", 3) == []
    assert Bm25Index([], []).search("cat", 3) == []
    s = scores_for("dog", ["a dog", "no match here"])
    assert s[0] > 0 and s[1] == 0
