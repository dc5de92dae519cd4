"""The garbage collector while samevm starts (samevm/collector.py): paused by `python -m samevm`
for its imports, back on for every command, and for serve once its first load is over."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import weakref

import pytest

from runtime.config import EngineConfig
from runtime.engine.llm_engine import read_files
from runtime.server import loading
from runtime.server.config import ServerConfig
from runtime.server.revisions import RevisionRegistry
from runtime.server.state import ServerState
from samevm import collector
from samevm.cli import main
from samevm.commands import serve
from tests.runtime.server.conftest import REPO


@pytest.fixture
def collector_paused():
    """The collector paused as a start leaves it; afterwards on and nothing frozen, as pytest had it."""
    gc.disable()
    yield
    gc.unfreeze()
    gc.enable()


def test_python_m_samevm_imports_with_the_collector_paused():
    code = ("import gc, runpy, samevm.cli\n"
            "samevm.cli.main = lambda: print('collecting' if gc.isenabled() else 'paused') or 0\n"
            "runpy.run_module('samevm', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["paused"]


def test_a_command_runs_with_the_collector_back_on(tmp_path, capsys, collector_paused):
    assert main(["--home", str(tmp_path), "models"]) == 0
    assert gc.isenabled() and not gc.get_freeze_count()


def state_for(model: str, home) -> ServerState:
    config = ServerConfig(engine=EngineConfig(model=model, backend="cpu", kv_cache_mb=8,
                                              tokenizer_cache=str(home / "tok")), model_id="tiny", home=home)
    return ServerState(config, RevisionRegistry(config.revisions_dir, config.model_id))


def test_serve_collects_once_its_model_serves_and_a_replaced_engine_is_freed(tiny_gguf, tmp_path, collector_paused):
    """As serve starts: its files read and its imports frozen, the first load with the collector
    paused; then it collects again, and an engine a reload replaced is freed (only a collection
    frees it: had the first load been frozen, its KV cache and weights would stay for good)."""
    state = state_for(tiny_gguf("qwen2"), tmp_path)
    files = read_files(state.config.engine)
    collector.imports_done()
    serve.first_load(state, files)
    try:
        assert state.loop is not None and state.load_error is None and gc.isenabled()
        first = weakref.ref(state.loop.live)
        old = state.loop.swap(loading.load(state, state.config.engine.model, "r2"))
        del old, files
        deadline = time.monotonic() + 30         # the engine thread lets go of it once it has drained
        while first() is not None:
            assert time.monotonic() < deadline, "the replaced engine was never freed"
            time.sleep(0.05)
            gc.collect()
    finally:
        state.loop.close()


def test_serve_collects_again_after_a_failed_first_load(tmp_path, collector_paused):
    state = state_for(str(tmp_path / "missing.gguf"), tmp_path)
    serve.first_load(state, None)
    assert state.loop is None and "missing.gguf" in state.load_error
    assert gc.isenabled()
