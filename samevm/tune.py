"""`samevm tune` end to end: the served model learns the platform's own tools.

    stack on the base -> trajectories (tuning.generate) -> rejected replies sampled from the
    served base (tuning.rejected) -> held-out suites on the base -> stack stopped
    [-> --sampled: tasks played by the served model, base or base + --sample-lora, best of
    --tries (tuning.sampled); the turns that passed their checks join the gold]
    -> LoRA SFT on every step (training/sft.py) -> ORPO on the pairs, same adapter
    -> adapter + merged GGUF -> stack on base + adapter -> held-out suites -> report

Each stack has its own home (OUT/stack-base, OUT/stack-tuned: fresh stores, no revision
resumed) and free ports (never someone's running stack); the base's is stopped before
training so that the GPU is the trainer's. The held-out suites are the agent suite library
(agents/suites): the generator's tasks are disjoint from them by construction. The tuned
model is served as base + adapter (`samevm serve --lora`); the merged GGUF is written beside it
for runtimes that serve no adapters.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

from samevm.settings import Settings
from samevm.supervisor import Stack
from samevm.tune_report import Bars, save
from training.params import OrpoParams, SftParams

# Held-out steps scored at each of the SFT's evaluations, at most (spread over the held-out
# tasks): 434 steps scored 20 times cost about a third of run A's training time.
HELD_OUT_SCORED = 256


@dataclass
class TuneConfig:
    base: Path                          # the base GGUF
    out: Path
    tasks: int = 200
    seed: int = 0
    data: Path | None = None            # steps already generated: skip generation
    pairs: Path | None = None           # pairs already sampled: skip sampling
    sampled: int = 0                    # tasks played by the served model, its passing turns kept as gold
    sample_lora: Path | None = None     # the adapter served on the base while sampling (None: the base)
    tries: int = 4                      # tries a sampled task gets; the one passing most turns is kept
    sample_rejected: bool = True
    samples: int = 4                    # replies sampled per step when looking for a rejected one
    reject_steps: int | None = 600      # steps sampled for rejected replies (None: all of them)
    sft: SftParams = field(default_factory=SftParams)
    orpo: OrpoParams | None = field(default_factory=OrpoParams)   # None: no ORPO
    orpo_steps: int | None = None       # None: one pass over the pairs
    held_out_share: float = 0.05        # share of tasks whose steps only score the SFT loss
    suites: list[str] = field(default_factory=list)
    seeds: int = 10
    temperature: float = 0.3
    parallel: int = 5
    backend: str = "auto"               # the runtime's
    export_type: str = "q8_0"
    resume: bool = False                # go on from what `out` holds: data, adapter, suites already run
    from_adapter: Path | None = None    # an adapter to go on from (served while sampling; SFT only for
                                        # sft.max_steps given, else ORPO alone refines it)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_for(settings: Settings, cfg: TuneConfig, label: str, model: Path, runtime_args: list[str] = ()) -> Stack:
    """A stack of its own home (fresh stores) that serves exactly `model` (+ `runtime_args`):
    --no-resume, so no revision a reload made active elsewhere takes its place."""
    home = cfg.out / f"stack-{label}"
    ours = settings.model_copy(update={"home": home, "model": str(model), "backend": cfg.backend,
                                       "runtime_port": free_port(), "worker_port": free_port(),
                                       "mcp_port": free_port(), "console_port": free_port()})
    return Stack(ours, attach=False, runtime_args=["--no-resume", *runtime_args])


def evaluate(stack: Stack, cfg: TuneConfig, label: str, suites: list[str], bars: Bars, report: dict) -> None:
    """report["eval"][label][suite] = {pass_rate, passed, runs, turns} on the running stack,
    saved as each suite ends, and report["served"][label] = what served them (/v1/models)."""
    from agents.checks import Probe
    from agents.model import ChatModel
    from agents.runner import SuiteRunner
    from agents.suite import load
    from tools.context import ToolContext
    from tools.toolsets import build_registry

    registry = build_registry(ToolContext.from_settings(stack.settings))
    probe = Probe(stack.urls.worker, registry, api_key=stack.settings.api_key)
    results = report["eval"].setdefault(label, {})
    for name in suites:
        suite = load(name)
        bar = bars.bar(f"{label}: {name}", cfg.seeds * len(suite.turns), "turn")
        runner = SuiteRunner(suite, ChatModel(stack.urls.runtime, api_key=stack.settings.api_key), registry, probe,
                             {"temperature": cfg.temperature}, on_turn=lambda seed, turn: bar.update(1))
        result = runner.run(list(range(cfg.seeds)), cfg.parallel)
        bar.close()
        s = result["summary"]
        results[name] = {"pass_rate": s["pass_rate"], "passed": s["passed"], "runs": s["runs"],
                         "turns": {k: v["pass_rate"] for k, v in s["turns"].items()}}
        report.setdefault("served", {})[label] = runner.info
        save(report, cfg.out)


def held_out(records: list[dict], share: float) -> tuple[list[dict], list[dict]]:
    """(train, held out), split by task so that no held-out step shares a conversation with a trained one."""
    def out(r: dict) -> bool:
        digest = hashlib.sha256(str(r.get("task", r.get("id"))).encode()).digest()
        return int.from_bytes(digest[:4], "big") / 2**32 < share
    return [r for r in records if not out(r)], [r for r in records if out(r)]


def gather(settings: Settings, cfg: TuneConfig, bars: Bars, report: dict) -> None:
    """Data (generated or given) and the base's pass rates, on one stack of the base."""
    steps, pairs = cfg.out / "steps.jsonl", cfg.out / "pairs.jsonl"
    for given, kept in ((cfg.data, steps), (cfg.pairs, pairs)):
        if given and Path(given).resolve() != kept.resolve():
            shutil.copyfile(given, kept)
    make_steps = not cfg.data and not (cfg.resume and steps.is_file())
    make_pairs = (cfg.orpo is not None and cfg.sample_rejected and not cfg.pairs
                  and not (cfg.resume and pairs.is_file()))
    suites = todo(cfg, report, "base")
    if not (make_steps or make_pairs or suites):
        return
    start = ["--lora", str(cfg.from_adapter)] if cfg.from_adapter else []
    with stack_for(settings, cfg, "base", cfg.base, start) as stack:
        if make_steps:
            from tuning.generate import generate
            progress = bars.callback("generating trajectories", cfg.tasks)
            report["generate"] = generate(stack.urls.worker, steps, cfg.tasks, cfg.seed, progress=progress)
            progress.close()
        if make_pairs:
            from tuning.rejected import sample_rejected
            progress = bars.callback("sampling rejected replies", None)
            report["rejected"] = sample_rejected(stack.urls.runtime, steps, pairs, samples=cfg.samples,
                                                 progress=progress, steps=cfg.reject_steps, seed=cfg.seed)
            progress.close()
        evaluate(stack, cfg, "base", suites, bars, report)


def sample(settings: Settings, cfg: TuneConfig, bars: Bars, report: dict) -> None:
    """Gold from the stack's own runs: `cfg.sampled` tasks of another seed played by the served
    model (with `cfg.sample_lora` when given), the turns that passed kept in OUT/sampled.jsonl."""
    out = cfg.out / "sampled.jsonl"
    if not cfg.sampled or (cfg.resume and out.is_file()):
        return
    from tuning.sampled import sample_gold
    lora = ["--lora", str(cfg.sample_lora)] if cfg.sample_lora else []
    with stack_for(settings, cfg, "sampler", cfg.base, lora) as stack:
        progress = bars.callback("sampling gold runs", cfg.sampled)
        report["sampled"] = sample_gold(stack.urls.runtime, stack.urls.worker, out, cfg.sampled, cfg.seed + 1,
                                        tries=cfg.tries, progress=progress)
        progress.close()


def todo(cfg: TuneConfig, report: dict, label: str) -> list[str]:
    """The suites still to run on `label` (with resume, those without a result yet)."""
    done = report["eval"].get(label, {}) if cfg.resume else {}
    return [s for s in cfg.suites if s not in done]


def train(settings: Settings, cfg: TuneConfig, bars: Bars, report: dict) -> tuple[Path, Path]:
    """SFT then ORPO on one adapter; (adapter dir, merged GGUF)."""
    adapter, merged = cfg.out / "adapter", cfg.out / "merged.gguf"
    if cfg.resume and "sft" in report and merged.is_file():       # merged.gguf is written last
        return adapter, merged
    from runtime.tokenizer import Tokenizer
    from training import steps
    from training.adapter import adapter_label, merged_gguf, save_adapter
    from training.hf_model import load_model, load_tokenizer
    from training.sft import train_sft

    cache = settings.tokenizer_cache
    cache.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(cfg.base, cache)
    sampled = cfg.out / "sampled.jsonl"
    records = steps.load_records(cfg.out / "steps.jsonl") + (steps.load_records(sampled) if sampled.is_file() else [])
    train_records, eval_records = held_out(records, cfg.held_out_share)
    stops = steps.stop_ids(tok, cfg.base)
    spell = steps.spellings(tok, cfg.base)
    examples, counts = steps.build(tok, train_records, cfg.sft.max_length, stops, spell)
    held, held_counts = steps.build(tok, eval_records, cfg.sft.max_length, stops, spell)
    held = held[::math.ceil(len(held) / HELD_OUT_SCORED)] if held else held
    report["data"] = {**counts, "held_out_records": held_counts["records"], "held_out_examples": len(held),
                      "dropped_too_long": counts["dropped_too_long"] + held_counts["dropped_too_long"],
                      "kinds": _count(train_records + eval_records, "kind"),
                      "domains": _count(train_records + eval_records, "domain"),
                      "spelled_as_text": [tok.token_text(i) for i in sorted(spell)]}
    if not examples:
        raise ValueError(f"no training examples left of {counts['records']} steps (max_length {cfg.sft.max_length})")
    model = load_model(cfg.base)
    if cfg.from_adapter:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, str(cfg.from_adapter), is_trainable=True)
    if cfg.from_adapter and not cfg.sft.max_steps:
        report["sft"] = {"skipped": f"going on from {cfg.from_adapter}"}
    else:
        bar = bars.bar("SFT", None, "step")
        sft = train_sft(model, examples, cfg.sft, held, on_progress=bars.follow(bar))
        bar.close()
        report["sft"] = {"metrics": sft.metrics, "history": sft.history, "params": cfg.sft.model_dump()}
        model = sft.model
    pairs_path = cfg.out / "pairs.jsonl"
    if cfg.orpo is not None and pairs_path.is_file():
        pairs, dropped = steps.preference_pairs(tok, steps.load_records(pairs_path), cfg.sft.max_length, stops)
        report["data"].update(pairs=len(pairs), pairs_dropped=dropped)
        if pairs:
            import datasets

            from training.orpo import train_orpo
            datasets.disable_progress_bars()          # TRL's tokenising passes: the ORPO bar says enough
            params = cfg.orpo.model_copy(update={
                "max_length": cfg.sft.max_length, "device": cfg.sft.device, "seed": cfg.seed,
                "warmup_steps": 0, "max_steps": cfg.orpo_steps or math.ceil(
                    len(pairs) / (cfg.orpo.batch_size * cfg.orpo.gradient_accumulation_steps))})
            bar = bars.bar("ORPO", params.max_steps, "step")
            orpo = train_orpo(model, load_tokenizer(cfg.base, cache), pairs, params,
                              on_progress=bars.follow(bar), merge=False, spell=spell)
            bar.close()
            report["orpo"] = {"metrics": orpo.metrics, "history": orpo.history, "params": params.model_dump()}
            model = orpo.model
    save_adapter(model, adapter, cfg.base)
    report["adapter"] = {"path": str(adapter), "label": adapter_label(adapter)}
    merged_gguf(model, cfg.base, merged, cfg.export_type)
    report["merged_gguf"] = str(merged)
    return adapter, merged


def _count(records: list[dict], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[str(r.get(key))] = out.get(str(r.get(key)), 0) + 1
    return out


def run(settings: Settings, cfg: TuneConfig, bars: Bars) -> dict:
    cfg.out.mkdir(parents=True, exist_ok=True)
    saved = cfg.out / "report.json"
    report = json.loads(saved.read_text()) if cfg.resume and saved.is_file() else {
        "base": str(cfg.base), "eval": {}, "config": {"tasks": cfg.tasks, "seed": cfg.seed, "suites": cfg.suites,
                                                     "seeds": cfg.seeds, "temperature": cfg.temperature,
                                                     "backend": cfg.backend,
                                                     "from_adapter": str(cfg.from_adapter) if cfg.from_adapter
                                                     else None}}
    gather(settings, cfg, bars, report)
    sample(settings, cfg, bars, report)
    save(report, cfg.out)
    adapter, _ = train(settings, cfg, bars, report)
    save(report, cfg.out)
    suites = todo(cfg, report, "tuned")
    if suites:
        report["served_as"] = "base + adapter (--lora)"
        with stack_for(settings, cfg, "tuned", cfg.base, ["--lora", str(adapter)]) as stack:
            evaluate(stack, cfg, "tuned", suites, bars, report)
    return report
