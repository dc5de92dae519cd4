"""Which weights revision is served, which served before it, and what happened: persisted
as JSON under <home>/runtime/revisions/<model id>.json so it survives a restart.

A revision names a GGUF and the LoRA adapter folder served on it, if any (facts "adapter",
"adapter_sha256"). Activations form a stack: a reload pushes, a rollback pops. The top is active; the one
below it is the last known good (it served until it was replaced). A refused reload is
recorded in the history and never touches the stack. A restart resumes the active
revision when its file still exists.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)
MAX_HISTORY = 200


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class RevisionRegistry:
    def __init__(self, directory: Path, model_id: str):
        self.path = Path(directory) / f"{model_id.replace('/', '_')}.json"
        self._lock = threading.Lock()
        self.data = {"model": model_id, "stack": [], "revisions": {}, "history": []}
        if self.path.exists():
            try:
                self.data = json.loads(self.path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                aside = self.path.with_suffix(".corrupt")
                log.warning("revision registry %s is unreadable (%s); moved to %s and started afresh",
                            self.path, e, aside)
                self.path.replace(aside)

    # ---- reading ---------------------------------------------------------------------
    @property
    def active(self) -> str | None:
        return self.data["stack"][-1] if self.data["stack"] else None

    @property
    def last_known_good(self) -> str | None:
        return self.data["stack"][-2] if len(self.data["stack"]) > 1 else None

    def entry(self, revision: str) -> dict | None:
        return self.data["revisions"].get(revision)

    def resume_target(self) -> tuple[str, str] | None:
        """(path, revision) of the active revision if its file is still there."""
        rev = self.active
        entry = self.entry(rev) if rev else None
        if entry and Path(entry["path"]).is_file():
            return entry["path"], rev
        return None

    def conflicts(self, revision: str, path: str, adapter: str | None = None) -> bool:
        """`revision` already names another GGUF, or the same GGUF with another adapter (or none)."""
        entry = self.entry(revision)
        if entry is None or entry["status"] == "refused":
            return False
        other = entry.get("adapter")
        return Path(entry["path"]).resolve() != Path(path).resolve() or \
            (other and Path(other).resolve()) != (adapter and Path(adapter).resolve())

    def describe(self, history: int = 50) -> dict:
        with self._lock:
            revisions = [{"revision": r, **e} for r, e in self.data["revisions"].items()]
            return {"model": self.data["model"], "active": self.active,
                    "last_known_good": self.last_known_good, "revisions": revisions,
                    "history": self.data["history"][-history:]}

    # ---- writing ---------------------------------------------------------------------
    def activated(self, revision: str, path: str, action: str, **facts) -> None:
        """`revision` now serves (action: start, reload or rollback)."""
        with self._lock:
            stack = self.data["stack"]
            if action == "rollback":
                gone = stack.pop()
                self.data["revisions"][gone]["status"] = "rolled_back"
                assert stack and stack[-1] == revision
            elif not stack or stack[-1] != revision:
                if stack:
                    self.data["revisions"][stack[-1]]["status"] = "good"
                if revision in stack:      # re-activating an older revision moves it to the top
                    stack.remove(revision)
                stack.append(revision)
            self.data["revisions"][revision] = {**self.data["revisions"].get(revision, {}), **facts,
                                                "path": str(path), "status": "active",
                                                "activated_at": _now()}
            self._log(action, revision, True, None)

    def refused(self, revision: str | None, path: str, action: str, reason: str) -> None:
        with self._lock:
            if revision and revision not in self.data["revisions"]:
                self.data["revisions"][revision] = {"path": str(path), "status": "refused", "reason": reason}
            self._log(action, revision, False, reason, path=str(path))

    def _log(self, action: str, revision: str | None, ok: bool, reason: str | None, **extra) -> None:
        self.data["history"].append({"time": _now(), "action": action, "revision": revision,
                                     "ok": ok, "reason": reason, **extra})
        del self.data["history"][:-MAX_HISTORY]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)
