"""One settings object for the whole stack, filled from SAMEVM_* environment variables
and the CLI. Everything a run writes lives under `home` (SAMEVM_HOME, default ./.samevm)."""
from __future__ import annotations

from pathlib import Path

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runtime.catalog import DEFAULT_MODEL
from runtime.config import CudaOptions


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAMEVM_", extra="ignore")

    home: Path = Path(".samevm")
    model: str = ""                      # a known model name or a GGUF path; "": the default for the backend
    lora: str = "auto"                   # a PEFT LoRA adapter folder served on the model; "auto": the adapter
                                         # shipped with a known model (runtime/adapters/); "none": the base
    backend: str = "auto"
    cpu_dtype: str = "int8"              # CPU weights when serving: int8 (1.7x transformers) or float32 (reference)
    host: str = "127.0.0.1"
    runtime_port: int = 8081
    worker_port: int = 8082
    mcp_port: int = 8083                 # `samevm mcp --http` and `samevm up --mcp`
    console_port: int = 8084             # the web console (`samevm console`, started by `samevm up`)
    api_key: str | None = None
    allowed_hosts: list[str] = []        # Host names the services answer to besides loopback and `host`
    cuda: str = ""                       # CUDA backend options, NAME=VALUE,... (runtime/config.py CudaOptions)

    def cuda_options(self, extra: list[str] | None = None) -> CudaOptions:
        """The settings' CUDA options, then `extra` (NAME=VALUE each, the CLI's) over them."""
        return CudaOptions.parse([kv for kv in self.cuda.split(",") if kv.strip()] + list(extra or []))

    @model_validator(mode="after")
    def _default_model(self) -> "Settings":
        if not self.model:
            self.model = DEFAULT_MODEL
        return self

    @property
    def tokenizer_cache(self) -> Path:
        return self.home / "cache" / "tokenizers"

    @property
    def kernel_cache(self) -> Path:
        return self.home / "cache" / "kernels"

    @property
    def merge_cache(self) -> Path:
        return self.home / "cache" / "merged"

    @property
    def digest_cache(self) -> Path:
        return self.home / "cache" / "digests"       # as runtime.server.config.ServerConfig's

    @property
    def runtime_url(self) -> str:
        return f"http://{self.host}:{self.runtime_port}"

    @property
    def worker_url(self) -> str:
        return f"http://{self.host}:{self.worker_port}"

    @property
    def console_url(self) -> str:
        return f"http://{self.host}:{self.console_port}"

    @property
    def mcp_url(self) -> str:
        return f"http://{self.host}:{self.mcp_port}/mcp"
