"""samevm status: health, model, revision, backend and URLs of the runtime and the worker
(and of the supervisor's children when `samevm up` runs)."""
from __future__ import annotations

import json
import os
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("status", help="show whether the runtime and the worker are up, and what they serve")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def collect(settings) -> dict:
    """What the stack's services say about themselves, and what the supervisor recorded."""
    from samevm.probe import probe_health, runtime_card, worker_models   # here: others start without httpx
    runtime, worker = probe_health(settings.runtime_url), probe_health(settings.worker_url)
    card = runtime_card(settings.runtime_url, settings.api_key) if runtime.ready else None
    models = worker_models(settings.worker_url, settings.api_key) if worker.ready else None
    state_file = Path(settings.home) / "run" / "stack.json"
    supervised = json.loads(state_file.read_text()) if state_file.is_file() else None
    if supervised:
        supervised["running"] = _alive(supervised["supervisor_pid"])
    return {
        "runtime": {"url": settings.runtime_url, "health": runtime.detail, "ready": runtime.ready,
                    **({k: card.get(k) for k in ("id", "revision", "backend", "context_length", "rope_scaling")}
                       if card else {})},
        "worker": {"url": settings.worker_url, "health": worker.detail, "ready": worker.ready,
                   **({"models": [m["name"] + (" (loaded)" if m.get("loaded") else "") for m in models]}
                      if models is not None else {})},
        "supervisor": supervised,
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # someone else's process: it exists
        return True
    return True


def run(args, settings) -> int:
    info = collect(settings)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0 if info["runtime"]["ready"] and info["worker"]["ready"] else 1
    for name in ("runtime", "worker"):
        s = info[name]
        print(f"{name:<8} {'ready' if s['ready'] else 'down':<6} {s['url']}  ({s['health']})")
        if name == "runtime" and "id" in s:
            print(f"         model {s['id']}  revision {s['revision']}  backend {s['backend']}  "
                  f"context {s['context_length']}" + (f"  rope {s['rope_scaling']}" if s.get("rope_scaling") else ""))
        if name == "worker" and "models" in s:
            print(f"         models: {', '.join(s['models'])}")
    sup = info["supervisor"]
    if sup and not sup["running"]:
        print(f"(no supervisor: `samevm up` pid {sup['supervisor_pid']} is gone)")
    elif sup:
        for row in sup["services"]:
            print(f"supervised {row['name']:<8} {row['state']:<10} pid {row['pid']}  restarts {row['restarts']}  "
                  f"log {row['log']}")
    return 0 if info["runtime"]["ready"] and info["worker"]["ready"] else 1
