"""`python -m training.runner JOB_DIR`: one fine-tune job, in its own process.

The worker starts this so that a crash in training (out of memory, a bug, a kill) cannot
take the worker down. It reads JOB_DIR/job.json and JOB_DIR/dataset.jsonl, appends its
stages and progress to JOB_DIR/events.jsonl, and writes JOB_DIR/result.json: the result,
or {"error": reason} for input the job cannot use (exit code 1). Anything else is a bug: its
traceback goes to the log (stderr) and the exit code says so.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from runtime.gguf import ModelLoadError
from training import pipeline
from training.dataset import DatasetError, parse_jsonl
from training.files import append_jsonl, read_json, write_json
from training.revisions import RevisionStore

API_KEY_ENV = "SAMEVM_RUNTIME_API_KEY"     # passed in the environment, never written to the job file


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    job_dir = Path(argv[0])
    job = read_json(job_dir / "job.json")
    events = job_dir / "events.jsonl"

    def emit(kind: str, **fields) -> None:
        append_jsonl(events, {"type": kind, "time": round(time.time(), 3), **fields})

    spec = pipeline.OrpoJob.from_json(job["spec"])
    try:
        pairs = parse_jsonl((job_dir / "dataset.jsonl").read_text())
        result = pipeline.run(spec, pairs, RevisionStore(Path(job["revisions_dir"])), emit,
                              os.environ.get(API_KEY_ENV))
    except (DatasetError, ModelLoadError, ValueError) as e:
        write_json(job_dir / "result.json", {"error": str(e)})
        print(f"job {job['id']} refused its input: {e}", file=sys.stderr)
        return 1
    write_json(job_dir / "result.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
