"""samevm tune: teach the served model the platform's own tools, end to end (samevm/tune.py):
generate verified trajectories against a real worker, LoRA SFT on every agent step, ORPO
with rejected replies sampled from the served base (or from the base with --from-adapter, whose
adapter ORPO then refines), then the held-out agent suites on the base and on base + adapter.
Writes OUT/report.json, OUT/loss_curves.png, the PEFT adapter OUT/adapter/ and OUT/merged.gguf
(the adapter merged, for runtimes that serve no adapters)."""
from __future__ import annotations

import platform
import sys
import time
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("tune", help="fine-tune the model on its own tools (LoRA SFT + ORPO) and measure it")
    p.add_argument("--model", help="base: known model name or GGUF path (default: the hardware's default model)")
    p.add_argument("--out", type=Path, help="output directory (default $SAMEVM_HOME/tune/MODEL-TIME)")
    p.add_argument("--tasks", type=int, default=200, help="generated tasks (each gives several agent steps)")
    p.add_argument("--data", type=Path, help="use these agent steps (JSONL) instead of generating them")
    p.add_argument("--pairs", type=Path, help="use these preference pairs (JSONL) instead of sampling them")
    p.add_argument("--samples", type=int, default=4, help="replies sampled from the base per step for rejected ones")
    p.add_argument("--reject-steps", type=int, default=600,
                   help="steps (drawn at random) sampled for rejected replies; 0: all")
    p.add_argument("--sampled", type=int, default=0,
                   help="tasks also played by the served model (best of --tries), its passing turns added as gold")
    p.add_argument("--sample-lora", type=Path, help="adapter served on the base while sampling (e.g. the shipped one)")
    p.add_argument("--tries", type=int, default=4, help="tries a sampled task gets (the best is kept)")
    p.add_argument("--from-adapter", type=Path,
                   help="go on from this PEFT adapter (e.g. the shipped one) instead of a new one: rejected replies "
                        "are sampled from the base served with it, its rank is kept, and SFT runs only for --steps "
                        "given, so ORPO alone can refine it")
    p.add_argument("--epochs", type=float, default=1.0, help="SFT passes over the steps")
    p.add_argument("--steps", type=int, help="SFT optimizer steps (overrides --epochs)")
    p.add_argument("--orpo-steps", type=int, help="ORPO optimizer steps (default: one pass over the pairs)")
    p.add_argument("--skip-orpo", action="store_true", help="SFT only")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank (alpha is twice it)")
    p.add_argument("--lr", type=float, default=1e-4, help="SFT learning rate")
    p.add_argument("--orpo-lr", type=float, default=5e-5, help="ORPO learning rate (it goes on from the SFT adapter)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=4096, help="longer steps (prompt + reply tokens) are dropped")
    p.add_argument("--seed", type=int, default=0, help="data generation and training seed")
    p.add_argument("--suites", nargs="*", help="held-out suites (default: the whole library; `--suites` alone "
                   "or `--suites none`: no evaluation)")
    p.add_argument("--seeds", type=int, default=10, help="seeds per held-out suite")
    p.add_argument("--parallel", type=int, default=5, help="seeds at once in the evaluation")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="where training runs")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"], help="the runtime's backend (default: the settings')")
    p.add_argument("--export", choices=["f16", "q8_0"], default="q8_0", help="tensor type of the merged GGUF")
    p.add_argument("--resume", action="store_true",
                   help="go on from what --out holds (data, base suites run, adapter, tuned suites run), "
                        "e.g. after a time limit stopped a run")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def versions() -> dict:
    import importlib.metadata as md

    import torch
    out = {"python": platform.python_version(), "cuda_device": torch.cuda.get_device_name(0)
           if torch.cuda.is_available() else None}
    for name in ("torch", "transformers", "peft", "trl", "datasets", "accelerate"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def check_installed(skip_orpo: bool) -> None:
    """Refuse now, not after an hour of data generation, when a training package is missing."""
    import importlib.util
    wanted = ["peft", "matplotlib"] + ([] if skip_orpo else ["trl", "datasets"])
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"samevm tune needs {', '.join(missing)}: pip install -e '.[train]'"
                         + ("" if skip_orpo or "peft" in missing else " (or --skip-orpo)"))


def run(args, settings) -> int:
    from agents.suite import names
    from runtime import catalog
    from samevm import tune
    from samevm.tune_report import Bars, table, write
    from training.params import OrpoParams, SftParams

    check_installed(args.skip_orpo)
    suites = names() if args.suites is None else [] if args.suites == ["none"] else args.suites
    unknown = set(suites) - set(names())
    if unknown:
        raise ValueError(f"unknown suites {sorted(unknown)}; known: {', '.join(names())}")
    if args.resume and not args.out:
        raise ValueError("--resume needs the --out of the run to go on with")
    if args.from_adapter and not (args.from_adapter / "adapter_config.json").is_file():
        raise ValueError(f"--from-adapter {args.from_adapter}: not a PEFT adapter folder (no adapter_config.json)")
    if args.from_adapter and args.skip_orpo and not args.steps:
        raise ValueError("--from-adapter with --skip-orpo and no --steps trains nothing")
    backend = args.backend or settings.backend
    name = args.model or catalog.DEFAULT_MODEL
    base = catalog.resolve(name, settings.home)
    out = args.out or Path(settings.home) / "tune" / f"{Path(name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    sft = SftParams(learning_rate=args.lr, epochs=args.epochs, max_steps=args.steps, lora_r=args.rank,
                    lora_alpha=2 * args.rank, batch_size=args.batch_size, max_length=args.max_length,
                    seed=args.seed, device=args.device)
    # ORPO: one pair (chosen + rejected, two sequences of up to max_length) at a time, accumulated
    orpo = None if args.skip_orpo else OrpoParams(learning_rate=args.orpo_lr, batch_size=1,
                                                  gradient_accumulation_steps=args.batch_size,
                                                  max_length=args.max_length, device=args.device)
    cfg = tune.TuneConfig(base=Path(base), out=Path(out), tasks=args.tasks, seed=args.seed, data=args.data,
                          pairs=args.pairs, samples=args.samples, reject_steps=args.reject_steps or None,
                          sampled=args.sampled, sample_lora=args.sample_lora, tries=args.tries,
                          sft=sft, orpo=orpo, orpo_steps=args.orpo_steps,
                          suites=suites, seeds=args.seeds, parallel=args.parallel, backend=backend,
                          export_type=args.export, resume=args.resume, from_adapter=args.from_adapter)
    print(f"samevm tune: {name} -> {cfg.out}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    report = tune.run(settings, cfg, Bars(args.quiet))
    report.update(model=name, versions=versions(), total_seconds=round(time.monotonic() - t0, 1),
                  date=time.strftime("%Y-%m-%d %H:%M:%S"))
    json_path, png = write(report, cfg.out)
    if report["eval"]:
        print(table(report))
    print(f"report: {json_path}\nloss curves: {png}\nadapter: {report['adapter']['path']}\n"
          f"merged GGUF: {report['merged_gguf']}")
    return 0
