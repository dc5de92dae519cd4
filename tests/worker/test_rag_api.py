"""RAG routes end to end: real PDFs (built here), real MiniLM embeddings, real chromadb."""
from __future__ import annotations

import os

import pytest


def upload(client, files, collection="default"):
    return client.post("/v1/rag/ingest", data={"collection": collection},
                       files=[("files", (name, data, "application/octet-stream")) for name, data in files])


def search(client, query, **kw):
    return client.post("/v1/rag/search", json={"query": query, **kw})


QUESTIONS = [("What makes sourdough rise?", 2), ("How do bees tell each other where flowers are?", 4),
             ("When does Python free reference cycles?", 3), ("Why are some eruptions explosive?", 1)]


def test_search_finds_the_right_page(client, make_pdf, topic_pages):
    r = upload(client, [("topics.pdf", make_pdf(topic_pages))])
    assert r.status_code == 200, r.text
    doc = r.json()["documents"][0]
    assert (doc["status"], doc["pages"]) == ("added", 4)
    for mode in ("hybrid", "vector", "bm25"):
        for question, page in QUESTIONS:
            hits = search(client, question, k=2, mode=mode, rerank="none").json()["results"]
            assert hits[0]["page"] == page, (mode, question, hits)
            assert hits[0]["source"] == "topics.pdf" and hits[0]["chunk_id"] and hits[0]["doc_id"] == doc["doc_id"]
    top = search(client, QUESTIONS[0][0], k=3).json()
    assert top["rerank"] == "none" and top["results"][0]["page"] == 2
    assert set(top["results"][0]["scores"]) >= {"vector", "bm25", "fused"}
    embedding = search(client, QUESTIONS[0][0], k=3, rerank="embedding").json()["results"]
    assert embedding[0]["page"] == 2 and "rerank" in embedding[0]["scores"]


def test_dedup_replace_and_delete(client, make_pdf, topic_pages):
    pdf = make_pdf(topic_pages)
    first = upload(client, [("topics.pdf", pdf)]).json()["documents"][0]
    again = upload(client, [("topics.pdf", pdf)]).json()["documents"][0]
    assert again["status"] == "unchanged" and again["chunks"] == first["chunks"]
    listed = client.get("/v1/rag/documents").json()["documents"]
    assert [(d["source"], d["pages"], d["chunks"]) for d in listed] == [("topics.pdf", 4, first["chunks"])]

    changed = make_pdf(topic_pages[:2] + ["Glaciers carve U-shaped valleys as the ice grinds the rock."])
    replaced = upload(client, [("topics.pdf", changed)]).json()["documents"][0]
    assert replaced["status"] == "replaced" and replaced["doc_id"] == first["doc_id"]
    listed = client.get("/v1/rag/documents").json()["documents"]
    assert len(listed) == 1 and listed[0]["pages"] == 3
    hits = search(client, "honey bee waggle dance", k=5, mode="bm25", rerank="none").json()["results"]
    assert all("waggle" not in h["text"] for h in hits)         # the old version's chunks are gone
    assert search(client, "glaciers valleys", k=1).json()["results"][0]["page"] == 3

    r = client.delete("/v1/rag/documents", params={"doc_id": first["doc_id"]})
    assert r.status_code == 200 and r.json()["deleted_chunks"] == replaced["chunks"]
    assert client.get("/v1/rag/documents").json()["documents"] == []
    assert client.delete("/v1/rag/documents", params={"doc_id": first["doc_id"]}).status_code == 404


def test_text_and_collections(client):
    r = client.post("/v1/rag/ingest", json={"collection": "notes", "texts": [
        {"text": "The deploy key for staging rotates every 30 days.", "source": "ops-note"}]})
    assert r.status_code == 200, r.text
    hit = search(client, "how often is the staging key rotated", collection="notes").json()["results"][0]
    assert hit["source"] == "ops-note" and hit["page"] is None
    assert client.get("/v1/rag/collections").json()["collections"] == ["notes"]
    r = search(client, "anything", collection="nope")
    assert r.status_code == 404 and "unknown collection" in r.json()["error"]["message"]
    assert client.get("/v1/rag/documents", params={"collection": "nope"}).status_code == 404
    assert client.delete("/v1/rag/collections/notes").json()["deleted_chunks"] == 1
    assert client.get("/v1/rag/collections").json()["collections"] == []


def test_paths_only_inside_allowed_roots(make_client, tmp_path, make_pdf, topic_pages):
    root, outside = tmp_path / "docs", tmp_path / "private"
    root.mkdir(), outside.mkdir()
    (root / "a.pdf").write_bytes(make_pdf(topic_pages[:1]))
    (root / "notes.md").write_text("Meeting moved to Thursday at ten.")
    (outside / "secret.txt").write_text("the vault code is 0000")
    os.symlink(outside / "secret.txt", root / "link.txt")
    client = make_client(allowed_roots=[root])

    r = client.post("/v1/rag/ingest", json={"paths": [str(root / "a.pdf"), str(root / "notes.md")]})
    assert r.status_code == 200, r.text
    assert [d["status"] for d in r.json()["documents"]] == ["added", "added"]
    for bad in (outside / "secret.txt", root / "link.txt", root / ".." / "private" / "secret.txt"):
        r = client.post("/v1/rag/ingest", json={"paths": [str(bad)]})
        assert r.status_code == 400 and "outside the allowed roots" in r.json()["error"]["message"], bad
    r = client.post("/v1/rag/ingest", json={"paths": [str(root)]})   # a folder walk meets the link
    assert r.status_code == 400 and "outside the allowed roots" in r.json()["error"]["message"]
    assert make_client().post("/v1/rag/ingest", json={"paths": [str(root / "a.pdf")]}).status_code == 400


@pytest.mark.parametrize("name,data,message", [
    ("fake.pdf", b"this is plain text, not a PDF", "not a PDF"),
    ("broken.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer\n%%EOF", "unreadable PDF"),
    ("empty.txt", b"", "empty"),
    ("blank.txt", b"   \n\t ", "empty"),
    ("binary.txt", b"\xff\xfe\x00\x81 bytes", "not UTF-8"),
    ("image.png", b"\x89PNG\r\n", "unsupported file type"),
])
def test_bad_files_are_refused_and_nothing_is_written(client, make_pdf, topic_pages, name, data, message):
    good = ("good.pdf", make_pdf(topic_pages))
    r = upload(client, [good, (name, data)])
    assert r.status_code == 400 and message in r.json()["error"]["message"], r.text
    assert client.get("/v1/rag/collections").json()["collections"] == []   # not even the good one


def test_encrypted_scanned_truncated_and_huge_pdfs(make_client, make_pdf, topic_pages):
    client = make_client(max_upload_bytes=200_000)
    r = upload(client, [("locked.pdf", make_pdf(topic_pages, password="s3cret"))])
    assert r.status_code == 400 and "encrypted" in r.json()["error"]["message"]
    r = upload(client, [("scan.pdf", make_pdf(["", ""]))])
    assert r.status_code == 400 and "no extractable text" in r.json()["error"]["message"]
    r = upload(client, [("cut.pdf", make_pdf(topic_pages)[:300])])
    assert r.status_code == 400
    r = upload(client, [("huge.pdf", b"%PDF-1.4\n" + b"0" * 300_000)])
    assert r.status_code == 413
    r = client.post("/v1/rag/ingest", json={"texts": [{"text": "x" * 100, "source": "s"}], "collection": "a/b"})
    assert r.status_code == 400 and "collection name" in r.json()["error"]["message"]
    assert client.get("/v1/rag/collections").json()["collections"] == []
