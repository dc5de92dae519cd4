"""Tool failures a suite injects, to see an agent recover: the first `times` calls of a tool
in a named turn return the error envelope ({"ok": false, "error": ..., "retryable": ...})
instead of running. The agent loop's own retries of a retryable failure count as calls, so
a fault that should reach the model must outlast them (times > AgentConfig.tool_retries)."""
from __future__ import annotations

import threading

from agents.suite import Fault


class FaultyTools:
    """Wraps a tool registry (anything with `call`); `turn` names the turn being played."""

    def __init__(self, tools, faults: list[Fault]):
        self.tools, self.faults = tools, faults
        self.turn: str | None = None
        self.injected: dict[tuple[str, str], int] = {}      # (turn, tool) -> failures returned
        self._lock = threading.Lock()

    def call(self, name: str, arguments: dict | str | None = None) -> dict:
        fault = next((f for f in self.faults if f.tool == name and f.turn == self.turn), None)
        if fault is not None:
            with self._lock:
                key = (fault.turn, name)
                if self.injected.get(key, 0) < fault.times:
                    self.injected[key] = self.injected.get(key, 0) + 1
                    return {"ok": False, "error": fault.error, "retryable": fault.retryable}
        return self.tools.call(name, arguments)

    def __getattr__(self, attr: str):
        if attr == "tools":
            raise AttributeError(attr)
        return getattr(self.tools, attr)           # the rest of the registry, as it is

    def injected_in(self, turn: str) -> int:
        return sum(n for (t, _), n in self.injected.items() if t == turn)
