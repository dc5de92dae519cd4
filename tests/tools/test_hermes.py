"""Hermes agent itself (hermes-agent 0.19.0 from PyPI, in its own venv) runs one conversation
against samevm on the real default model and calls a samevm tool through MCP. Slow: the
first run installs Hermes; the model loads and prefills Hermes' prompt on the CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import catalog
from tests.stack_fixtures import CHILD_ENV, settings_env, stack_settings
from tools import hermes

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
MODEL = catalog.installed_path(catalog.DEFAULT_MODEL, REPO / ".samevm")


def test_hermes_converses_on_samevm_and_calls_a_samevm_tool(tmp_path):
    if MODEL is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    settings = stack_settings(tmp_path / "home", str(MODEL))
    cache = REPO / ".samevm" / "cache" / "tokenizers"
    if cache.is_dir():                          # skip the tokenizer conversion
        (settings.home / "cache").mkdir(parents=True)
        (settings.home / "cache" / "tokenizers").symlink_to(cache)
    out = tmp_path / "hermes.json"
    env = {k: v for k, v in os.environ.items() if k != "CI"} | settings_env(settings) | CHILD_ENV
    # Unforced, the 0.5B model wrote malformed or no calls under Hermes' prompt; forced, samevm
    # decodes the call under a grammar, and after one tool turn Hermes asks for a summary.
    demo = subprocess.run([sys.executable, "demos/hermes_samevm.py", "--json", str(out), "--force-tools",
                           "--max-turns", "1",
                           "--venv", str(REPO / ".samevm" / "hermes" / "venv")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
    assert out.exists(), demo.stdout[-3000:] + demo.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["card"]["context_length"] >= hermes.HERMES_MIN_CONTEXT
    assert result["card"]["rope_scaling"]["type"] == "yarn"

    messages = result["messages"]                # as Hermes stored them in its state.db
    calls = [json.loads(m["tool_calls"]) for m in messages if m["role"] == "assistant" and m["tool_calls"]]
    names = [c["function"]["name"] for batch in calls for c in batch]
    assert any(n.startswith("mcp__samevm__") for n in names), (names, result["stdout"])
    results = [m for m in messages if m["role"] == "tool"]
    assert results and result["card"]["revision"] in results[0]["content"], results   # the tool's true answer
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"]
    assert result["returncode"] == 0, result["stderr"]
