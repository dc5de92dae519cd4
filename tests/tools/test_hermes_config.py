"""`samevm hermes` writes a Hermes config for the running stack; the MCP server it names
starts and serves samevm's tools (checked with the SDK's stdio client, as Hermes starts it),
and the model provider it names answers. Hermes itself runs in test_hermes.py (slow)."""
from __future__ import annotations

import anyio
import httpx
import yaml
from mcp import Client, StdioServerParameters

from samevm.cli import main
from tests.stack_fixtures import settings_env


def test_samevm_hermes_writes_a_config_that_works(stack, monkeypatch, capsys):
    for key, value in settings_env(stack.settings).items():
        monkeypatch.setenv(key, value)
    assert main(["hermes", "--tools", "memory_add,memory_search", "--force-tools"]) == 0
    out, err = capsys.readouterr()
    assert "Hermes refuses less than 64000" in err              # the tiny model's 1024 tokens are not enough
    home = stack.settings.home.resolve() / "hermes" / "home"
    assert out.startswith(f"HERMES_HOME={home} ") and out.rstrip().endswith("chat --provider custom -t samevm")
    config = yaml.safe_load((home / "config.yaml").read_text())

    model = config["model"]
    card = httpx.get(model["base_url"] + "/models", headers={"Authorization": f"Bearer {model['api_key']}"}).json()
    assert model["provider"] == "custom" and card["data"][0]["id"] == model["default"]
    assert config["custom_providers"][0]["extra_body"] == {"tool_choice": "required"}
    assert config["custom_providers"][0]["base_url"] == model["base_url"]

    server = config["mcp_servers"]["samevm"]
    assert server["tools"]["include"] == ["memory_add", "memory_search"]
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])

    async def use_it():
        async with Client(params, read_timeout_seconds=120) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"memory_add", "memory_search", "sql_query"} <= names
            saved = await client.call_tool("memory_add", {"text": "Configured for Hermes"})
            assert not saved.is_error and saved.structured_content["ok"]
    anyio.run(use_it)
