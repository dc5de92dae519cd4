"""Real `samevm serve` processes (uvicorn) on tiny random models, driven over HTTP.

The servers run torch on one thread: on a 2-core machine shared with other processes,
OpenMP's spinning threads make a tiny model 30x slower, not faster.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI, OpenAI

START_TIMEOUT_S = 180
REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path
    home: Path
    model_id: str

    def client(self, **kw) -> OpenAI:
        return OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, **kw)

    def async_client(self, **kw) -> AsyncOpenAI:
        return AsyncOpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=300, **kw)

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, timeout=300, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.url + path, timeout=300, **kw)

    def metric(self, name: str) -> float:
        text = self.get("/metrics").text
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        assert found, f"{name} not in /metrics"
        return float(found.group(1))

    def wait_for(self, condition, what: str, timeout: float = 120) -> None:
        """Poll until `condition()` holds (progress, not speed, is what is tested)."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(model: str, home: Path, *extra: str) -> Server:
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"server-{port}.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "samevm", "--home", str(home), "serve", "--model", model,
           "--port", str(port), "--backend", "cpu", "--kv-cache-mb", "16", *extra]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", proc, log, home, Path(model).stem)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if server.get("/health").status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"server did not become healthy:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def server_model(tiny_gguf) -> str:
    return tiny_gguf("qwen2")


@pytest.fixture(scope="session")
def server(server_model, tmp_path_factory):
    s = start_server(server_model, tmp_path_factory.mktemp("server-home"))
    yield s
    s.stop()
