"""Whole-file digests, each file version hashed once: a start of the default model hashed its
shipped adapter three times (the catalog's check, serve's check, the load) and the 0.5 GB GGUF
once more after every load (the revision registry's record).

A digest is kept, in this process and, given a `cache_dir`, in a small JSON file there for later
starts, under the file's identity: resolved path, device, inode, size, mtime and ctime. The
kernel sets ctime on every change to a file and nothing sets it back, so a rewritten file, even
one given its old size and mtime, has a new identity and is hashed again. A digest taken within
RACY_NS of the file's last change is not kept: a write in the same tick of a coarse file clock
would leave the identity as it was (git's "racily clean" rule). Callers in several threads
asking for one file version wait for one hash (a server begins the GGUF's before its imports).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

ALGORITHMS = {"sha256": hashlib.sha256, "blake2b-128": lambda: hashlib.blake2b(digest_size=16)}
RACY_NS = 2_000_000_000
_kept: dict[tuple, str] = {}
_hashing: dict[tuple, threading.Lock] = {}       # per file version, held while it is hashed
_hashing_lock = threading.Lock()


def identity(path: Path, algorithm: str) -> tuple:
    st = path.stat()
    return algorithm, str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def file_digest(path: str | Path, algorithm: str = "sha256", cache_dir: str | Path | None = None) -> str:
    """The hex digest of the file at `path` (OSError if it cannot be read)."""
    path = Path(path).resolve()
    key = identity(path, algorithm)
    with _hashing_lock:
        lock = _hashing.setdefault(key, threading.Lock())
    with lock:
        return _digest(path, algorithm, key, cache_dir)


def _digest(path: Path, algorithm: str, key: tuple, cache_dir: str | Path | None) -> str:
    if key in _kept:
        return _kept[key]
    entry = Path(cache_dir) / f"{hashlib.blake2b(repr(key[:2]).encode(), digest_size=12).hexdigest()}.json" \
        if cache_dir else None
    digest = read_entry(entry, key) if entry else None
    if digest is None:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, ALGORITHMS[algorithm]).hexdigest()
        settled = time.time_ns() - max(key[-2:]) > RACY_NS
        if not settled or identity(path, algorithm) != key:     # changed while it was read
            return digest
        if entry:
            write_entry(entry, key, digest)
    _kept[key] = digest
    return digest


def read_entry(entry: Path, key: tuple) -> str | None:
    try:
        stored = json.loads(entry.read_text())
    except (OSError, ValueError):
        return None                 # none yet, or a damaged one: hashed again and rewritten
    ok = isinstance(stored, dict) and stored.get("identity") == list(key) and isinstance(stored.get("digest"), str)
    return stored["digest"] if ok else None


def write_entry(entry: Path, key: tuple, digest: str) -> None:
    """Whole or absent (written beside it, then renamed); a failed write costs the next start a hash."""
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"identity": list(key), "digest": digest}))
        tmp.replace(entry)
    except OSError:
        tmp.unlink(missing_ok=True)
