"""The stack: the runtime server and the worker (and, on request, the MCP server) as child
processes of one supervisor.

    with Stack(settings) as stack:          # start (or attach), wait until both are healthy
        stack.urls.runtime, stack.urls.worker
    # both stopped: SIGTERM, then SIGKILL after `stop_timeout`

A service that already answers at its address is attached, not started (and never stopped
by us); with attach=False that is an error instead (tests use it so they never write into
someone else's stack). A child that exits is restarted by a monitor thread, with a
growing delay; after `max_restarts` exits in a row without ever becoming ready it is marked
failed; a child that exits with code 2 (bad settings: a retry cannot help) fails at once.
Either way the failure says the child's own last words from its log. Children run in their
own process groups, so a Ctrl-C in the terminal reaches only the supervisor, which then
stops them in order; on Linux they get SIGTERM when the supervisor dies (even by SIGKILL).
Each child logs to <home>/logs/<name>.log; the state of the stack is written to
<home>/run/stack.json for `samevm status`, and a new supervisor of the same home stops the
children a dead one left behind (found there) instead of attaching to them.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from samevm.orphans import die_with_parent, stop_orphans
from samevm.probe import Health, probe_health, probe_mcp
from samevm.settings import Settings

log = logging.getLogger(__name__)
POLL_S = 0.5
STARTING_POLL_S = 0.1           # while a child starts: its readiness is seen within this, not 1.5 s later
EXIT_USAGE = 2                  # samevm's exit code for bad settings or arguments: never retried


class StackError(RuntimeError):
    """The stack cannot become ready: a child keeps dying, its model failed to load, or time ran out."""


@dataclass(frozen=True, slots=True)
class StackUrls:
    runtime: str        # the OpenAI-compatible base is runtime + "/v1"
    worker: str
    mcp: str | None     # streamable-HTTP MCP endpoint, when the stack serves one
    console: str | None = None   # the web console, when the stack serves one


@dataclass
class Service:
    name: str
    argv: list[str]
    url: str
    probe: Callable[[str], Health]
    log_path: Path
    proc: subprocess.Popen | None = None
    external: bool = False          # attached to one already running: not ours to restart or stop
    state: str = "stopped"          # stopped | starting | ready | restarting | failed | external
    detail: str = ""
    restarts: int = 0
    exits_in_a_row: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    history: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {"name": self.name, "url": self.url, "state": self.state, "detail": self.detail,
                "pid": self.proc.pid if self.proc and self.proc.poll() is None else None,
                "restarts": self.restarts, "log": str(self.log_path),
                "uptime_s": round(time.monotonic() - self.started_at, 1) if self.started_at else None}


class Stack:
    def __init__(self, settings: Settings, *, runtime_args: list[str] = (), worker_args: list[str] = (),
                 mcp: bool = False, console: bool = False, attach: bool = True, restart: bool = True, max_restarts: int = 5,
                 stop_timeout: float = 20.0, env: dict[str, str] | None = None):
        self.settings, self.attach = settings, attach
        self.restart, self.max_restarts, self.stop_timeout = restart, max_restarts, stop_timeout
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
        # every child reads the same settings (the worker promotes into the runtime, the MCP server calls both)
        self.env.update({"SAMEVM_HOME": str(settings.home), "SAMEVM_HOST": settings.host, "SAMEVM_MODEL": settings.model,
                         "SAMEVM_BACKEND": settings.backend, "SAMEVM_RUNTIME_PORT": str(settings.runtime_port),
                         "SAMEVM_WORKER_PORT": str(settings.worker_port), "SAMEVM_MCP_PORT": str(settings.mcp_port),
                         "SAMEVM_CONSOLE_PORT": str(settings.console_port)})
        if settings.api_key:
            self.env["SAMEVM_API_KEY"] = settings.api_key     # not on the command line, where ps shows it
        home = Path(settings.home)
        base = [sys.executable, "-m", "samevm", "--home", str(home)]
        logs = home / "logs"
        self.services = [
            Service("runtime", [*base, "serve", "--model", settings.model, "--host", settings.host,
                                "--port", str(settings.runtime_port), "--backend", settings.backend, *runtime_args],
                    settings.runtime_url, probe_health, logs / "runtime.log"),
            Service("worker", [*base, "worker", "--host", settings.host, "--port", str(settings.worker_port),
                               *worker_args], settings.worker_url, probe_health, logs / "worker.log"),
        ]
        if mcp:
            self.services.append(Service("mcp", [*base, "mcp", "--http", "--host", settings.host,
                                                 "--port", str(settings.mcp_port)],
                                         settings.mcp_url, probe_mcp, logs / "mcp.log"))
        if console:
            self.services.append(Service("console", [*base, "console", "--host", settings.host,
                                                     "--port", str(settings.console_port)],
                                         settings.console_url, probe_health, logs / "console.log"))
        self.state_path = home / "run" / "stack.json"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    # ---- the API the CLI and the agent suite use ------------------------------------------
    @property
    def urls(self) -> StackUrls:
        mcp = next((s.url for s in self.services if s.name == "mcp"), None)
        console = next((s.url for s in self.services if s.name == "console"), None)
        return StackUrls(self.settings.runtime_url, self.settings.worker_url, mcp, console)

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    def start(self) -> "Stack":
        """Start every service that is not already running, and the monitor thread."""
        self._stopping.clear()
        stop_orphans(self.state_path, Path(self.settings.home), self.stop_timeout)
        taken = [s for s in self.services if s.probe(s.url).up]
        if taken and not self.attach:
            raise StackError(", ".join(f"{s.name}'s address {s.url} is taken" for s in taken) + " (attach=False)")
        for s in self.services:
            if s in taken:
                s.external, s.state, s.detail = True, "external", "already running; attached"
            else:
                self._spawn(s)
        self._monitor = threading.Thread(target=self._watch, name="stack-monitor", daemon=True)
        self._monitor.start()
        return self

    def wait_ready(self, timeout: float = 900.0, progress: Callable[[list[dict]], None] | None = None,
                   cancel: threading.Event | None = None) -> None:
        """Block until every service is ready; StackError if one fails or `timeout` passes.
        `progress(rows)` is called about once a second while waiting."""
        deadline, told = time.monotonic() + timeout, float("-inf")
        while True:
            rows = self.status()
            if progress and time.monotonic() - told >= 1.0:
                progress(rows)
                told = time.monotonic()
            failed = [r for r in rows if r["state"] == "failed"]
            if failed:
                raise StackError("; ".join(f"{r['name']} failed: {r['detail']} (log: {r['log']})" for r in failed))
            if all(r["state"] in ("ready", "external") for r in rows):
                return
            if time.monotonic() > deadline or (cancel and cancel.is_set()):
                waiting = [f"{r['name']} ({r['state']}: {r['detail']})" for r in rows if r["state"] != "ready"]
                raise StackError(f"not ready after {timeout:.0f} s: {', '.join(waiting)}")
            time.sleep(STARTING_POLL_S)

    def status(self) -> list[dict]:
        with self._lock:
            return [s.row() for s in self.services]

    def stop(self) -> None:
        """Stop the monitor, then every child we started: SIGTERM, wait, SIGKILL."""
        self._stopping.set()
        if self._monitor:
            self._monitor.join(timeout=5)
        with self._lock:
            owned = [s for s in self.services if s.proc is not None and s.proc.poll() is None]
            for s in owned:
                s.proc.terminate()
            deadline = time.monotonic() + self.stop_timeout
            for s in owned:
                try:
                    s.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop in %.0f s; killing it", s.name, self.stop_timeout)
                    s.proc.kill()
                    s.proc.wait()
            for s in self.services:
                if not s.external:
                    s.state, s.detail = "stopped", ""
            self._write_state()

    def __enter__(self) -> "Stack":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- supervision ---------------------------------------------------------------------
    def _spawn(self, s: Service) -> None:
        s.log_path.parent.mkdir(parents=True, exist_ok=True)
        with s.log_path.open("ab") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(s.argv)}\n".encode())
            out.flush()
            s.proc = subprocess.Popen(s.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=self.env, start_new_session=True,
                                      preexec_fn=die_with_parent if sys.platform == "linux" else None)
        s.state, s.detail, s.started_at = "starting", "process started", time.monotonic()
        log.info("started %s (pid %d)", s.name, s.proc.pid)

    def _watch(self) -> None:
        while not self._stopping.wait(STARTING_POLL_S if self._starting() else POLL_S):
            with self._lock:
                for s in self.services:
                    if not s.external and s.state not in ("stopped", "failed"):
                        self._check(s)
                self._write_state()

    def _starting(self) -> bool:
        with self._lock:
            return any(s.state in ("starting", "restarting") for s in self.services)

    def _check(self, s: Service) -> None:
        now = time.monotonic()
        if s.state == "restarting":
            if now >= s.next_start:
                s.restarts += 1
                self._spawn(s)
            return
        code = s.proc.poll()
        if code is not None:
            s.exits_in_a_row += 1
            s.history.append(f"exited with {code} after {now - s.started_at:.0f} s")
            said = last_words(s.log_path)
            if not self.restart or s.exits_in_a_row > self.max_restarts or code == EXIT_USAGE:
                s.state, s.detail = "failed", f"exited with code {code} ({s.exits_in_a_row} exits in a row): {said}"
                return
            delay = min(30.0, 2.0 ** (s.exits_in_a_row - 1) - 1.0)
            s.state, s.detail, s.next_start = "restarting", f"exited with code {code}; restarting: {said}", now + delay
            log.warning("%s exited with code %s (%s); restarting in %.0f s", s.name, code, said, delay)
            return
        p = s.probe(s.url)
        if p.ready:
            s.state, s.detail, s.exits_in_a_row = "ready", "ok", 0
        elif p.failed:
            s.state, s.detail = "failed", p.detail
        else:
            s.state = "starting"
            s.detail = f"{p.detail} ({now - s.started_at:.0f} s)"

    def _write_state(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"supervisor_pid": os.getpid(), "updated": time.time(),
                                   "services": [s.row() for s in self.services]}, indent=1))
        tmp.replace(self.state_path)


def last_words(log_path: Path, limit: int = 300) -> str:
    """The last non-empty line a child wrote to its log since it was last started."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, log_path.stat().st_size - 8192))
            tail = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    lines = [line.strip() for line in tail.split("\n--- ")[-1].splitlines()[1:] if line.strip()]
    return lines[-1][:limit] if lines else "(it wrote nothing)"
