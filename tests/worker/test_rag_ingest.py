"""Ingest through the worker's routes and the `samevm ingest` command: identities, page
counts, batching across documents, which worker the CLI writes into, and what a bad or
abandoned request may cost (FIFOs, NUL bytes, page/chunk/time budgets, disconnects)."""
from __future__ import annotations

import os
import socket
import threading
import time
from argparse import Namespace

import pytest

from tests.rag.pdfs import page_bomb


def docs_listed(client, collection="default"):
    return client.get("/v1/rag/documents", params={"collection": collection}).json()["documents"]


@pytest.fixture
def cli(monkeypatch):
    """cli(test_client, home, *paths) -> what `samevm ingest PATHS` prints, talking to the
    given in-process worker as if it answered on the stack's worker port."""
    from samevm.commands import ingest
    from samevm.settings import Settings
    from worker.client import WorkerClient

    def run(client, home, *paths, collection="default"):
        monkeypatch.setattr(WorkerClient, "__init__", lambda self, *a, **k: setattr(self, "http", client))
        return ingest.run(Namespace(paths=[str(p) for p in paths], collection=collection), Settings(home=home))
    return run


def test_same_named_files_in_different_folders_stay_apart(make_client, tmp_path, cli, capsys):
    client = make_client()
    for folder, text in (("a", "The blue door code is 1234."), ("b", "The red gate opens at dawn.")):
        (tmp_path / "docs" / folder).mkdir(parents=True)
        (tmp_path / "docs" / folder / "notes.md").write_text(text)
    assert cli(client, tmp_path / "home", tmp_path / "docs") == 0
    assert "via worker" in capsys.readouterr().err
    sources = sorted(d["source"] for d in docs_listed(client))
    assert sources == [str((tmp_path / "docs" / f / "notes.md").resolve()) for f in "ab"]


def test_an_upload_and_a_path_ingest_of_one_file_are_one_document(make_client, tmp_path, cli):
    root = tmp_path / "docs"
    root.mkdir()
    note = root / "plan.md"
    note.write_text("The launch is planned for March.")
    client = make_client(allowed_roots=[root])
    assert cli(client, tmp_path / "home", note) == 0
    note.write_text("The launch moved to April.")
    r = client.post("/v1/rag/ingest", json={"paths": [str(note)]})
    assert r.status_code == 200 and r.json()["documents"][0]["status"] == "replaced", r.text
    listed = docs_listed(client)
    assert len(listed) == 1 and listed[0]["source"] == str(note.resolve())


def test_the_cli_refuses_a_worker_of_another_data_directory(make_client, tmp_path, cli):
    client = make_client()                       # serves tmp_path/home
    (tmp_path / "x.md").write_text("Nothing to see.")
    with pytest.raises(ValueError, match="serves the data directory"):
        cli(client, tmp_path / "other-home", tmp_path / "x.md")
    assert client.get("/v1/rag/collections").json()["collections"] == []


def test_documents_reports_the_pages_ingest_reported(client, make_pdf):
    r = client.post("/v1/rag/ingest", files=[("files", ("gap.pdf", make_pdf(["first page", "", "third page"])))])
    assert r.json()["documents"][0]["pages"] == 3
    assert docs_listed(client)[0]["pages"] == 3


def test_many_small_documents_are_embedded_together(tmp_path, embedder):
    from fastapi.testclient import TestClient
    from worker.main import create_app
    from worker.settings import WorkerSettings

    class Counting:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def embed(self, texts):
            self.calls.append(len(texts))
            return self.inner.embed(texts)

    counting = Counting(embedder)
    texts = [{"text": f"Note {i}: the meeting room {i} has {i + 2} chairs.", "source": f"note-{i}"} for i in range(40)]
    with TestClient(create_app(WorkerSettings(home=tmp_path / "home", runtime_url=None), embedder=counting),
                    base_url="http://127.0.0.1") as c:
        r = c.post("/v1/rag/ingest", json={"texts": texts})
        assert r.status_code == 200 and len(r.json()["documents"]) == 40
    assert counting.calls == [40]               # one batch for all forty, not forty batches


def test_a_fifo_is_refused_before_it_is_opened(make_client, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    client = make_client(allowed_roots=[root])
    got = {}
    worker = threading.Thread(target=lambda: got.update(r=client.post("/v1/rag/ingest",
                                                                       json={"paths": [str(root / "pipe.txt")]})))
    worker.start()
    worker.join(60)
    if worker.is_alive():                        # the reader blocks on the FIFO: release it, then fail
        os.close(os.open(root / "pipe.txt", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail("ingest of a FIFO blocked a worker thread")
    assert got["r"].status_code == 400 and "not a regular file" in got["r"].json()["error"]["message"]


def test_a_nul_byte_or_a_lone_surrogate_in_a_path_or_text_is_a_400(make_client, tmp_path):
    client = make_client(allowed_roots=[tmp_path])
    r = client.post("/v1/rag/ingest", json={"paths": [str(tmp_path / "a\x00b.pdf")]})
    assert r.status_code == 400 and "NUL" in r.json()["error"]["message"]
    for body in ('{"paths": ["%s/a\\ud800.pdf"]}' % tmp_path, '{"texts": [{"text": "x\\ud800", "source": "s"}]}',
                 '{"texts": [{"text": "x", "source": "\\udfff"}]}'):
        r = client.post("/v1/rag/ingest", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)      # the JSON parser or rag.sources refuses it


def test_budgets_refuse_a_page_bomb_a_huge_document_and_a_slow_one(make_client):
    client = make_client(max_pdf_pages=50, max_doc_chunks=5)
    r = client.post("/v1/rag/ingest", files=[("files", ("bomb.pdf", page_bomb(3)))])     # 1,000 pages, 1 KB
    assert r.status_code == 400 and "1000 pages is over the limit of 50" in r.json()["error"]["message"]
    long_text = " ".join(f"Sentence {i} about nothing in particular." for i in range(400))
    r = client.post("/v1/rag/ingest", json={"texts": [{"text": long_text, "source": "long"}]})
    assert r.status_code == 400 and "over the limit of 5" in r.json()["error"]["message"]
    slow = make_client(ingest_seconds=0)
    r = slow.post("/v1/rag/ingest", json={"texts": [{"text": "short", "source": "s"}]})
    assert r.status_code == 400 and "longer than the budget" in r.json()["error"]["message"]
    assert client.get("/v1/rag/collections").json()["collections"] == []


def test_ingest_stops_when_the_client_goes_away(tmp_path, embedder, monkeypatch):
    import httpx
    import uvicorn

    from rag import index
    from worker.main import create_app
    from worker.settings import WorkerSettings

    class Held:
        """The first batch waits until the test lets it go; the rest run freely."""
        def __init__(self, inner):
            self.inner, self.calls = inner, 0
            self.started, self.release = threading.Event(), threading.Event()

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def embed(self, texts):                  # only ingest embeds here: no search is made
            self.calls += 1
            self.started.set()
            self.release.wait(60)
            return self.inner.embed(texts)

    monkeypatch.setattr(index, "EMBED_BATCH", 2, raising=False)
    embedder.embed(["load the model first", "so that no load looks like a quiet worker"])
    slow = Held(embedder)
    app = create_app(WorkerSettings(home=tmp_path / "home", runtime_url=None), embedder=slow)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        body = httpx.Request("POST", f"http://127.0.0.1:{port}/v1/rag/ingest", json={"texts": [
            {"text": f"Item {i} is stored on shelf {i}.", "source": f"item-{i}"} for i in range(60)]})
        raw = (f"POST /v1/rag/ingest HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body.read())}\r\n\r\n").encode() + body.read()
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(raw)
            assert slow.started.wait(120)
        time.sleep(2)                            # the worker looks for a disconnect every 0.2 s
        slow.release.set()
        seen = -1
        while seen != slow.calls:                # until no batch started for a while
            seen = slow.calls
            time.sleep(5)
        assert slow.calls == 1                   # of the 30 batches of two (60 on one-text batches)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/rag/collections").json()["collections"] == []
    finally:
        server.should_exit = True
        thread.join(30)
