"""`samevm suite` end to end against a real worker (SQLite, RAG, memory) and a scripted
model: a model that does the work passes; one that only says it did, or stores the wrong
value, fails the checks that look at the stores themselves."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from samevm.cli import main
from tests.agents.fake_model import ScriptedModel, call, calls, text
from tests.stack_fixtures import CHILD_ENV, free_port

REPO = Path(__file__).resolve().parents[2]
NOTE = "Note {run}: Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half."


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """A real `samevm worker` process under a temporary home: (url, port, home)."""
    home, port = tmp_path_factory.mktemp("suite-home"), free_port()
    log = (home / "worker.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "samevm", "--home", str(home), "worker", "--port", str(port)],
                            cwd=REPO, env={**os.environ, **CHILD_ENV, "HF_HUB_OFFLINE": "1"},
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, (home / "worker.log").read_text()[-2000:]
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.3)
    yield url, port, home
    proc.terminate()
    proc.wait(20)


@pytest.fixture
def suite_cli(worker, monkeypatch, tmp_path):
    """suite_cli(script, *args) -> (exit code, report dict, ScriptedModel): `samevm suite` with
    the scripted model as the runtime and the real worker, both attached by the supervisor."""
    url, worker_port, home = worker

    def run(script, *args: str):
        runtime_port = free_port()
        monkeypatch.setenv("SAMEVM_RUNTIME_PORT", str(runtime_port))
        monkeypatch.setenv("SAMEVM_WORKER_PORT", str(worker_port))
        out = tmp_path / f"report-{runtime_port}"
        with ScriptedModel(script, port=runtime_port) as fake:
            code = main(["--home", str(home), "suite", *args, "--out", str(out), "--quiet", "--strict"])
        assert (out / "transcript.txt").is_file()
        return code, json.loads((out / "report.json").read_text()), fake
    return run


def checks(report: dict) -> dict[str, bool]:
    return {c["check"]: c["ok"] for c in report["runs"][0]["turns"][0]["checks"]}


DOES_THE_WORK = [
    call("sql_exec", db="suite_s0", sql="CREATE TABLE deploys (service TEXT, version TEXT, day TEXT)"),
    calls(("sql_exec", {"db": "suite_s0", "sql": "INSERT INTO deploys VALUES ('orion', '4.2.1', '2026-11-20')"}),
          ("rag_ingest", {"text": NOTE.format(run="s0"), "source": "orion-notes-s0"}),
          ("memory_add", {"text": "Orion's deploy record is in the deploys table of suite_s0; release notes are in "
                                  "the knowledge base."})),
    text("Stored the deploy row, the release note and a memory note."),
]


def test_freeform_suite_passes_when_the_work_is_done(suite_cli):
    code, report, fake = suite_cli(list(DOES_THE_WORK), "freeform")
    assert code == 0, checks(report)
    turn = report["runs"][0]["turns"][0]
    assert turn["passed"] and all(checks(report).values()) and len(checks(report)) == 6
    assert [c["name"] for c in turn["steps"][1]["calls"]] == ["sql_exec", "rag_ingest", "memory_add"]
    assert report["summary"]["pass_rate"] == 1.0 and report["model"] == "fake-model"
    assert turn["tokens"] == {"prompt": 300, "completion": 30} and turn["latency_s"] > 0
    offered = {t["function"]["name"] for t in fake.requests[0]["tools"]}
    assert {"sql_exec", "rag_ingest", "memory_add"} <= offered and "runtime_status" not in offered


def test_claiming_without_doing_fails_every_store_check(suite_cli):
    # Runs after the passing test on the same worker: the reset and the memory mark must keep
    # that run's rows, document and note from counting for this one.
    code, report, _ = suite_cli([text("Done: I stored the deploy, the note and the memory.")], "freeform")
    assert code == 1
    assert not any(ok for name, ok in checks(report).items()), checks(report)


def test_wrong_value_fails_the_database_check(suite_cli):
    script = list(DOES_THE_WORK)
    script[1] = calls(("sql_exec", {"db": "suite_s0", "sql": "INSERT INTO deploys VALUES ('orion', '4.1.0', '2026-11-20')"}),
                      ("rag_ingest", {"text": NOTE.format(run="s0"), "source": "orion-notes-s0"}),
                      ("memory_add", {"text": "deploys table of suite_s0 and the knowledge base hold Orion's records"}))
    code, report, _ = suite_cli(script, "freeform")
    failed = [name for name, ok in checks(report).items() if not ok]
    assert code == 1 and len(failed) == 1 and failed[0].startswith("sql suite_s0")


def test_a_suite_file_given_by_path_with_runtime_facts(suite_cli, tmp_path):
    path = tmp_path / "status.yaml"
    path.write_text(yaml.safe_dump({"name": "status", "turns": [{
        "name": "ask", "user": "Which backend serves you?", "tools": ["runtime"],
        "expect": {"called": ["runtime_status"], "answer_contains": ["{runtime.backend}", "{runtime.context_length}"],
                   "answer_excludes": ["cuda"]}}]}))
    code, report, fake = suite_cli([call("runtime_status"), text("The fake backend, with 4,096 tokens of context.")],
                                   str(path))
    assert code == 0, checks(report)
    assert report["suite_file"] == str(path)
    assert [t["function"]["name"] for t in fake.requests[0]["tools"]] == ["runtime_status", "runtime_models", "final_answer"]


def work_for(run: str) -> list[dict]:
    return [call("sql_exec", db=f"suite_{run}", sql="CREATE TABLE deploys (service TEXT, version TEXT, day TEXT)"),
            calls(("sql_exec", {"db": f"suite_{run}", "sql": "INSERT INTO deploys VALUES ('orion', '4.2.1', '2026-11-20')"}),
                  ("rag_ingest", {"text": NOTE.format(run=run), "source": f"orion-notes-{run}"}),
                  ("memory_add", {"text": f"Orion's deploy record is in the deploys table of suite_{run}."})),
            text(f"Stored everything for {run}.")]


def test_parallel_seeds_store_apart_and_both_pass(suite_cli):
    import re

    def script(body):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        run = re.search(r"suite_(s\d+)", user).group(1)
        done = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        return work_for(run)[done]

    code, report, fake = suite_cli(script, "freeform", "--seeds", "2", "--parallel", "2")
    assert code == 0, [c for r in report["runs"] for c in r["turns"][0]["checks"] if not c["ok"]]
    assert [r["seed"] for r in report["runs"]] == [0, 1] and report["parallel"] == 2
    assert {r["turns"][0]["answer"] for r in report["runs"]} == {"Stored everything for s0.", "Stored everything for s1."}


def test_a_runtime_failure_fails_its_seed_and_the_others_still_count(suite_cli):
    """A 5xx from the runtime in one seed is that seed's recorded failure (stop model_error,
    the error kept), not a crash that loses the seeds already run."""
    import re

    def script(body):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        run = re.search(r"suite_(s\d+)", user).group(1)
        if run == "s1":
            raise StopIteration               # the scripted runtime answers 500
        done = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        return work_for(run)[done]

    code, report, _ = suite_cli(script, "freeform", "--seeds", "2", "--parallel", "2")
    ok, failed = report["runs"]
    assert code == 1 and ok["passed"] and not failed["passed"]
    assert failed["turns"][0]["stop"] == "model_error" and "500" in failed["error"]
    assert report["summary"]["runs"] == 2 and report["summary"]["pass_rate"] == 0.5


def test_other_seeds_copies_of_a_document_do_not_crowd_out_this_runs(suite_cli, worker):
    """Seeds ingest near-identical notes into one collection; other runs' copies (here made to
    match the check's question better) are set aside, this run's note still has to be found."""
    url = worker[0]
    texts = [{"text": f"Note s{i}: What did Orion 4.2.1 change? " + NOTE.format(run=f"s{i}"),
              "source": f"orion-notes-s{i}"} for i in range(11, 16)]
    assert httpx.post(url + "/v1/rag/ingest", json={"texts": texts}, timeout=120).status_code == 200
    try:
        code, report, _ = suite_cli(list(DOES_THE_WORK), "freeform")
        assert code == 0, checks(report)
        assert checks(report)["rag top-3 for 'What did Orion 4.2.1 change?' has orion-notes-s0"]
    finally:
        for t in texts:
            httpx.delete(url + "/v1/rag/documents", params={"source": t["source"]}, timeout=60)


def test_a_check_every_seed_fails_is_counted_once_under_its_run_template(suite_cli):
    import re

    def script(body):
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        run = re.search(r"suite_(s\d+)", user).group(1)
        done = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        reply = work_for(run)[done]
        return json.loads(json.dumps(reply).replace("4.2.1", "4.1.0"))      # both store the wrong version

    code, report, _ = suite_cli(script, "freeform", "--seeds", "2", "--parallel", "2")
    failed = report["summary"]["turns"]["deploy_record"]["failed_checks"]
    assert code == 1 and failed == {"sql suite_{run}: SELECT service, version, day FROM deploys": 2}
