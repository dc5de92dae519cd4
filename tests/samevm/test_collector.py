"""The garbage collector while samevm starts (samevm/collector.py): paused by `python -m samevm`
for its imports, back on for every command, and for serve once its first load is over."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from runtime.config import EngineConfig
from runtime.server.config import ServerConfig
from runtime.server.revisions import RevisionRegistry
from runtime.server.state import ServerState
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


def test_serve_freezes_what_its_start_made_and_collects_once_the_model_serves(tiny_gguf, tmp_path, collector_paused):
    state = state_for(tiny_gguf("qwen2"), tmp_path)
    made = []                           # tracked by the collector: something the start made
    try:
        serve.first_load(state, None)
        assert state.loop is not None and state.load_error is None
        assert gc.isenabled() and gc.get_freeze_count() > 0
        assert not any(o is made for o in gc.get_objects())      # frozen: no collection walks it again
    finally:
        if state.loop is not None:
            state.loop.close()


def test_serve_collects_again_after_a_failed_first_load(tmp_path, collector_paused):
    state = state_for(str(tmp_path / "missing.gguf"), tmp_path)
    serve.first_load(state, None)
    assert state.loop is None and "missing.gguf" in state.load_error
    assert gc.isenabled()
