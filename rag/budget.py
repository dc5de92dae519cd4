"""What one document may cost: wall time, pages and chunks, and a flag the caller sets when
nobody waits for the answer any more (the HTTP client went away).

Stages call `check()` between units of work (a page, an embedding batch); a child process
registered with `watch` is killed the moment the budget is cancelled, so a stuck pdftotext
does not outlive its request.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from rag.errors import InputError


class Cancelled(RuntimeError):
    """The caller gave up (the client disconnected); the work was stopped, nothing written."""


class OverBudget(InputError):
    """The document costs more than the budget allows (time, pages or chunks)."""


@dataclass
class Budget:
    seconds: float = math.inf
    max_pages: int = 10_000
    max_chunks: int = 50_000
    cancelled: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)
    _children: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seconds_left(self) -> float | None:
        """None without a time limit (what subprocess timeouts take for "wait")."""
        if math.isinf(self.seconds):
            return None
        return max(0.0, self.started + self.seconds - time.monotonic())

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled("the client went away; ingest stopped")
        left = self.seconds_left()
        if left is not None and left <= 0:
            raise OverBudget(f"ingest took longer than the budget of {self.seconds:g} s")

    def check_pages(self, pages: int, name: str) -> None:
        if pages > self.max_pages:
            raise OverBudget(f"{name}: {pages} pages is over the limit of {self.max_pages}")

    def check_chunks(self, chunks: int, name: str) -> None:
        if chunks > self.max_chunks:
            raise OverBudget(f"{name}: {chunks} chunks is over the limit of {self.max_chunks}")

    def cancel(self) -> None:
        self.cancelled.set()
        with self._lock:
            for proc in list(self._children):
                proc.kill()

    def watch(self, proc) -> None:
        with self._lock:
            self._children.add(proc)
        if self.cancelled.is_set():
            proc.kill()

    def unwatch(self, proc) -> None:
        with self._lock:
            self._children.discard(proc)

    def fresh(self) -> "Budget":
        """The same limits and cancel flag, the clock restarted: one budget per document."""
        return Budget(self.seconds, self.max_pages, self.max_chunks, self.cancelled, _children=self._children,
                      _lock=self._lock)
