"""A real worker for the tuning tests, started the way `python -m tuning.generate` starts one
on a bare machine (tuning/worker.py), and the registry and probe bound to it."""
from __future__ import annotations

import pytest

from agents.checks import Probe
from tests.stack_fixtures import CHILD_ENV
from tools.context import ToolContext
from tools.toolsets import build_registry
from tuning.worker import local_worker


@pytest.fixture(scope="session")
def worker_url():
    with local_worker(CHILD_ENV) as url:          # torch on one thread in the worker
        yield url


@pytest.fixture
def shared(worker_url):
    """(registry, probe) on the worker, as generate.py builds them."""
    registry = build_registry(ToolContext(worker_url=worker_url))
    probe = Probe(worker_url, registry)
    yield registry, probe
    probe.close()
