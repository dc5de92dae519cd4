"""samevm train PAIRS.jsonl: ORPO fine-tune a model on preference pairs, export a revision,
and with --promote load it into the running runtime (`POST /admin/reload`).

Runs in this process by default, printing progress; --worker submits the same job to the
running worker (`POST /v1/jobs/orpo`) and follows its event stream instead."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("train", help="ORPO fine-tune on preference pairs (JSONL) and export a GGUF revision")
    p.add_argument("dataset", help="JSONL with prompt/chosen/rejected per line (text or chat messages)")
    p.add_argument("--model", help="base: known model name, trained revision id or GGUF path")
    p.add_argument("--steps", type=int, help="optimizer steps (default 60)")
    p.add_argument("--lr", type=float, help="learning rate (default 5e-4)")
    p.add_argument("--beta", type=float, help="weight of the odds-ratio term (default 0.5)")
    p.add_argument("--export", choices=["f16", "q8_0"], help="GGUF tensor type (default q8_0)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"])
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="any other hyperparameter (see training/params.py), e.g. --set lora_r=8")
    p.add_argument("--promote", action="store_true", help="load the new revision into the runtime")
    p.add_argument("--runtime-url", help="runtime to promote into (default: the settings' runtime)")
    p.add_argument("--worker", action="store_true", help="run as a job of the running worker")
    p.set_defaults(func=run)


def params_from(args) -> OrpoParams:
    from training.params import OrpoParams      # here, not in every samevm start (the parser imports each command)
    given = {k: v for k, v in {"max_steps": args.steps, "learning_rate": args.lr, "beta": args.beta,
                               "export_type": args.export, "device": args.device}.items() if v is not None}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set wants NAME=VALUE, not {item!r}")
        try:
            given[name] = json.loads(value)      # numbers, true/false, lists
        except json.JSONDecodeError:
            given[name] = value                  # a bare word: lr_scheduler=cosine
    return OrpoParams(**given)        # pydantic's ValidationError is a ValueError: cli.py prints it


_T0 = time.monotonic()


def _print_progress(kind: str, **e) -> None:
    if kind == "progress":
        margin = e["reward_margin"]
        print(f"step {e['step']}/{e['max_steps']}  loss {e['loss']:.4f}  reward margin "
              f"{margin if margin is None else round(margin, 4)}  eta {e['eta_s']:.0f} s", file=sys.stderr)
    elif kind in ("stage", "state"):
        print(f"[{e[kind]}] {time.monotonic() - _T0:.1f} s", " ".join(f"{k}={v}" for k, v in e.items() if k != kind),
              file=sys.stderr)


def run(args, settings) -> int:
    params = params_from(args)
    if args.worker:
        return _via_worker(args, settings, params)
    from runtime.catalog import DEFAULT_MODEL
    from training import pipeline
    from training.dataset import load_jsonl
    from training.revisions import RevisionStore

    pairs = load_jsonl(args.dataset)
    revisions = RevisionStore(Path(settings.home) / "training" / "revisions")
    name = args.model or settings.model or DEFAULT_MODEL
    base = pipeline.resolve_base(name, settings.home, revisions)
    job = pipeline.OrpoJob(base_model=str(base), params=params, promote=args.promote,
                           runtime_url=args.runtime_url or settings.runtime_url, base_label=name,
                           tokenizer_cache=str(settings.tokenizer_cache))
    result = pipeline.run(job, pairs, revisions, _print_progress, settings.api_key)
    print(json.dumps(result, indent=1))
    return 1 if result.get("promotion_error") else 0


def _via_worker(args, settings, params: OrpoParams) -> int:
    from httpkit.client import client

    body = {"dataset": Path(args.dataset).read_text(), "hyperparameters": params.model_dump(),
            "promote": args.promote, **({"base_model": args.model} if args.model else {})}
    with client(f"{settings.worker_url}/v1/jobs", settings.api_key, timeout=None) as http:
        r = http.post("/orpo", json=body)
        if r.status_code >= 400:
            raise ValueError(r.json()["error"]["message"])
        job = r.json()
        print(f"job {job['id']}: {job['message']}", file=sys.stderr)
        with http.stream("GET", f"/{job['id']}/events") as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    _print_progress(event.pop("type"), **{k: v for k, v in event.items() if k != "time"})
        job = http.get(f"/{job['id']}").json()
    print(json.dumps({k: job[k] for k in ("id", "state", "error", "result")}, indent=1))
    return 0 if job["state"] == "succeeded" else 1
