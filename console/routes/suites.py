"""Suites from the page: the known suites, and one seed of a suite run turn by turn.

POST /run answers with newline-delimited JSON as the run goes: a `start` line (the turn
names), a `model` line (what serves), one `turn` line per finished turn (the record of
agents.runner: passed, checks, steps and answer) and a closing `done` or `error` line. The
run goes on in a thread of its own (SuiteRunner is synchronous); a page that leaves early
stops reading, not the run.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading

import yaml
from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, model_validator

from agents import suite as suites
from agents.checks import Probe
from agents.runner import SuiteRunner
from console.deps import StateDep

log = logging.getLogger(__name__)
router = APIRouter()


class RunRequest(BaseModel):
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a suite in agents/suites/")
    yaml: str | None = Field(None, max_length=200_000, description="a suite file's text")
    seed: int = Field(0, ge=0, le=1_000_000)

    @model_validator(mode="after")
    def _one(self):
        if (self.name is None) == (self.yaml is None):
            raise ValueError("give exactly one of name and yaml")
        return self


@router.get("")
def known() -> dict:
    """The suites in agents/suites/ with their descriptions and turns."""
    out = []
    for path in sorted(suites.SUITES_DIR.glob("*.yaml")):
        s = suites.load(path.stem)
        out.append({"name": s.name, "file": path.stem, "description": s.description,
                    "turns": [t.name for t in s.turns]})
    return {"suites": out}


def _suite(req: RunRequest) -> suites.Suite:
    try:
        if req.name is not None:
            return suites.load(req.name)
        data = yaml.safe_load(req.yaml)
        return suites.parse(data if isinstance(data, dict) else {"turns": None})
    except (ValueError, FileNotFoundError, yaml.YAMLError) as e:
        raise HTTPException(400, f"not a usable suite: {e}") from e


@router.post("/run")
async def run(req: RunRequest, state: StateDep):
    """Run one seed of a suite; NDJSON lines as each turn finishes."""
    suite = _suite(req)
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[dict | None] = asyncio.Queue()

    def put(item: dict | None) -> None:
        loop.call_soon_threadsafe(lines.put_nowait, item)

    def work() -> None:
        model = state.model()
        probe = Probe(state.config.worker_url, state.registry, api_key=state.config.api_key)
        try:
            runner = SuiteRunner(suite, model, state.registry, probe, {},
                                 on_turn=lambda seed, record: put({"type": "turn", "seed": seed, "turn": record}))
            put({"type": "model", "model": runner.info})
            result = runner.run_seed(req.seed)
            put({"type": "done", "passed": result["passed"], "latency_s": result["latency_s"],
                 **({"error": result["error"]} if "error" in result else {})})
        except Exception as e:          # the thread's boundary: the page is told, the log has the trace
            log.exception("suite %s failed to run", suite.name)
            put({"type": "error", "message": f"{type(e).__name__}: {e}"})
        finally:
            model.close()
            probe.http.close()
            put(None)

    async def stream():
        yield json.dumps({"type": "start", "suite": suite.name, "seed": req.seed,
                          "turns": [{"name": t.name, "user": t.user} for t in suite.turns]}) + "\n"
        threading.Thread(target=work, name=f"suite-{suite.name}", daemon=True).start()
        while (item := await lines.get()) is not None:
            yield json.dumps(item, default=str) + "\n"

    return StreamingResponse(stream(), media_type="application/x-ndjson")
