"""runtime/file_digest.py: a file version is hashed once (in the process and, with a cache
folder, across processes), and a changed file is hashed again even when its size and mtime
are put back as they were."""
from __future__ import annotations

import hashlib
import os
import threading

import pytest

from runtime import file_digest as fd

HOUR_AGO_NS = 3600 * 10**9


@pytest.fixture
def hashed(monkeypatch):
    """Counts the files actually read and hashed; the in-process store starts empty, and the racy
    window (which counts from ctime, which no test can date back) is closed."""
    monkeypatch.setattr(fd, "_kept", {})
    monkeypatch.setattr(fd, "RACY_NS", 0)
    calls = []
    real = hashlib.file_digest
    monkeypatch.setattr(fd.hashlib, "file_digest", lambda f, algo: calls.append(f.name) or real(f, algo))
    return calls


def settled(path, data: bytes, mtime_ns: int | None = None) -> int:
    """Write `data` to `path` and date its mtime an hour back (or `mtime_ns`)."""
    path.write_bytes(data)
    mtime_ns = mtime_ns or os.stat(path).st_mtime_ns - HOUR_AGO_NS
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return mtime_ns


def test_a_file_is_hashed_once_and_again_once_changed_with_its_old_size_and_mtime(tmp_path, hashed):
    f = tmp_path / "weights.bin"
    mtime = settled(f, b"a" * 1000)
    assert fd.file_digest(f) == fd.file_digest(f) == hashlib.sha256(b"a" * 1000).hexdigest()
    assert len(hashed) == 1
    settled(f, b"b" * 1000, mtime)          # same size, same mtime: only ctime tells
    assert fd.file_digest(f) == hashlib.sha256(b"b" * 1000).hexdigest()
    assert fd.file_digest(f, "blake2b-128") == hashlib.blake2b(b"b" * 1000, digest_size=16).hexdigest()
    assert len(hashed) == 3


def test_the_cache_folder_serves_a_later_process_and_never_a_changed_file(tmp_path, hashed, monkeypatch):
    f, cache = tmp_path / "model.gguf", tmp_path / "digests"
    mtime = settled(f, b"x" * 4096)
    first = fd.file_digest(f, "blake2b-128", cache)
    monkeypatch.setattr(fd, "_kept", {})                  # a new process: only the folder remains
    assert fd.file_digest(f, "blake2b-128", cache) == first and len(hashed) == 1
    settled(f, b"y" * 4096, mtime)
    monkeypatch.setattr(fd, "_kept", {})
    assert fd.file_digest(f, "blake2b-128", cache) == hashlib.blake2b(b"y" * 4096, digest_size=16).hexdigest()
    for entry in cache.iterdir():                          # a damaged entry is hashed again, not trusted
        entry.write_text("{not json")
    monkeypatch.setattr(fd, "_kept", {})
    assert fd.file_digest(f, "blake2b-128", cache) == hashlib.blake2b(b"y" * 4096, digest_size=16).hexdigest()
    assert len(hashed) == 3


def test_a_file_just_written_is_not_kept(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(fd, "RACY_NS", 2_000_000_000)
    f = tmp_path / "fresh.bin"
    f.write_bytes(b"new")           # within the racy window: a same-tick rewrite would look the same
    fd.file_digest(f)
    fd.file_digest(f)
    assert len(hashed) == 2


def test_threads_asking_at_once_wait_for_one_hash(tmp_path, hashed, monkeypatch):
    """A server begins the GGUF's digest before its imports; the load asking for it meanwhile
    waits for that hash instead of reading 0.5 GB again."""
    f = tmp_path / "model.gguf"
    settled(f, b"z" * 4096)
    entered, release = [threading.Event(), threading.Event()], threading.Event()
    real = fd.hashlib.file_digest                      # the counting one

    def slow(fh, algo):
        entered[sum(e.is_set() for e in entered)].set()
        release.wait(10)
        return real(fh, algo)
    monkeypatch.setattr(fd.hashlib, "file_digest", slow)
    ahead = threading.Thread(target=fd.file_digest, args=(f,))
    ahead.start()
    assert entered[0].wait(10)
    results = []
    second = threading.Thread(target=lambda: results.append(fd.file_digest(f)))
    second.start()
    hashed_twice = entered[1].wait(0.5)                # without the wait it starts hashing at once
    release.set()
    ahead.join(10)
    second.join(10)
    assert not hashed_twice and results == [hashlib.sha256(b"z" * 4096).hexdigest()] and len(hashed) == 1
