"""Revision directories: complete or absent, named after their GGUF, the served and last
known good revisions never pruned (a runtime rollback needs their files)."""
from __future__ import annotations

import shutil

from runtime.gguf import quick_digest
from training.revisions import MODEL_FILE, RevisionStore


def make(store: RevisionStore, gguf, tag: str) -> dict:
    staging = store.staging()
    shutil.copy(gguf, staging / MODEL_FILE)
    with (staging / MODEL_FILE).open("ab") as f:   # a distinct file per revision
        f.write(tag.encode())
    return store.commit(staging, {"dataset_sha256": tag, "base_revision": "base"})


def test_commit_get_list_and_prune_spare_served_and_last_known_good(tiny_gguf, tmp_path):
    store = RevisionStore(tmp_path / "revisions")
    made = [make(store, tiny_gguf("qwen2"), f"r{i}") for i in range(5)]
    first = made[0]
    assert first["revision"].endswith(quick_digest(first["path"])[:8])
    assert store.get(first["revision"])["dataset_sha256"] == "r0"
    assert store.get("../etc") is None and store.get("nope") is None
    assert [m["revision"] for m in store.list()] == [m["revision"] for m in made]
    assert not list((tmp_path / "revisions" / ".staging").iterdir())

    gone = store.prune({made[1]["revision"], made[0]["revision"]}, keep=2)
    assert gone == [made[2]["revision"]]                       # 0 and 1 are protected, 3 and 4 newest
    assert {m["revision"] for m in store.list()} == {made[i]["revision"] for i in (0, 1, 3, 4)}


def test_discarded_staging_leaves_nothing(tmp_path):
    store = RevisionStore(tmp_path / "revisions")
    staging = store.staging()
    (staging / MODEL_FILE).write_bytes(b"half")
    store.discard(staging)
    assert store.list() == [] and not staging.exists()
