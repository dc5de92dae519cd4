"""Fine-tune jobs: start an ORPO job, read its state, follow its progress (SSE), cancel it.

The dataset (inline or a JSONL path under the allowed roots), the base model and the
hyperparameters are checked here, so bad input is a 400 naming each problem (dataset
problems with their line numbers) before any job exists. Training runs in a subprocess
(training.jobs); one job runs at a time and the next ones queue.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import InputError
from rag.sources import resolve_allowed
from runtime import catalog
from runtime.gguf import ModelLoadError
from training.dataset import DatasetError, from_records, load_jsonl, parse_jsonl
from training.jobs import TERMINAL, JobManager, JobNotFound, JobRefused
from training.params import OrpoParams
from training.pipeline import OrpoJob
from training.promote import PromotionError
from training.revisions import RevisionStore
from worker.deps import SettingsDep
from worker.errors import ServiceError, error_response

router = APIRouter()
_jobs_lock = threading.Lock()
POLL_S = 0.25
KEEPALIVE_S = 15.0
NO_CONTROL_CHARS = r"^[^\x00-\x1f]*$"          # names and paths: a NUL would fail deep in os calls


def get_jobs(request: Request, settings: SettingsDep) -> JobManager:
    # built on first use: it recovers jobs a previous worker left running
    with _jobs_lock:
        jobs = getattr(request.app.state, "jobs", None)
        if jobs is None:
            jobs = request.app.state.jobs = JobManager(settings.home / "training", settings.runtime_api_key)
    return jobs


JobsDep = Annotated[JobManager, Depends(get_jobs)]


def existing_job(job_id: str, jobs: JobsDep) -> str:
    # a dependency, so that an unknown id is a 404 before an event stream starts
    try:
        jobs.get(job_id)
    except JobNotFound as e:
        raise ServiceError(404, str(e), "job_not_found", "job_id") from e
    return job_id


JobId = Annotated[str, Depends(existing_job)]


class OrpoJobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: list[Any] | str | None = Field(
        None, description="preference pairs inline: a list of {prompt, chosen, rejected} or JSONL text")
    dataset_path: str | None = Field(None, max_length=4096, pattern=NO_CONTROL_CHARS,
                                     description="a JSONL file under the worker's allowed roots")
    base_model: str = Field(catalog.DEFAULT_MODEL, min_length=1, max_length=4096, pattern=NO_CONTROL_CHARS,
                            description="a known model name, a trained revision id, or a GGUF path under "
                                        "the allowed roots or the data directory")
    hyperparameters: OrpoParams = Field(default_factory=OrpoParams)
    promote: bool = Field(False, description="on success, load the new revision into the runtime")


def _pairs(req: OrpoJobRequest, settings):
    if (req.dataset is None) == (req.dataset_path is None):
        raise ServiceError(400, "give exactly one of `dataset` (pairs inline) and `dataset_path` (a JSONL file)",
                           "invalid_dataset", "dataset")
    if req.dataset_path is not None:
        return load_jsonl(resolve_allowed(req.dataset_path, settings.allowed_roots))
    if isinstance(req.dataset, str):
        return parse_jsonl(req.dataset)
    return from_records(req.dataset)


def _base_model(name: str, settings, revisions: RevisionStore):
    trained = revisions.get(name)
    if trained:
        return trained["path"]
    if name in catalog.KNOWN_MODELS:
        return str(catalog.resolve(name, settings.home, auto_fetch=False))
    path = resolve_allowed(name, [*settings.allowed_roots, settings.home])
    if not path.is_file() or path.suffix != ".gguf":
        raise InputError(f"{name}: not a GGUF file")
    return str(path)


@router.post("/orpo", status_code=202)
def start_orpo(req: OrpoJobRequest, jobs: JobsDep, settings: SettingsDep):
    """Start an ORPO fine-tune (queued if one is running); returns the job."""
    try:
        pairs = _pairs(req, settings)
    except DatasetError as e:
        return error_response(400, str(e), "invalid_dataset", "dataset", problems=e.problems)
    try:
        base = _base_model(req.base_model, settings, RevisionStore(jobs.revisions_dir))
    except ModelLoadError as e:
        raise ServiceError(400, str(e), "model_not_found", "base_model") from e
    if req.promote and not settings.runtime_url:
        raise ServiceError(400, "promote needs the runtime's URL, and this worker has none configured",
                           "no_runtime", "promote")
    spec = OrpoJob(base_model=base, params=req.hyperparameters, promote=req.promote,
                   runtime_url=settings.runtime_url, base_label=req.base_model,
                   tokenizer_cache=str(settings.home / "cache" / "tokenizers"))
    summary = {"base_model": req.base_model, "promote": req.promote,
               "dataset_path": req.dataset_path, "hyperparameters": req.hyperparameters.model_dump()}
    try:
        job = jobs.submit(spec, pairs, summary)
    except JobRefused as e:
        raise ServiceError(409, str(e), "queue_full") from e
    return JSONResponse(job, status_code=202)


@router.get("")
def list_jobs(jobs: JobsDep) -> dict:
    """Every job, oldest first."""
    return {"object": "list", "data": jobs.list()}


@router.get("/{job_id}")
def get_job(job_id: JobId, jobs: JobsDep) -> dict:
    """State, progress, stage, metrics and result, error, and the tail of the log."""
    return jobs.get(job_id)


@router.get("/{job_id}/events", response_class=EventSourceResponse)
async def job_events(job_id: JobId, jobs: JobsDep, last_event_id: Annotated[str | None, Header()] = None):
    """Server-sent events (state, stage, progress) until the job ends; resumes after Last-Event-ID."""
    start = int(last_event_id) + 1 if last_event_id and last_event_id.isdigit() else 0
    idle = 0.0
    while True:
        events = jobs.events(job_id, start)
        for i, event in enumerate(events, start):
            yield ServerSentEvent(data=event, event=event["type"], id=str(i))
            if event["type"] == "state" and event["state"] in TERMINAL:
                return
        start += len(events)
        idle = 0.0 if events else idle + POLL_S
        if idle >= KEEPALIVE_S:
            yield ServerSentEvent(comment="keep-alive")
            idle = 0.0
        await asyncio.sleep(POLL_S)


@router.post("/{job_id}/promote")
def promote_job(job_id: JobId, jobs: JobsDep, settings: SettingsDep) -> dict:
    """Load a succeeded job's revision into the runtime; 409 with the reason if it refuses."""
    if not settings.runtime_url:
        raise ServiceError(400, "this worker has no runtime URL configured", "no_runtime")
    try:
        return jobs.promote(job_id, settings.runtime_url)
    except JobRefused as e:
        raise ServiceError(409, str(e), "job_not_succeeded") from e
    except PromotionError as e:
        if e.status is None:              # no answer from the runtime at all
            raise ServiceError(503, str(e), "runtime_unreachable") from e
        raise ServiceError(409, str(e), "promotion_refused") from e


@router.delete("/{job_id}")
def cancel_job(job_id: JobId, jobs: JobsDep) -> dict:
    """Cancel a queued or running job (its process is stopped); 409 if it already ended."""
    try:
        return jobs.cancel(job_id)
    except JobRefused as e:
        raise ServiceError(409, str(e), "job_finished") from e
