"""The revision registry's whole-file digest of a GGUF: "sha256:<hex>", recorded at each
activation and checked before a rollback or a resume serves the file again.

sha256 runs on the CPU's SHA unit where it has one: 0.33 s for the default 0.5 GB GGUF here,
where blake2b took 0.85 s and held a first start's /health back 0.5 s after the load. The file
is read from the page cache beside the load, and each file version is hashed once
(runtime/file_digest.py keeps it under the data directory). `hash_ahead` begins it before the
server's imports, which hold the GIL while hashing does not.
"""
from __future__ import annotations

import threading
from pathlib import Path

from runtime.file_digest import ALGORITHMS, file_digest
from runtime.server.config import ServerConfig

DIGEST = "sha256"


def model_digest(config: ServerConfig, path: str | Path) -> str:
    return f"{DIGEST}:{file_digest(path, DIGEST, config.digest_cache)}"


def same_content(config: ServerConfig, path: str | Path, recorded: str) -> bool:
    """Whether the file at `path` still has the digest `recorded`, computed the way it was (a bare
    hex, as registries recorded before, is blake2b-128; an algorithm unknown here never matches)."""
    algorithm, hexdigest = recorded.split(":", 1) if ":" in recorded else ("blake2b-128", recorded)
    return algorithm in ALGORITHMS and file_digest(path, algorithm, config.digest_cache) == hexdigest


def hash_ahead(config: ServerConfig) -> None:
    """Begin the served GGUF's digest in a thread; the start's model_digest finds it done, or waits
    for it (file_digest hashes a file version once at a time)."""
    def run() -> None:
        try:
            model_digest(config, config.engine.model)
        except OSError:
            pass            # the load opens the file itself and says what is wrong with it
    threading.Thread(target=run, name="digest-ahead", daemon=True).start()
