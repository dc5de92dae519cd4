"""Hermes agent (`hermes-agent` from PyPI) on samevm: samevm's runtime as its model provider
(a custom OpenAI-compatible base URL) and every samevm tool through MCP (`samevm mcp` over
stdio, started by Hermes).

Hermes pins its own versions of openai, pydantic and more, so it lives in a virtual
environment of its own (`make hermes` puts it in .samevm/hermes/venv); the two talk only
over HTTP and MCP. Its home (HERMES_HOME: config.yaml, sessions, logs) is <home>/hermes/home.

Hermes sizes its context by asking the endpoint's /v1/models (`context_length`) and refuses
a model under 64K tokens. samevm reports what one request may really use; to serve 64K from
a Qwen model trained on 32K, start the runtime with `--max-model-len 65536` (YaRN, see
runtime/models/rope.py) and a KV cache that holds it.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

HERMES_REQUIREMENT = "hermes-agent[mcp]==0.19.0"
HERMES_MIN_CONTEXT = 64_000          # agent/model_metadata.py MINIMUM_CONTEXT_LENGTH in 0.19.0
SERVER = "samevm"                    # Hermes names the tools mcp_samevm_<tool>, toolset "samevm"


def hermes_dir(home: Path) -> Path:
    return Path(home).resolve() / "hermes"


def install(venv: Path) -> Path:
    """Create Hermes' own venv at `venv` and pip-install hermes-agent into it (once);
    returns the `hermes` executable."""
    exe = Path(venv) / "bin" / "hermes"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(Path(venv) / "bin" / "python"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", HERMES_REQUIREMENT], check=True)
    return exe


def config(settings, model_id: str, tools: list[str] | None = None, max_turns: int = 6,
           max_tokens: int = 1024, force_tools: bool = False) -> dict:
    """Hermes' config.yaml for the stack of `settings` (samevm.settings.Settings): the
    runtime as a custom provider serving `model_id`, samevm's MCP server over stdio (only
    `tools` of it, if given), and nothing that reaches beyond this machine. `max_tokens` caps
    each reply: without it Hermes asks for the whole context, which samevm refuses (400) as
    soon as the prompt takes any of it. `force_tools` sends tool_choice "required" with every
    request (through Hermes' custom_providers extra_body): samevm then decodes a valid call
    under a grammar, for a model too small to write one reliably; the turn ends when Hermes'
    `max_turns` runs out."""
    server = {"command": sys.executable, "args": ["-m", "samevm", "--home", str(Path(settings.home).resolve()), "mcp"],
              "env": {"SAMEVM_HOST": settings.host, "SAMEVM_RUNTIME_PORT": str(settings.runtime_port),
                      "SAMEVM_WORKER_PORT": str(settings.worker_port), "HF_HUB_OFFLINE": "1"},
              "timeout": 300, "connect_timeout": 120}
    if settings.api_key:
        server["env"]["SAMEVM_API_KEY"] = settings.api_key
    if tools:
        server["tools"] = {"include": tools}
    base_url = settings.runtime_url + "/v1"
    forcing = {"custom_providers": [{"name": "samevm", "base_url": base_url,
                                     "extra_body": {"tool_choice": "required"}}]} if force_tools else {}
    return {
        **forcing,
        "model": {"provider": "custom", "default": model_id, "base_url": base_url,
                  "api_key": settings.api_key or "samevm-local", "max_tokens": max_tokens},
        "toolsets": [SERVER],
        "mcp_servers": {SERVER: server},
        "agent": {"max_turns": max_turns},
    }


def write_home(settings, model_id: str, **kw) -> Path:
    """Write HERMES_HOME/config.yaml for the stack; returns HERMES_HOME."""
    home = hermes_dir(settings.home) / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config(settings, model_id, **kw), sort_keys=False))
    return home


def chat(hermes: Path, hermes_home: Path, query: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """One non-interactive Hermes conversation (`hermes chat -q QUERY -Q`) with the config in
    `hermes_home`, limited to samevm's tools."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "OPENROUTER_"))}
    env.update({"HERMES_HOME": str(hermes_home), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"})
    cmd = [str(hermes), "chat", "-q", query, "-Q", "--provider", "custom", "-t", SERVER, "--source", "tool"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(hermes_home))


def transcript(hermes_home: Path) -> list[dict]:
    """The messages of Hermes' latest session, as Hermes stored them (its state.db): role,
    content, tool_calls (JSON text) and, for tool results, tool_name."""
    with sqlite3.connect(f"file:{Path(hermes_home) / 'state.db'}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT role, content, tool_calls, tool_name FROM messages WHERE session_id = "
                          "(SELECT session_id FROM messages ORDER BY id DESC LIMIT 1) ORDER BY id").fetchall()
    return [dict(r) for r in rows]
