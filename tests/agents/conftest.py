"""Agent tests: the loop through its real HTTP client against a scripted model server, with
tools in a real Registry (dispatch, validation and envelopes as in production)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from agents.config import AgentConfig
from agents.loop import Agent
from agents.model import ChatModel
from tests.agents.fake_model import ScriptedModel
from tests.stack_fixtures import CHILD_ENV, free_port
from tools.context import ToolError
from tools.registry import Registry


REPO = Path(__file__).resolve().parents[2]


class Counter:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def add(self, name: str, **args) -> None:
        with self.lock:
            self.calls.append((name, args))


@pytest.fixture
def counter() -> Counter:
    return Counter()


@pytest.fixture
def registry(counter) -> Registry:
    r = Registry()

    @r.tool(toolset="math")
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first
            b: the second
        """
        counter.add("add", a=a, b=b)
        return a + b

    @r.tool(toolset="slow")
    def wait(seconds: float, label: str = "unnamed") -> dict:
        """Wait, then say which call this was.

        Args:
            seconds: how long to wait
            label: echoed back
        """
        counter.add("wait", label=label)
        time.sleep(seconds)
        return {"label": label, "finished": time.monotonic()}

    @r.tool(toolset="flaky")
    def flaky(fail_times: int) -> str:
        """Fail with a retryable error the first `fail_times` times it is called.

        Args:
            fail_times: how many calls fail before one succeeds
        """
        counter.add("flaky", fail_times=fail_times)
        if sum(1 for name, _ in counter.calls if name == "flaky") <= fail_times:
            raise ToolError("the service timed out", retryable=True)
        return "done"

    @r.tool(toolset="flaky")
    def broken(reason: str) -> str:
        """Always fail, not retryably.

        Args:
            reason: what to say
        """
        counter.add("broken", reason=reason)
        raise ToolError(f"refused: {reason}")

    return r


@pytest.fixture
def agent_for(registry):
    """agent_for(script, **config) -> (Agent, ScriptedModel) on a running scripted server."""
    servers = []

    def make(script, **config) -> tuple[Agent, ScriptedModel]:
        fake = ScriptedModel(script).__enter__()
        servers.append(fake)
        return Agent(ChatModel(fake.url), registry, AgentConfig(**config)), fake

    yield make
    for s in servers:
        s.__exit__(None, None, None)


@pytest.fixture(scope="session")
def worker(tmp_path_factory):
    """A real `samevm worker` process under a temporary home: (url, port, home)."""
    home, port = tmp_path_factory.mktemp("suite-home"), free_port()
    log = (home / "worker.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "samevm", "--home", str(home), "worker", "--port", str(port)],
                            cwd=REPO, env={**os.environ, **CHILD_ENV, "HF_HUB_OFFLINE": "1"},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, (home / "worker.log").read_text()[-2000:]
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.3)
    yield url, port, home
    proc.terminate()
    proc.wait(20)
