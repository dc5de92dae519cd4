"""What `samevm tune` shows while it runs (a progress bar per long stage) and what it leaves:
report.json (data counts, steps, losses, held-out pass rates before and after per suite) and
loss_curves.png (SFT training and held-out loss, ORPO loss, per optimizer step)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tqdm import tqdm


class Bars:
    def __init__(self, quiet: bool = False):
        self.quiet = quiet

    def bar(self, desc: str, total: int | None, unit: str = "it") -> tqdm:
        return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=self.quiet, dynamic_ncols=True)

    @staticmethod
    def follow(bar: tqdm):
        """A trainer's on_progress: moves `bar` to the event's step, shows loss and ETA."""
        def on_progress(event: dict) -> None:
            if bar.total != event["max_steps"]:
                bar.total = event["max_steps"]
            bar.update(event["step"] - bar.n)
            shown = {k: f"{event[k]:.4f}" for k in ("loss", "eval_loss", "reward_margin") if event.get(k) is not None}
            bar.set_postfix(shown, refresh=False)
        return on_progress

    def callback(self, desc: str, total: int | None):
        """A progress callback for the data stages: progress(done, total), progress({"done":
        .., "total": ..}) or progress() for one more item."""
        bar = self.bar(desc, total)

        def progress(done=None, total=None, **_):
            if isinstance(done, dict):
                done, total = done.get("done"), done.get("total", total)
            if total is not None and bar.total != total:
                bar.total = total
            bar.update(1 if done is None else done - bar.n)
        progress.close = bar.close
        return progress


def plot(report: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [s for s in ("sft", "orpo") if report.get(s, {}).get("history")]
    fig, axes = plt.subplots(1, max(1, len(stages)), figsize=(5.5 * max(1, len(stages)), 3.8), squeeze=False)
    for ax, stage in zip(axes[0], stages):
        history = report[stage]["history"]
        ax.plot([e["step"] for e in history], [e["loss"] for e in history], label="training loss")
        before = report[stage]["metrics"].get("eval_loss_before")
        evals = ([{"step": 0, "eval_loss": before}] if before is not None else []) + \
            [e for e in history if e.get("eval_loss") is not None]
        if evals:
            ax.plot([e["step"] for e in evals], [e["eval_loss"] for e in evals], "o-", label="held-out steps")
        ax.set_title(f"{stage.upper()} ({report[stage]['metrics'].get('device')})")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss" if stage == "orpo" else "completion NLL")
        ax.legend(fontsize=8)
    fig.suptitle(f"samevm tune: {Path(report['base']).name}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save(report: dict, out: Path) -> Path:
    """report.json as it stands (after each stage, so a failed later stage keeps the earlier ones)."""
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def write(report: dict, out: Path) -> tuple[Path, Path]:
    return save(report, out), plot(report, out / "loss_curves.png")


def table(report: dict) -> str:
    """Pass rates per held-out suite, base against tuned."""
    base, tuned = report["eval"].get("base", {}), report["eval"].get("tuned", {})
    lines = [f"{'suite':<20} {'base':>8} {'tuned':>8}"]
    for name in sorted(set(base) | set(tuned)):
        cell = lambda r: f"{r['passed']}/{r['runs']}" if r else "-"   # noqa: E731
        lines.append(f"{name:<20} {cell(base.get(name)):>8} {cell(tuned.get(name)):>8}")
    return "\n".join(lines)
