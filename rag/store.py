"""Chunk storage in chromadb: persistent under a folder, or a Chroma server by URL.

Collections are created with our embedding function (rag.embedding.ChromaEmbedding) in
cosine space. Each chunk's metadata carries doc_id, source, content_hash, kind, chunk
index and (for PDFs) page; documents are the groups of chunks sharing a doc_id.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError

from rag.embedding import ChromaEmbedding
from rag.errors import InputError, NotFoundError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,62}[A-Za-z0-9]$")


def check_collection_name(name: str) -> str:
    if not _NAME.match(name) or ".." in name:
        raise InputError(f"collection name {name!r}: use 3-64 letters, digits, '.', '_' or '-', "
                         "starting and ending with a letter or digit")
    return name


class ChromaStore:
    def __init__(self, embedding: ChromaEmbedding, path: Path | None = None, url: str | None = None):
        assert (path is None) != (url is None), "give a folder or a server URL"
        self.embedding = embedding
        settings = ChromaSettings(anonymized_telemetry=False)
        if url:
            u = urlparse(url)
            self.client = chromadb.HttpClient(host=u.hostname or "localhost", port=u.port or 8000,
                                              ssl=u.scheme == "https", settings=settings)
        else:
            Path(path).mkdir(parents=True, exist_ok=True)
            self.client = chromadb.PersistentClient(path=str(path), settings=settings)
        self._handles: dict = {}     # name -> chromadb Collection, for state()

    def collections(self) -> list[str]:
        return sorted(c.name for c in self.client.list_collections())

    def collection(self, name: str, create: bool = False):
        check_collection_name(name)
        if create:
            return self.client.get_or_create_collection(
                name, embedding_function=self.embedding, configuration={"hnsw": {"space": "cosine"}})
        if name not in self.collections():
            raise NotFoundError(f"unknown collection {name!r}; known: {', '.join(self.collections()) or 'none'}")
        return self.client.get_collection(name, embedding_function=self.embedding)

    def drop(self, name: str) -> None:
        self.collection(name)
        self._handles.pop(name, None)
        self.client.delete_collection(name)

    def state(self, name: str) -> tuple[str, int]:
        """(collection id, chunk count), NotFoundError when there is no such collection: what
        search checks on every query to notice other clients' writes (an add or delete
        changes the count, a drop and re-create the id). A kept handle makes that one round
        trip instead of three (list, get, count); a handle whose collection was dropped
        elsewhere raises a chromadb error, and the lookup anew raises the one that fits."""
        handle = self._handles.get(name)
        if handle is not None:
            try:
                return str(handle.id), handle.count()
            except ChromaError:
                self._handles.pop(name, None)
        handle = self._handles[name] = self.collection(name)
        return str(handle.id), handle.count()

    def add(self, name: str, ids: list[str], texts: list[str], metadatas: list[dict],
            embeddings: np.ndarray) -> None:
        """All or nothing: a failed batch removes the batches already added."""
        col = self.collection(name, create=True)
        step = max(1, self.client.get_max_batch_size())
        done: list[str] = []
        try:
            for i in range(0, len(ids), step):
                col.add(ids=ids[i:i + step], documents=texts[i:i + step],
                        metadatas=metadatas[i:i + step], embeddings=embeddings[i:i + step])
                done.extend(ids[i:i + step])
        except BaseException:
            if done:
                col.delete(ids=done)
            raise

    def delete(self, name: str, ids: list[str]) -> None:
        if ids:
            self.collection(name).delete(ids=ids)

    def metadatas(self, name: str, where: dict | None = None) -> tuple[list[str], list[dict]]:
        got = self.collection(name).get(where=where, include=["metadatas"])
        return got["ids"], got["metadatas"]

    def texts(self, name: str) -> tuple[list[str], list[str], list[dict], np.ndarray]:
        """Every chunk: ids, texts, metadata and stored vectors [n, dim]."""
        got = self.collection(name).get(include=["documents", "metadatas", "embeddings"])
        return got["ids"], got["documents"], got["metadatas"], np.asarray(got["embeddings"], np.float32)

    def query(self, name: str, vector: np.ndarray, k: int, where: dict | None = None):
        """[(id, text, metadata, cosine similarity)], best first."""
        col = self.collection(name)
        n = min(k, col.count())
        if n == 0:
            return []
        got = col.query(query_embeddings=[vector], n_results=n, where=where,
                        include=["documents", "metadatas", "distances"])
        return [(i, t, m, 1.0 - d) for i, t, m, d in
                zip(got["ids"][0], got["documents"][0], got["metadatas"][0], got["distances"][0])]
