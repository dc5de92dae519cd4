"""Fine-tune jobs through the worker's HTTP routes, with real training subprocesses.

Bad input is a 400 naming the problem before any job exists; a job runs to a revision while
its SSE stream reports states, stages and progress; one job runs at a time, the next ones
queue, a full queue is refused, and cancel stops the process; a worker killed under a
running job comes back with that job marked failed and its orphaned process stopped."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.gguf import quick_digest
from tests.runtime.server.conftest import free_port
from tests.training.conftest import PAIRS
from tests.training.worker_app import create
from worker.settings import WorkerSettings

QUICK = {"max_steps": 4, "warmup_steps": 0, "batch_size": 4, "learning_rate": 2e-3, "export_type": "f16"}
ENDLESS = {**QUICK, "max_steps": 100_000}
REPO = Path(__file__).resolve().parents[2]


def wait_until(condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"     # a zombie has ended


def sse(lines) -> list[dict]:
    """Parse an event stream into [{"id", "event", "data"}]."""
    events, current = [], {}
    for line in lines:
        if not line:
            if current:
                events.append(current)
            current = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            current[key] = json.loads(value) if key == "data" else value
    return events


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")      # the training subprocesses inherit it
    return tmp_path / "home"


@pytest.fixture
def client(home, tmp_path):
    settings = WorkerSettings(home=home, allowed_roots=[tmp_path], runtime_url=None)
    with TestClient(base_url="http://127.0.0.1", app=create(settings)) as c:
        yield c
        for job in c.get("/v1/jobs").json()["data"]:       # leave no training process behind
            if job["state"] in ("queued", "running"):
                c.delete(f"/v1/jobs/{job['id']}")


@pytest.fixture
def base(tiny_gguf, tmp_path) -> str:
    path = tmp_path / "base.gguf"                            # under the allowed roots
    path.write_bytes(Path(tiny_gguf("qwen2")).read_bytes())
    return str(path)


def start(client, base, params=QUICK, **extra) -> httpx.Response:
    return client.post("/v1/jobs/orpo", json={"dataset": PAIRS, "base_model": base,
                                              "hyperparameters": params, **extra})


def test_bad_input_is_a_400_that_names_the_problem(client, base, tmp_path):
    bad = json.dumps(PAIRS[0]) + "\n" + json.dumps({"prompt": "p", "chosen": ""}) + "\n"
    r = client.post("/v1/jobs/orpo", json={"dataset": bad, "base_model": base})
    assert r.status_code == 400 and r.json()["error"]["problems"] == ["line 2: missing field(s): rejected"]
    r = start(client, base, params={"learning_rate": -1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "hyperparameters.learning_rate"
    r = start(client, base, params={"lr": 0.1})
    assert r.status_code == 400 and "lr" in r.json()["error"]["message"]
    r = start(client, base, params={"warmup_steps": 9, "max_steps": 5})
    assert r.status_code == 400 and "warmup_steps" in r.json()["error"]["message"]
    r = start(client, base, dataset_path=str(tmp_path / "x.jsonl"))
    assert r.status_code == 400 and "exactly one of" in r.json()["error"]["message"]
    r = client.post("/v1/jobs/orpo", json={"dataset_path": "/etc/passwd", "base_model": base})
    assert r.status_code == 400 and "outside the allowed roots" in r.json()["error"]["message"]
    assert start(client, "no-such-model").status_code == 400
    assert start(client, "/etc/hostname").status_code == 400
    assert start(client, "bad\x00name").status_code == 400
    r = start(client, base, promote=True)
    assert r.status_code == 400 and r.json()["error"]["code"] == "no_runtime"
    for method, path in (("GET", ""), ("GET", "/events"), ("DELETE", "")):
        assert client.request(method, f"/v1/jobs/job-nope{path}").status_code == 404
    assert client.get("/v1/jobs").json()["data"] == []


def test_a_job_trains_exports_and_reports_progress(client, base, tmp_path):
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    r = client.post("/v1/jobs/orpo", json={"dataset_path": str(dataset), "base_model": base,
                                           "hyperparameters": QUICK})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        events = sse(s.iter_lines())
    kinds = [(e["event"], e["data"].get("state") or e["data"].get("stage")) for e in events]
    assert kinds[:4] == [("state", "queued"), ("state", "running"), ("stage", "loading"), ("stage", "training")]
    assert kinds[-3:] == [("stage", "exporting"), ("stage", "exported"), ("state", "succeeded")], kinds
    progress = [e["data"] for e in events if e["event"] == "progress"]
    assert [p["step"] for p in progress] == [1, 2, 3, 4]
    assert all({"loss", "reward_margin", "eta_s", "max_steps"} <= p.keys() for p in progress)
    assert progress[-1]["reward_margin"] > progress[0]["reward_margin"]
    assert [e["id"] for e in events] == [str(i) for i in range(len(events))]

    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["state"] == "succeeded" and job["error"] is None and job["progress"]["step"] == 4
    result = job["result"]
    assert result["metrics"]["after"]["reward_margin"] > result["metrics"]["before"]["reward_margin"]
    assert result["base_revision"] == quick_digest(base) and result["served_revision"] is None
    manifest = json.loads((Path(result["path"]).parent / "manifest.json").read_text())
    assert manifest["dataset_sha256"] == job["dataset"]["sha256"] and manifest["revision"] == result["revision"]
    LLMEngine.from_gguf(EngineConfig(model=result["path"], backend="cpu", kv_cache_mb=16))   # the runtime loads it
    # a client that reconnects with Last-Event-ID gets only what came after
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": str(len(events) - 2)}) as s:
        assert [e["id"] for e in sse(s.iter_lines())] == [str(len(events) - 1)]
    # the trained revision is itself a base for the next job
    assert client.post("/v1/jobs/orpo", json={"dataset": PAIRS, "base_model": result["revision"],
                                              "hyperparameters": {"max_steps": 1, "warmup_steps": 0}}
                       ).status_code == 202


def test_one_job_at_a_time_queue_limit_and_cancel(client, base):
    first = start(client, base, ENDLESS).json()
    queued = [start(client, base, ENDLESS).json() for _ in range(4)]
    assert all(q["state"] == "queued" for q in queued) and queued[0]["queue_position"] == 1
    assert first["id"] in queued[0]["message"] and "one training job runs at a time" in queued[0]["message"]
    r = start(client, base, ENDLESS)
    assert r.status_code == 409 and r.json()["error"]["code"] == "queue_full"
    running = wait_until(lambda: (j := client.get(f"/v1/jobs/{first['id']}").json())["stage"] == "training" and j,
                         "the first job to train")
    assert running["state"] == "running" and alive(running["pid"])
    for q in queued[1:]:
        assert client.delete(f"/v1/jobs/{q['id']}").json()["state"] == "cancelled"
    cancelled = client.delete(f"/v1/jobs/{first['id']}").json()
    assert cancelled["state"] == "cancelled" and cancelled["error"] == "cancelled by request"
    wait_until(lambda: not alive(running["pid"]), "the cancelled job's process to end", 30)
    nxt = wait_until(lambda: (j := client.get(f"/v1/jobs/{queued[0]['id']}").json())["pid"] and j,
                     "the queued job to start")
    assert nxt["state"] == "running"
    assert client.delete(f"/v1/jobs/{first['id']}").status_code == 409      # already ended


def start_worker(home: Path, roots: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "SAMEVM_HOME": str(home), "SAMEVM_WORKER_ALLOWED_ROOTS": json.dumps([str(roots)]),
           "SAMEVM_WORKER_RUNTIME_URL": "", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "--factory", "tests.training.worker_app:create",
                             "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: _health(port), "the worker to start", 60)
    return proc


def _health(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    except httpx.TransportError:
        return False


def test_a_worker_restart_fails_the_running_job_and_keeps_the_queue(home, base, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/jobs"
    worker = start_worker(home, tmp_path, port)
    body = {"dataset": PAIRS, "base_model": base, "hyperparameters": ENDLESS}
    try:
        running = httpx.post(f"{url}/orpo", json=body).json()
        queued = httpx.post(f"{url}/orpo", json=body).json()
        pid = wait_until(lambda: (j := httpx.get(f"{url}/{running['id']}").json())["stage"] == "training"
                         and j["pid"], "the job to train")
        worker.send_signal(signal.SIGKILL)                # the worker dies; its job's process does not
        worker.wait()
        assert alive(pid)
        worker = start_worker(home, tmp_path, port)
        job = httpx.get(f"{url}/{running['id']}").json()
        assert job["state"] == "failed" and "the worker stopped while this job was running" in job["error"]
        wait_until(lambda: not alive(pid), "the orphaned training process to be stopped", 30)
        assert wait_until(lambda: httpx.get(f"{url}/{queued['id']}").json()["state"] == "running",
                          "the queued job to start after the restart")
        assert httpx.delete(f"{url}/{queued['id']}").json()["state"] == "cancelled"
    finally:
        worker.kill()
        worker.wait()
