"""A throwaway worker for a generation run on a bare machine: `samevm worker` as a child
process in a temporary home on a free loopback port, stopped (and its home removed) after."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

START_TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_worker(env: dict[str, str] | None = None) -> Iterator[str]:
    """The URL of a fresh worker, for the duration of the block (`env` added to its environment)."""
    with tempfile.TemporaryDirectory(prefix="samevm-tuning-") as home:
        port, log_path = free_port(), Path(home) / "worker.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "samevm", "--home", home, "worker", "--port", str(port)],
                                    env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker exited with {proc.returncode}:\n{log_path.read_text()[-2000:]}")
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start in {START_TIMEOUT_S} s:\n{log_path.read_text()[-2000:]}")
                time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
