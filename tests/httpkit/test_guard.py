"""httpkit's Guard on a real uvicorn, with raw sockets where a client library would hide
what is tested (chunked bodies, keep-alive, the Host header)."""
from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from httpkit.guard import Guard, allowed_hosts, host_name
from tests.stack_fixtures import free_port
from tests.training.worker_app import serving

LIMIT = 64 << 10


def respond(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "code": code}}, status)


async def echo(request: Request):
    body = await request.body()
    return JSONResponse({"bytes": len(body)})


async def boom(request: Request):
    raise RuntimeError("a bug below the routes")


@pytest.fixture(scope="module")
def url():
    # as the services add it: inside Starlette's ServerErrorMiddleware
    guarded = Starlette(routes=[Route("/echo", echo, methods=["POST"]), Route("/boom", boom)],
                        middleware=[Middleware(Guard, max_body_bytes=LIMIT, hosts=allowed_hosts("127.0.0.1"),
                                               respond=respond)])
    with serving(guarded, free_port()) as url:
        yield urlsplit(url).hostname, urlsplit(url).port


def raw(addr, request: bytes, then: bytes = b"") -> bytes:
    """Send `request` (and `then`), stop sending, and read what the server answers."""
    with socket.create_connection(addr, timeout=20) as s:
        s.sendall(request + then)
        s.shutdown(socket.SHUT_WR) if not then else None
        out = b""
        while b"\r\n\r\n" not in out or len(out) < out.find(b"\r\n\r\n") + 4 + _length(out):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_a_chunked_body_over_the_limit_is_refused_as_it_streams(url):
    head = (b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (16 << 10, b"x" * (16 << 10))
    # the body never ends: only counting as it arrives can answer
    answer = raw(url, head, chunk * (LIMIT // (16 << 10) + 1))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    ok = raw(url, head, chunk + b"0\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200") and b'"bytes":16384' in ok


def test_a_declared_length_over_the_limit_is_refused_before_any_byte(url):
    answer = raw(url, b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50000000\r\n\r\n", b"{")
    assert answer.startswith(b"HTTP/1.1 413")


@pytest.mark.parametrize("host,origin,status", [
    ("127.0.0.1:8081", None, 200), ("localhost", "http://localhost:3000", 200), ("[::1]:80", None, 200),
    ("attacker.example", None, 421), ("127.0.0.1.nip.io:8081", None, 421), ("", None, 421),
    ("127.0.0.1", "http://attacker.example", 403), ("127.0.0.1", "null", 403),
])
def test_host_and_origin_must_name_this_machine(url, host, origin, status):
    headers = f"Host: {host}\r\n" + (f"Origin: {origin}\r\n" if origin else "")
    body = b'{"a": 1}'
    answer = raw(url, f"POST /echo HTTP/1.1\r\n{headers}Content-Type: text/plain\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer[:300]


@pytest.mark.parametrize("body,needle", [
    ('{"text": "\\ud800"}', "Unicode"), ('["a", {"k\\udfff": 1}]', "Unicode"),
    ("[" * 5000 + "]" * 5000, "nested"), ("[" * 300 + "]" * 300, "nested"),
])
def test_json_a_route_cannot_take_is_refused_at_the_door(url, body, needle):
    c = http.client.HTTPConnection(*url, timeout=20)
    c.request("POST", "/echo", body=body.encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 400 and needle in json.loads(r.read())["error"]["message"]


def test_good_json_passes_including_surrogate_pairs(url):
    c = http.client.HTTPConnection(*url, timeout=20)
    body = '{"text": "\\ud83d\\ude00 \\\\ud800 is text", "deep": ' + "[" * 20 + "]" * 20 + "}"
    c.request("POST", "/echo", body=body.encode(), headers={"Content-Type": "application/json"})
    assert c.getresponse().status == 200


def test_errors_keep_the_connection_open(url):
    c = http.client.HTTPConnection(*url, timeout=20)
    for path, method, body, status in [("/boom", "GET", None, 500), ("/echo", "POST", b'"\\ud800"', 400),
                                       ("/echo", "GET", None, 405), ("/nope", "GET", None, 404),
                                       ("/echo", "POST", b"{}", 200)]:
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        first = c.sock
        r = c.getresponse()
        r.read()
        assert r.status == status and r.getheader("connection") != "close"
        assert c.sock is first, f"{path} closed the connection"


def test_a_nul_in_the_path_is_a_400(url):
    answer = raw(url, b"GET /echo%00x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")


def test_allowed_hosts_rules():
    assert allowed_hosts("0.0.0.0") == {"*"}
    assert "box.lan" in allowed_hosts("127.0.0.1", ["Box.lan"])
    assert host_name("[::1]:8081") == "::1" and host_name("a:b") is None and host_name("[zz]") is None
