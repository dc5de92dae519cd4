"""Hot reload on a live server: a stream running across the swap finishes on the old
weights, the next request gets the new revision, bad files are refused while the old
revision keeps serving, rollback, and the history across a restart."""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path

import pytest

from dev.synthetic import Shape
from tests.runtime.server.conftest import start_server

PROBE = [{"role": "user", "content": "Which revision are you?"}]


@pytest.fixture(scope="module")
def files(tiny_gguf, tmp_path_factory):
    base = tiny_gguf("qwen2")
    corrupt = Path(base).parent / "truncated.gguf"          # reload reads only beside the served model
    with open(base, "rb") as f:
        corrupt.write_bytes(f.read()[: 200_000])
    return {"base": base, "new": tiny_gguf("qwen2", seed=1), "llama": tiny_gguf("llama"),
            "other_tokenizer": tiny_gguf("qwen2", shape=Shape(num_merges=150)), "corrupt": str(corrupt)}


def ask(server, **kw):
    return server.client().chat.completions.with_raw_response.create(
        model=server.model_id, messages=PROBE, max_tokens=kw.pop("max_tokens", 12), temperature=0,
        extra_body={"ignore_eos": True}, **kw)


def test_reload_while_streaming_then_refusals_then_rollback(files, tmp_path):
    server = start_server(files["base"], tmp_path / "home")
    try:
        old_rev = server.get("/v1/models").json()["data"][0]["revision"]
        long = dict(max_tokens=900)
        reference = ask(server, **long).parse().choices[0].message.content     # the old weights' answer
        short_reference = ask(server).parse().choices[0].message.content

        stream = server.client().chat.completions.create(
            model=server.model_id, messages=PROBE, max_tokens=900, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
        first = next(iter(stream))
        reloaded = {}
        t = threading.Thread(target=lambda: reloaded.update(
            server.post("/admin/reload", json={"path": files["new"], "revision": "r2"}).json()))
        t.start()
        chunks = [first] + list(stream)
        t.join()
        assert reloaded["revision"] == "r2" and reloaded["previous"] == old_rev
        assert reloaded["draining_requests"] == 1, "the stream must have been running across the swap"
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == reference
        assert {c.system_fingerprint for c in chunks} == {old_rev}
        assert chunks[-1].usage.completion_tokens == 900

        after = ask(server)
        assert after.headers["x-samevm-revision"] == "r2" and after.parse().system_fingerprint == "r2"
        assert after.parse().choices[0].message.content != short_reference          # other weights
        assert server.get("/v1/models").json()["data"][0]["revision"] == "r2"
        server.wait_for(lambda: server.metric("samevm_draining_engines") == 0, "the old engine to drain")

        for name, status, reason in (("llama", 409, "architecture"), ("other_tokenizer", 409, "tokenizer"),
                                     ("corrupt", 422, "cannot load")):
            r = server.post("/admin/reload", json={"path": files[name], "revision": f"bad-{name}"})
            assert r.status_code == status, r.text
            assert reason in r.json()["error"]["message"] and "still serving r2" in r.json()["error"]["message"]
            assert ask(server).parse().system_fingerprint == "r2"
        r = server.post("/admin/reload", json={"path": str(Path(files["base"]).parent / "missing.gguf")})
        assert r.status_code == 422
        r = server.post("/admin/reload", json={"path": files["base"], "revision": "r2"})
        assert r.status_code == 409 and r.json()["error"]["code"] == "revision_conflict"

        revs = server.get("/admin/revisions").json()
        assert (revs["active"], revs["last_known_good"]) == ("r2", old_rev)
        refused = [h for h in revs["history"] if not h["ok"]]
        assert len(refused) == 4 and {h["revision"] for h in refused} >= {"bad-llama", "bad-corrupt"}

        r = server.post("/admin/rollback")
        assert r.status_code == 200 and r.json()["revision"] == old_rev
        back = ask(server, **long).parse()
        assert back.system_fingerprint == old_rev and back.choices[0].message.content == reference
        assert server.post("/admin/rollback").status_code == 409          # nothing older left
        assert server.metric('samevm_reloads_total{outcome="ok"}') == 2
    finally:
        server.stop()


def test_history_and_active_revision_survive_a_restart(files, tmp_path):
    home = tmp_path / "home"
    (home / "training" / "revisions" / "r3").mkdir(parents=True)
    moved = shutil.copy(files["new"], home / "training" / "revisions" / "r3" / "model.gguf")
    server = start_server(files["base"], home)
    try:
        assert server.post("/admin/reload", json={"path": str(moved), "revision": "r3"}).status_code == 200
    finally:
        server.stop()
    server = start_server(files["base"], home)
    try:
        assert server.get("/v1/models").json()["data"][0]["revision"] == "r3"     # resumed
        revs = server.get("/admin/revisions").json()
        assert revs["active"] == "r3"
        assert [h["action"] for h in revs["history"]] == ["start", "reload", "start"]
    finally:
        server.stop()


def test_revisions_recorded_with_older_digests_still_resume_and_roll_back(files, tmp_path):
    """A registry records each GGUF's sha256 as "sha256:<hex>"; one written before, with a bare
    blake2b-128 hex, is still checked the way it was recorded."""
    home = tmp_path / "home"
    server = start_server(files["base"], home)
    try:
        assert server.post("/admin/reload", json={"path": files["new"], "revision": "r2"}).status_code == 200
    finally:
        server.stop()
    registry = home / "runtime" / "revisions" / f"{Path(files['base']).stem}.json"
    data = json.loads(registry.read_text())
    for entry in data["revisions"].values():
        content = Path(entry["path"]).read_bytes()
        assert entry["digest"] == "sha256:" + hashlib.sha256(content).hexdigest()
        entry["digest"] = hashlib.blake2b(content, digest_size=16).hexdigest()       # as registries were
    registry.write_text(json.dumps(data))
    server = start_server(files["base"], home)
    try:
        assert server.get("/v1/models").json()["data"][0]["revision"] == "r2"     # resumed
        r = server.post("/admin/rollback")
        assert r.status_code == 200, r.text
        assert ask(server).parse().system_fingerprint == r.json()["revision"] != "r2"
    finally:
        server.stop()
