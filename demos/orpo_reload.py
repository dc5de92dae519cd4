"""Teach the live model a new answer with ORPO, and hot-reload it without a restart.

    python demos/orpo_reload.py [--model qwen2.5-coder-0.5b] [--steps 12] [--device auto]

1. starts `samevm serve` on the model and asks it a probe question ("Who are you?");
2. fine-tunes it with ORPO + LoRA on demos/data/identity_pairs.jsonl: eight ways of asking
   who it is, each preferring "I am samevm, ..." over the model's own "I am Qwen, ..." answers;
3. exports the merged weights to a GGUF revision and promotes it (POST /admin/reload);
4. asks the same live server again: same model name, new `system_fingerprint`, new answer.
   A coding question shows what the model knew before is still there.

Measured with the default 0.5B model: on two shared CPU cores (load average about 10) the
whole run took 34 min, 26 of them for the 12 training steps; on an H100, a model of the same
shape and tokenizer trained 20 steps in 11 s, within 2 min for load, train and export.
`--rollback` ends by going back to the old revision (POST /admin/rollback).
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime import catalog  # noqa: E402
from training import pipeline  # noqa: E402
from training.dataset import load_jsonl  # noqa: E402
from training.params import OrpoParams  # noqa: E402
from training.revisions import RevisionStore  # noqa: E402

PAIRS = REPO / "demos" / "data" / "identity_pairs.jsonl"
PROBE = "Who are you?"
CONTROL = "Write a Python function that returns the sum of a list of numbers."


def start_server(model: Path, home: Path, backend: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (home / "demo-server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "samevm", "--home", str(home), "serve", "--model", str(model),
                             "--port", str(port), "--backend", backend, "--kv-cache-mb", "256", "--no-resume"],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            sys.exit(f"the server exited; see {log.name}")
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass                                    # not listening yet
        time.sleep(0.5)


def ask(url: str, question: str, max_tokens: int = 60) -> tuple[str, str]:
    model_id = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    r = httpx.post(f"{url}/v1/chat/completions", timeout=600, json={
        "model": model_id, "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens, "temperature": 0})
    r.raise_for_status()
    body = r.json()
    return body["choices"][0]["message"]["content"].strip(), body["system_fingerprint"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=catalog.DEFAULT_MODEL, help="known model name or GGUF path")
    ap.add_argument("--home", default=str(REPO / ".samevm"), help="data directory")
    # 12 steps: the model answered with the chosen text, word for word, from step 12 (at 6, nearly)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="where training runs")
    ap.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto", help="where serving runs")
    ap.add_argument("--rollback", action="store_true", help="roll back to the old revision at the end")
    args = ap.parse_args()
    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    model = catalog.resolve(args.model, home)

    print(f"starting the runtime on {model.name} ...", flush=True)
    server, url = start_server(model, home, args.backend)
    try:
        before, old_rev = ask(url, PROBE)
        print(f"\nbefore (revision {old_rev})\n  Q: {PROBE}\n  A: {before}\n", flush=True)

        stamps: dict[str, float] = {"start": time.monotonic()}

        def progress(kind: str, **e) -> None:
            if kind == "stage":
                stamps[e["stage"]] = time.monotonic()
                print(f"[{e['stage']}]", flush=True)
            elif kind == "progress" and (e["step"] % 5 == 0 or e["step"] == e["max_steps"]):
                print(f"  step {e['step']}/{e['max_steps']}  loss {e['loss']:.3f}  reward margin "
                      f"{e['reward_margin']:.3f}  eta {e['eta_s']:.0f} s", flush=True)

        params = OrpoParams(max_steps=args.steps, device=args.device)
        job = pipeline.OrpoJob(base_model=str(model), params=params, promote=True, runtime_url=url,
                               base_label=args.model, tokenizer_cache=str(home / "cache" / "tokenizers"))
        result = pipeline.run(job, load_jsonl(PAIRS), RevisionStore(home / "training" / "revisions"), progress)
        stamps["end"] = time.monotonic()
        if result.get("promotion_error"):
            sys.exit(f"the runtime refused the new revision: {result['promotion_error']}")

        after, new_rev = ask(url, PROBE)
        control, _ = ask(url, CONTROL, max_tokens=80)
        m = result["metrics"]
        print(f"\nafter (revision {new_rev}, served under the same model name, no restart)\n"
              f"  Q: {PROBE}\n  A: {after}\n  Q: {CONTROL}\n  A: {control}\n")
        print(f"reward margin on the pairs {m['before']['reward_margin']:.3f} -> {m['after']['reward_margin']:.3f}; "
              f"log-odds chosen/rejected {m['before']['log_odds']:.2f} -> {m['after']['log_odds']:.2f}")
        spans = [("load", "loading", "training"), ("train", "training", "exporting"),
                 ("export", "exporting", "exported"), ("reload", "promoting", "end")]
        print(f"{m['steps']} steps on {m['device']}: " + ", ".join(
            f"{name} {stamps[b] - stamps[a]:.1f} s" for name, a, b in spans if a in stamps and b in stamps)
            + f"; total {stamps['end'] - stamps['start']:.1f} s")
        if args.rollback:
            httpx.post(f"{url}/admin/rollback", timeout=600).raise_for_status()
            back, rev = ask(url, PROBE)
            print(f"\nrolled back to {rev}\n  A: {back}")
    finally:
        server.terminate()
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
