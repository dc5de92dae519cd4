"""POST /v1/embeddings checked with the official OpenAI client against sentence-transformers."""
from __future__ import annotations

import base64

import numpy as np
import openai
import pytest


@pytest.fixture
def oai(client):
    return openai.OpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=client)


def test_openai_client_gets_the_models_vectors(oai, embedder):
    texts = ["A cat sleeps on the sofa.", "A kitten naps on the couch.", "Quarterly tax filing deadlines."]
    got = oai.embeddings.create(model="all-minilm-l6-v2", input=texts)
    vectors = np.array([d.embedding for d in got.data])
    assert vectors.shape == (3, 384) and got.usage.prompt_tokens > 0
    from sentence_transformers import SentenceTransformer
    reference = SentenceTransformer(str(embedder.model_dir), device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.6 > 0.2 > vectors[0] @ vectors[2]


def test_base64_and_single_input(client):
    f = client.post("/v1/embeddings", json={"input": "hello world"}).json()
    b = client.post("/v1/embeddings", json={"input": "hello world", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(b["data"][0]["embedding"]), "<f4")
    np.testing.assert_allclose(decoded, f["data"][0]["embedding"], atol=1e-7)
    assert abs(np.linalg.norm(decoded) - 1) < 1e-4


def test_bad_requests(client):
    assert client.post("/v1/embeddings", json={"input": "x", "model": "text-embedding-3-small"}).status_code == 404
    assert client.post("/v1/embeddings", json={"input": []}).status_code == 400
    assert client.post("/v1/embeddings", json={"input": ["ok", ""]}).status_code == 400
    assert client.post("/v1/embeddings", json={"input": [[1, 2, 3]]}).status_code == 400
    r = client.post("/v1/embeddings", json={"input": "x", "dimensions": 128})
    assert r.status_code == 400 and "384" in r.json()["error"]["message"]
