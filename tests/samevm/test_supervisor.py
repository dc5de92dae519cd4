"""`samevm up` as a real process: both services come up, `samevm status` reports them, a
killed child is restarted, and SIGINT stops everything. Plus the supervisor giving up on a
child that cannot start."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from samevm.cli import main
from samevm.probe import probe_health
from samevm.supervisor import Service, Stack, StackError
from tests.stack_fixtures import free_port, settings_env, stack_settings

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.3)
    return value


def lines_of(proc: subprocess.Popen) -> queue.Queue:
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(line) for line in proc.stdout], daemon=True).start()
    return q


def test_up_status_restart_and_clean_stop(tiny_gguf, tmp_path, monkeypatch, capsys):
    settings = stack_settings(tmp_path / "home", tiny_gguf("qwen2"))
    env = {**os.environ, **settings_env(settings)}
    up = subprocess.Popen([sys.executable, "-m", "samevm", "up", "--backend", "cpu", "--serve-arg=--kv-cache-mb=16", "--mcp"],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, seen = lines_of(up), []
    try:
        while not any("samevm is up" in line for line in seen):
            seen.append(out.get(timeout=240))
        assert any(line.startswith("runtime  starting") for line in seen), seen   # progress while loading

        for key, value in settings_env(settings).items():
            monkeypatch.setenv(key, value)
        assert main(["status", "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["runtime"]["ready"] and info["runtime"]["backend"] == "cpu"
        assert info["runtime"]["id"] == Path(settings.model).stem and info["runtime"]["revision"]
        assert info["worker"]["ready"] and info["supervisor"]["supervisor_pid"] == up.pid
        pids = {r["name"]: r["pid"] for r in info["supervisor"]["services"]}
        assert {r["name"]: r["state"] for r in info["supervisor"]["services"]} == {
            "runtime": "ready", "worker": "ready", "mcp": "ready", "console": "ready"}
        assert out.get(timeout=30).strip() == f"console: {settings.console_url}/"     # the line after
        assert probe_health(settings.console_url).ready

        os.kill(pids["worker"], signal.SIGKILL)
        state_file = settings.home / "run" / "stack.json"

        def restarted():
            rows = {r["name"]: r for r in json.loads(state_file.read_text())["services"]}
            w = rows["worker"]
            return w["restarts"] == 1 and w["state"] == "ready" and w["pid"] not in (None, pids["worker"]) and w
        worker = wait_until(restarted, "the worker to be restarted")
        assert alive(worker["pid"]) and alive(pids["runtime"])

        up.send_signal(signal.SIGINT)
        assert up.wait(60) == 0
        assert not any(alive(pid) for pid in (worker["pid"], pids["runtime"], pids["mcp"], pids["console"]))
        assert {r["state"] for r in json.loads(state_file.read_text())["services"]} == {"stopped"}
    finally:
        if up.poll() is None:
            up.kill()


def test_a_child_that_keeps_dying_is_given_up(tmp_path):
    settings = stack_settings(tmp_path / "home", "unused.gguf")
    stack = Stack(settings, attach=False, max_restarts=2)
    stack.services = [Service("flaky", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
                              f"http://127.0.0.1:{free_port()}", probe_health, tmp_path / "flaky.log")]
    stack.start()
    try:
        with pytest.raises(StackError, match=r"flaky failed: exited with code 3 \(3 exits in a row\)"):
            stack.wait_ready(timeout=60)
        assert stack.service("flaky").restarts == 2
        assert (tmp_path / "flaky.log").read_text().count("\nboom\n") == 3     # each start logged its output
    finally:
        stack.stop()


SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_children_die_with_a_killed_supervisor(tmp_path):
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from samevm.probe import probe_health\n"
        "from samevm.supervisor import Service, Stack\n"
        "from tests.stack_fixtures import stack_settings, free_port\n"
        f"stack = Stack(stack_settings(Path({str(tmp_path / 'home')!r}), 'unused.gguf'), attach=False)\n"
        f"stack.services = [Service('sleeper', {SLEEPER!r}, f'http://127.0.0.1:{{free_port()}}', probe_health,\n"
        f"                          Path({str(tmp_path / 's.log')!r}))]\n"
        "stack.start()\n"
        "print(stack.service('sleeper').proc.pid, flush=True)\n"
        "time.sleep(600)\n")
    sup = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        child = int(sup.stdout.readline())
        assert alive(child)
        sup.kill()                                    # SIGKILL: no chance to stop its children
        sup.wait()
        wait_until(lambda: not alive(child), "the child to die with its supervisor", timeout=30)
    finally:
        sup.kill()


def orphan_server(home: Path, port: int) -> list[str]:
    """A stand-in for a samevm child: answers /health on `port`, its command line names `home`."""
    code = ("import sys, http.server, json\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        body = json.dumps({'status': 'ok'}).encode()\n"
            "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
            "        self.end_headers(); self.wfile.write(body)\n"
            "    def log_message(self, *a): pass\n"
            f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n")
    return [sys.executable, "-c", code, "samevm", "--home", str(home)]


def test_a_new_supervisor_stops_the_orphans_of_a_dead_one(tmp_path, caplog):
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    orphan = subprocess.Popen(orphan_server(home, port), start_new_session=True)
    try:
        wait_until(lambda: probe_health(url).up, "the orphan to answer", timeout=30)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        (home / "run").mkdir(parents=True)
        (home / "run" / "stack.json").write_text(json.dumps({"supervisor_pid": dead.pid, "services": [
            {"name": "svc", "pid": orphan.pid, "state": "ready"}]}))
        stack = Stack(stack_settings(home, "unused.gguf"), stop_timeout=10)
        stack.services = [Service("svc", orphan_server(home, port), url, probe_health, tmp_path / "svc.log")]
        with caplog.at_level("WARNING"):
            stack.start()
        try:
            assert orphan.wait(15) is not None                     # stopped, not attached
            assert "left running by a supervisor that died" in caplog.text
            stack.wait_ready(timeout=60)
            svc = stack.service("svc")
            assert not svc.external and svc.state == "ready" and svc.proc.pid != orphan.pid
        finally:
            stack.stop()
    finally:
        orphan.kill()


def test_bad_settings_fail_at_once_with_the_childs_reason(tiny_gguf, tmp_path):
    settings = stack_settings(tmp_path / "home", tiny_gguf("qwen2"), host="0.0.0.0")
    stack = Stack(settings, attach=False, env={"SAMEVM_API_KEY": ""})
    stack.start()
    try:
        with pytest.raises(StackError, match="API key") as failed:
            stack.wait_ready(timeout=120)
        assert "code 2" in str(failed.value)
        assert all(s.restarts == 0 for s in stack.services)
    finally:
        stack.stop()
