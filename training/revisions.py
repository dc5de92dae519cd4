"""Trained weights revisions, one directory each under <home>/training/revisions/:

    <revision>/model.gguf       what the runtime loads
    <revision>/manifest.json    revision, base model and base revision, dataset hash,
                                hyperparameters, metrics, job id, created

A revision is built in a staging directory and renamed into place whole, so a directory
that exists is complete. Its id ends with a digest of the GGUF (the runtime's
system_fingerprint shows it). Which revision serves, and which served before it, is the
runtime's registry's to say (runtime/server/revisions.py, `GET /admin/revisions`); prune()
spares the revisions it is told the runtime still needs, so a rollback always finds its file.
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from runtime.gguf import quick_digest
from training.files import read_json, write_json

MODEL_FILE = "model.gguf"


class RevisionStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # ---- building ---------------------------------------------------------------------
    def staging(self) -> Path:
        path = self.root / ".staging" / uuid.uuid4().hex[:12]
        path.mkdir(parents=True)
        return path

    def commit(self, staging: Path, manifest: dict) -> dict:
        """Name the staged revision after its GGUF and move it into place."""
        gguf = staging / MODEL_FILE
        assert gguf.is_file(), "stage the GGUF before committing"
        revision = f"orpo-{time.strftime('%Y%m%d-%H%M%S')}-{quick_digest(gguf)[:8]}"
        target = self.root / revision
        manifest = {**manifest, "revision": revision, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "created_at": time.time()}
        write_json(staging / "manifest.json", manifest)
        staging.rename(target)
        return {**manifest, "path": str(target / MODEL_FILE)}

    def discard(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)

    # ---- reading ----------------------------------------------------------------------
    def get(self, revision: str) -> dict | None:
        if not revision or "/" in revision or revision.startswith("."):
            return None
        manifest = self.root / revision / "manifest.json"
        if not manifest.is_file():
            return None
        return {**read_json(manifest), "path": str(self.root / revision / MODEL_FILE)}

    def list(self) -> list[dict]:
        found = [self.get(p.name) for p in sorted(self.root.iterdir()) if p.is_dir()]
        return sorted((m for m in found if m), key=lambda m: m["created_at"])

    # ---- pruning ----------------------------------------------------------------------
    def prune(self, protected: set[str | None], keep: int = 5) -> list[str]:
        """Remove all but the newest `keep` revisions, sparing `protected` (the runtime's served
        and last known good revisions)."""
        assert keep >= 1
        revisions = [m["revision"] for m in self.list()]
        doomed = [r for r in revisions[:-keep] if r not in protected]
        for r in doomed:
            shutil.rmtree(self.root / r)
        return doomed
