"""Fine-tune jobs: persisted under <home>/training/jobs/<id>/, run one at a time, each in a
subprocess (training.runner), so a crash in training cannot take the worker down.

    job.json       state (queued, running, succeeded, failed, cancelled), spec, result, error
    dataset.jsonl  the validated pairs           events.jsonl  state, stages and progress
    log.txt        the subprocess's output       result.json   what the subprocess returned

Only this manager writes job.json; the subprocess appends events and writes result.json.
A second job waits in the queue (up to `max_queued`; beyond that it is refused). When the
manager starts and finds a job still marked running, the worker died under it: that job's
process, if still alive, is stopped and the job marked failed with the reason.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from training.dataset import PreferencePair, dataset_hash, to_jsonl
from training.files import append_jsonl, read_json, read_jsonl, write_json
from training.pipeline import OrpoJob
from training.promote import PromotionError, promote
from training.runner import API_KEY_ENV

TERMINAL = ("succeeded", "failed", "cancelled")
JOB_ID = re.compile(r"job-[0-9a-f]{12}")
KILL_GRACE_S = 10.0
LOG_TAIL_LINES = 40


class JobNotFound(LookupError):
    pass


class JobRefused(RuntimeError):
    """The request is valid but cannot be taken now (queue full, job already finished)."""


def _now() -> float:
    return round(time.time(), 3)


class JobManager:
    def __init__(self, root: Path, runtime_api_key: str | None = None, max_queued: int = 4):
        self.jobs_dir = Path(root) / "jobs"
        self.revisions_dir = Path(root) / "revisions"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.runtime_api_key = runtime_api_key
        self.max_queued = max_queued
        self._lock = threading.RLock()
        self._procs: dict[str, subprocess.Popen] = {}
        self._recover()

    # ---- files ------------------------------------------------------------------------
    def _dir(self, job_id: str) -> Path:
        if not JOB_ID.fullmatch(job_id) or not (self.jobs_dir / job_id / "job.json").is_file():
            raise JobNotFound(f"no job {job_id!r}")
        return self.jobs_dir / job_id

    def _load(self, job_id: str) -> dict:
        return read_json(self._dir(job_id) / "job.json")

    def _save(self, job: dict) -> None:
        write_json(self.jobs_dir / job["id"] / "job.json", job)

    def _event(self, job_id: str, kind: str, **fields) -> None:
        append_jsonl(self.jobs_dir / job_id / "events.jsonl", {"type": kind, "time": _now(), **fields})

    def _all(self) -> list[dict]:
        found = [read_json(p) for p in self.jobs_dir.glob("job-*/job.json")]
        return sorted(found, key=lambda j: j["created_at"])

    # ---- reading ----------------------------------------------------------------------
    def list(self) -> list[dict]:
        return [self.get(j["id"]) for j in self._all()]

    def get(self, job_id: str) -> dict:
        """The job with its latest progress and stage, queue position and log tail."""
        with self._lock:
            job = self._load(job_id)
            queued = [j["id"] for j in self._all() if j["state"] == "queued"]
        progress = stage = None
        for e in self.events(job_id):
            if e["type"] == "progress":
                progress = {k: v for k, v in e.items() if k not in ("type", "time")}
            elif e["type"] == "stage":
                stage = e["stage"]
        log = self.jobs_dir / job_id / "log.txt"
        tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if log.exists() else []
        return {**job, "progress": progress, "stage": stage, "logs": tail,
                "queue_position": queued.index(job_id) + 1 if job_id in queued else None}

    def events(self, job_id: str, start: int = 0) -> list[dict]:
        return read_jsonl(self._dir(job_id) / "events.jsonl", start)

    # ---- changing ---------------------------------------------------------------------
    def submit(self, spec: OrpoJob, pairs: list[PreferencePair], summary: dict) -> dict:
        """Queue a job (it starts at once when none runs); JobRefused when the queue is full."""
        with self._lock:
            jobs = self._all()
            running = [j["id"] for j in jobs if j["state"] == "running"]
            queued = [j["id"] for j in jobs if j["state"] == "queued"]
            if len(queued) >= self.max_queued:
                raise JobRefused(f"one training job runs at a time: {running[0] if running else queued[0]} "
                                 f"is running and {len(queued)} are queued (the limit); try again when one "
                                 "finishes, or cancel one with DELETE /v1/jobs/{id}")
            job_id = f"job-{uuid.uuid4().hex[:12]}"
            d = self.jobs_dir / job_id
            d.mkdir()
            (d / "dataset.jsonl").write_text(to_jsonl(pairs))
            job = {"id": job_id, "kind": "orpo", "state": "queued", "created_at": _now(), "started_at": None,
                   "finished_at": None, "pid": None, "spec": spec.to_json(), "request": summary,
                   "dataset": {"examples": len(pairs), "sha256": dataset_hash(pairs)},
                   "revisions_dir": str(self.revisions_dir), "result": None, "error": None}
            self._save(job)
            ahead = running + queued
            message = (f"queued behind {', '.join(ahead)}: one training job runs at a time" if ahead
                       else "started")
            self._event(job_id, "state", state="queued", message=message)
            self._start_next()
            return {**self.get(job_id), "message": message}

    def cancel(self, job_id: str) -> dict:
        with self._lock:
            job = self._load(job_id)
            if job["state"] in TERMINAL:
                raise JobRefused(f"job {job_id} already {job['state']}; nothing to cancel")
            was_running = job["state"] == "running"
            self._finish(job, "cancelled", error="cancelled by request")
            proc = self._procs.get(job_id)
            if was_running and proc is not None:
                _stop(proc)
            self._start_next()
        return self.get(job_id)

    def promote(self, job_id: str, runtime_url: str) -> dict:
        """Load a succeeded job's revision into the runtime (again, after a rollback, say) and
        report what it now serves; PromotionError (the runtime's reason) leaves it serving
        what it served."""
        job = self._load(job_id)
        if job["state"] != "succeeded":
            raise JobRefused(f"job {job_id} is {job['state']}; only a succeeded job has a revision to promote")
        result = job["result"]
        self._event(job_id, "stage", stage="promoting", runtime_url=runtime_url)
        try:                                  # minutes for a large model: not under the lock
            served = promote(runtime_url, result["path"], result["revision"], self.runtime_api_key)
        except PromotionError as e:
            self._update_result(job_id, {"promotion_error": str(e)})
            self._event(job_id, "stage", stage="promotion_refused", error=str(e))
            raise
        self._event(job_id, "stage", stage="promoted", **served)
        return {**self._update_result(job_id, {**served, "promotion_error": None}), "promotion": served}

    def _update_result(self, job_id: str, changes: dict) -> dict:
        with self._lock:
            job = self._load(job_id)
            job["result"] = {**(job["result"] or {}), **changes}
            self._save(job)
        return self.get(job_id)

    # ---- the one running job ----------------------------------------------------------
    def _start_next(self) -> None:
        with self._lock:
            jobs = self._all()
            if any(j["state"] == "running" for j in jobs):
                return
            queued = [j for j in jobs if j["state"] == "queued"]
            if not queued:
                return
            job = queued[0]
            d = self.jobs_dir / job["id"]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            if self.runtime_api_key:
                env[API_KEY_ENV] = self.runtime_api_key
            with (d / "log.txt").open("ab") as log:
                # its own session: cancel stops the whole process group, and the worker's
                # terminal signals (Ctrl-C) reach the worker, which decides what happens
                proc = subprocess.Popen([sys.executable, "-m", "training.runner", str(d)], stdout=log,
                                        stderr=subprocess.STDOUT, env=env, start_new_session=True)
            self._procs[job["id"]] = proc
            job.update(state="running", started_at=_now(), pid=proc.pid)
            self._save(job)
            self._event(job["id"], "state", state="running")
            threading.Thread(target=self._watch, args=(job["id"], proc), daemon=True,
                             name=f"watch-{job['id']}").start()

    def _watch(self, job_id: str, proc: subprocess.Popen) -> None:
        code = proc.wait()
        with self._lock:
            self._procs.pop(job_id, None)
            job = self._load(job_id)
            if job["state"] == "running":          # not cancelled, not recovered by another manager
                result_path = self.jobs_dir / job_id / "result.json"
                result = read_json(result_path) if result_path.exists() else None
                if code == 0 and result and not result.get("promotion_error"):
                    self._finish(job, "succeeded", result=result)
                elif result and result.get("promotion_error"):
                    self._finish(job, "failed", result=result, error=result["promotion_error"])
                elif result and result.get("error"):
                    self._finish(job, "failed", error=result["error"])
                else:
                    tail = self.get(job_id)["logs"][-1:] or ["(no output)"]
                    self._finish(job, "failed", error=f"the training process exited with code {code}: {tail[0]}")
            self._start_next()

    def _finish(self, job: dict, state: str, result: dict | None = None, error: str | None = None) -> None:
        job.update(state=state, finished_at=_now(), result=result or job.get("result"), error=error)
        self._save(job)
        self._event(job["id"], "state", state=state, **({"error": error} if error else {}))

    def _recover(self) -> None:
        for job in self._all():
            if job["state"] == "running":
                if job.get("pid") and _is_runner_of(job["pid"], self.jobs_dir / job["id"]):
                    os.killpg(job["pid"], signal.SIGKILL)      # an orphan of the dead worker
                self._finish(job, "failed", error="the worker stopped while this job was running, so the job "
                                                  "was stopped too; submit it again")
        self._start_next()


def _is_runner_of(pid: int, job_dir: Path) -> bool:
    """True if `pid` is still the runner of that job (pids are reused)."""
    try:
        return str(job_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the runner's process group; SIGKILL it if it is still there after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:          # it ended (and was reaped) while we decided
        return

    def kill() -> None:
        if proc.poll() is None:         # still running: poll() reaps, so the pid is still ours
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # the watcher reaped it in between
                return
    timer = threading.Timer(KILL_GRACE_S, kill)
    timer.daemon = True
    timer.start()
