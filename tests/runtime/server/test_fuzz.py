"""A bounded schemathesis run over the server's OpenAPI schema: whatever it sends, no 5xx.
The server gets a 96-token context so generated requests finish quickly."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.runtime.server.conftest import start_server

MAX_EXAMPLES = 40


@pytest.fixture(scope="module")
def small_server(server_model, tmp_path_factory):
    s = start_server(server_model, tmp_path_factory.mktemp("fuzz-home"), "--max-model-len", "96")
    yield s
    s.stop()


def test_openapi_fuzz_finds_no_server_error(small_server, tmp_path):
    cmd = [sys.executable, "-m", "schemathesis.cli", "run", f"{small_server.url}/openapi.json",
           "--checks", "not_a_server_error", "--max-examples", str(MAX_EXAMPLES),
           "--phases", "examples,coverage,fuzzing", "--workers", "1", "--request-timeout", "120",
           "--suppress-health-check", "all", "--seed", "1", "--no-color"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=550, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts and counts.group(1) == counts.group(2) and int(counts.group(1)) > 500, run.stdout[-3000:]
    for route in ("/v1/chat/completions", "/v1/completions"):             # it reached the model, too
        assert small_server.metric(f'samevm_requests_total{{route="{route}",status="200"}}') > 0
    assert small_server.proc.poll() is None
