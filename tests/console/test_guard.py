"""The console's guard and proxy without a browser: Host and Origin checks, the API key
when one is set, and what the proxy forwards upstream (the server's key, never the
browser's cookies or Origin)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient

from console.app import create_app
from console.config import ConsoleConfig


@pytest.fixture
def upstream():
    """A loopback server that answers every request with what it received: (url, seen)."""
    seen: list[dict] = []

    class Echo(BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            record = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body": self.rfile.read(length).decode()}
            seen.append(record)
            data = json.dumps(record).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()


def client(upstream_url: str, **config) -> TestClient:
    app = create_app(ConsoleConfig(runtime_url=upstream_url, worker_url=upstream_url, **config))
    return TestClient(app, base_url="http://127.0.0.1:8084")


def test_host_and_origin_checks_refuse_other_sites(upstream):
    url, seen = upstream
    c = client(url)
    assert c.get("/").status_code == 200 and "samevm console" in c.get("/").text
    assert c.get("/", headers={"Host": "localhost:8084"}).status_code == 200
    # DNS rebinding: another site's name pointed at 127.0.0.1 arrives with its own Host
    assert c.get("/runtime/v1/models", headers={"Host": "attacker.example:8084"}).status_code == 403
    # a page elsewhere posting to the console (a form or text/plain: no preflight) is refused
    for headers in ({"Origin": "http://attacker.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": "http://127.0.0.1:9999"}):
        r = c.post("/worker/v1/sql/exec", content="x", headers={"Content-Type": "text/plain", **headers})
        assert r.status_code == 403, headers
    assert seen == []                                      # nothing reached the stack
    same = c.post("/worker/v1/sql/exec", json={"db": "d", "sql": "SELECT 1"}, headers={"Origin": "http://127.0.0.1:8084"})
    assert same.status_code == 200 and seen[-1]["path"] == "/v1/sql/exec"


def test_the_proxy_sends_the_servers_key_not_the_browsers_headers(upstream):
    url, seen = upstream
    c = client(url, api_key="s3cret")
    r = c.post("/runtime/v1/chat/completions?x=1", json={"model": "m"},
               headers={"Authorization": "Bearer s3cret", "Cookie": "session=abc", "Origin": "http://127.0.0.1:8084"})
    assert r.status_code == 200
    got = seen[-1]
    assert got["path"] == "/v1/chat/completions?x=1" and json.loads(got["body"]) == {"model": "m"}
    assert got["headers"]["authorization"] == "Bearer s3cret"
    assert "cookie" not in got["headers"] and "origin" not in got["headers"]


def test_with_a_key_everything_but_the_page_wants_it(upstream):
    url, seen = upstream
    c = client(url, api_key="s3cret", host="0.0.0.0", allowed_hosts=("console.lan",))
    assert c.get("/", headers={"Host": "console.lan"}).status_code == 200          # the page asks for the key
    assert c.get("/static/js/main.js").status_code == 200
    for path in ("/api/tools", "/runtime/v1/models", "/worker/v1/sql/databases"):
        assert c.get(path).status_code == 401
        assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/api/tools", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert seen == []


def test_off_loopback_needs_a_key():
    with pytest.raises(ValueError, match="needs an API key"):
        ConsoleConfig(runtime_url="http://127.0.0.1:1", worker_url="http://127.0.0.1:2", host="0.0.0.0")


def test_an_unreachable_service_is_a_502_that_names_it():
    c = client("http://127.0.0.1:9")
    r = c.get("/runtime/v1/models")
    assert r.status_code == 502 and "runtime" in r.json()["error"]["message"]


def test_suite_requests_are_checked_before_running(upstream):
    url, _ = upstream
    c = client(url)
    assert c.post("/api/suites/run", json={"name": "../../etc/passwd"}).status_code == 422
    assert c.post("/api/suites/run", json={"yaml": "turns: []"}).status_code == 400
    assert c.post("/api/suites/run", json={}).status_code == 422
    names = [s["file"] for s in c.get("/api/suites").json()["suites"]]
    assert "canonical" in names
