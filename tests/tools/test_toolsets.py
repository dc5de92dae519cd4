"""Every toolset through real dispatch (Registry.call) against a real worker and runtime
process: real SQLite files, RAG over a generated PDF, the real MiniLM, Piper and Whisper."""
from __future__ import annotations

import math
import time
import re
import sqlite3

import pytest
from jsonschema import Draft202012Validator

from tools.context import ToolContext
from tools.toolsets import TOOL_MODULES, build_registry

EXPECTED = {
    "runtime": {"runtime_status", "runtime_models"},
    "sql": {"sql_exec", "sql_query"},
    "rag": {"rag_ingest", "rag_ingest_files", "rag_search", "rag_documents"},
    "embed": {"embed", "similarity"},
    "rerank": {"rerank"},
    "speech": {"tts", "stt"},
    "memory": {"memory_add", "memory_read", "memory_search"},
    "training": {"training_start", "training_status", "training_reload", "training_rollback"},
}


def test_the_default_registry_has_every_toolset():
    r = build_registry()
    assert {ts: {t.name for t in r.select([ts])} for ts in r.toolsets()} == EXPECTED
    for tool in r.tools.values():
        Draft202012Validator.check_schema(tool.parameters)
        # small models copy values out of descriptions: no examples in them
        text = tool.description + " ".join(p.get("description", "") for p in tool.parameters["properties"].values())
        assert not re.search(r"\b(e\.g\.|for example|such as)", text, re.I), tool.name
    only = build_registry(toolsets=["sql", "memory"])
    assert sorted(only.tools) == ["memory_add", "memory_read", "memory_search", "sql_exec", "sql_query"]
    with pytest.raises(ValueError, match="unknown toolsets"):
        build_registry(toolsets=["sql", "nope"])
    assert len(TOOL_MODULES) == len(EXPECTED)


def test_sql_tools_write_a_real_sqlite_file(call, stack):
    call("sql_exec", db="facts", sql="CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value TEXT)")
    out = call("sql_exec", db="facts", sql="INSERT INTO facts VALUES ('capital', 'Paris''; --')")
    assert out["rowcount"] == 1
    rows = call("sql_query", db="facts", sql="SELECT key, value FROM facts WHERE key = 'capital'")
    assert rows == {"columns": ["key", "value"], "rows": [["capital", "Paris'; --"]], "row_count": 1}
    with sqlite3.connect(stack.settings.home / "sql" / "facts.db") as db:      # the file itself, read independently
        assert db.execute("SELECT value FROM facts").fetchall() == [("Paris'; --",)]
    refused = call.raw("sql_query", db="facts", sql="DELETE FROM facts")
    assert refused["ok"] is False and refused["retryable"] is False and "readonly" in refused["error"].replace("-", "")
    missing = call.raw("sql_query", db="facts", sql="SELECT * FROM nope")
    assert missing["ok"] is False and "no such table: nope" in missing["error"]
    for read in ("SELECT * FROM facts", "  -- read back\n /* all */ select key FROM facts"):
        wrong_tool = call.raw("sql_exec", db="facts", sql=read)      # a read goes to the tool for reading
        assert wrong_tool["ok"] is False and wrong_tool["retryable"] is False and "sql_query" in wrong_tool["error"]
    call("sql_exec", db="facts", sql="INSERT INTO facts SELECT 'city', 'Lyon'")     # a write that selects is a write
    assert call("sql_query", db="facts", sql="SELECT count(*) AS n FROM facts")["rows"] == [[2]]
    # an empty result and a change that matched nothing say so in words; a match carries no note
    none = call("sql_query", db="facts", sql="SELECT value FROM facts WHERE key = 'river'")
    assert none["rows"] == [] and "no row matched" in none["note"]
    unchanged = call("sql_exec", db="facts", sql="UPDATE facts SET value = 'x' WHERE key = 'river'")
    assert unchanged["rowcount"] == 0 and "nothing was changed" in unchanged["note"]
    assert "note" not in call("sql_exec", db="facts", sql="DELETE FROM facts WHERE key = 'city'")
    unfilled = call.raw("sql_exec", db="facts", sql="INSERT INTO facts VALUES (:k, :v)")
    assert unfilled["ok"] is False and "(:k, :v)" in unfilled["error"] and "literals" in unfilled["error"]
    borrowed = call.raw("sql_exec", db="facts", sql="INSERT INTO facts VALUES ('a', 'b')", params={"a": 1})
    assert borrowed["ok"] is False and "params" in borrowed["error"]       # no such parameter to fill
    # a time's ':' is not a placeholder
    call("sql_exec", db="facts", sql="INSERT INTO facts VALUES ('at', '12:30')")
    assert call("sql_query", db="facts", sql="SELECT value FROM facts WHERE key = 'at'")["rows"] == [["12:30"]]


def test_rag_tools_find_the_right_page_of_a_pdf(call, docs_dir):
    from fpdf import FPDF
    pages = ["Sourdough bread rises because wild yeast and lactic acid bacteria ferment the dough.",
             "The waggle dance of honey bees encodes the direction of flowers relative to the sun.",
             "Basaltic lava flows are fluid, while andesitic eruptions build steep stratovolcanoes."]
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for title, text in zip(["Baking", "Insects", "Volcanoes"], pages):
        pdf.add_page()
        pdf.start_section(title)            # the outline a hit's section comes from
        pdf.multi_cell(0, 6, text)
    path = docs_dir / "nature.pdf"
    path.write_bytes(bytes(pdf.output()))

    empty = call("rag_search", query="bees", collection="tools-test-never-stored")
    assert empty["hits"] == [] and "nothing is stored" in empty["note"]    # not an error an agent retries
    assert "rag_ingest" in empty["note"]                                   # ...but a pointer to the step it skipped
    added = call("rag_ingest_files", paths=[str(path)], collection="tools-test")
    assert added["documents"][0]["status"] == "added" and added["documents"][0]["pages"] == 3
    assert call("rag_ingest_files", paths=[str(path)], collection="tools-test")["documents"][0]["status"] == "unchanged"
    hits = call("rag_search", query="how do bees tell each other where flowers are?", collection="tools-test")["hits"]
    assert hits[0]["source"].endswith("nature.pdf") and hits[0]["page"] == 2 and "waggle" in hits[0]["text"]
    assert hits[0]["section"] == "Insects"
    call("rag_ingest", text="The samevm test note says the launch code is 4417.", source="note")
    assert "4417" in call("rag_search", query="launch code", k=1)["hits"][0]["text"]
    docs = call("rag_documents", collection="tools-test")["documents"]
    assert sorted((d["source"], d["kind"], d["pages"]) for d in docs) == [(str(path), "pdf", 3)]
    assert "'source' is a required property" in call.raw("rag_ingest", text="no name")["error"]
    outside = call.raw("rag_ingest_files", paths=["/etc/passwd"])
    assert outside["ok"] is False and not outside["retryable"]


def test_memory_tools_persist_searchable_notes(call, stack):
    first = call("memory_add", text="The user's cat is called Miso and eats at 7 pm.", tags=["cat", "pets"])
    second = call("memory_add", text="Deploys happen on Tuesdays after the standup.", tags=["work"])
    found = call("memory_search", query="What's the cat called?")["notes"]
    assert found[0]["id"] == first["id"] and found[0]["tags"] == ["cat", "pets"]
    assert call("memory_search", query="tuesday deploys")["notes"][0]["text"].startswith("Deploys")
    recent = call("memory_read", limit=1)["notes"]
    assert len(recent) == 1 and recent[0]["text"].startswith("Deploys")
    assert call("memory_read", note_id=first["id"])["notes"][0]["text"].startswith("The user's cat")
    assert call.raw("memory_read", note_id=999)["error"] == "no note with id 999"
    missed = call("memory_search", query='"unbalanced (quotes')
    assert missed["notes"] == [] and [n["id"] for n in missed["recent"]][:2] == [second["id"], first["id"]]
    assert "no note mentions" in missed["note"]
    assert call("memory_search", query="deploying")["notes"][0]["id"] == second["id"]     # by the word's stem
    with sqlite3.connect(stack.settings.home / "sql" / "memory.db") as db:
        saved = db.execute("SELECT id, tags FROM notes WHERE id IN (?, ?) ORDER BY id", (first["id"], second["id"]))
        assert saved.fetchall() == [(first["id"], "cat,pets"), (second["id"], "work")]


def test_embed_and_rerank_order_by_meaning(call):
    out = call("embed", texts=["a cat sleeps", "quarterly tax filing"])
    assert out["dim"] == 384 and len(out["embeddings"]) == 2
    assert math.isclose(sum(x * x for x in out["embeddings"][0]), 1.0, abs_tol=1e-3)
    sim = call("similarity", text="kitten", candidates=["tax return deadline", "a small young cat"])
    assert [r["index"] for r in sim["results"]] == [1, 0] and sim["results"][0]["score"] > sim["results"][1]["score"]
    ranked = call("rerank", query="how do volcanoes erupt?", top_n=1,
                  documents=["Bread needs yeast.", "Magma rises through the crust and erupts as lava."])
    assert ranked["results"] == [{"index": 1, "text": "Magma rises through the crust and erupts as lava.",
                                  "score": ranked["results"][0]["score"]}]


def test_speech_round_trip_and_file_boundary(call, stack, tmp_path):
    spoken = call("tts", text="The meeting moves to Thursday morning.")
    assert spoken["seconds"] > 0.5 and spoken["path"].startswith(str(stack.settings.home))
    heard = call("stt", path=spoken["path"])["text"].lower()
    assert "meeting" in heard and "thursday" in heard
    stranger = tmp_path / "outside.wav"
    stranger.write_bytes(open(spoken["path"], "rb").read())
    refused = call.raw("stt", path=str(stranger))
    assert refused["ok"] is False and "only files in the data directory" in refused["error"]


def test_runtime_tools_report_what_serves(call, stack):
    status = call("runtime_status")
    assert status["runtime"]["healthy"] and status["runtime"]["backend"] == "cpu"
    assert status["runtime"]["architecture"] == "qwen2" and status["runtime"]["context_length"] > 0
    assert status["worker"]["healthy"] and str(stack.settings.home.resolve()) not in str(status)   # no paths to copy
    models = call("runtime_models")
    assert models["chat"][0]["id"] == status["runtime"]["model"] and "url" not in status["runtime"]
    assert any(m["id"] == "all-minilm-l6-v2" and m["installed"] for m in models["worker"])


def test_training_tools_reach_the_jobs_api(call):
    bad = call.raw("training_start", pairs=[{"prompt": "Hi", "chosen": "Hello!"}])
    unknown = call.raw("training_status", job_id="../../health")
    assert bad["ok"] is False and not bad["retryable"] and "rejected" in bad["error"]
    assert unknown["ok"] is False and "404" in unknown["error"]


def test_a_stack_that_is_down_gives_retryable_errors():
    r = build_registry(ToolContext(worker_url="http://127.0.0.1:9", runtime_url="http://127.0.0.1:9", timeout=2))
    for name, args in [("sql_query", {"db": "x", "sql": "SELECT 1"}), ("runtime_status", {}), ("memory_search", {"query": "x"})]:
        out = r.call(name, args)
        assert out["ok"] is False and out["retryable"] is True, (name, out)


PAIRS = [{"prompt": f"Who are you? ({i})", "chosen": "I am samevm's own model.", "rejected": "I am a cloud service."}
         for i in range(4)]


def test_training_tools_train_promote_and_roll_back(call, tiny_gguf, docs_dir):
    base = docs_dir / "base.gguf"                    # the served tiny model, where the worker may read it
    base.write_bytes(open(tiny_gguf("qwen2"), "rb").read())
    before = call("runtime_status")["runtime"]["revision"]
    job = call("training_start", pairs=PAIRS, base_model=str(base), steps=2, promote=True)
    assert job["state"] in ("queued", "running")
    deadline = time.monotonic() + 600
    while (status := call("training_status", job_id=job["job_id"]))["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, status
        time.sleep(1)
    assert status["state"] == "succeeded", status
    revision = status["result"]["revision"]
    assert status["result"]["served_revision"] == revision
    assert call("runtime_status")["runtime"]["revision"] == revision       # the runtime serves the new weights
    call("training_rollback")
    assert call("runtime_status")["runtime"]["revision"] == before
    again = call("training_reload", job_id=job["job_id"])                   # and can load them again
    assert again["result"]["served_revision"] == revision
    call("training_rollback")
