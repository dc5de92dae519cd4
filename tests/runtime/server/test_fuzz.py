"""Whatever a client sends, no 5xx and no hang: a bounded schemathesis run over the server's
OpenAPI schema, then hostile bodies (tests/fuzz_bodies.py). The server gets a 96-token
context so generated requests finish quickly."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz_bodies import Target, run
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


def runtime_targets(model: str, models_dir: str) -> list[Target]:
    chat = {"model": model, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            "max_tokens": 4, "temperature": 0.5, "top_k": 5, "top_p": 0.9, "min_p": 0.1, "seed": 1, "stop": ["x"],
            "logprobs": True, "top_logprobs": 2, "presence_penalty": 0.5, "repetition_penalty": 1.1}
    tools = {"model": model, "messages": [{"role": "user", "content": "call f"}], "max_tokens": 8, "stream": True,
             "stream_options": {"include_usage": True}, "tool_choice": "auto",
             "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
                 "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]}
    return [
        Target("POST", "/v1/chat/completions", chat),
        Target("POST", "/v1/chat/completions", tools),
        Target("POST", "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "x"}],
                                                "max_tokens": 6, "structured_outputs": {"regex": "[a-z]{1,4}"}}),
        Target("POST", "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "x"}],
                                                "max_tokens": 6, "response_format": {"type": "json_schema", "json_schema": {
                                                    "name": "o", "schema": {"type": "object", "properties": {
                                                        "n": {"type": "integer", "maximum": 9}}}}}}),
        Target("POST", "/v1/completions", {"model": model, "prompt": "once upon", "max_tokens": 4, "logprobs": 1,
                                           "stream": False, "ignore_eos": True}),
        Target("POST", "/v1/completions", {"model": model, "prompt": [1, 2, 3], "max_tokens": 3, "stream": True}),
        Target("POST", "/tokenize", {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}),
        Target("POST", "/detokenize", {"tokens": [1, 2, 3]}),
        Target("POST", "/admin/reload", {"path": f"{models_dir}/missing.gguf", "revision": "fz"}),
        Target("GET", "/v1/models"), Target("GET", "/admin/revisions"),
    ]


def test_hostile_bodies_on_the_real_routes_get_no_5xx_and_no_hang(small_server, server_model):
    targets = runtime_targets(small_server.model_id, str(Path(server_model).parent))
    seen = run(small_server.url, targets, examples=200)
    assert sum(seen.values()) == 200 and seen.get(200, 0) > 10, seen
    assert small_server.get("/health").status_code == 200 and small_server.proc.poll() is None
