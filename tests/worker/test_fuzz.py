"""Schemathesis fuzzes every operation of the worker's OpenAPI schema: no input may give a 5xx.

Bounded (a few dozen examples per operation, about a minute on 2 cores). The llm reranker
talks to the loopback stub; speech input is capped short so synthesis stays quick.
"""
from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from worker.main import create_app
from worker.settings import WorkerSettings


@pytest.fixture
def worker_schema(tmp_path, embedder, llm_stub):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "note.txt").write_text("A short note about the weather.")
    embedder.embed(["load the model now, not inside a timed request"])
    app = create_app(WorkerSettings(home=tmp_path / "home", runtime_url=llm_stub[0], allowed_roots=[root],
                                    tts_max_chars=80, max_upload_bytes=1 << 20, sql_timeout_s=2.0),
                     embedder=embedder)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_no_server_errors(worker_schema):
    # One hypothesis run per operation, driven here: schemathesis' pytest plugin does not
    # work with this pytest, and its fixtures-based loader needs it.
    for result in worker_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=50, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def fuzz(case):
            case.call_and_validate(checks=[not_a_server_error])
        started = time.perf_counter()
        fuzz()
        print(f"{operation.label}: {time.perf_counter() - started:.1f} s")
