"""The canonical suite end to end on the default model (slow): `samevm suite` starts the real
stack (runtime on Qwen2.5-Coder-0.5B, worker), runs the five turns, checks every store,
and writes its report and transcript."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import catalog
from samevm.cli import main
from tests.stack_fixtures import CHILD_ENV, free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_canonical_suite_passes_on_the_default_model(tmp_path, monkeypatch):
    try:
        model = catalog.resolve(catalog.DEFAULT_MODEL, REPO / ".samevm", auto_fetch=False)
    except catalog.ModelLoadError:
        pytest.skip("the default model is not installed: run `samevm models fetch`")
    for key, value in {"SAMEVM_MODEL": str(model), "SAMEVM_BACKEND": "cpu", **CHILD_ENV,
                       "SAMEVM_RUNTIME_PORT": str(free_port()), "SAMEVM_WORKER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "report"
    code = main(["--home", str(tmp_path / "home"), "suite", "canonical", "--out", str(out)])
    report = json.loads((out / "report.json").read_text())
    transcript = (out / "transcript.txt").read_text()
    failed = {t["name"]: [c["check"] for c in t["checks"] if not c["ok"]]
              for t in report["runs"][0]["turns"] if not t["passed"]}
    assert code == 0 and not failed, f"{failed}\n{transcript}"
    assert [t["name"] for t in report["runs"][0]["turns"]] == ["discover", "keep_facts", "file_background",
                                                                "note", "recall"]
    assert report["model"].startswith("qwen2.5-coder-0.5b") and "recall: PASS" in transcript
