"""The worker app for tests that run it as a real process (`uvicorn --factory
tests.training.worker_app:create`; settings from SAMEVM_*) or serve it over real HTTP from a
thread (`serving`)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from worker.main import create_app
from worker.settings import WorkerSettings


def create(settings: WorkerSettings | None = None) -> FastAPI:
    return create_app(settings)


@contextmanager
def serving(app: FastAPI, port: int):
    """Serve `app` on loopback from a thread of this process, for clients that need real HTTP."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
