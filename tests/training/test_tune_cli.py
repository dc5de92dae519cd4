"""`samevm tune` end to end on a tiny random model: steps in, adapter + merged GGUF +
report.json + loss_curves.png out. The fast test gives the steps and pairs and skips the
held-out suites (no stack); the slow one generates (a stand-in for tuning.generate writing the
hand-made steps through a real worker's URL) and evaluates a suite on base and tuned stacks."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from peft import PeftModel

from dev.synthetic import Shape
from samevm.cli import main
from tests.stack_fixtures import CHILD_ENV
from tests.training import agent_steps
from training.adapter import CONFIG, WEIGHTS
from training.hf_model import load_model

TINY = ["--steps", "12", "--orpo-steps", "2", "--lr", "3e-3", "--device", "cpu", "--backend", "cpu",
        "--export", "f16", "--max-length", "2048", "--quiet"]


def check_outputs(out, base) -> dict:
    report = json.loads((out / "report.json").read_text())
    assert (out / "loss_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "adapter" / CONFIG).is_file() and (out / "adapter" / WEIGHTS).is_file()
    PeftModel.from_pretrained(load_model(base), out / "adapter")           # loads where PEFT loads it
    assert (out / "merged.gguf").is_file()
    data = report["data"]
    assert data["records"] + data["held_out_records"] == len(agent_steps.steps())
    assert data["kinds"] == {"call": 16, "answer": 8} and data["pairs"] == 16
    assert [e["step"] for e in report["sft"]["history"]] == list(range(1, 13))
    assert report["sft"]["metrics"]["final_loss"] < report["sft"]["metrics"]["first_loss"]
    assert len(report["orpo"]["history"]) == 2
    assert report["adapter"]["label"].startswith("adapter@sha256:")
    return report


def test_tune_trains_and_writes_the_report(tiny_gguf, tmp_path):
    base = tiny_gguf("qwen2", shape=Shape(context=8192))
    data = agent_steps.write(tmp_path / "steps.jsonl")
    out = tmp_path / "out"
    assert main(["--home", str(tmp_path / "home"), "tune", "--model", base, "--data", data, "--pairs", data,
                 "--suites", "--out", str(out), *TINY]) == 0
    report = check_outputs(out, base)
    assert report["eval"] == {}

    # --resume goes on from what OUT holds: here everything, so nothing is trained again
    # (`--suites none` is `--suites` alone, as its help says)
    weights = (out / "adapter" / WEIGHTS).stat().st_mtime_ns
    assert main(["--home", str(tmp_path / "home"), "tune", "--model", base, "--suites", "none", "--out", str(out),
                 "--resume", *TINY]) == 0
    assert (out / "adapter" / WEIGHTS).stat().st_mtime_ns == weights
    assert json.loads((out / "report.json").read_text())["sft"] == report["sft"]


def test_orpo_alone_goes_on_from_a_given_adapter(tiny_gguf, tmp_path):
    # --from-adapter: no SFT unless --steps is given; ORPO refines the given adapter (its rank
    # and its trained weights, not a fresh LoRA whose B starts at zero)
    from safetensors.torch import load_file

    from training.ship import ship
    base = tiny_gguf("qwen2", shape=Shape(context=8192))
    data = agent_steps.write(tmp_path / "steps.jsonl")
    home = ["--home", str(tmp_path / "home"), "tune", "--model", base, "--data", data, "--suites"]
    first = tmp_path / "first"
    assert main([*home, "--out", str(first), "--skip-orpo", "--rank", "4", *TINY]) == 0
    shipped = tmp_path / "shipped"
    ship(first / "adapter", shipped, Path(base).name)                      # float16, as adapters ship
    start = load_file(shipped / WEIGHTS)

    out = tmp_path / "out"
    orpo_only = [a for a in TINY if a not in ("--steps", "12")]
    assert main([*home, "--out", str(out), "--pairs", data, "--from-adapter", str(shipped), *orpo_only]) == 0
    report = json.loads((out / "report.json").read_text())
    assert "history" not in report["sft"] and len(report["orpo"]["history"]) == 2
    assert report["config"]["from_adapter"] == str(shipped)
    after = load_file(out / "adapter" / WEIGHTS)
    assert after.keys() == start.keys()
    assert all(after[k].shape == start[k].shape for k in start)          # rank 4 kept (the default is 16)
    moved = max((after[k].float() - start[k].float()).abs().max().item() for k in start)
    b_size = max(start[k].float().abs().max().item() for k in start if "lora_B" in k)
    assert 0 < moved < b_size        # ORPO changed the adapter, starting from its trained weights


def test_from_adapter_refuses_a_folder_without_an_adapter(tiny_gguf, tmp_path, capsys):
    base = tiny_gguf("qwen2", shape=Shape(context=8192))
    assert main(["--home", str(tmp_path / "home"), "tune", "--model", base, "--suites", "--out", str(tmp_path / "o"),
                 "--from-adapter", str(tmp_path), *TINY]) == 2
    assert "not a PEFT adapter folder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()          # refused before any work


def test_sampled_runs_of_the_served_model_join_the_gold(tiny_gguf, tmp_path, monkeypatch):
    # --sampled plays tasks on a stack serving base + --sample-lora; the turns that passed
    # (here: a stand-in writing steps of other tasks) are trained on beside the given data
    import contextlib

    from samevm import tune
    base = tiny_gguf("qwen2", shape=Shape(context=8192))
    data = agent_steps.write(tmp_path / "steps.jsonl")
    served, played = [], []

    @contextlib.contextmanager
    def stack_for(settings, cfg, label, model, runtime_args=()):
        served.append((label, list(runtime_args)))
        yield types.SimpleNamespace(urls=types.SimpleNamespace(runtime="http://runtime", worker="http://worker"))

    def sample_gold(runtime_url, worker_url, out, tasks, seed, tries=4, progress=None):
        played.append((runtime_url, tasks, tries))
        out.write_text("".join(json.dumps({**r, "task": "m" + r["task"]}) + "\n" for r in agent_steps.steps()[:6]))
        return {"tasks": tasks, "kept": 2}

    monkeypatch.setattr(tune, "stack_for", stack_for)
    monkeypatch.setitem(sys.modules, "tuning.sampled", types.SimpleNamespace(sample_gold=sample_gold))
    out = tmp_path / "out"
    lora = tmp_path / "shipped"
    assert main(["--home", str(tmp_path / "home"), "tune", "--model", base, "--data", data, "--skip-orpo",
                 "--suites", "--sampled", "5", "--sample-lora", str(lora), "--tries", "3", "--out", str(out),
                 *[a for a in TINY if a not in ("--orpo-steps", "2")]]) == 0
    assert served == [("sampler", ["--lora", str(lora)])] and played == [("http://runtime", 5, 3)]
    report = json.loads((out / "report.json").read_text())
    assert report["sampled"] == {"tasks": 5, "kept": 2}
    assert report["data"]["records"] + report["data"]["held_out_records"] == len(agent_steps.steps()) + 6


@pytest.mark.slow
def test_tune_generates_on_a_stack_and_measures_base_and_tuned(tiny_gguf, tmp_path, monkeypatch):
    base = tiny_gguf("qwen2", shape=Shape(context=8192))
    seen = []

    def generate(worker_url, out, tasks, seed, progress=None):
        seen.append(worker_url)
        agent_steps.write(out)
        for i in range(tasks):
            progress(i + 1, tasks)
        return {"tasks": tasks, "steps": len(agent_steps.steps())}

    for name, value in CHILD_ENV.items():     # the stack's children: torch on one thread (shared 2 cores)
        monkeypatch.setenv(name, value)
    fake = types.ModuleType("tuning.generate")
    fake.generate = generate
    monkeypatch.setitem(sys.modules, "tuning", types.ModuleType("tuning"))
    monkeypatch.setitem(sys.modules, "tuning.generate", fake)
    out = tmp_path / "out"
    assert main(["--home", str(tmp_path / "home"), "tune", "--model", base, "--tasks", "3", "--skip-orpo",
                 "--suites", "freeform", "--seeds", "1", "--parallel", "1", "--out", str(out),
                 *[a for a in TINY if a not in ("--orpo-steps", "2")]]) == 0
    assert seen and seen[0].startswith("http://127.0.0.1:")
    report = json.loads((out / "report.json").read_text())
    assert report["generate"] == {"tasks": 3, "steps": len(agent_steps.steps())}
    for which in ("base", "tuned"):
        assert report["eval"][which]["freeform"]["runs"] == 1
    assert report["served_as"] == "base + adapter (--lora)"
    assert report["served"]["tuned"]["revision"] != report["served"]["base"]["revision"]   # not the base again


def test_rejected_replies_are_sampled_from_the_base_served_with_the_given_adapter(tmp_path, monkeypatch):
    # the stack that samples the rejected replies serves --from-adapter: they are its own mistakes
    import contextlib

    from samevm import tune
    from samevm.settings import Settings
    from samevm.tune_report import Bars
    served = []

    @contextlib.contextmanager
    def stack(settings, cfg, label, model, runtime_args=()):
        served.append((label, list(runtime_args)))
        yield types.SimpleNamespace(urls=types.SimpleNamespace(runtime="http://r", worker="http://w"))
    monkeypatch.setattr(tune, "stack_for", stack)
    monkeypatch.setattr("tuning.rejected.sample_rejected", lambda *a, **k: {"pairs": 0})
    monkeypatch.setattr(tune, "evaluate", lambda *a, **k: None)          # no suites asked
    data = agent_steps.write(tmp_path / "steps.jsonl")
    cfg = tune.TuneConfig(base=tmp_path / "base.gguf", out=tmp_path / "out", data=data,
                          from_adapter=tmp_path / "shipped")
    cfg.out.mkdir()
    tune.gather(Settings(home=tmp_path / "home"), cfg, Bars(True), {"eval": {}})
    assert served == [("base", ["--lora", str(tmp_path / "shipped")])]
