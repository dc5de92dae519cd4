"""The `training` toolset: fine-tune the chat model on preference pairs (an ORPO job of the
worker, POST /v1/jobs/orpo), follow the job (GET /v1/jobs/{id}), load its weights into the
running runtime (POST /v1/jobs/{id}/promote) or go back to the previous weights (the
runtime's POST /admin/rollback)."""
from __future__ import annotations

from urllib.parse import quote

from tools.context import ToolContext
from tools.registry import Registry

RESULT_FIELDS = ("revision", "served_revision", "previous_revision", "metrics", "promotion_error")


def job_summary(job: dict) -> dict:
    """The parts of a worker job a model needs: state, stage, progress, error, result."""
    out = {"job_id": job["id"], "state": job["state"], "stage": job.get("stage"),
           "queue_position": job.get("queue_position"), "error": job.get("error")}
    if job.get("progress"):
        out["progress"] = {k: job["progress"].get(k) for k in ("step", "max_steps", "loss", "reward_margin", "eta_s")}
    if job.get("result"):
        out["result"] = {k: job["result"][k] for k in RESULT_FIELDS if k in job["result"]}
    return {k: v for k, v in out.items() if v is not None}


def register(registry: Registry) -> None:
    @registry.tool(toolset="training")
    def training_start(ctx: ToolContext, pairs: list[dict[str, str]], base_model: str | None = None,
                       steps: int | None = None, promote: bool = False) -> dict:
        """Start fine-tuning the chat model on preference pairs (ORPO); returns a job id to follow.

        Args:
            pairs: examples, each with "prompt", "chosen" (the answer to prefer) and "rejected"
            base_model: the model or trained revision to start from (default: the default model)
            steps: optimizer steps
            promote: load the new weights into the running chat model when training succeeds
        """
        body: dict = {"dataset": pairs, "promote": promote}
        if base_model:
            body["base_model"] = base_model
        if steps:
            body["hyperparameters"] = {"max_steps": steps, "warmup_steps": min(3, steps - 1)}
        return job_summary(ctx.worker("POST", "/v1/jobs/orpo", json=body))

    @registry.tool(toolset="training")
    def training_status(ctx: ToolContext, job_id: str) -> dict:
        """Report a fine-tuning job: state, stage, progress (step, loss, reward margin) and result.

        Args:
            job_id: the id training_start returned
        """
        return job_summary(ctx.worker("GET", f"/v1/jobs/{quote(job_id, safe='')}"))

    @registry.tool(toolset="training")
    def training_reload(ctx: ToolContext, job_id: str) -> dict:
        """Load the weights a succeeded fine-tuning job produced into the running chat model.

        Args:
            job_id: the id of a succeeded job
        """
        return job_summary(ctx.worker("POST", f"/v1/jobs/{quote(job_id, safe='')}/promote"))

    @registry.tool(toolset="training")
    def training_rollback(ctx: ToolContext) -> dict:
        """Put the chat model back on the weights it served before the last reload."""
        return ctx.runtime("POST", "/admin/rollback")
