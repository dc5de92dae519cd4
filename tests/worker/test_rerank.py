"""POST /v1/rerank with each backend: embedding (default), a local cross-encoder, the llm."""
from __future__ import annotations

import numpy as np
import pytest

QUERY = "how do I bake sourdough bread"
DOCS = ["The stock market closed higher on Friday.",
        "Feed the sourdough starter, let the dough rise overnight, then bake it hot.",
        "Bread flour has more protein than cake flour."]


def test_embedding_backend_orders_by_relevance(client):
    r = client.post("/v1/rerank", json={"query": QUERY, "documents": DOCS, "top_n": 2, "return_documents": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "embedding"
    assert [x["index"] for x in body["results"]] == [1, 2]
    assert body["results"][0]["document"]["text"] == DOCS[1]
    assert body["results"][0]["relevance_score"] > body["results"][1]["relevance_score"]


@pytest.fixture
def tiny_cross_encoder(tmp_path):
    """A random 2-layer BertForSequenceClassification with its own small WordPiece vocab."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast
    words = sorted({w.strip(".,").lower() for d in DOCS + [QUERY] for w in d.split()})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    folder = tmp_path / "tiny-ce"
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    config = BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=1, max_position_embeddings=128)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def test_cross_encoder_backend_matches_transformers(make_client, tiny_cross_encoder):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    client = make_client(cross_encoder_path=tiny_cross_encoder)
    r = client.post("/v1/rerank", json={"query": QUERY, "documents": DOCS, "model": "cross-encoder"})
    assert r.status_code == 200, r.text
    got = {x["index"]: x["relevance_score"] for x in r.json()["results"]}
    tok = AutoTokenizer.from_pretrained(tiny_cross_encoder)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_cross_encoder).eval()
    with torch.no_grad():
        logits = model(**tok([QUERY] * 3, DOCS, padding=True, return_tensors="pt")).logits[:, 0]
    expected = torch.sigmoid(logits).numpy()
    np.testing.assert_allclose([got[i] for i in range(3)], expected, atol=1e-5)
    assert [x["index"] for x in r.json()["results"]] == list(np.argsort(-expected))


def test_llm_backend_scores_p_yes_from_logprobs(make_client, llm_stub):
    url, seen = llm_stub
    client = make_client(runtime_url=url, runtime_model="qwen2.5-coder-1.5b")
    docs = ["unrelated text", "this one is relevant", "also unrelated"]
    r = client.post("/v1/rerank", json={"query": "q", "documents": docs, "model": "llm"})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["index"] for x in results] == [1, 0, 2]
    assert results[0]["relevance_score"] == pytest.approx(0.9)
    assert results[1]["relevance_score"] == pytest.approx(0.2)    # "yes" + " Yes"
    assert len(seen) == 3 and all(s["logprobs"] is True and s["max_tokens"] == 1 and s["top_logprobs"] >= 5
                                  and s["model"] == "qwen2.5-coder-1.5b" for s in seen)


def test_llm_backend_asks_the_runtime_for_its_model_when_none_is_set(make_client, llm_stub):
    url, seen = llm_stub
    client = make_client(runtime_url=url)
    r = client.post("/v1/rerank", json={"query": "q", "documents": ["relevant", "other"], "model": "llm"})
    assert r.status_code == 200 and [x["index"] for x in r.json()["results"]] == [0, 1]
    assert {s["model"] for s in seen} == {"stub-model"}


def test_unconfigured_unknown_and_unreachable_backends(make_client):
    client = make_client()
    for model, status, words in (("cross-encoder", 400, "no cross-encoder"), ("llm", 400, "not configured"),
                                 ("bm42", 400, "unknown reranker")):
        r = client.post("/v1/rerank", json={"query": "q", "documents": ["d"], "model": model})
        assert r.status_code == status and words in r.json()["error"]["message"], r.text
    down = make_client(runtime_url="http://127.0.0.1:9")
    r = down.post("/v1/rerank", json={"query": "q", "documents": ["d"], "model": "llm"})
    assert r.status_code == 503 and "runtime at http://127.0.0.1:9" in r.json()["error"]["message"]
