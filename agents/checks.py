"""Per-turn checks of a suite, evaluated against what really happened.

Tool checks read the turn's records (a call counts only if it succeeded). Database and
RAG checks ask the worker directly over HTTP, not through the agent's tools, so a model
that only claims to have stored something fails; they read the seed's namespace, whatever
names the model chose inside it. `tool` and `memory` checks call registry tools directly
(for stores whose layout is the tool's own). Text matching is case-insensitive, and digits
grouped with commas ("32,768") match the plain number.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from agents.loop import Tools
from agents.steps import Turn
from agents.suite import Expect, RagExpect, SqlExpect
from agents.text import missing, normalise
from httpkit.client import client
from tools.context import NAMESPACE_SEP

MEMORY_DB = "memory"   # the memory tool's database: its notes are not the rows a sql check means


@dataclass(slots=True)
class CheckResult:
    check: str
    ok: bool
    detail: str = ""


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Probe:
    """Independent access to the stack for checks and resets: the worker over HTTP and
    the tool registry by direct dispatch, within one namespace ("" for the worker's own)."""

    def __init__(self, worker_url: str, tools: Tools, api_key: str | None = None, timeout: float = 120.0,
                 namespace: str = ""):
        self.worker_url, self.api_key, self.timeout = worker_url, api_key, timeout
        self.http = client(worker_url, api_key, timeout)
        self.tools, self.namespace = tools, namespace
        self.prefix = namespace + NAMESPACE_SEP if namespace else ""

    def within(self, namespace: str, tools: Tools) -> "Probe":
        """A probe for one seed: its namespace, and the registry bound to it."""
        return Probe(self.worker_url, tools, self.api_key, self.timeout, namespace)

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.http.post(path, json=body)

    def sql_rows(self, db: str, query: str) -> list[list]:
        """Rows of `query` in the database the model calls `db`; none if it does not exist."""
        r = self.post("/v1/sql/query", {"db": self.prefix + db, "sql": query})
        if r.status_code in (400, 404):   # no such table or database: no rows were stored
            return []
        r.raise_for_status()
        return r.json()["rows"]

    def sql_exec(self, db: str, sql: str) -> None:
        self.post("/v1/sql/exec", {"db": self.prefix + db, "sql": sql}).raise_for_status()

    def databases(self) -> list[str]:
        """The model's names of this namespace's SQLite databases (all, without a namespace)."""
        r = self.http.get("/v1/sql/databases")
        r.raise_for_status()
        return [d["name"][len(self.prefix):] for d in r.json()["databases"]
                if d["kind"] == "sqlite" and d["name"].startswith(self.prefix)]

    def tables(self, db: str) -> list[str]:
        """Tables with rows of their own, as the worker lists them: not SQLite's, nor the shadow
        tables of a full-text index."""
        name = self.prefix + db
        r = self.http.get("/v1/sql/databases", params={"tables": "true", "prefix": name})
        r.raise_for_status()
        return next((list(d.get("tables") or []) for d in r.json()["databases"] if d["name"] == name), [])

    def sql_tables(self, db: str | None = None) -> dict[str, list[list]]:
        """Every table's rows, as {"db.table": rows}, of `db` or of every database but memory's."""
        dbs = [db] if db is not None else [d for d in self.databases() if d != MEMORY_DB]
        return {f"{d}.{t}": self.sql_rows(d, f"SELECT * FROM {quote(t)}") for d in dbs for t in self.tables(d)}

    def collections(self) -> list[str]:
        r = self.http.get("/v1/rag/collections")
        r.raise_for_status()
        return [c[len(self.prefix):] for c in r.json()["collections"] if c.startswith(self.prefix)]

    def rag_search(self, query: str, k: int, collection: str) -> list[dict]:
        r = self.post("/v1/rag/search", {"query": query, "k": k, "collection": self.prefix + collection})
        if r.status_code == 404:         # no such collection yet
            return []
        r.raise_for_status()
        return r.json()["results"]

    def rag_delete(self, source: str, collection: str) -> None:
        r = self.http.delete("/v1/rag/documents", params={"collection": self.prefix + collection, "source": source})
        if r.status_code not in (200, 404):
            r.raise_for_status()

    def clear(self) -> None:
        """Empty this namespace: drop every table and view of its databases, every collection.
        Refused without a namespace (that would be everyone's data)."""
        assert self.prefix, "clear() empties one seed's namespace, not the whole worker"
        for db in self.databases():
            for virtual_first in (True, False):   # a full-text index's shadow tables go with it
                rows = self.sql_rows(db, "SELECT type, name, sql FROM sqlite_master "
                                         "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")
                for kind, name, sql in rows:
                    if not virtual_first or (sql or "").upper().startswith("CREATE VIRTUAL"):
                        self.sql_exec(db, f"DROP {'VIEW' if kind == 'view' else 'TABLE'} IF EXISTS {quote(name)}")
        for collection in self.collections():
            self.http.delete(f"/v1/rag/collections/{self.prefix + collection}").raise_for_status()

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


def sql_check(e: SqlExpect, probe: Probe, fill) -> CheckResult:
    """With a query: its rows hold the values. Without: some table holds them all (in one
    row with same_row), in at least min_rows rows that hold one of them; and no row of any
    table holds all the `absent` values."""
    want, gone = [fill(t) for t in e.contains], [fill(t) for t in e.absent]
    if e.query:
        rows = probe.sql_rows(fill(e.db), fill(e.query))
        lost = missing(json.dumps(rows, default=str), want)
        return CheckResult(f"sql {fill(e.db)}: {fill(e.query)}", len(rows) >= e.min_rows and not lost,
                           f"{len(rows)} rows" + (f", missing {lost}" if lost else ""))
    tables = {name: [json.dumps(r, default=str, ensure_ascii=False) for r in rows]
              for name, rows in probe.sql_tables(fill(e.db) if e.db else None).items()}
    holding = (f"a table{' of ' + fill(e.db) if e.db else ''} holds " + ", ".join(want)
               + (" in one row" if e.same_row else "") + (f" in {e.min_rows}+ rows" if e.min_rows > 1 else "")) if want else ""
    name = "sql: " + ", ".join(filter(None, [holding, f"no row holds {', '.join(gone)}" if gone else ""]))

    def holds(texts: list[str]) -> bool:
        if e.same_row:
            return sum(not missing(t, want) for t in texts) >= e.min_rows
        holding = [t for t in texts if len(missing(t, want)) < len(want)] if want else texts
        return not missing(" ".join(texts), want) and len(holding) >= e.min_rows

    stale = [t for texts in tables.values() for t in texts if gone and not missing(t, gone)]
    ok = (not want or any(holds(texts) for texts in tables.values())) and not stale
    seen = ", ".join(f"{t} ({len(r)} rows)" for t, r in tables.items()) or "no tables"
    return CheckResult(name, ok, "" if ok else f"seen: {seen}" + (f"; still there: {stale[:2]}" if stale else ""))


def rag_check(e: RagExpect, probe: Probe, fill) -> CheckResult:
    """Among the top k hits of the question (in each collection searched), one of the
    expected source (any, if none is named) holds the values."""
    source = fill(e.source) if e.source else None
    collections = [fill(e.collection)] if e.collection else probe.collections()
    hits = [h for c in collections for h in probe.rag_search(fill(e.query), e.k, c)]
    good = [h for h in hits if (source is None or h["source"] == source)
            and not missing(h["text"], [fill(t) for t in e.contains])]
    return CheckResult(f"rag top-{e.k} for {fill(e.query)!r} has " + (source or "a passage with ")
                       + ", ".join(fill(t) for t in e.contains), bool(good),
                       f"collections {collections}, sources {[h['source'] for h in hits]}")


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
    for group in expect.called_any:
        out.append(CheckResult("called one of " + " | ".join(group), bool(succeeded & set(group))))
    for name in expect.not_called:
        out.append(CheckResult(f"did not call {name}", name not in attempted))
    for name in expect.recovered:
        mine = [c for c in turn.calls if c.name == name]
        ok = any(not c.ok for c in mine) and mine[-1].ok
        out.append(CheckResult(f"{name} failed, then succeeded", ok,
                               f"results {['ok' if c.ok else 'failed' for c in mine]}"))
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
    out += [sql_check(e, probe, fill) for e in expect.sql]
    out += [rag_check(e, probe, fill) for e in expect.rag]
    for e in expect.tool:
        result = probe.tools.call(e.name, {k: fill(v) if isinstance(v, str) else v for k, v in e.arguments.items()})
        text = json.dumps(result.get("data"), default=str, ensure_ascii=False)
        lost = missing(text, [fill(t) for t in e.contains]) if result.get("ok") else e.contains
        out.append(CheckResult(f"{e.name} shows " + ", ".join(map(fill, e.contains)), bool(result.get("ok")) and not lost,
                               result.get("error", "") if not result.get("ok") else (f"missing {lost}" if lost else "")))
    if expect.memory:
        notes = [n["text"] for n in probe.memory_notes() if n["id"] > memory_mark]
        for e in expect.memory:
            want, groups = [fill(t) for t in e.contains], [[fill(t) for t in g] for g in e.contains_any]
            ok = any(not missing(text, want) and all(len(missing(text, g)) < len(g) for g in groups)
                     for text in notes)
            out.append(CheckResult("memory note saved with " + ", ".join(want + [" | ".join(g) for g in groups]),
                                   ok, f"{len(notes)} new notes"))
    return out
