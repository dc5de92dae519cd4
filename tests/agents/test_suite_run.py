"""`samevm suite` end to end against a real worker (SQLite, RAG, memory) and a scripted
model: a model that does the work passes; one that only says it did, or stores the wrong
value, fails the checks that look at the stores themselves."""
from __future__ import annotations

import json

import pytest
import yaml

from samevm.cli import main
from tests.agents.fake_model import ScriptedModel, call, calls, text
from tests.stack_fixtures import free_port

NOTE = "Orion 4.2.1 moved the scheduler to a new queue and cut p99 latency in half."


@pytest.fixture
def suite_cli(worker, monkeypatch, tmp_path):
    """suite_cli(script, *args) -> (exit code, report dict, ScriptedModel): `samevm suite` with
    the scripted model as the runtime and the real worker, both attached by the supervisor."""
    url, worker_port, home = worker

    def run(script, *args: str, strict: bool = True):
        runtime_port = free_port()
        monkeypatch.setenv("SAMEVM_RUNTIME_PORT", str(runtime_port))
        monkeypatch.setenv("SAMEVM_WORKER_PORT", str(worker_port))
        out = tmp_path / f"report-{runtime_port}"
        with ScriptedModel(script, port=runtime_port) as fake:
            code = main(["--home", str(home), "suite", *args, "--out", str(out), "--quiet", *(["--strict"] if strict else [])])
        assert (out / "transcript.txt").is_file()
        return code, json.loads((out / "report.json").read_text()), fake
    return run


def checks(report: dict) -> dict[str, bool]:
    return {c["check"]: c["ok"] for c in report["runs"][0]["turns"][0]["checks"]}


DOES_THE_WORK = [
    call("sql_exec", db="releases", sql="CREATE TABLE deploys (service TEXT, version TEXT, day TEXT)"),
    calls(("sql_exec", {"db": "releases", "sql": "INSERT INTO deploys VALUES ('orion', '4.2.1', '2026-11-20')"}),
          ("rag_ingest", {"text": NOTE, "source": "orion-notes"}),
          ("memory_add", {"text": "Orion's deploy record is in the deploys table of the releases database; its "
                                  "release notes are in the knowledge base."})),
    text("Stored the deploy row, the release note and a memory note."),
]
STORE_CHECKS = ["sql: a table holds orion, 4.2.1, 2026-11-20 in one row",
                "rag top-3 for 'What did Orion 4.2.1 change?' has a passage with p99",
                "memory note saved with orion, database | sqlite | sql | table, knowledge base | rag"]


def test_freeform_suite_passes_when_the_work_is_done(suite_cli):
    code, report, fake = suite_cli(list(DOES_THE_WORK), "freeform")
    assert code == 0, checks(report)
    turn = report["runs"][0]["turns"][0]
    assert turn["passed"] and all(checks(report).values()) and set(STORE_CHECKS) <= set(checks(report))
    assert [c["name"] for c in turn["steps"][1]["calls"]] == ["sql_exec", "rag_ingest", "memory_add"]
    assert report["summary"]["pass_rate"] == 1.0 and report["model"] == "fake-model"
    assert turn["tokens"] == {"prompt": 300, "completion": 30} and turn["latency_s"] > 0
    offered = {t["function"]["name"] for t in fake.requests[0]["tools"]}
    assert {"sql_exec", "rag_ingest", "memory_add", "runtime_status"} <= offered and "speak" not in offered


def test_claiming_without_doing_fails_every_store_check(suite_cli):
    # Runs after the passing test on the same worker and the same seed: emptying the seed's
    # namespace first must keep that run's rows, document and note from counting for this one.
    code, report, _ = suite_cli([text("Done: I stored the deploy, the note and the memory.")], "freeform")
    assert code == 1
    assert [name for name, ok in checks(report).items() if ok] == ["did not call runtime_status"]


def test_without_strict_a_failing_suite_reports_and_exits_cleanly(suite_cli):
    # `make run` runs the suite this way: the failures are in the report, the command ends with 0
    code, report, _ = suite_cli([text("Done: I stored the deploy, the note and the memory.")], "freeform",
                                strict=False)
    assert code == 0 and report["summary"]["pass_rate"] == 0.0 and not all(checks(report).values())


def test_wrong_value_fails_the_database_check(suite_cli):
    script = json.loads(json.dumps(DOES_THE_WORK).replace("4.2.1', ", "4.1.0', "))
    code, report, _ = suite_cli(script, "freeform")
    failed = [name for name, ok in checks(report).items() if not ok]
    assert code == 1 and failed == [STORE_CHECKS[0]]


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
    assert [t["function"]["name"] for t in fake.requests[0]["tools"]] == ["runtime_status", "runtime_models"]


def seed_of(body: dict) -> int:
    """The suite seed of a request (the runner seeds the sampler with seed * 1000 + step)."""
    return body["seed"] // 1000


def steps_done(body: dict) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))


def test_a_runtime_failure_fails_its_seed_and_the_others_still_count(suite_cli):
    """A 5xx from the runtime in one seed is that seed's recorded failure (stop model_error,
    the error kept), not a crash that loses the seeds already run."""
    def script(body):
        if seed_of(body) == 1:
            raise StopIteration               # the scripted runtime answers 500
        return DOES_THE_WORK[steps_done(body)]

    code, report, _ = suite_cli(script, "freeform", "--seeds", "2", "--parallel", "2")
    ok, failed = report["runs"]
    assert code == 1 and ok["passed"] and not failed["passed"]
    assert failed["turns"][0]["stop"] == "model_error" and "500" in failed["error"]
    assert report["summary"]["runs"] == 2 and report["summary"]["pass_rate"] == 0.5


def test_a_check_every_seed_fails_is_counted_once(suite_cli):
    def script(body):                         # both seeds store the wrong version
        return json.loads(json.dumps(DOES_THE_WORK[steps_done(body)]).replace("4.2.1', ", "4.1.0', "))

    code, report, _ = suite_cli(script, "freeform", "--seeds", "2", "--parallel", "2")
    failed = report["summary"]["turns"]["deploy_record"]["failed_checks"]
    assert code == 1 and failed == {STORE_CHECKS[0]: 2}
