"""The worker app with the jobs router mounted, for tests that run the worker as a real
process (`uvicorn --factory tests.training.worker_app:create`); settings from SAMEVM_*."""
from __future__ import annotations

from fastapi import FastAPI

from worker.api.routes import jobs
from worker.main import create_app
from worker.settings import WorkerSettings


def with_jobs(app: FastAPI) -> FastAPI:
    """Mount the jobs routes unless the worker's router already does."""
    if not any(getattr(r, "path", "").startswith("/v1/jobs") for r in app.routes):
        app.include_router(jobs.router, prefix="/v1/jobs", tags=["jobs"])
    return app


def create(settings: WorkerSettings | None = None) -> FastAPI:
    return with_jobs(create_app(settings))
