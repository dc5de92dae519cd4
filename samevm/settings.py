"""One settings object for the whole stack, filled from SAMEVM_* environment variables
and the CLI. Everything a run writes lives under `home` (SAMEVM_HOME, default ./.samevm)."""
from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from runtime.catalog import DEFAULT_MODEL


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMEVM_", extra="ignore")

    home: Path = Path(".samevm")
    model: str = DEFAULT_MODEL           # a known model name or a GGUF path
    backend: str = "auto"
    cpu_dtype: str = "int8"              # CPU weights when serving: int8 (1.7x transformers) or float32 (reference)
    host: str = "127.0.0.1"
    runtime_port: int = 8081
    worker_port: int = 8082
    mcp_port: int = 8083                 # `samevm mcp --http` and `samevm up --mcp`
    api_key: str | None = None
    allowed_hosts: list[str] = []        # Host names the services answer to besides loopback and `host`

    @property
    def tokenizer_cache(self) -> Path:
        return self.home / "cache" / "tokenizers"

    @property
    def runtime_url(self) -> str:
        return f"http://{self.host}:{self.runtime_port}"

    @property
    def worker_url(self) -> str:
        return f"http://{self.host}:{self.worker_port}"

    @property
    def mcp_url(self) -> str:
        return f"http://{self.host}:{self.mcp_port}/mcp"
