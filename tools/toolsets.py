"""The default tool set: which modules register tools, and one function that builds the
registry every adapter (our agent, MCP, Hermes) shares. Each module in TOOL_MODULES exposes
`register(registry)`; the registry itself imports none of them."""
from __future__ import annotations

import importlib

from tools.context import ToolContext
from tools.registry import Registry

TOOL_MODULES: list[str] = ["tools.runtime", "tools.sql", "tools.rag", "tools.embed", "tools.rerank",
                           "tools.speech", "tools.memory", "tools.training"]


def build_registry(context: ToolContext | None = None, toolsets: list[str] | None = None) -> Registry:
    """A registry with every default tool (or only `toolsets`), bound to `context`."""
    full = Registry(context or ToolContext())
    for module in TOOL_MODULES:
        importlib.import_module(module).register(full)
    if toolsets is None:
        return full
    unknown = set(toolsets) - set(full.toolsets())
    if unknown:
        raise ValueError(f"unknown toolsets {sorted(unknown)}; known: {full.toolsets()}")
    picked = Registry(full.context)
    for tool in full.select(toolsets):
        picked.add(tool)
    return picked
