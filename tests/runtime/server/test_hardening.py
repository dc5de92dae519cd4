"""The runtime against an adversarial client, over a real `samevm serve`: bounds, text that is
not Unicode, bodies too large to tokenize, cross-site requests, and keep-alive after errors."""
from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest

QUESTION = [{"role": "user", "content": "hi"}]


def address(server) -> tuple[str, int]:
    u = urlsplit(server.url)
    return u.hostname, u.port


def raw_exchange(server, head: bytes, body: bytes) -> bytes:
    """Send a head and part of a body, stop sending, return the status line and headers."""
    with socket.create_connection(address(server), timeout=60) as s:
        s.sendall(head)
        try:
            s.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass                      # refused before the body was read: what comes back still counts
        out = b""
        while b"\r\n\r\n" not in out:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


@pytest.mark.parametrize("field,value", [("top_k", 2**31), ("top_k", 2**64), ("max_tokens", 2**63),
                                         ("seed", 2**64), ("top_logprobs", 2**40)])
def test_numbers_past_their_bounds_are_400_naming_the_field(server, field, value):
    body = {"model": server.model_id, "messages": QUESTION, "max_tokens": 2, "logprobs": True, field: value}
    for stream in (False, True):
        r = server.post("/v1/chat/completions", json={**body, "stream": stream})
        assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text


@pytest.mark.parametrize("extra", [
    {"structured_outputs": {"regex": "a\ud800"}}, {"structured_outputs": {"grammar": "start: \"\ud800\""}},
    {"stop": ["\udc00"]}, {"tools": [{"type": "function", "function": {"name": "f", "description": "\ud800"}}]},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"enum": ["\ud800"]}}}},
])
def test_text_that_is_not_unicode_is_a_400_everywhere(server, extra):
    content = json.dumps({"model": server.model_id, "messages": QUESTION, "max_tokens": 2, **extra})
    r = server.post("/v1/chat/completions", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "Unicode" in r.json()["error"]["message"], r.text


def test_a_50_mb_prompt_is_refused_before_it_is_read(server):
    body = json.dumps({"model": server.model_id, "prompt": "word " * (10 << 20)}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    assert raw_exchange(server, head, body[:1 << 20]).startswith(b"HTTP/1.1 413")
    chunked = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
    part = b"%x\r\n%s\r\n" % (1 << 20, body[:1 << 20])
    assert raw_exchange(server, chunked, part * 6).startswith(b"HTTP/1.1 413")     # 6 MiB, never ended
    assert server.get("/health").status_code == 200


@pytest.mark.parametrize("path", ["/admin/rollback", "/admin/reload", "/v1/chat/completions"])
def test_cross_site_requests_cannot_reach_the_api(server, path):
    body = json.dumps({"model": server.model_id, "messages": QUESTION, "path": "/x"})
    rebound = server.post(path, content=body, headers={"host": f"evil.example:{address(server)[1]}"})
    assert rebound.status_code == 421
    csrf = server.post(path, content=body, headers={"origin": "http://evil.example", "content-type": "text/plain"})
    assert csrf.status_code == 403 and csrf.json()["error"]["code"] == "invalid_origin"
    same = server.post("/tokenize", json={"prompt": "hi"}, headers={"origin": server.url})
    assert same.status_code == 200


def test_405_says_what_is_allowed(server):
    r = server.get("/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_errors_keep_the_connection_alive(server):
    c = http.client.HTTPConnection(*address(server), timeout=60)
    regex = json.dumps({"model": server.model_id, "messages": QUESTION,
                        "structured_outputs": {"regex": "\ud800"}}).encode()
    deep = b'{"model": "x", "messages": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    for path, body, status in [("/tokenize", b'{"model": 5}', 400), ("/v1/chat/completions", regex, 400),
                               ("/v1/chat/completions", deep, 400), ("/tokenize", b'{"prompt": "hi"}', 200)]:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        sock = c.sock
        r = c.getresponse()
        r.read()
        assert r.status == status
        assert c.sock is sock and r.getheader("connection") != "close"


def test_the_schema_documents_the_400_that_invalid_requests_get(server):
    schema = server.get("/openapi.json").json()
    responses = schema["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert "400" in responses and "422" not in responses
    assert server.post("/v1/chat/completions", json={"model": 5}).status_code == 400
