"""Merged adapter weights kept on disk (runtime/lora_merge.py): a later load of the same base
and adapter reads them instead of merging again, and a damaged copy is merged again."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess

import numpy as np
from gguf import GGMLQuantizationType as Q

import runtime.lora_merge as lm
from runtime.gguf import load_gguf
from runtime.lora import load_adapter
from tests.runtime.lora_fixtures import make_adapter


def test_merged_weights_are_kept_and_read_back(tiny_gguf, tmp_path, monkeypatch):
    base = tiny_gguf("qwen2")
    make_adapter(base, tmp_path / "lora", seed=4)
    model = load_gguf(base)
    adapter = load_adapter(tmp_path / "lora", model.spec)
    calls = []
    real = lm.merge_into
    monkeypatch.setattr(lm, "merge_into", lambda jobs, *a: calls.append(len(jobs)) or real(jobs, *a))
    cache = tmp_path / "merged"

    fresh = lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert len(calls) == 1 and len(list(cache.iterdir())) == 1
    n = calls[0]
    again = lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert len(calls) == 1                                       # nothing merged the second time
    changed = [k for k in fresh.tensors if fresh.tensors[k] is not model.tensors[k]]
    assert len(changed) == n
    for k in changed:
        a, b = fresh.tensors[k], again.tensors[k]
        assert (a.name, a.qtype, a.shape) == (b.name, b.qtype, b.shape) and np.array_equal(a.data, b.data)

    want = {k: np.array(fresh.tensors[k].data) for k in changed}   # fresh maps the files damaged next
    damaged = next((cache / next(iter(cache.iterdir())).name).glob("*.npy"))
    damaged.write_bytes(damaged.read_bytes()[:100])
    third = lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert len(calls) == 2                                       # merged again, and kept again
    assert all(np.array_equal(third.tensors[k].data, want[k]) for k in changed)
    lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert len(calls) == 2                                       # the good copy is back in place


def test_a_full_disk_merges_in_memory_and_keeps_nothing(tiny_gguf, tmp_path, monkeypatch):
    """The merge writes into files whose space is taken first: no room is an error there (not a
    SIGBUS mid-merge), and the load goes on with the tensors in memory."""
    base = tiny_gguf("qwen2")
    make_adapter(base, tmp_path / "lora", seed=5)
    model = load_gguf(base)
    adapter = load_adapter(tmp_path / "lora", model.spec)
    want = lm.merge_adapter(model, adapter, Q.Q8_0)

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(lm.os, "posix_fallocate", full)
    cache = tmp_path / "merged"
    got = lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert list(cache.iterdir()) == []
    changed = [k for k in want.tensors if want.tensors[k] is not model.tensors[k]]
    assert changed and all(np.array_equal(got.tensors[k].data, want.tensors[k].data) for k in changed)


def test_a_merge_killed_midway_leaves_nothing_behind_after_the_next(tiny_gguf, tmp_path):
    """The merge writes into a folder beside the cache entry, renamed into place when whole; a
    process killed before that leaves it, and the next merge of that entry removes it (only
    those of processes no longer running)."""
    base = tiny_gguf("qwen2")
    make_adapter(base, tmp_path / "lora", seed=6)
    model = load_gguf(base)
    adapter = load_adapter(tmp_path / "lora", model.spec)
    cache = tmp_path / "merged"
    lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    entry = next(cache.iterdir())
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid in (dead.pid, os.getppid()):                       # a dead process's, a live one's
        shutil.copytree(entry, entry.with_name(f"{entry.name}.tmp-{pid}"))
    shutil.rmtree(entry)                                        # the next load merges again
    lm.merge_adapter(model, adapter, Q.Q8_0, cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([entry.name, f"{entry.name}.tmp-{os.getppid()}"])
