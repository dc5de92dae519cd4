"""The samevm command line, in-process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from samevm.cli import main


def test_models_lists_known_models(tmp_path, capsys):
    assert main(["--home", str(tmp_path), "models"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-0.5b" in out and "smollm2-135m" in out and "not installed" in out


def test_chat_answers_with_a_local_gguf(tmp_path, tiny_gguf, capsys):
    rc = main(["--home", str(tmp_path), "chat", "What is 2+2?", "--model", tiny_gguf("qwen2"),
               "--backend", "cpu", "--max-tokens", "6"])
    captured = capsys.readouterr()
    assert rc == 0
    assert captured.out.strip()
    assert "6 tokens" in captured.err or "finish stop" in captured.err


def test_cpu_weights_are_int8_by_default_and_float32_on_request(tmp_path, tiny_gguf, capsys, monkeypatch):
    args = ["--home", str(tmp_path), "chat", "hi", "--model", tiny_gguf("qwen2"), "--backend", "cpu",
            "--max-tokens", "2"]
    assert main(args) == 0
    assert "on cpu int8" in capsys.readouterr().err
    assert main(args + ["--cpu-dtype", "float32"]) == 0
    assert "on cpu float32," in capsys.readouterr().err
    monkeypatch.setenv("SAMEVM_CPU_DTYPE", "bfloat16")
    assert main(args) == 0
    assert "on cpu bfloat16," in capsys.readouterr().err


def test_bad_model_name_is_a_clear_error(tmp_path, capsys):
    assert main(["--home", str(tmp_path), "models", "path", "nope"]) == 2
    assert "no model file or known model named 'nope'" in capsys.readouterr().err


def test_the_parser_imports_no_command_s_own_dependencies():
    """Every samevm start builds the whole parser: a command's own libraries (the trainer's, the
    worker's, a progress bar) load when it runs, not in `samevm serve`'s start."""
    code = ("import json, sys\nfrom samevm.cli import build_parser\n"
            "build_parser().parse_args(['serve'])\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'training', 'worker', 'rag', 'tqdm'})))")
    repo = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == []
