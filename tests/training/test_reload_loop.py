"""The whole loop against a live runtime server (a real `samevm serve` process on a tiny
model) and the worker's job routes: train on pairs that target a probe prompt, promote,
and see the new revision answer differently; roll back and see the old answers; promote
again while a stream runs (the stream finishes on the old weights); a corrupt export is
refused and the revision being served keeps serving."""
from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from tests.runtime.server.conftest import start_server
from tests.training.test_jobs_api import sse
from tests.training.worker_app import create
from worker.settings import WorkerSettings

PROBE = [{"role": "user", "content": "What is 2+2?"}]
TARGET = "The answer is 4."
PAIRS = [{"prompt": PROBE, "chosen": [{"role": "assistant", "content": TARGET}],
          "rejected": [{"role": "assistant", "content": bad}]}
         for bad in ("Hello world.", "SELECT * FROM notes.", "The quick brown fox.")]
TRAIN = {"max_steps": 20, "warmup_steps": 0, "batch_size": 3, "learning_rate": 3e-3, "export_type": "q8_0"}


def ask(server, max_tokens=12):
    r = server.client().chat.completions.with_raw_response.create(
        model=server.model_id, messages=PROBE, max_tokens=max_tokens, temperature=0,
        extra_body={"ignore_eos": True})
    reply = r.parse()
    assert r.headers["x-samevm-revision"] == reply.system_fingerprint
    return reply.choices[0].message.content, reply.system_fingerprint


def run_job(worker, base: str, **body) -> dict:
    job = worker.post("/v1/jobs/orpo", json={"dataset": PAIRS, "base_model": base, **body}).json()
    with worker.stream("GET", f"/v1/jobs/{job['id']}/events") as s:
        sse(s.iter_lines())                                   # returns once the job has ended
    return worker.get(f"/v1/jobs/{job['id']}").json()


@pytest.fixture
def live(tiny_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    home = tmp_path / "home"                                  # one data directory, as `samevm up` runs them
    base = tmp_path / "base.gguf"
    base.write_bytes(open(tiny_gguf("qwen2"), "rb").read())
    server = start_server(str(base), home)
    settings = WorkerSettings(home=home, allowed_roots=[tmp_path], runtime_url=server.url)
    try:
        with TestClient(base_url="http://127.0.0.1", app=create(settings)) as worker:
            yield server, worker, str(base)
    finally:
        server.stop()


@pytest.mark.slow          # about 50 s: a server, two training subprocesses, two 900-token generations
def test_train_promote_probe_rollback_stream_across_reload_and_refuse_a_corrupt_export(live):
    server, worker, base = live
    before, old_rev = ask(server)
    long_reference, _ = ask(server, max_tokens=900)

    job = run_job(worker, base, hyperparameters=TRAIN, promote=True)
    assert job["state"] == "succeeded", job["error"] or job["logs"][-5:]
    new_rev = job["result"]["revision"]
    assert job["result"]["served_revision"] == new_rev and job["result"]["previous_revision"] == old_rev
    assert server.get("/admin/revisions").json()["active"] == new_rev
    after, fingerprint = ask(server)
    assert fingerprint == new_rev and after != before and after.startswith(TARGET), (before, after)

    assert server.post("/admin/rollback").json()["revision"] == old_rev
    assert ask(server) == (before, old_rev)

    # promote the same revision again while a long stream runs on the old weights
    stream = server.client().chat.completions.create(
        model=server.model_id, messages=PROBE, max_tokens=900, temperature=0, stream=True,
        extra_body={"ignore_eos": True})
    chunks = [next(iter(stream))]
    promoted = {}
    t = threading.Thread(target=lambda: promoted.update(worker.post(f"/v1/jobs/{job['id']}/promote").json()))
    t.start()
    chunks += list(stream)
    t.join()
    assert promoted["promotion"]["served_revision"] == new_rev
    assert promoted["promotion"]["draining_requests"] == 1, "the stream must have run across the swap"
    assert {c.system_fingerprint for c in chunks} == {old_rev}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == long_reference
    assert ask(server) == (after, new_rev)

    # a corrupt export: refused with the runtime's reason, the new revision keeps serving
    broken = run_job(worker, base, hyperparameters={**TRAIN, "max_steps": 1})
    assert broken["state"] == "succeeded"
    path = broken["result"]["path"]
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 3])
    r = worker.post(f"/v1/jobs/{broken['id']}/promote")
    assert r.status_code == 409 and "cannot load" in r.json()["error"]["message"], r.text
    assert f"still serving {new_rev}" in r.json()["error"]["message"]
    assert "cannot load" in worker.get(f"/v1/jobs/{broken['id']}").json()["result"]["promotion_error"]
    assert ask(server) == (after, new_rev)
    assert worker.post("/v1/jobs/job-nope/promote").status_code == 404
