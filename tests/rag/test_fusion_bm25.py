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


def test_bm25_a_chunk_naming_each_query_word_beats_one_repeating_one_word():
    """Term frequency saturates early (k1 0.9, b 0.4): with bm25s' own 1.5 / 0.75 the chunk
    that says "upsmon" twice would outrank the one that answers "upsmon command"."""
    filler = ["The command prints the version.", "Each command reads its options.", "A command may fail.",
              "Sourdough bread rises because yeast ferments the dough.", "The driver talks to the hardware."]
    index = Bm25Index(["repeats", "both", *map(str, range(len(filler)))],
                      ["upsmon watches the battery. upsmon watches the battery.",
                       "upsmon runs the shutdown command when the battery is low.", *filler])
    assert [i for i, _ in index.search("upsmon command", 2)] == ["both", "repeats"]


def test_convex_fusion_keeps_a_strong_vector_hit_that_bm25_missed():
    import numpy as np
    from rag.fusion import convex
    cosine = np.array([0.80, 0.40, 0.35], np.float32)      # chunk 0: only the vectors found it
    bm25 = np.array([0.0, 6.0, 5.0], np.float32)
    fused = convex(cosine, bm25, alpha=0.7)
    assert fused == pytest.approx([0.56, 0.28 + 0.3, 0.245 + 0.25])
    assert int(np.argmax(fused)) in (0, 1) and fused[0] > fused[2]
    ranked = [i for i, _ in rrf([["0", "1", "2"], ["1", "2"]])]
    assert ranked.index("0") == 2                           # rank fusion buries it below both


def test_bm25_terms_in_reading_order_and_per_term_scores_add_up_to_the_query_score():
    """The rerank study reads where query terms sit and what each one scores."""
    texts = ["Running dogs chased the cats.", "The cat sat on the mat.", "Dogs sleep."]
    index = Bm25Index(["a", "b", "c"], texts)
    (query,) = index.terms(["cats running"])
    chunk = index.terms(texts)[0]
    assert len(query) == 2 and chunk.index(query[1]) < chunk.index(query[0])   # "running" before "cats"
    summed = sum(index.term_scores(t) for t in query)
    assert summed == pytest.approx(index.scores("cats running"), rel=1e-5)
    assert summed[2] == 0 and summed[0] > summed[1] > 0
