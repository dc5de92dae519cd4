"""A stand-in for the runtime's /v1/models during generation, so that `runtime_status` returns
a model card the task knows: the oracle replaces the served model, and without a runtime the
tool would only report it unreachable. Each task reads its own card under its own path
(`URL/<task id>/v1/models`), drawn from the task id, so answers quote varied values."""
from __future__ import annotations

import contextlib
import hashlib
import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = [("qwen2.5-coder-0.5b", "qwen2"), ("qwen2.5-coder-1.5b", "qwen2"), ("smollm2-135m", "llama"),
          ("qwen3-0.6b", "qwen3"), ("llama-3.2-1b-instruct", "llama"), ("qwen2.5-3b-instruct", "qwen2")]


def card(task_id: str) -> dict:
    """The model card the runtime serves to task `task_id` (the fields tools/runtime.py reads)."""
    rng = random.Random(hashlib.sha256(task_id.encode()).digest())
    name, arch = rng.choice(MODELS)
    return {"id": name, "object": "model", "revision": "%012x" % rng.getrandbits(48),
            "backend": rng.choice(["cpu", "cuda"]), "architecture": arch,
            "context_length": rng.choice([4096, 8192, 16384, 32768])}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):          # noqa: N802 (http.server's name)
        task, _, rest = self.path.strip("/").partition("/")
        body = {"object": "list", "data": [card(task)]} if rest == "v1/models" else {"status": "ok"}
        data = json.dumps(body).encode()
        self.send_response(200 if rest in ("v1/models", "health") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def runtime_stub() -> Iterator[str]:
    """The stub's base URL for the duration of the block (a task's runtime is URL/<task id>)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
