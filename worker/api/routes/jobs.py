"""Fine-tune jobs: start an ORPO job, read its state, follow its progress (SSE), promote or
cancel it. The checks and the job logic are worker/jobs.py's; JobManager lives in Services."""
from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field

from runtime import catalog
from training.jobs import TERMINAL
from training.params import OrpoParams
from worker import jobs as service
from worker.deps import JobsDep, SettingsDep

router = APIRouter()
POLL_S = 0.25
KEEPALIVE_S = 15.0
NO_CONTROL_CHARS = r"^[^\x00-\x1f]*$"          # names and paths: a NUL would fail deep in os calls


def existing_job(job_id: str, jobs: JobsDep) -> str:
    # a dependency, so that an unknown id is a 404 before an event stream starts
    service.get(jobs, job_id)
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


@router.post("/orpo", status_code=202)
def start_orpo(req: OrpoJobRequest, jobs: JobsDep, settings: SettingsDep):
    """Start an ORPO fine-tune (queued if one is running); returns the job."""
    job = service.start_orpo(jobs, settings, dataset=req.dataset, dataset_path=req.dataset_path,
                             base_model=req.base_model, hyperparameters=req.hyperparameters, promote=req.promote)
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
    return service.promote(jobs, job_id, settings)


@router.delete("/{job_id}")
def cancel_job(job_id: JobId, jobs: JobsDep) -> dict:
    """Cancel a queued or running job (its process is stopped); 409 if it already ended."""
    return service.cancel(jobs, job_id)
