"""Default search through the HTTP route: of two chunks with the same words, the one that
says the question's terms in the question's order ranks first (rag.phrase), even where
fusion alone puts the other first."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from worker.main import create_app
from worker.settings import WorkerSettings

SCATTERED = "Rotate the page, scale the drawing, and translate the origin on each canvas, any canvas."
IN_ORDER = "Translate the origin, scale the drawing and rotate the canvas on each page."
QUESTION = "how do I translate, scale and rotate on the canvas"


class BagOfWords:
    """The real embedder over each text's words sorted: word order cannot move a vector, so
    only the phrase stage can tell the two chunks apart by it."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        return self.inner.embed([" ".join(sorted(re.findall(r"\w+", t.lower()))) for t in texts])


def test_the_chunk_with_the_question_in_order_ranks_first(tmp_path, embedder):
    settings = WorkerSettings(home=tmp_path / "home", runtime_url=None)
    with TestClient(create_app(settings, embedder=BagOfWords(embedder)), base_url="http://127.0.0.1") as c:
        texts = [{"text": SCATTERED, "source": "scattered"}, {"text": IN_ORDER, "source": "in-order"}]
        assert c.post("/v1/rag/ingest", json={"texts": texts}).status_code == 200
        hits = c.post("/v1/rag/search", json={"query": QUESTION, "k": 2}).json()["results"]
    first, second = hits
    assert (first["source"], second["source"]) == ("in-order", "scattered")
    # fusion alone prefers the chunk that says "canvas" twice; the in-order one holds the
    # whole question as one run (translate, scale, rotate, canvas: share 1), the other none
    assert second["scores"]["fused"] > first["scores"]["fused"]
    assert first["scores"]["phrase"] == pytest.approx(1.0) and second["scores"]["phrase"] == 0.0
    assert first["score"] == pytest.approx(first["scores"]["fused"] + 0.1)
