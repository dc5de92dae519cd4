"""The default model as `samevm serve` serves it, with the tools adapter shipped for it (slow;
runs where the default model is installed): no regression on plain prompts, which are answered
in text although the agent's tools are offered (the suites measure the calls)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents import prompts
from runtime import catalog
from tests.runtime.server.conftest import start_server
from tools.context import ToolContext
from tools.toolsets import build_registry

pytestmark = pytest.mark.slow
HOME = Path(os.environ.get("SAMEVM_HOME", ".samevm")).resolve()
INSTALLED = catalog.installed_path(catalog.DEFAULT_MODEL, HOME)
PLAIN = {"What is 2+2?": "4", "Name three primary colors.": "blue",
         "Write a Python function that reverses a string.": "def ", "Translate 'good morning' into French.": "bonjour"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if INSTALLED is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    home = tmp_path_factory.mktemp("tuned-home")
    (home / "models").mkdir()
    (home / "models" / INSTALLED.name).symlink_to(INSTALLED)
    if (HOME / "cache" / "tokenizers").is_dir():           # a converted tokenizer saves ~30 s
        (home / "cache").mkdir()
        (home / "cache" / "tokenizers").symlink_to(HOME / "cache" / "tokenizers")
    server = start_server(catalog.DEFAULT_MODEL, home, "--kv-cache-mb", "256")
    yield server
    server.stop()


def test_the_default_model_is_served_with_its_adapter(served):
    adapter = served.get("/health").json()["adapter"]
    assert adapter["name"] == catalog.KNOWN_MODELS[catalog.DEFAULT_MODEL].adapter
    assert adapter["sha256"] == catalog.KNOWN_MODELS[catalog.DEFAULT_MODEL].adapter_sha256


@pytest.mark.parametrize("prompt", list(PLAIN))
def test_plain_prompts_are_answered_in_text_with_the_tools_offered(served, prompt):
    tools = prompts.strict(build_registry(ToolContext()).openai_tools())
    r = served.client().chat.completions.create(
        model=catalog.DEFAULT_MODEL, messages=[{"role": "user", "content": prompt}], tools=tools,
        tool_choice="auto", temperature=0, max_tokens=120)
    msg = r.choices[0].message
    assert not msg.tool_calls, (prompt, msg.tool_calls)
    assert PLAIN[prompt] in msg.content.lower(), (prompt, msg.content)

