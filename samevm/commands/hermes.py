"""samevm hermes [QUERY]: point Hermes agent at the running stack. Writes HERMES_HOME
(<home>/hermes/home/config.yaml: samevm's runtime as the model provider, samevm's tools
over MCP) and prints how to start Hermes; with a QUERY, runs one conversation and prints it.
Hermes lives in its own venv (`make hermes`); it wants a 64K context, so start the stack
with `samevm up --serve-arg=--max-model-len=65536 --serve-arg=--kv-cache-mb=1536`."""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("hermes", help="configure Hermes agent for the running stack (and run one query)")
    p.add_argument("query", nargs="?", help="run this one conversation now")
    p.add_argument("--tools", help="comma-separated samevm tools to give Hermes (default: all)")
    p.add_argument("--force-tools", action="store_true", help="send tool_choice=required (small models)")
    p.add_argument("--venv", type=Path, default=Path(".samevm/hermes/venv"), help="Hermes' own venv")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from samevm.probe import runtime_card          # here: the other commands start without httpx
    from tools import hermes

    card = runtime_card(settings.runtime_url, settings.api_key)
    if card is None:
        raise ValueError(f"no runtime answers at {settings.runtime_url}; start the stack first (samevm up)")
    home = hermes.write_home(settings, card["id"], tools=args.tools.split(",") if args.tools else None,
                             force_tools=args.force_tools)
    if card["context_length"] < hermes.HERMES_MIN_CONTEXT:
        print(f"warning: the runtime serves {card['context_length']} tokens of context and Hermes refuses less than "
              f"{hermes.HERMES_MIN_CONTEXT}; restart it with --max-model-len 65536 (YaRN) and a KV cache that holds it",
              file=sys.stderr)
    if not args.query:
        print(f"HERMES_HOME={home} {args.venv.resolve() / 'bin' / 'hermes'} chat --provider custom -t {hermes.SERVER}")
        return 0
    result = hermes.chat(hermes.install(args.venv), home, args.query)
    for m in hermes.transcript(home):
        print(f"[{m['role']}{' ' + m['tool_name'] if m['tool_name'] else ''}] {(m['tool_calls'] or m['content'] or '')[:800]}")
    print(result.stdout.strip(), file=sys.stderr)
    return result.returncode
