"""A real manual from a Debian documentation package (r-doc-pdf), ingested by path.

Skipped when the package is not installed (CI installs nothing by apt); the generated-PDF
tests in test_rag_api.py cover the same routes everywhere.
"""
from __future__ import annotations

from pathlib import Path

import pytest

MANUAL = Path("/usr/share/R/doc/manual/R-data.pdf")
QUESTIONS = [
    ("Why is R not well suited to extremely large data sets?", 21),
    ("What is the first piece of advice for reading an Excel spreadsheet?", 36),
    ("Which function opens an ODBC connection to a database?", 26),
    ("Can sockets be used as connections for reading and writing?", 31),
]


@pytest.mark.skipif(not MANUAL.is_file(), reason="Debian package r-doc-pdf is not installed")
def test_real_manual_pages_are_found(make_client):
    client = make_client(allowed_roots=[MANUAL.parent])
    r = client.post("/v1/rag/ingest", json={"paths": [str(MANUAL)], "collection": "manuals"})
    assert r.status_code == 200, r.text
    doc = r.json()["documents"][0]
    assert doc["pages"] == 41 and doc["chunks"] > 41
    for question, page in QUESTIONS:
        hits = client.post("/v1/rag/search", json={"query": question, "collection": "manuals",
                                                   "k": 5}).json()["results"]
        assert page in [h["page"] for h in hits], (question, [(h["page"], h["text"][:60]) for h in hits])
        assert all(h["source"] == str(MANUAL) for h in hits)
