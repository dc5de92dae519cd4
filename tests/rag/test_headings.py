"""A chunk's stored vector leans toward its section heading's: of two chunks with the same
words, the one under the heading the question names ranks first in vector search. With
`context_prefix` the vector is instead the text's under its title and heading path."""
from __future__ import annotations

import numpy as np

from rag.types import Document, Page

BODY = "Set the path of the program and the port it uses. The default is the one the system installed."


def _doc(name: str, heading: str, title: str = "") -> Document:
    return Document(name, "pdf", (Page(1, BODY, ((0, heading),)),), name, title)


def test_the_chunk_under_the_asked_heading_ranks_first(index):
    index.ingest_many([_doc("scan.pdf", "Scanning the answer sheets"),
                       _doc("mail.pdf", "Sending e-mail through sendmail")], "headings")
    hits = index.search("how do I send e-mail with sendmail", "headings", k=2, mode="vector")
    assert [h.source for h in hits] == ["mail.pdf", "scan.pdf"]
    assert hits[0].scores["vector"] > hits[1].scores["vector"]


def test_the_stored_vector_is_text_plus_a_tenth_of_the_heading(index):
    index.ingest(_doc("one.pdf", "Network access control"), "vectors")
    corpus = index.corpus("vectors")
    text, heading = index.embedder.embed([BODY, "Network access control"])
    want = text + 0.1 * heading
    np.testing.assert_allclose(corpus.vectors[0], want / np.linalg.norm(want), atol=1e-5)


def test_with_context_prefix_the_vector_is_the_text_under_title_and_headings(index):
    index.context_prefix = True
    try:
        index.ingest_many([_doc("amc.pdf", "Mailing > Transport", "Auto Multiple Choice"),
                           _doc("docs/user-manual.pdf", "Network access control")], "context")
    finally:
        index.context_prefix = False
    corpus = index.corpus("context")
    want = index.embedder.embed(["Auto Multiple Choice > Mailing > Transport\n" + BODY,
                                 "user-manual > Network access control\n" + BODY])   # no title: the file's name
    got = {m["source"]: v for m, v in zip(corpus.metas, corpus.vectors)}
    np.testing.assert_allclose(got["amc.pdf"], want[0], atol=1e-5)
    np.testing.assert_allclose(got["docs/user-manual.pdf"], want[1], atol=1e-5)
    hits = index.search("sendmail transport", "context", k=2)
    assert {h.text for h in hits} == {BODY}      # hits quote the chunk, not what was embedded
