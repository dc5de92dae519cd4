"""The server's one configuration object, built by `samevm serve` (or a test) and passed down."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from runtime.config import EngineConfig


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(slots=True)
class ServerConfig:
    engine: EngineConfig               # the model to serve at start (engine.model: a GGUF path)
    model_id: str                      # the name clients pass as `model`
    home: Path                         # data directory; revisions live under home/runtime/
    host: str = "127.0.0.1"
    port: int = 8081
    api_key: str | None = None
    resume: bool = True                # serve the registry's active revision if it was reloaded
    allowed_hosts: tuple[str, ...] = ()   # Host names besides loopback and `host` ("*": any)
    max_body_bytes: int = 4 << 20      # far above any prompt that fits a context, far below harm
    reload_roots: tuple[Path, ...] = ()   # folders /admin/reload may load from, besides reload_dirs' own

    def __post_init__(self):
        self.home = Path(self.home)
        if not self.model_id:
            raise ValueError("model_id must not be empty")
        if not is_loopback(self.host) and not self.api_key:
            raise ValueError(f"binding to {self.host} (off loopback) requires an API key (--api-key)")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")
        if not 0 <= self.port <= 65535:
            raise ValueError("port must be in [0, 65535]")

    @property
    def revisions_dir(self) -> Path:
        return self.home / "runtime" / "revisions"

    @property
    def digest_cache(self) -> Path:
        return self.home / "cache" / "digests"

    @property
    def reload_dirs(self) -> tuple[Path, ...]:
        """Where /admin/reload may read a model: the served model's (and adapter's) folder, the data
        directory's installed models and trained revisions, and the configured roots."""
        served = [Path(self.engine.model).parent] + ([Path(self.engine.lora).parent] if self.engine.lora else [])
        return (*served, self.home / "models", self.home / "training" / "revisions", *map(Path, self.reload_roots))
