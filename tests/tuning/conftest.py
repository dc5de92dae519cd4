"""A real worker for the tuning tests, started the way `python -m tuning.generate` starts one
on a bare machine (tuning/worker.py)."""
from __future__ import annotations

import os

import pytest

from tests.stack_fixtures import CHILD_ENV
from tuning.worker import local_worker


@pytest.fixture(scope="session")
def worker_url():
    saved = {k: os.environ.get(k) for k in CHILD_ENV}
    os.environ.update(CHILD_ENV)                 # the child inherits one torch thread
    try:
        with local_worker() as url:
            yield url
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
