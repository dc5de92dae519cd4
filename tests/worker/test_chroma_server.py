"""The RAG routes against a Chroma server (chroma_url) instead of the embedded store: the
`chroma run` server that the chromadb package ships, started here on loopback."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

CHROMA = Path(sys.executable).parent / "chroma"


@pytest.fixture
def chroma_server(tmp_path):
    if not CHROMA.is_file():
        pytest.skip("the chroma command is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(CHROMA), "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(f"{url}/api/v2/heartbeat", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert proc.poll() is None, "chroma run exited"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ingest_and_search_through_a_chroma_server(make_client, chroma_server, tmp_path):
    client = make_client(chroma_url=chroma_server)
    r = client.post("/v1/rag/ingest", json={"texts": [
        {"text": "The backup job runs every night at two and keeps thirty copies.", "source": "ops"},
        {"text": "Lunch is served in the cafeteria on the ground floor.", "source": "canteen"}]})
    assert r.status_code == 200, r.text
    hit = client.post("/v1/rag/search", json={"query": "how many backup copies are kept", "k": 1}).json()
    assert hit["results"][0]["source"] == "ops"
    assert not (tmp_path / "home" / "chroma").exists()      # nothing went to the embedded store
