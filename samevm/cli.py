"""`samevm <command>`: each command lives in samevm/commands/<name>.py and exposes
`register(subparsers)` (adding its parser with `func=run`) and `run(args, settings)`."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from samevm import collector
from samevm.settings import Settings

COMMANDS = ["models", "chat", "serve", "worker", "up", "status", "suite", "mcp", "hermes", "ingest", "search", "train", "tune", "console"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samevm", description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="data directory (default $SAMEVM_HOME or ./.samevm)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"samevm.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings(**({"home": args.home} if args.home else {}))
    collector.resume()              # paused by `python -m samevm` for its imports (serve pauses it again)
    try:
        return args.func(args, settings) or 0
    except KeyboardInterrupt:
        return 130
    except (ValueError, FileNotFoundError) as e:   # bad input from the user: say it plainly
        print(f"samevm {args.command}: {e}", file=sys.stderr)
        return 2
