"""A model that loads on first use, once, and can be unloaded to free memory.

Loading is guarded by a lock so concurrent first requests load it once; `unload` drops
the reference (the next `get` loads again).
"""
from __future__ import annotations

import gc
import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    def __init__(self, name: str, kind: str, loader: Callable[[], T]):
        self.name, self.kind = name, kind
        self._loader = loader
        self._value: T | None = None
        self._lock = threading.Lock()
        self.load_seconds: float | None = None

    @property
    def loaded(self) -> bool:
        return self._value is not None

    def get(self) -> T:
        value = self._value
        if value is not None:
            return value
        with self._lock:
            if self._value is None:
                t0 = time.perf_counter()
                self._value = self._loader()
                self.load_seconds = time.perf_counter() - t0
            return self._value

    def unload(self) -> bool:
        with self._lock:
            was = self._value is not None
            self._value = None
        if was:
            gc.collect()
        return was
