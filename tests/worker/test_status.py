"""Health, status, cache clearing, the model listing and the API key guard."""
from __future__ import annotations


def test_models_load_lazily_and_cache_clear_unloads(make_client, tmp_path):
    from rag.embedding import Embedder
    from worker import catalog
    own = Embedder(catalog.embedding_dir())            # not the shared one: this test unloads it
    from fastapi.testclient import TestClient

    from worker.main import create_app
    from worker.settings import WorkerSettings
    with TestClient(base_url="http://127.0.0.1", app=create_app(WorkerSettings(home=tmp_path / "h", runtime_url=None), embedder=own)) as client:
        assert client.get("/health").json() == {"status": "ok"}
        loaded = {m["name"]: m["loaded"] for m in client.get("/v1/status").json()["models"]}
        assert loaded == {"all-minilm-l6-v2": False, "piper-joe": False, "whisper-base": False}
        client.post("/v1/embeddings", json={"input": "warm up"})
        status = client.get("/v1/status").json()
        model = next(m for m in status["models"] if m["name"] == "all-minilm-l6-v2")
        assert model["loaded"] and model["load_seconds"] > 0
        assert status["memory"]["process_rss_bytes"] > 0 and status["gpu"] is None
        client.post("/v1/sql/exec", json={"db": "n", "sql": "CREATE TABLE t (x)"})
        assert client.get("/v1/status").json()["data_dir"]["bytes"] > 0
        assert client.post("/v1/cache/clear").json() == {"unloaded": ["all-minilm-l6-v2"]}
        assert not own.model.loaded
        assert client.post("/v1/embeddings", json={"input": "again"}).status_code == 200   # loads again


def test_model_listing_shape_matches_the_runtime_catalog(client, tmp_path):
    from runtime.catalog import listing as runtime_listing
    from worker.catalog import listing
    rows = listing(tmp_path)
    assert {r["name"] for r in rows} == {"all-minilm-l6-v2", "whisper-base", "piper-joe"}
    assert all(set(r) == set(runtime_listing(tmp_path)[0]) for r in rows)
    ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert "whisper-base" in ids


def test_api_key_guards_everything_but_health(make_client):
    client = make_client(api_key="k3y")
    assert client.get("/health").status_code == 200
    r = client.get("/v1/status")
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert client.get("/v1/status", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/v1/status", headers={"Authorization": "Bearer k3y"}).status_code == 200


def test_oversized_request_is_refused_before_reading(make_client):
    client = make_client(max_upload_bytes=1000)
    r = client.post("/v1/embeddings", content=b"x" * (3 << 20), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_off_loopback_needs_a_key():
    import pytest

    from worker.settings import WorkerSettings
    with pytest.raises(ValueError, match="API key"):
        WorkerSettings(host="0.0.0.0").check_exposure()
    WorkerSettings(host="0.0.0.0", api_key="k").check_exposure()
    WorkerSettings(host="127.0.0.1").check_exposure()
