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
