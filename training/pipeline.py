"""One ORPO fine-tune from preference pairs to a served revision:

    validate pairs -> load the HF form of the base GGUF -> ORPO + LoRA -> merge
    -> export GGUF -> revision directory -> (promote: runtime /admin/reload)

Shared by the job runner (a subprocess of the worker), `samevm train` and the demo. Each
stage is announced through `emit`, and training progress flows through it too.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runtime import catalog
from runtime.gguf import ModelLoadError, quick_digest
from training.dataset import PreferencePair, dataset_hash
from training.params import OrpoParams
from training.revisions import MODEL_FILE, RevisionStore

log = logging.getLogger(__name__)
Emit = Callable[..., None]          # emit(type, **fields)


@dataclass
class OrpoJob:
    base_model: str                       # GGUF path of the model to start from
    params: OrpoParams = field(default_factory=OrpoParams)
    promote: bool = False
    runtime_url: str | None = None        # where /admin/reload lives, when promoting
    base_label: str = ""                  # how the user named the base (a model name, a revision)
    tokenizer_cache: str | None = None    # the runtime's cache of converted tokenizers

    def to_json(self) -> dict:
        return {**asdict(self), "params": self.params.model_dump()}

    @classmethod
    def from_json(cls, data: dict) -> "OrpoJob":
        return cls(**{**data, "params": OrpoParams(**data["params"])})


def resolve_base(name: str, home: Path, revisions: RevisionStore) -> Path:
    """The GGUF of a trained revision id, a known model name (installed) or a file path."""
    trained = revisions.get(name)
    return Path(trained["path"]) if trained else catalog.resolve(name, home, auto_fetch=False)


def base_revision(path: Path, revisions: RevisionStore) -> str:
    """The revision the runtime reports while serving `path`: the revision id of a trained
    revision, else the file's digest (the runtime's default revision)."""
    if path.name == MODEL_FILE and path.resolve().parent.parent == revisions.root.resolve():
        return path.parent.name
    return quick_digest(path)


def run(job: OrpoJob, pairs: list[PreferencePair], revisions: RevisionStore, emit: Emit,
        runtime_api_key: str | None = None) -> dict:
    """Train, export and (if asked) promote; returns the result recorded on the job, with
    `promotion_error` set when the runtime refused the new revision."""
    # heavy imports here: the worker imports this module's neighbours without torch's start-up cost
    from training.export import export_gguf
    from training.hf_model import load_model, load_tokenizer
    from training.orpo import train_orpo
    from training.promote import PromotionError, promote

    base = Path(job.base_model)
    if not base.is_file():
        raise ModelLoadError(f"no such base model file: {base}")
    base_rev = base_revision(base, revisions)
    t0 = time.monotonic()
    emit("stage", stage="loading", base_model=str(base))
    tokenizer = load_tokenizer(base, job.tokenizer_cache)
    model = load_model(base)
    emit("stage", stage="training", examples=len(pairs), max_steps=job.params.max_steps)
    trained = train_orpo(model, tokenizer, pairs, job.params,
                         on_progress=lambda event: emit("progress", **event))
    emit("stage", stage="exporting", export_type=job.params.export_type)
    staging = revisions.staging()
    try:
        export_gguf(trained.model, base, staging / MODEL_FILE, job.params.export_type)
        revision = revisions.commit(staging, {
            "base_model": job.base_label or str(base), "base_path": str(base), "base_revision": base_rev,
            "dataset_sha256": dataset_hash(pairs), "examples": len(pairs),
            "params": job.params.model_dump(), "metrics": trained.metrics})
    except BaseException:
        revisions.discard(staging)
        raise
    result = {"revision": revision["revision"], "path": revision["path"], "base_revision": base_rev,
              "dataset_sha256": revision["dataset_sha256"], "metrics": trained.metrics,
              "served_revision": None}
    emit("stage", stage="exported", revision=revision["revision"], path=revision["path"])
    if job.promote:
        if not job.runtime_url:
            raise ValueError("promotion was asked for but no runtime URL is configured")
        emit("stage", stage="promoting", runtime_url=job.runtime_url)
        try:
            served = promote(job.runtime_url, revision["path"], revision["revision"], runtime_api_key)
        except PromotionError as e:
            # the revision stays on disk; the runtime keeps serving what it served
            result["promotion_error"] = str(e)
        else:
            revisions.prune({served["served_revision"], served["previous_revision"]})
            result.update(served)
    result["total_seconds"] = round(time.monotonic() - t0, 2)
    return result
