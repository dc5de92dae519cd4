"""Fine-tune jobs as the worker runs them: an ORPO request checked into a training job, then
queued, followed, promoted or cancelled through training.jobs.JobManager (one job runs at a
time, in a subprocess; the next ones queue).

The dataset (inline or a JSONL file under the allowed roots), the base model and the
hyperparameters are checked here, so bad input is a 400 naming each problem (dataset
problems with their line numbers) before any job exists.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from httpkit.errors import APIError
from rag.errors import InputError
from rag.sources import resolve_allowed
from runtime import catalog
from runtime.gguf import ModelLoadError
from training.dataset import DatasetError, PreferencePair, from_records, load_jsonl, parse_jsonl
from training.jobs import JobManager, JobNotFound, JobRefused
from training.params import OrpoParams
from training.pipeline import OrpoJob
from training.promote import PromotionError
from training.revisions import RevisionStore
from worker.settings import WorkerSettings


def allowed_file(path: str, roots: list[Path], param: str) -> Path:
    """The real path of a file the request names, inside the worker's allowed roots (the
    same rule as RAG's ingest of local paths)."""
    try:
        return resolve_allowed(path, roots)
    except InputError as e:
        raise APIError(400, str(e), code="invalid_path", param=param) from e


def dataset_pairs(dataset: list[Any] | str | None, dataset_path: str | None,
                  settings: WorkerSettings) -> list[PreferencePair]:
    if (dataset is None) == (dataset_path is None):
        raise APIError(400, "give exactly one of `dataset` (pairs inline) and `dataset_path` (a JSONL file)",
                       code="invalid_dataset", param="dataset")
    try:
        if dataset_path is not None:
            return load_jsonl(allowed_file(dataset_path, settings.allowed_roots, "dataset_path"))
        return parse_jsonl(dataset) if isinstance(dataset, str) else from_records(dataset)
    except DatasetError as e:
        raise APIError(400, str(e), code="invalid_dataset", param="dataset", problems=e.problems) from e


def base_model_path(name: str, settings: WorkerSettings, revisions: RevisionStore) -> str:
    """A trained revision id, a known model name, or a GGUF under the allowed roots or home."""
    trained = revisions.get(name)
    if trained:
        return trained["path"]
    try:
        if name in catalog.KNOWN_MODELS:
            return str(catalog.resolve(name, settings.home, auto_fetch=False))
    except ModelLoadError as e:
        raise APIError(400, str(e), code="model_not_found", param="base_model") from e
    path = allowed_file(name, [*settings.allowed_roots, settings.home], "base_model")
    if not path.is_file() or path.suffix != ".gguf":
        raise APIError(400, f"{name}: not a GGUF file", code="invalid_path", param="base_model")
    return str(path)


def start_orpo(jobs: JobManager, settings: WorkerSettings, *, dataset, dataset_path: str | None,
               base_model: str, hyperparameters: OrpoParams, promote: bool) -> dict:
    """Check the request and queue the job; returns it."""
    pairs = dataset_pairs(dataset, dataset_path, settings)
    base = base_model_path(base_model, settings, RevisionStore(jobs.revisions_dir))
    if promote and not settings.runtime_url:
        raise APIError(400, "promote needs the runtime's URL, and this worker has none configured",
                       code="no_runtime", param="promote")
    spec = OrpoJob(base_model=base, params=hyperparameters, promote=promote,
                   runtime_url=settings.runtime_url, base_label=base_model,
                   tokenizer_cache=str(settings.home / "cache" / "tokenizers"))
    summary = {"base_model": base_model, "promote": promote, "dataset_path": dataset_path,
               "hyperparameters": hyperparameters.model_dump()}
    try:
        return jobs.submit(spec, pairs, summary)
    except JobRefused as e:
        raise APIError(409, str(e), code="queue_full") from e


def get(jobs: JobManager, job_id: str) -> dict:
    try:
        return jobs.get(job_id)
    except JobNotFound as e:
        raise APIError(404, str(e), code="job_not_found", param="job_id") from e


def promote(jobs: JobManager, job_id: str, settings: WorkerSettings) -> dict:
    """Load a succeeded job's revision into the runtime; 409 with the reason if it refuses."""
    if not settings.runtime_url:
        raise APIError(400, "this worker has no runtime URL configured", code="no_runtime")
    try:
        return jobs.promote(job_id, settings.runtime_url)
    except JobRefused as e:
        raise APIError(409, str(e), code="job_not_succeeded") from e
    except PromotionError as e:
        if e.status is None:              # no answer from the runtime at all
            raise APIError(503, str(e), code="runtime_unreachable") from e
        raise APIError(409, str(e), code="promotion_refused") from e


def cancel(jobs: JobManager, job_id: str) -> dict:
    try:
        return jobs.cancel(job_id)
    except JobRefused as e:
        raise APIError(409, str(e), code="job_finished") from e
