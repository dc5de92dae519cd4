"""One real stack (tiny runtime + real worker) shared by the tool and MCP tests."""
from __future__ import annotations

import pytest

from tests.stack_fixtures import stack_settings, tiny_stack
from tools.context import ToolContext
from tools.toolsets import build_registry


@pytest.fixture(scope="session")
def docs_dir(tmp_path_factory):
    """A folder the worker may ingest from by path."""
    return tmp_path_factory.mktemp("docs")


@pytest.fixture(scope="session")
def stack(tiny_gguf, tmp_path_factory, docs_dir):
    settings = stack_settings(tmp_path_factory.mktemp("stack-home"), tiny_gguf("qwen2"))
    with tiny_stack(settings, docs_dir) as s:
        yield s


@pytest.fixture(scope="session")
def registry(stack):
    r = build_registry(ToolContext.from_settings(stack.settings))
    yield r
    r.context.close()


@pytest.fixture
def call(registry):
    """call(name, **arguments) -> the envelope, asserting it is ok; call.raw for any envelope."""
    def ok(name: str, **arguments):
        out = registry.call(name, arguments)
        assert out["ok"], out
        return out["data"]
    ok.raw = lambda name, **arguments: registry.call(name, arguments)
    return ok
