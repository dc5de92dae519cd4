"""No input may give the worker a 5xx or a hang: schemathesis over every operation of its
OpenAPI schema (in-process), then hostile bodies (tests/fuzz_bodies.py) over a real uvicorn.

Bounded (a few dozen examples per operation, about a minute on 2 cores). The llm reranker
talks to the loopback stub; speech input is capped short so synthesis stays quick.
"""
from __future__ import annotations

import time

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from worker.main import create_app
from tests.fuzz_bodies import Target, run
from tests.stack_fixtures import free_port
from tests.training.worker_app import serving
from worker.settings import WorkerSettings


@pytest.fixture
def worker_schema(tmp_path, embedder, llm_stub):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "note.txt").write_text("A short note about the weather.")
    embedder.embed(["load the model now, not inside a timed request"])
    app = create_app(WorkerSettings(home=tmp_path / "home", runtime_url=llm_stub[0], allowed_roots=[root],
                                    tts_max_chars=80, max_upload_bytes=1 << 20, sql_timeout_s=2.0,
                                    allowed_hosts=["testserver"]),   # schemathesis' ASGI client's Host
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


EXAMPLES = 120
WORKER_TARGETS = [
    Target("POST", "/v1/embeddings", {"input": ["hello", "world"], "model": "all-minilm-l6-v2",
                                      "encoding_format": "float", "dimensions": 384}),
    Target("POST", "/v1/rerank", {"query": "a note", "documents": ["a note", {"text": "other"}], "top_n": 1,
                                  "return_documents": True}),
    Target("POST", "/v1/sql/exec", {"db": "fuzz", "sql": "INSERT INTO t VALUES (:a, :b)", "params": {"a": 1, "b": "x"}}),
    Target("POST", "/v1/sql/query", {"db": "fuzz", "sql": "SELECT * FROM t WHERE a = :a LIMIT 3", "params": {"a": 1}}),
    Target("POST", "/v1/rag/ingest", {"texts": [{"text": "a note about fuzzing", "source": "fz"}], "collection": "fuzz"}),
    Target("POST", "/v1/rag/search", {"query": "note", "collection": "fuzz", "k": 3, "mode": "hybrid", "rerank": "none"}),
    Target("DELETE", "/v1/rag/documents?collection=fuzz&source=nope"),
    Target("GET", "/v1/sql/databases"), Target("GET", "/v1/rag/collections"), Target("GET", "/health"),
]


@pytest.fixture
def worker_url(tmp_path, embedder, llm_stub):
    app = create_app(WorkerSettings(home=tmp_path / "home", runtime_url=llm_stub[0], max_upload_bytes=1 << 20,
                                    sql_timeout_s=2.0, default_rerank="embedding"), embedder=embedder)
    with serving(app, free_port()) as url:
        httpx.post(url + "/v1/sql/exec", json={"db": "fuzz", "sql": "CREATE TABLE t (a, b)"}).raise_for_status()
        yield url


def test_hostile_bodies_on_the_real_routes_get_no_5xx_and_no_hang(worker_url):
    seen = run(worker_url, WORKER_TARGETS, examples=EXAMPLES)
    assert sum(seen.values()) == EXAMPLES and seen.get(200, 0) > 10, seen     # it reaches the services, too
    assert httpx.get(worker_url + "/health").status_code == 200
