"""Search scores through the route against references computed here (Lucene BM25 by brute
force over a tiny corpus, cosines of /v1/embeddings vectors, the convex fusion formula),
and a search that notices what another client wrote to its collection."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rag.bm25 import B, K1
from rag.index import SearchSettings

# Words without stop words whose stems all differ: each word is one BM25 term.
DOCS = {"a": "zebra quartz plum zebra", "b": "quartz tundra lemon", "c": "zebra lemon lemon lemon violin",
        "d": "falcon harbor", "e": "tundra quartz quartz harbor violin falcon"}
QUERIES = ["zebra lemon", "Quartz VIOLIN xylophone", "harbor harbor falcon", "plum"]


def lucene_bm25(query: str, k1: float = K1, b: float = B) -> dict[str, float]:
    """Lucene's BM25: sum over the query's words of idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)),
    idf = ln(1 + (N - df + 0.5) / (df + 0.5)); words no text has add nothing."""
    words = {name: text.split() for name, text in DOCS.items()}
    avgdl = sum(map(len, words.values())) / len(words)
    out = {}
    for name, ws in words.items():
        score = 0.0
        for w in query.lower().split():
            df = sum(w in other for other in words.values())
            if df:
                tf = ws.count(w)
                score += math.log(1 + (len(words) - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * len(ws) / avgdl))
        out[name] = score
    return out


def ingest(client, collection: str, docs: dict[str, str]) -> None:
    r = client.post("/v1/rag/ingest", json={"collection": collection,
                                            "texts": [{"source": s, "text": t} for s, t in docs.items()]})
    assert r.status_code == 200, r.text


def search(client, query: str, collection: str, **kw) -> list[dict]:
    r = client.post("/v1/rag/search", json={"query": query, "collection": collection, "k": 10, **kw})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_bm25_vector_and_fused_scores_match_references(client):
    ingest(client, "scores", DOCS)
    data = client.post("/v1/embeddings", json={"input": [*DOCS.values(), *QUERIES]}).json()["data"]
    vectors = np.array([d["embedding"] for d in data])
    docs, queries = vectors[:len(DOCS)], vectors[len(DOCS):]
    alpha = SearchSettings().alpha
    for query, qv in zip(QUERIES, queries):
        want = lucene_bm25(query)
        hits = search(client, query, "scores", mode="bm25")
        assert [h["source"] for h in hits] == sorted((s for s in want if want[s] > 0), key=lambda s: -want[s]), query
        assert {h["source"]: h["scores"]["bm25"] for h in hits} == pytest.approx(
            {s: v for s, v in want.items() if v > 0}, rel=1e-5)

        cosine = dict(zip(DOCS, (docs @ qv).tolist()))
        hits = search(client, query, "scores", mode="vector")
        assert {h["source"]: h["scores"]["vector"] for h in hits} == pytest.approx(cosine, abs=1e-5)

        top = max(want.values())
        fused = {s: alpha * cosine[s] + (1 - alpha) * want[s] / top for s in DOCS}
        hits = search(client, query, "scores")
        assert {h["source"]: h["scores"]["fused"] for h in hits} == pytest.approx(fused, abs=1e-5)
        assert [h["source"] for h in hits] == sorted(fused, key=lambda s: -fused[s]), query

    assert search(client, "the of and", "scores", mode="bm25") == []        # stop words only
    assert search(client, "xylophone", "scores", mode="bm25") == []         # no chunk has it


def test_search_notices_another_clients_writes(make_client):
    """Two workers over one data directory: what the second writes, the first's next search
    sees, even a collection dropped and made again with as many chunks as before."""
    first, second = make_client(), make_client()
    ingest(first, "shared", {"birds": "falcon harbor"})
    assert [h["source"] for h in search(first, "falcon", "shared", mode="bm25")] == ["birds"]

    assert second.delete("/v1/rag/collections/shared").status_code == 200
    ingest(second, "shared", {"stones": "zebra quartz"})
    assert [h["source"] for h in search(first, "quartz", "shared", mode="bm25")] == ["stones"]
    assert search(first, "falcon", "shared", mode="bm25") == []

    ingest(second, "shared", {"fruit": "lemon plum"})
    assert [h["source"] for h in search(first, "plum", "shared", mode="bm25")] == ["fruit"]

    assert second.delete("/v1/rag/collections/shared").status_code == 200
    r = first.post("/v1/rag/search", json={"query": "plum", "collection": "shared"})
    assert r.status_code == 404 and "shared" in r.json()["error"]["message"]
