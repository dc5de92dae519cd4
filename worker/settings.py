"""The worker's one Settings object: SAMEVM_HOME for the data directory and SAMEVM_WORKER_*
for the rest, or built by `samevm worker` from the CLI. Every path the worker writes is
under `home`."""
from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMEVM_WORKER_", extra="ignore", populate_by_name=True)

    home: Path = Field(Path(".samevm"), validation_alias=AliasChoices("SAMEVM_HOME", "SAMEVM_WORKER_HOME"))
    host: str = "127.0.0.1"
    port: int = 8082
    api_key: str | None = None             # required when host is not loopback
    allowed_hosts: list[str] = []           # Host names besides loopback and `host` ("*": any)

    # SQL: named SQLite files under home/sql, plus any SQLAlchemy URLs by name.
    databases: dict[str, str] = {}
    sql_row_limit: int = 1000
    sql_timeout_s: float = 10.0
    sql_max_result_bytes: int = 8 << 20    # a query's rows, as JSON, stop here (truncated)

    # RAG
    allowed_roots: list[Path] = []          # local paths that ingest may read
    chroma_url: str | None = None           # a Chroma server instead of home/chroma
    max_upload_bytes: int = 50 << 20
    ingest_seconds: float = 300.0           # per document read, and for embedding one request's chunks
    max_pdf_pages: int = 5000               # per document
    max_doc_chunks: int = 50_000            # per document
    chunk_tokens: int = 128                 # measured: 128/32 beat 200/40, 192/48, 128/64 and 96/24 on the eval manuals
    chunk_overlap: int = 32
    embedding_path: Path | None = None      # a sentence-transformers folder; default all-MiniLM-L6-v2
    cross_encoder_path: Path | None = None
    default_rerank: str = "embedding"       # /v1/rerank's backend
    search_rerank: str = "none"             # RAG search's: none (measured best), prf, or a backend
    runtime_url: str | None = "http://127.0.0.1:8081"   # for the llm reranker
    runtime_model: str | None = None        # None: the first model the runtime lists
    runtime_api_key: str | None = None

    # Speech
    tts_engine: str = "auto"                # auto (piper, else espeak-ng) | piper | espeak
    tts_max_chars: int = 4096
    max_audio_seconds: float = 600.0

    @property
    def sql_dir(self) -> Path:
        return self.home / "sql"

    @property
    def chroma_dir(self) -> Path:
        return self.home / "chroma"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def check_exposure(self) -> None:
        """Off loopback the API must be behind a key."""
        if self.host not in LOOPBACK and not self.api_key:
            raise ValueError(f"binding the worker to {self.host} needs an API key "
                             "(--api-key or SAMEVM_API_KEY); loopback needs none")

    @classmethod
    def from_stack(cls, stack, **overrides) -> "WorkerSettings":
        """Worker settings for the stack's settings (samevm.settings.Settings): its data
        directory, worker port, API key and runtime; SAMEVM_WORKER_* fill the rest."""
        values = {"home": stack.home, "host": stack.host, "port": stack.worker_port, "api_key": stack.api_key,
                  "allowed_hosts": stack.allowed_hosts,
                  "runtime_url": stack.runtime_url, "runtime_model": stack.model, "runtime_api_key": stack.api_key}
        return cls(**{**values, **{k: v for k, v in overrides.items() if v is not None}})
