"""Hermes agent (hermes-agent from PyPI, in its own venv) runs one conversation on samevm:
samevm's runtime is its model provider and samevm's tools reach it through MCP.

    make hermes                                   # once: Hermes' venv in .samevm/hermes/venv
    python demos/hermes_samevm.py                 # starts the stack (or uses a running one)
    python demos/hermes_samevm.py "Save a memory note: ..." --tools memory_add,memory_search
    python demos/hermes_samevm.py --force-tools --max-turns 1   # what the slow test runs

The stack is started with a 64K context (Hermes refuses less): YaRN over the default Qwen
model's 32K, and a KV cache that holds it. Prints the conversation as Hermes recorded it.
Ports, home and model come from SAMEVM_* (samevm.settings.Settings).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from samevm.probe import runtime_card  # noqa: E402
from samevm.settings import Settings  # noqa: E402
from samevm.supervisor import Stack  # noqa: E402
from tools import hermes  # noqa: E402

QUERY = "Which model and weights revision is samevm serving right now? Call the runtime_status tool to find out, then answer."
LONG_CONTEXT = ["--max-model-len", "65536", "--kv-cache-mb", "1536"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("query", nargs="?", default=QUERY)
    p.add_argument("--tools", default="runtime_status,memory_add,memory_search",
                   help="samevm tools to give Hermes (fewer tools: a shorter prompt for a small model)")
    p.add_argument("--venv", type=Path, default=REPO / ".samevm" / "hermes" / "venv", help="Hermes' own venv")
    p.add_argument("--force-tools", action="store_true",
                   help="send tool_choice=required, so a small model's call is decoded under a grammar")
    p.add_argument("--max-turns", type=int, default=6, help="Hermes' tool-calling iterations (then it summarizes)")
    p.add_argument("--json", type=Path, help="also write the result here")
    args = p.parse_args()

    settings = Settings()
    exe = hermes.install(args.venv)
    t0 = time.monotonic()
    with Stack(settings, runtime_args=LONG_CONTEXT) as stack:
        card = runtime_card(stack.urls.runtime, settings.api_key)
        print(f"stack ready in {time.monotonic() - t0:.0f} s: {card['id']} revision {card['revision']}, "
              f"context {card['context_length']} (rope scaling {card.get('rope_scaling')})", flush=True)
        if card["context_length"] < hermes.HERMES_MIN_CONTEXT:
            print(f"Hermes needs {hermes.HERMES_MIN_CONTEXT} tokens of context; restart the runtime with "
                  f"{' '.join(LONG_CONTEXT)}", file=sys.stderr)
            return 1
        home = hermes.write_home(settings, card["id"], tools=args.tools.split(","), force_tools=args.force_tools,
                                 max_turns=args.max_turns)
        t1 = time.monotonic()
        run = hermes.chat(exe, home, args.query)
        seconds = time.monotonic() - t1
    messages = hermes.transcript(home)
    for m in messages:
        what = m["tool_calls"] or m["content"] or ""
        print(f"[{m['role']}{' ' + m['tool_name'] if m['tool_name'] else ''}] {what[:600]}")
    print(f"hermes exited {run.returncode} after {seconds:.0f} s; its output:\n{run.stdout.strip()}")
    if args.json:
        args.json.write_text(json.dumps({"returncode": run.returncode, "seconds": seconds, "card": card,
                                         "stdout": run.stdout, "stderr": run.stderr[-3000:],
                                         "messages": messages}, indent=1))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
