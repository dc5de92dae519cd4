"""The worker against an adversarial client: text that is not Unicode, chunked bodies past the
limit, results and echoes without bounds, names that sneak a newline, cross-site requests."""
from __future__ import annotations

import json

import pytest

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("path,body", [
    ("/v1/embeddings", {"input": "a\ud800b"}),
    ("/v1/embeddings", {"input": ["fine", "\udfff"]}),
    ("/v1/rerank", {"query": "q\ud800", "documents": ["a"]}),
    ("/v1/rerank", {"query": "q", "documents": [{"text": "\ud800"}]}),
    ("/v1/rag/search", {"query": "\ud800"}),
    ("/v1/rag/ingest", {"texts": [{"text": "\ud800", "source": "s"}]}),
    ("/v1/sql/exec", {"db": "t", "sql": "SELECT :x", "params": {"x": "\ud800"}}),
])
def test_text_that_is_not_unicode_is_a_400(client, path, body):
    r = client.post(path, content=json.dumps(body), headers=JSON)
    assert r.status_code == 400 and "Unicode" in r.json()["error"]["message"], r.text


def test_a_chunked_body_over_the_limit_is_a_413(make_client):
    client = make_client(max_upload_bytes=1000)
    limit = 1000 + (1 << 20)
    chunks = (b'{"texts": [{"source": "s", "text": "' + b"x" * (limit + 10) + b'"}]}',)
    r = client.post("/v1/rag/ingest", content=iter(chunks), headers=JSON)       # no Content-Length
    assert r.status_code == 413, r.text
    assert "transfer-encoding" in r.request.headers and "content-length" not in r.request.headers


def test_a_huge_value_is_refused_and_many_rows_stop_at_the_byte_limit(make_client):
    client = make_client(sql_max_result_bytes=1 << 20)
    client.post("/v1/sql/exec", json={"db": "big", "sql": "CREATE TABLE t (x)"})
    r = client.post("/v1/sql/query", json={"db": "big", "sql": "SELECT zeroblob(500000000)"})
    assert r.status_code == 400 and "too big" in r.json()["error"]["message"]
    r = client.post("/v1/sql/query", json={"db": "big", "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                                           "SELECT i + 1 FROM n WHERE i < 500) SELECT i, randomblob(100000) FROM n"})
    body = r.json()
    assert r.status_code == 200 and body["truncated"] and "bytes" in body["truncated_reason"]
    assert 0 < len(body["rows"]) < 10 and len(r.content) < (1 << 20) + 4096
    r = client.post("/v1/sql/query", json={"db": "big", "sql": "SELECT 1"})
    assert r.json()["truncated"] is False and r.json()["truncated_reason"] is None


@pytest.mark.parametrize("name", ["t\n", "t\r\n", "a\x00"])
def test_a_database_name_with_a_line_break_is_refused(client, tmp_path, name):
    r = client.post("/v1/sql/exec", json={"db": name, "sql": "CREATE TABLE x (a)"})
    assert r.status_code == 400
    assert not list((tmp_path / "home").rglob("*.db"))


def test_errors_echo_a_bounded_part_of_the_input(client):
    name = "n" * (5 << 20)
    r = client.post("/v1/rag/search", json={"query": "q", "collection": name})
    assert r.status_code in (400, 404) and len(r.content) < 10_000, len(r.content)
    assert "characters left out" in r.json()["error"]["message"]


def test_405_carries_allow(client):
    r = client.get("/v1/sql/query")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_cross_site_requests_are_refused(client):
    text = {"texts": [{"text": "planted", "source": "evil"}]}
    r = client.post("/v1/rag/ingest", content=json.dumps(text),
                    headers={"content-type": "text/plain", "origin": "https://evil.example"})
    assert r.status_code == 403
    r = client.post("/v1/rag/ingest", json=text, headers={"host": "rebound.evil.example:8082"})
    assert r.status_code == 421
    assert client.get("/v1/rag/collections").json()["collections"] == []
    assert client.get("/v1/sql/databases%00").status_code == 400


def test_configured_hosts_are_answered(make_client):
    client = make_client(allowed_hosts=["box.lan"])
    assert client.get("/health", headers={"host": "box.lan:8082"}).status_code == 200
    assert client.get("/health", headers={"host": "other.lan"}).status_code == 421


def test_the_schema_documents_the_400_that_invalid_requests_get(client):
    schema = client.get("/openapi.json").json()
    r = client.post("/v1/sql/query", json={"db": 5})
    assert r.status_code == 400
    assert "400" in schema["paths"]["/v1/sql/query"]["post"]["responses"]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            assert "422" not in op["responses"], (method, path)
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_an_embedding_text_is_bounded_before_the_tokenizer_reads_it(client):
    r = client.post("/v1/embeddings", json={"input": ["ok", "word " * 40_000]})
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("input")


def test_a_chunked_upload_over_the_limit_is_a_413_where_fastapi_parses_the_form(make_client):
    client = make_client(max_upload_bytes=1000)
    boundary = "b0undary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            "Content-Type: audio/wav\r\n\r\n").encode()
    parts = iter([head, b"\0" * (2 << 20), f"\r\n--{boundary}--\r\n".encode()])
    r = client.post("/v1/audio/transcriptions", content=parts,
                    headers={"content-type": f"multipart/form-data; boundary={boundary}"})
    assert r.status_code == 413, r.text
