"""/admin in-process: reload reads only from the model and revision directories, rollback
refuses a file whose content changed, and a bad path in a stored registry never breaks
/admin/revisions."""
from __future__ import annotations

import json
import os
import shutil

from fastapi.testclient import TestClient

from runtime.server.app import create_app
from tests.runtime.server.test_app import config, wait_healthy


def local(app) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 1))


def test_reload_is_confined_to_the_model_and_revision_directories(tiny_gguf, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    base = shutil.copy(tiny_gguf("qwen2"), models / "base.gguf")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    stray = shutil.copy(tiny_gguf("qwen2", seed=1), outside / "new.gguf")
    os.symlink(stray, models / "link.gguf")
    with local(create_app(config(str(base), tmp_path / "home"))) as c:
        wait_healthy(c)
        for path in ("/proc/self/environ", "/etc/passwd", stray, str(models / "link.gguf"),
                     str(models / ".." / "elsewhere" / "new.gguf")):
            r = c.post("/admin/reload", json={"path": str(path)})
            assert r.status_code == 403 and r.json()["error"]["code"] == "path_not_allowed", (path, r.text)
        for path in ("a\x00b", "x\n.gguf"):
            assert c.post("/admin/reload", json={"path": path}).status_code == 400
        r = c.post("/admin/reload", content=b'{"path": "\\ud800.gguf"}', headers={"content-type": "application/json"})
        assert r.status_code == 400
        revisions = c.get("/admin/revisions")
        assert revisions.status_code == 200 and not [h for h in revisions.json()["history"] if not h["ok"]]
        trained = tmp_path / "home" / "training" / "revisions" / "t1"
        trained.mkdir(parents=True)
        shutil.copy(stray, trained / "model.gguf")
        assert c.post("/admin/reload", json={"path": str(trained / "model.gguf"), "revision": "t1"}).status_code == 200


def test_rollback_refuses_a_file_that_changed(tiny_gguf, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    base = shutil.copy(tiny_gguf("qwen2"), models / "base.gguf")
    new = shutil.copy(tiny_gguf("qwen2", seed=1), models / "new.gguf")
    with local(create_app(config(str(base), tmp_path / "home"))) as c:
        wait_healthy(c)
        old = c.get("/v1/models").json()["data"][0]["revision"]
        assert c.post("/admin/reload", json={"path": str(new), "revision": "r2"}).status_code == 200
        shutil.copy(tiny_gguf("qwen2", seed=2), base)           # other weights under the old name
        r = c.post("/admin/rollback")
        assert r.status_code == 409 and r.json()["error"]["code"] == "revision_changed", r.text
        assert c.get("/v1/models").json()["data"][0]["revision"] == "r2"
        shutil.copy(tiny_gguf("qwen2"), base)                    # the same bytes again: fine
        r = c.post("/admin/rollback")
        assert r.status_code == 200 and r.json()["revision"] == old


def test_a_stored_bad_path_never_breaks_revisions(tiny_gguf, tmp_path):
    home = tmp_path / "home"
    registry = home / "runtime" / "revisions" / "tiny.json"
    registry.parent.mkdir(parents=True)
    bad = {"path": "/x/\ud800.gguf", "status": "good"}
    registry.write_text(json.dumps({"model": "tiny", "stack": ["old"], "revisions": {"old": bad},
                                    "history": [{"action": "reload", "path": "\ud800\x00", "ok": True}]}))
    with local(create_app(config(tiny_gguf("qwen2"), home))) as c:
        wait_healthy(c)
        r = c.get("/admin/revisions")
        assert r.status_code == 200 and r.json()["revisions"][0]["path"] == "/x/\ud800.gguf"
        assert 400 <= c.post("/admin/rollback").status_code < 500
        assert c.get("/admin/revisions").status_code == 200
