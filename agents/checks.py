"""Per-turn checks of a suite, evaluated against what really happened.

Tool checks read the turn's records (a call counts only if it succeeded). Database and
RAG checks ask the worker directly over HTTP, not through the agent's tools, so a model
that only claims to have stored something fails. `tool` checks call a registry tool
directly (for stores whose layout is the tool's own, like memory notes). Text matching is
case-insensitive, and digits grouped with commas ("32,768") match the plain number.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import httpx

from httpkit.client import client
from agents.steps import Turn
from agents.text import missing, normalise
from agents.suite import Expect
from agents.loop import Tools


@dataclass(slots=True)
class CheckResult:
    check: str
    ok: bool
    detail: str = ""


class Probe:
    """Independent access to the stack for checks and resets: the worker over HTTP and
    the tool registry by direct dispatch."""

    def __init__(self, worker_url: str, tools: Tools, api_key: str | None = None, timeout: float = 120.0):
        self.http = client(worker_url, api_key, timeout)
        self.tools = tools

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.http.post(path, json=body)

    def sql_rows(self, db: str, query: str) -> list[list]:
        r = self.post("/v1/sql/query", {"db": db, "sql": query})
        if r.status_code == 400:         # no such table or database: no rows were stored
            return []
        r.raise_for_status()
        return r.json()["rows"]

    def sql_exec(self, db: str, sql: str) -> None:
        self.post("/v1/sql/exec", {"db": db, "sql": sql}).raise_for_status()

    def rag_search(self, query: str, k: int, collection: str) -> list[dict]:
        r = self.post("/v1/rag/search", {"query": query, "k": k, "collection": collection})
        if r.status_code == 404:         # no such collection yet
            return []
        r.raise_for_status()
        return r.json()["results"]

    def rag_delete(self, source: str, collection: str) -> None:
        r = self.http.delete("/v1/rag/documents", params={"collection": collection, "source": source})
        if r.status_code not in (200, 404):
            r.raise_for_status()

    def memory_notes(self) -> list[dict]:
        """The most recent memory notes ({id, text, ...}), through the memory tool."""
        result = self.tools.call("memory_read", {"limit": 100})
        if not result.get("ok"):
            raise RuntimeError(f"memory_read failed: {result.get('error')}")
        return result["data"]["notes"]

    def memory_mark(self) -> int:
        """The newest note id now; notes saved later have larger ids."""
        return max((n["id"] for n in self.memory_notes()), default=0)

    def close(self) -> None:
        self.http.close()


SIBLING_SLACK = 50     # extra hits fetched so that other runs' documents can be set aside


def other_runs(template: str, mine: str):
    """Whether a source is another seed's copy of this document (the template with another
    run's name): seeds of one suite ingest near-identical texts into one collection, and
    those are not this run's competitors for its top-k."""
    if "{run}" not in template:
        return lambda source: False
    pattern = re.compile(re.escape(template).replace(re.escape("{run}"), r"s\d+") + "$")
    return lambda source: source != mine and bool(pattern.match(source))


def evaluate(expect: Expect, turn: Turn, probe: Probe, fill, memory_mark: int = 0) -> list[CheckResult]:
    """Every check of `expect` against `turn` and the live stack; `fill` substitutes the
    {runtime.*} variables into expected text; memory checks see only notes newer than
    `memory_mark` (saved during this run)."""
    out: list[CheckResult] = []
    succeeded = {c.name for c in turn.calls if c.ok}
    attempted = {c.name for c in turn.calls}
    for name in expect.called:
        out.append(CheckResult(f"called {name}", name in succeeded,
                               "" if name in succeeded else ("failed" if name in attempted else "never called")))
    for name in expect.not_called:
        out.append(CheckResult(f"did not call {name}", name not in attempted))
    answer = turn.answer or ""
    if expect.answer_contains:
        lost = missing(answer, [fill(t) for t in expect.answer_contains])
        out.append(CheckResult("answer contains " + ", ".join(map(fill, expect.answer_contains)), not lost,
                               f"missing {lost}" if lost else ""))
    for group in expect.answer_contains_any:
        options = [fill(t) for t in group]
        hit = len(missing(answer, options)) < len(options)
        out.append(CheckResult("answer mentions one of " + " | ".join(options), hit))
    for text in expect.answer_excludes:
        out.append(CheckResult(f"answer does not contain {fill(text)!r}",
                               normalise(fill(text)) not in normalise(answer)))
    for e in expect.sql:
        rows = probe.sql_rows(fill(e.db), fill(e.query))
        lost = missing(json.dumps(rows, default=str), [fill(t) for t in e.contains])
        ok = len(rows) >= e.min_rows and not lost
        out.append(CheckResult(f"sql {fill(e.db)}: {fill(e.query)}", ok,
                               f"{len(rows)} rows" + (f", missing {lost}" if lost else "")))
    for e in expect.rag:
        source = fill(e.source) if e.source else None
        sibling = other_runs(e.source, source) if source else (lambda s: False)
        hits = [h for h in probe.rag_search(fill(e.query), e.k + SIBLING_SLACK, fill(e.collection))
                if not sibling(h["source"])][:e.k]
        good = [h for h in hits if (source is None or h["source"] == source)
                and not missing(h["text"], [fill(t) for t in e.contains])]
        out.append(CheckResult(f"rag top-{e.k} for {fill(e.query)!r} has " + (source or "a match"), bool(good),
                               f"sources {[h['source'] for h in hits]}"))
    for e in expect.tool:
        result = probe.tools.call(e.name, {k: fill(v) if isinstance(v, str) else v for k, v in e.arguments.items()})
        text = json.dumps(result.get("data"), default=str, ensure_ascii=False)
        lost = missing(text, [fill(t) for t in e.contains]) if result.get("ok") else e.contains
        out.append(CheckResult(f"{e.name} shows " + ", ".join(map(fill, e.contains)), bool(result.get("ok")) and not lost,
                               result.get("error", "") if not result.get("ok") else (f"missing {lost}" if lost else "")))
    if expect.memory:
        notes = [n["text"] for n in probe.memory_notes() if n["id"] > memory_mark]
        for e in expect.memory:
            want = [fill(t) for t in e.contains]
            out.append(CheckResult("memory note saved with " + ", ".join(want),
                                   any(not missing(text, want) for text in notes), f"{len(notes)} new notes"))
    return out
