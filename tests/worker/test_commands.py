"""The command line: `samevm worker` as a real uvicorn process, `samevm ingest` and
`samevm search` both through it and in-process."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

SAMEVM = str(Path(sys.executable).parent / "samevm")     # the installed console script


def samevm(*args, home, port, timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SAMEVM_WORKER_PORT": str(port)}
    return subprocess.run([SAMEVM, "--home", str(home), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def docs(tmp_path, make_pdf, topic_pages):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "topics.pdf").write_bytes(make_pdf(topic_pages))
    (folder / "todo.md").write_text("Renew the passport before the trip to Lisbon.")
    return folder


@pytest.mark.slow      # three fresh interpreters that each import torch and load MiniLM: ~50 s
def test_ingest_and_search_in_process(tmp_path, docs):
    home, port = tmp_path / "home", free_port()     # nothing listens there: in-process
    r = samevm("ingest", str(docs), "--collection", "mine", home=home, port=port)
    assert r.returncode == 0, r.stderr
    assert "added" in r.stdout and "4 pages" in r.stdout and "chunk" in r.stderr   # the progress bar
    r = samevm("search", "what makes sourdough rise", "--collection", "mine", "-k", "1", home=home, port=port)
    assert r.returncode == 0 and "topics.pdf, page 2" in r.stdout, r.stdout + r.stderr
    r = samevm("search", "x", "--collection", "other", home=home, port=port)
    assert r.returncode == 2 and "unknown collection" in r.stderr


def test_worker_process_serves_and_the_cli_uses_it(tmp_path, docs):
    home, port = tmp_path / "home", free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([SAMEVM, "--home", str(home), "worker", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "timeout"
                time.sleep(0.3)
        r = samevm("ingest", str(docs / "todo.md"), home=home, port=port)
        assert r.returncode == 0 and "via worker" in r.stderr, r.stderr
        docs_listed = httpx.get(f"http://127.0.0.1:{port}/v1/rag/documents").json()["documents"]
        assert [d["source"] for d in docs_listed] == [str((docs / "todo.md").resolve())]
        r = samevm("search", "passport renewal", "-k", "1", home=home, port=port)
        assert r.returncode == 0 and "todo.md" in r.stdout
        r = samevm("ingest", str(docs / "todo.md"), home=tmp_path / "another-home", port=port)
        assert r.returncode != 0 and "serves the data directory" in r.stderr, r.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_worker_refuses_to_listen_off_loopback_without_a_key(tmp_path, capsys):
    from samevm.cli import main
    assert main(["--home", str(tmp_path / "home"), "worker", "--host", "0.0.0.0"]) == 2
    assert "API key" in capsys.readouterr().err


def test_the_worker_keeps_jax_from_reserving_the_gpu(tmp_path, monkeypatch):
    """A library that brings in JAX would take 75% of GPU memory from the runtime beside it."""
    import uvicorn

    from samevm.cli import main
    seen = {}
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)     # the command points it at its data dir
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")))
    assert main(["--home", str(tmp_path / "home"), "worker", "--port", str(free_port())]) == 0
    assert seen == {"preallocate": "false"}
