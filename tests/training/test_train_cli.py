"""`samevm train` through the CLI's real entry point (samevm.cli.main)."""
from __future__ import annotations

import json

from samevm.cli import main
from training.revisions import RevisionStore


def test_train_writes_a_revision(tiny_gguf, pairs_jsonl, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text(pairs_jsonl)
    code = main(["--home", str(tmp_path / "home"), "train", str(data), "--model", tiny_gguf("llama"),
                 "--steps", "2", "--export", "f16", "--set", "warmup_steps=0", "--set", "lr_scheduler=cosine"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["metrics"]["steps"] == 2 and out["served_revision"] is None
    (made,) = RevisionStore(tmp_path / "home" / "training" / "revisions").list()
    assert made["revision"] == out["revision"] and made["params"]["lr_scheduler"] == "cosine"


def test_bad_dataset_and_hyperparameters_are_plain_errors(tiny_gguf, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    data.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a"}\n')
    home = ["--home", str(tmp_path / "home")]
    assert main([*home, "train", str(data), "--model", tiny_gguf("qwen2")]) == 2
    assert "line 2: missing field(s): chosen, rejected" in capsys.readouterr().err
    assert main([*home, "train", str(data), "--lr", "-1"]) == 2
    assert "learning_rate" in capsys.readouterr().err


def test_train_through_the_worker_follows_the_job(tiny_gguf, pairs_jsonl, tmp_path, monkeypatch, capsys):
    from tests.runtime.server.conftest import free_port
    from tests.training.worker_app import create, serving
    from worker.settings import WorkerSettings

    base, data = tmp_path / "base.gguf", tmp_path / "pairs.jsonl"
    base.write_bytes(open(tiny_gguf("qwen2"), "rb").read())
    data.write_text(pairs_jsonl)
    port = free_port()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("SAMEVM_WORKER_PORT", str(port))
    app = create(WorkerSettings(home=tmp_path / "home", allowed_roots=[tmp_path], runtime_url=None))
    with serving(app, port):
        code = main(["train", str(data), "--model", str(base), "--steps", "2", "--set", "warmup_steps=0", "--worker"])
    captured = capsys.readouterr()
    job = json.loads(captured.out)
    assert code == 0 and job["state"] == "succeeded" and job["result"]["metrics"]["steps"] == 2
    assert "step 2/2" in captured.err and "[succeeded]" in captured.err
