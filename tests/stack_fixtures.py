"""A real samevm stack for tests: the runtime on a tiny random model and the real worker, as
child processes of samevm.supervisor.Stack on free loopback ports under a temporary home.
attach=False, so a test never writes into a stack someone else is running."""
from __future__ import annotations

import socket
from pathlib import Path

from samevm.settings import Settings
from samevm.supervisor import Stack

# torch on one thread: on a shared 2-core machine OpenMP's spinning threads only slow a tiny model down
CHILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_settings(home: Path, model: str, **kw) -> Settings:
    return Settings(home=home, model=model, backend="cpu", runtime_port=free_port(), worker_port=free_port(),
                    mcp_port=free_port(), console_port=free_port(), **kw)


def settings_env(settings: Settings) -> dict[str, str]:
    """SAMEVM_* variables that make a samevm process use `settings`' home and ports."""
    return {"SAMEVM_HOME": str(settings.home), "SAMEVM_MODEL": settings.model,
            "SAMEVM_RUNTIME_PORT": str(settings.runtime_port), "SAMEVM_WORKER_PORT": str(settings.worker_port),
            "SAMEVM_MCP_PORT": str(settings.mcp_port), "SAMEVM_CONSOLE_PORT": str(settings.console_port), **CHILD_ENV}


def tiny_stack(settings: Settings, docs: Path | None = None, **kw) -> Stack:
    return Stack(settings, runtime_args=["--kv-cache-mb", "16"], attach=False, env=CHILD_ENV,
                 worker_args=["--allow-root", str(docs)] if docs else [], **kw)
