"""The console's one configuration object, built at the edge (`samevm console`, a test) and
passed down. Off loopback the console wants the API key, like the runtime and the worker."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runtime.server.config import is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    runtime_url: str                   # the runtime's base URL (the OpenAI API is under /v1)
    worker_url: str
    home: Path = Path(".samevm")      # the stack's data directory (tools write audio under it)
    host: str = "127.0.0.1"
    port: int = 8084
    api_key: str | None = None        # sent upstream; and, when set, wanted from the browser too
    allowed_hosts: tuple[str, ...] = ()   # Host names besides loopback and the bound address

    def __post_init__(self):
        if not is_loopback(self.host) and not self.api_key:
            raise ValueError(f"binding the console to {self.host} (off loopback) needs an API key "
                             "(--api-key or SAMEVM_API_KEY); loopback needs none")
        if not 0 <= self.port <= 65535:
            raise ValueError("port must be in [0, 65535]")

    @classmethod
    def from_settings(cls, settings, **overrides) -> "ConsoleConfig":
        """The console of a stack's settings (samevm.settings.Settings)."""
        values = {"runtime_url": settings.runtime_url, "worker_url": settings.worker_url,
                  "home": Path(settings.home), "host": settings.host, "port": settings.console_port,
                  "api_key": settings.api_key}
        return cls(**{**values, **{k: v for k, v in overrides.items() if v is not None}})

    @property
    def host_names(self) -> set[str]:
        """Names the Host header may carry (without the port)."""
        return {*LOOPBACK_NAMES, self.host, *self.allowed_hosts}
