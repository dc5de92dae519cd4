"""The app in-process: /health while the model loads (held open by the test), the grammar
tokenizer built after the model serves, a model that fails to load, the API key, and /admin's
loopback rule."""
from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

from runtime.config import EngineConfig
from runtime.server import loading
from runtime.server import state as server_state
from runtime.server.app import create_app
from runtime.server.config import ServerConfig

LOCAL = "http://127.0.0.1"     # the Guard answers loopback names only (not "testserver")
ASK = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def config(model: str, home, **kw) -> ServerConfig:
    engine = EngineConfig(model=model, backend="cpu", kv_cache_mb=16, tokenizer_cache=str(home / "tok"))
    return ServerConfig(engine=engine, model_id="tiny", home=home, **kw)


def wait_healthy(client: TestClient) -> None:
    deadline = time.monotonic() + 120
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").json()
        time.sleep(0.05)


def test_health_is_503_until_the_model_serves(tiny_gguf, tmp_path):
    release = threading.Event()

    def held_start(state):
        release.wait(60)
        loading.start(state)

    with TestClient(base_url=LOCAL, app=create_app(config(tiny_gguf("qwen2"), tmp_path), start=held_start)) as client:
        r = client.get("/health")
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_loading"
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
        assert client.post("/v1/chat/completions", json=ASK).status_code == 503
        assert client.get("/v1/models").status_code == 503
        assert client.get("/metrics").status_code == 200
        release.set()
        wait_healthy(client)
        assert client.get("/health").json()["status"] == "ok"
        r = client.post("/v1/chat/completions", json=ASK)
        assert r.status_code == 200 and r.headers["x-samevm-backend"] == "cpu"


def test_the_model_serves_before_its_grammar_tokenizer_and_a_grammar_request_waits_for_it(
        tiny_gguf, tmp_path, monkeypatch):
    """The grammar tokenizer is no part of a first token: held here, /health turns ok and a plain
    request is answered; a request with tool_choice "required" is answered once it is built."""
    release, building, served_first = threading.Event(), threading.Event(), []
    real = server_state.GrammarFactory
    app = create_app(config(tiny_gguf("qwen2"), tmp_path))

    def held(*args, **kwargs):
        served_first.append(app.state.server.loop is not None)
        building.set()
        release.wait(300)
        return real(*args, **kwargs)

    monkeypatch.setattr(server_state, "GrammarFactory", held)
    tool = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": False}}}
    with TestClient(base_url=LOCAL, app=app) as client:
        assert building.wait(120)
        assert served_first == [True]
        wait_healthy(client)
        assert client.post("/v1/chat/completions", json=ASK).status_code == 200
        assert not release.is_set()
        answer = []
        asker = threading.Thread(target=lambda: answer.append(client.post(
            "/v1/chat/completions", json={**ASK, "max_tokens": 64, "tools": [tool], "tool_choice": "required"})))
        asker.start()
        release.set()
        asker.join(120)
        assert answer and answer[0].status_code == 200, answer and answer[0].text
        message = answer[0].json()["choices"][0]["message"]
        assert message.get("tool_calls") and message["tool_calls"][0]["function"]["name"] == "add", message


def test_the_first_request_with_a_grammar_builds_the_grammar_tokenizer(tiny_gguf, tmp_path, monkeypatch):
    """Not begun as the model goes live (building it holds the GIL, and /health and a first plain
    request waited on it): a plain request leaves it unbuilt, the first tool request builds it."""
    monkeypatch.setattr(loading, "GRAMMAR_AFTER_S", 3600)
    tool = {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": False}}}
    app = create_app(config(tiny_gguf("qwen2"), tmp_path))
    with TestClient(base_url=LOCAL, app=app) as client:
        wait_healthy(client)
        assert client.post("/v1/chat/completions", json=ASK).status_code == 200
        assert app.state.server.grammars == {}
        r = client.post("/v1/chat/completions", json={**ASK, "max_tokens": 64, "tools": [tool], "tool_choice": "required"})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "add"
        assert len(app.state.server.grammars) == 1


def test_a_model_that_fails_to_load_says_why(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with TestClient(base_url=LOCAL, app=create_app(config(str(bad), tmp_path))) as client:
        deadline = time.monotonic() + 60
        while client.get("/health").json()["error"]["code"] == "model_loading":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = client.get("/health")
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_load_failed"
        assert "broken.gguf" in r.json()["error"]["message"]


def test_admin_is_loopback_only_without_a_key(tiny_gguf, tmp_path):
    app = create_app(config(tiny_gguf("qwen2"), tmp_path))
    with TestClient(base_url=LOCAL, app=app, client=("192.0.2.7", 5000)) as remote:
        wait_healthy(remote)
        r = remote.get("/admin/revisions")
        assert r.status_code == 403 and r.json()["error"]["code"] == "admin_loopback_only"
        assert remote.post("/admin/reload", json={"path": "x.gguf"}).status_code == 403
        assert remote.post("/v1/chat/completions", json=ASK).status_code == 200
    with TestClient(base_url=LOCAL, app=app, client=("127.0.0.1", 5000)) as local:
        wait_healthy(local)
        assert local.get("/admin/revisions").status_code == 200


def test_an_api_key_guards_everything_but_health_and_metrics(tiny_gguf, tmp_path):
    app = create_app(config(tiny_gguf("qwen2"), tmp_path, host="0.0.0.0", api_key="s3cret"))
    with TestClient(base_url=LOCAL, app=app, client=("192.0.2.7", 5000)) as client:
        wait_healthy(client)
        assert client.get("/metrics").status_code == 200
        for method, path, body in (("post", "/v1/chat/completions", ASK), ("get", "/v1/models", None),
                                   ("post", "/tokenize", {"prompt": "x"}), ("get", "/admin/revisions", None)):
            r = client.request(method, path, json=body)
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
            r = client.request(method, path, json=body, headers={"authorization": "Bearer wrong"})
            assert r.status_code == 401
            r = client.request(method, path, json=body, headers={"authorization": "Bearer s3cret"})
            assert r.status_code == 200, (path, r.text)


def test_no_resume_serves_the_configured_model(tiny_gguf, tmp_path):
    base, new = tiny_gguf("qwen2"), tiny_gguf("qwen2", seed=1)
    with TestClient(base_url=LOCAL, app=create_app(config(base, tmp_path), start=loading.start), client=("127.0.0.1", 1)) as c:
        wait_healthy(c)
        assert c.post("/admin/reload", json={"path": new, "revision": "r3"}).status_code == 200
    for resume in (True, False):
        with TestClient(base_url=LOCAL, app=create_app(config(base, tmp_path, resume=resume)), client=("127.0.0.1", 1)) as c:
            wait_healthy(c)
            revision = c.get("/v1/models").json()["data"][0]["revision"]
            if resume:
                assert revision == "r3"
            else:
                assert revision != "r3" and c.get("/admin/revisions").json()["last_known_good"] == "r3"


def test_off_loopback_without_a_key_is_refused(tmp_path):
    with pytest.raises(ValueError, match="API key"):
        config("m.gguf", tmp_path, host="0.0.0.0")
