"""`samevm mcp` through the official SDK's own client, over stdio and streamable HTTP, listing
and calling tools against the real stack."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from samevm.cli import main
from tests.stack_fixtures import free_port, settings_env
from tools.mcp_server import build_server
from tools.registry import Registry
from tools.toolsets import build_registry

REPO = Path(__file__).resolve().parents[2]


def envelope(result) -> dict:
    """The tool's envelope, from the text a model reads; it must equal the structured copy."""
    data = json.loads(result.content[0].text)
    assert result.structured_content == data and result.is_error == (not data["ok"])
    return data


async def exercise(client: Client, db: str) -> None:
    listed = (await client.list_tools()).tools
    registry = build_registry()
    assert {t.name for t in listed} == set(registry.tools)
    sql_exec = next(t for t in listed if t.name == "sql_exec")
    assert sql_exec.input_schema == registry.tools["sql_exec"].parameters

    await client.call_tool("sql_exec", {"db": db, "sql": "CREATE TABLE t (n INTEGER)"})
    made = envelope(await client.call_tool("sql_exec", {"db": db, "sql": "INSERT INTO t VALUES (42)"}))
    assert made["ok"] and made["data"]["rowcount"] == 1
    rows = envelope(await client.call_tool("sql_query", {"db": db, "sql": "SELECT n FROM t"}))
    assert rows["data"]["rows"] == [[42]]

    bad = envelope(await client.call_tool("sql_query", {"db": db}))
    assert bad["ok"] is False and "'sql' is a required property" in bad["error"]
    with pytest.raises(MCPError, match="unknown tool"):
        await client.call_tool("no_such_tool", {})


def test_stdio_server_lists_and_calls_tools(stack):
    env = {**os.environ, **settings_env(stack.settings)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "samevm", "mcp"], env=env, cwd=str(REPO))

    async def main():
        async with Client(params, read_timeout_seconds=120) as client:
            await exercise(client, "mcp_stdio")
    anyio.run(main)


@pytest.fixture(scope="module")
def http_mcp(stack, tmp_path_factory):
    port = free_port()
    env = {**os.environ, **settings_env(stack.settings)}
    tmp_path = tmp_path_factory.mktemp("mcp")
    log = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "samevm", "mcp", "--http", "--port", str(port)], cwd=REPO,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, (tmp_path / "mcp.log").read_text()
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the MCP server did not start"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(20)
    log.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])   # legacy: the initialize handshake older clients use
def test_streamable_http_server_lists_and_calls_tools(http_mcp, mode):
    async def main():
        async with Client(http_mcp, mode=mode, read_timeout_seconds=120) as client:
            await exercise(client, f"mcp_http_{mode}")
            note = envelope(await client.call_tool("memory_add", {"text": f"MCP over HTTP works ({mode})"}))
            found = envelope(await client.call_tool("memory_search", {"query": f"MCP HTTP {mode}"}))
            assert found["data"]["notes"][0]["id"] == note["data"]["id"]
    anyio.run(main)


def test_http_server_refuses_foreign_hosts_and_binding(http_mcp, stack, capsys):
    r = httpx.post(http_mcp, headers={"Host": "evil.example", "Content-Type": "application/json",
                                      "Accept": "application/json, text/event-stream"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code in (403, 421)
    assert main(["--home", str(stack.settings.home), "mcp", "--http", "--host", "0.0.0.0"]) == 2
    assert "loopback only" in capsys.readouterr().err


def test_a_handler_bug_reaches_the_client_as_an_error_result_naming_it():
    # Registry.call raises on a handler bug; the MCP server turns it into an error result that
    # says what failed, not the SDK's bare "Internal server error"
    registry = Registry()

    @registry.tool(toolset="test")
    def broken() -> dict:
        """Fails with a bug."""
        return {}["missing"]

    async def call() -> dict:
        async with Client(build_server(registry)) as client:
            return envelope(await client.call_tool("broken", {}))
    out = anyio.run(call)
    assert out["ok"] is False and out["retryable"] is False and "KeyError" in out["error"] and "broken" in out["error"]
