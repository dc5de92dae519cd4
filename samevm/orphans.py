"""Children that outlive their supervisor: prevented (a parent-death signal set in the child)
and, for those a dead supervisor of the same data directory left behind before, found
through its <home>/run/stack.json and stopped, so a new supervisor starts its own instead of
attaching to processes nobody restarts or stops."""
from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child between fork and exec: SIGTERM when the supervisor thread that started it ends."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:                        # a zombie has exited: only its parent's wait() is missing
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def runs_in(pid: int, home: Path) -> bool:
    """Whether process `pid` is a samevm command for data directory `home` (its command line says)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return any("samevm" in a for a in args) and str(home) in args


def stop_orphans(state_path: Path, home: Path, timeout: float) -> None:
    """Stop (SIGTERM, then SIGKILL after `timeout`) each child listed in `state_path` whose
    supervisor is dead and whose command line still names `home`."""
    try:
        previous = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return
    supervisor = previous.get("supervisor_pid")
    if supervisor == os.getpid() or alive(supervisor):
        return
    for row in previous.get("services", []):
        pid = row.get("pid")
        if not (alive(pid) and runs_in(pid, home)):
            continue
        log.warning("%s (pid %d) was left running by a supervisor that died (pid %s); stopping it to "
                    "start a supervised one", row["name"], pid, supervisor)
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)
