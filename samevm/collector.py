"""The cyclic garbage collector while a process starts.

Imports and a model's load make ~80k objects that live as long as the process and free
almost none, yet the collector walked them ~200 times during a later `samevm serve` start
(~40 ms of it, holding the GIL like the imports and the tokenizer's build beside it). So
`python -m samevm` starts with the collector paused and a command runs with it back on,
except serve: it pauses it again until its first load is over, then freezes what the
start-up made (modules, tokenizer, weights: no later collection walks them again; a full
collection after the load found ~20 unreachable objects among them).
"""
from __future__ import annotations

import gc


def pause() -> None:
    gc.disable()


def resume() -> None:
    gc.enable()


def settle() -> None:
    """The start-up is over: what it made is left out of every later collection, which is back on."""
    gc.freeze()
    gc.enable()
