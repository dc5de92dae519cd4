"""samevm suite [NAME|PATH] [--seeds N]: run a conversation suite (agents/suites/NAME.yaml
or any suite file) through the agent against the stack, starting the runtime and the
worker unless they already run. Prints each turn's transcript as it finishes, the pass/fail
table and what failed in words at the end; writes report.json and transcript.txt. A failing
turn is a result, not an error: the exit status is 0 once the suite ran (with --strict, 0 only
if every turn of every seed passed)."""
from __future__ import annotations

import sys
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("suite", help="run a conversation suite through the agent and check every turn")
    p.add_argument("suite", nargs="?", default="canonical", help="suite name or path to a suite YAML file")
    p.add_argument("--seeds", type=int, default=1, help="how many seeds to run (0..N-1)")
    p.add_argument("--seed-start", type=int, default=0, help="first seed")
    p.add_argument("--parallel", type=int, default=1,
                   help="seeds run at once (the runtime batches them; each stores under its own names)")
    p.add_argument("--model", help="known model name or GGUF path (default: the settings' model)")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"])
    p.add_argument("--strict", action="store_true", help="exit with 1 unless every turn of every seed passed")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the suite's)")
    p.add_argument("--out", type=Path, help="report directory (default $SAMEVM_HOME/suites/NAME-TIME)")
    p.add_argument("--quiet", action="store_true", help="print only the table")
    p.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the stack to be ready")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from agents import report
    from agents.checks import Probe
    from agents.model import ChatModel
    from agents.runner import SuiteRunner
    from agents.suite import load
    from samevm.commands.up import _printer
    from samevm.supervisor import Stack
    from tools.context import ToolContext
    from tools.toolsets import build_registry

    suite = load(args.suite)
    if args.seeds < 1:
        raise ValueError("--seeds must be at least 1")
    settings = settings.model_copy(update={k: v for k, v in {"model": args.model, "backend": args.backend}.items() if v})
    out = args.out or Path(settings.home) / "suites" / f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    stack = Stack(settings)
    stack.start()
    try:
        stack.wait_ready(args.timeout, progress=_printer())
        context = ToolContext.from_settings(settings)
        registry = build_registry(context)
        model = ChatModel(stack.urls.runtime, api_key=settings.api_key)
        probe = Probe(stack.urls.worker, registry, api_key=settings.api_key)

        def show(seed: int, turn: dict) -> None:
            if not args.quiet:
                print(f"[seed {seed}] " + report.turn_transcript(turn) + "\n", flush=True)

        runner = SuiteRunner(suite, model, registry, probe,
                             {"temperature": args.temperature}, on_turn=show)
        print(f"suite {suite.name}: {len(suite.turns)} turns x {args.seeds} seeds on {runner.info['id']} "
              f"({runner.info.get('backend')})", flush=True)
        result = runner.run(list(range(args.seed_start, args.seed_start + args.seeds)), args.parallel)
    finally:
        stack.stop()
    json_path, text_path = report.write(result, out)
    print(report.table(result))
    print(report.failures(result))
    print(f"report: {json_path}\ntranscript: {text_path}")
    passed = result["summary"]["passed"] == result["summary"]["runs"]
    return 1 if args.strict and not passed else 0
