"""The cyclic garbage collector while a process starts.

A start makes ~130k objects that live as long as the process (modules, classes, functions)
and frees almost none, yet the collector walked them ~200 times during a later `samevm serve`
start (~40 ms of it, holding the GIL like the imports and the tokenizer's build beside it).
So `python -m samevm` imports with the collector paused and a command runs with it on. Serve
keeps it paused through its first load: once its imports are done it freezes what the start
made so far (no collection walks that again), and once the model serves the collector is back
on for everything after. The engine is not frozen: a hot reload makes it garbage, in cycles
that only a collection frees (its KV cache and weights with them).
"""
from __future__ import annotations

import gc


def pause() -> None:
    gc.disable()


def resume() -> None:
    gc.enable()


def imports_done() -> None:
    """What the start made so far stays for the life of the process: no collection walks it."""
    gc.freeze()
