"""What tool handlers get injected: HTTP access to the worker and the runtime on loopback.

Transport and HTTP failures become ToolError with `retryable` set the way an agent should
act on it: connection problems, timeouts, 429 and 5xx can be retried; other 4xx cannot.

A `namespace` ("s3") keeps what several agents store on one worker apart: the sql, memory
and rag tools store a database or collection the model calls `budget` as `s3__budget`, and
the prefix is taken out of what comes back, so the model sees only its own names.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from httpkit.client import client


NAMESPACE_SEP = "__"


class ToolError(Exception):
    """A failure to report to the model as an observation."""

    def __init__(self, message: str, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status          # the HTTP status, when a service refused the request


@dataclass
class ToolContext:
    worker_url: str = "http://127.0.0.1:8082"
    runtime_url: str = "http://127.0.0.1:8081"
    api_key: str | None = None
    timeout: float = 120.0
    home: Path = Path(".samevm")        # the stack's data directory: audio files live under it
    namespace: str = ""                 # "" shares the worker's names; "s3" stores budget as s3__budget
    _client: httpx.Client | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings, **overrides) -> "ToolContext":
        """The context for a stack's settings (samevm.settings.Settings or alike)."""
        values = {"worker_url": settings.worker_url, "runtime_url": settings.runtime_url,
                  "api_key": settings.api_key, "home": Path(settings.home)}
        return cls(**{**values, **overrides})

    def within(self, namespace: str) -> "ToolContext":
        """A copy of this context (with a client of its own) that stores under `namespace`."""
        return replace(self, namespace=namespace, _client=None)

    @property
    def prefix(self) -> str:
        return f"{self.namespace}{NAMESPACE_SEP}" if self.namespace else ""

    def scoped(self, name: str) -> str:
        """The worker's name for a database or collection the model calls `name`."""
        return self.prefix + name

    def unscoped(self, text: str) -> str:
        """`text` (a name, or a message naming some) as the model should see it."""
        return text.replace(self.prefix, "") if self.prefix else text

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = client(api_key=self.api_key, timeout=self.timeout)
        return self._client

    def send(self, method: str, url: str, **kwargs) -> httpx.Response:
        """The response of a successful request; any failure raises ToolError."""
        try:
            r = self.client.request(method, url, **kwargs)
        except httpx.TimeoutException as e:
            raise ToolError(f"{url} timed out: {e}", retryable=True) from e
        except httpx.TransportError as e:
            raise ToolError(f"cannot reach {url}: {e}", retryable=True) from e
        if r.status_code >= 400:
            raise ToolError(self.unscoped(f"{r.status_code} from {url}: {_message(r)}"),
                            retryable=r.status_code == 429 or r.status_code >= 500, status=r.status_code)
        return r

    def request(self, method: str, url: str, **kwargs) -> dict:
        r = self.send(method, url, **kwargs)
        return r.json() if r.content else {}

    def worker(self, method: str, path: str, **kwargs) -> dict:
        return self.request(method, self.worker_url + path, **kwargs)

    def runtime(self, method: str, path: str, **kwargs) -> dict:
        return self.request(method, self.runtime_url + path, **kwargs)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _message(r: httpx.Response) -> str:
    """The error text of an OpenAI-style or FastAPI-style error body, else the raw text."""
    try:
        body = r.json()
    except ValueError:
        return r.text[:500]
    if isinstance(body, dict):
        err = body.get("error") or body.get("detail")
        if isinstance(err, dict):
            return str(err.get("message") or err)
        if err is not None:
            return str(err)
    return str(body)[:500]
