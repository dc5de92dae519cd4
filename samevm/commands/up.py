"""samevm up: start the runtime server, the worker and the web console (and with --mcp the MCP
server), wait until each answers its health check, keep them running (a child that dies is
restarted), and stop them cleanly on Ctrl-C or SIGTERM."""
from __future__ import annotations

import signal
import sys
import threading


def register(sub) -> None:
    p = sub.add_parser("up", help="start the runtime and the worker, and keep them running")
    p.add_argument("--model", help="known model name or GGUF path (default: the settings' model)")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"])
    p.add_argument("--mcp", action="store_true", help="also serve the tools over MCP (streamable HTTP)")
    p.add_argument("--no-console", dest="console", action="store_false", help="do not serve the web console")
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for `samevm serve` (repeatable), e.g. --serve-arg=--kv-cache-mb=2048")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for both to be ready")
    p.set_defaults(func=run)


def _printer():
    last: dict[str, str] = {}

    def show(rows: list[dict]) -> None:
        for r in rows:
            line = f"{r['name']:<8} {r['state']:<10} {r['detail']}"
            if last.get(r["name"]) != line:
                # progress while loading: print a line when it changes (at most one per second)
                print(line, file=sys.stderr, flush=True)
                last[r["name"]] = line
    return show


def run(args, settings) -> int:
    from samevm.supervisor import Stack, StackError     # here: every command's start builds this parser
    changes = {k: v for k, v in {"model": args.model, "backend": args.backend}.items() if v}
    settings = settings.model_copy(update=changes)
    stack = Stack(settings, runtime_args=args.serve_arg, mcp=args.mcp, console=args.console)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    show = _printer()
    stack.start()
    try:
        stack.wait_ready(args.timeout, progress=show, cancel=stop)
        urls = stack.urls
        print(f"samevm is up: runtime {urls.runtime}/v1, worker {urls.worker}"
              + (f", MCP {urls.mcp}" if urls.mcp else "") + "  (Ctrl-C stops both)", flush=True)
        if urls.console:
            print(f"console: {urls.console}/", flush=True)
        while not stop.wait(1.0):
            show(stack.status())
            if any(r["state"] == "failed" for r in stack.status()):
                raise StackError("; ".join(f"{r['name']}: {r['detail']}" for r in stack.status()
                                           if r["state"] == "failed"))
        return 0
    except StackError as e:
        if stop.is_set():
            return 130
        print(f"samevm up: {e}", file=sys.stderr)
        return 1
    finally:
        print("stopping...", file=sys.stderr, flush=True)
        stack.stop()
