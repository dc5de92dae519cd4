"""What a start's first plain request does not import: jsonschema loads with the first request
that has tools, which still validates them (a bad schema is a 400, a good one is served)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.runtime.server.conftest import REPO

CODE = """
import json, sys, time
from fastapi.testclient import TestClient
from runtime.config import EngineConfig
from runtime.server.app import create_app
from runtime.server.config import ServerConfig

cfg = ServerConfig(engine=EngineConfig(model={model!r}, backend="cpu", kv_cache_mb=8, tokenizer_cache={home!r} + "/tok"),
                   model_id="tiny", home={home!r})
ask = {{"model": "tiny", "messages": [{{"role": "user", "content": "hi"}}], "max_tokens": 2}}
tool = {{"type": "function", "function": {{"name": "f", "parameters": {{"type": "object",
        "properties": {{"x": {{"type": "integer"}}}}}}}}}}
bad = {{"type": "function", "function": {{"name": "g", "parameters": {{"type": "object",
       "properties": {{"x": {{"type": 5}}}}}}}}}}
out = {{}}
with TestClient(base_url="http://127.0.0.1", app=create_app(cfg)) as client:
    deadline = time.monotonic() + 120
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    out["plain"] = client.post("/v1/chat/completions", json=ask).status_code
    out["after_plain"] = "jsonschema" in sys.modules
    out["bad_tools"] = client.post("/v1/chat/completions", json={{**ask, "tools": [bad]}}).status_code
    out["tools"] = client.post("/v1/chat/completions", json={{**ask, "tools": [tool]}}).status_code
    out["after_tools"] = "jsonschema" in sys.modules
print(json.dumps(out))
"""


def test_a_plain_request_imports_no_jsonschema_and_tools_are_still_checked(tiny_gguf, tmp_path):
    code = CODE.format(model=tiny_gguf("qwen2"), home=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out == {"plain": 200, "after_plain": False, "bad_tools": 400, "tools": 200, "after_tools": True}
