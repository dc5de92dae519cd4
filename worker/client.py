"""A small HTTP client for a running worker, used by `samevm ingest` and `samevm search`
when a worker is up (so one process owns the chroma store)."""
from __future__ import annotations

from pathlib import Path

import httpx

from httpkit.client import client


class WorkerClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0):
        self.http = client(base_url, api_key, timeout)

    def up(self) -> bool:
        try:
            return self.http.get("/health", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    def _json(self, response: httpx.Response) -> dict:
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:300]
            raise ValueError(f"worker answered {response.status_code}: {message}")
        return response.json()

    def ingest_file(self, path: Path, collection: str) -> dict:
        with path.open("rb") as f:
            r = self.http.post("/v1/rag/ingest", data={"collection": collection},
                               files=[("files", (path.name, f, "application/octet-stream"))])
        return self._json(r)["documents"][0]

    def search(self, query: str, **options) -> list[dict]:
        return self._json(self.http.post("/v1/rag/search", json={"query": query, **options}))["results"]
