"""A small HTTP client for a running worker, used by `samevm ingest` and `samevm search`
when a worker is up (so one process owns the chroma store).

`serves(home)` tells the stack's own worker from another one on the same port: the worker
reports its data directory in /v1/status. Uploads name each file by its resolved path, the
identity a path ingest gives the same file."""
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

    def serves(self, home: Path) -> bool:
        """True when a worker answers and its data directory is `home`; False when none
        answers; ValueError when another stack's worker answers."""
        if not self.up():
            return False
        theirs = self._json(self.http.get("/v1/status"))["data_dir"]["path"]
        if Path(theirs) != Path(home).resolve():
            raise ValueError(f"the worker at {self.http.base_url} serves the data directory {theirs}, "
                             f"not {Path(home).resolve()}: stop it, or give the --home it serves, "
                             "or point SAMEVM_WORKER_PORT at this stack's worker")
        return True

    def ingest_files(self, paths: list[Path], collection: str) -> list[dict]:
        """One request for all of `paths` (their chunks are embedded together)."""
        opened = [p.open("rb") for p in paths]
        try:
            r = self.http.post("/v1/rag/ingest", data={"collection": collection},
                               files=[("files", (str(p.resolve()), f, "application/octet-stream"))
                                      for p, f in zip(paths, opened)])
        finally:
            for f in opened:
                f.close()
        return self._json(r)["documents"]

    def search(self, query: str, **options) -> list[dict]:
        return self._json(self.http.post("/v1/rag/search", json={"query": query, **options}))["results"]
