"""Hubness (rag.hubs) against a brute-force reference, and search's cosine less it."""
from __future__ import annotations

import numpy as np
import pytest

from rag import hubs
from rag.types import Document, Page


def _reference(vectors: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros(len(vectors))
    for i in range(len(vectors)):
        others = sorted((float(vectors[i] @ vectors[j]) for j in range(len(vectors))
                         if j != i and groups[j] == groups[i]), reverse=True)
        out[i] = np.mean(others[:k]) if others else 0.0
    return out


@pytest.mark.parametrize("block", [3, 1024])
def test_hubness_is_the_mean_cosine_of_the_k_nearest_of_the_same_group(monkeypatch, block):
    monkeypatch.setattr(hubs, "BLOCK", block)      # row blocks of 3 cross group and block edges
    rng = np.random.default_rng(0)
    v = rng.normal(size=(23, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    groups = np.array([0] * 12 + [1] * 10 + [2])   # the last alone: no neighbours
    np.testing.assert_allclose(hubs.hubness(v, groups, k=4), _reference(v, groups, 4), atol=1e-6)


def test_search_subtracts_the_weighted_hubness_of_each_document_from_the_cosine(index, search):
    pages = tuple(Page(n, f"Page {n}. " + " ".join(f"Students tick box {n}-{i} on the answer sheet and the scanner "
                                                   f"reads it; option --opt{i} sets threshold {i}." for i in range(12)))
                  for n in (1, 2, 3))
    index.ingest_many([Document("amc.pdf", "pdf", pages, "amc-hash"),
                       Document("other.pdf", "pdf", (Page(1, "The UPS server shuts down the host."),), "ups-hash")], "hubs")
    corpus = index.corpus("hubs")
    doc = np.array([m["source"] for m in corpus.metas])
    r = _reference(corpus.vectors, doc, hubs.K)
    query = "which option sets the threshold of a ticked box"
    cos = corpus.vectors @ index.embedder.embed([query])[0]
    hits = search(query, "hubs", per_page=0, hub_weight=0.5)
    want = {cid: cos[i] - 0.5 * r[i] for i, cid in enumerate(corpus.ids)}
    assert len(hits) == corpus.count and r[doc == "other.pdf"] == pytest.approx(0.0)
    for h in hits:
        assert h.scores["vector"] == pytest.approx(want[h.chunk_id], abs=1e-5)
    assert [h.chunk_id for h in hits] == sorted(want, key=lambda c: -want[c])
