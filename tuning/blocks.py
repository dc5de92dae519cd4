"""The turns a task is built from: one method each, in sql_turns.py (records kept, changed,
queried and looked up again), store_turns.py (knowledge base, memory, no tool, several
stores at once) and reported.py (what a tool reported, kept on request and read back).

A Builder holds what the conversation has done so far (the table and its rows, the texts
filed, the notes saved, what the current session has said), so each turn's gold calls and
checks follow from it.
"""
from __future__ import annotations

import random
import re

from agents.suite import Expect
from tuning import wording as W
from tuning.domains import Domain
from tuning.plan import Step, TurnPlan
from tuning.records import Table, fmt
from tuning.reported import Report, ReportedTurns, ReportTable
from tuning.schema import plain_say, variant
from tuning.sql_turns import SqlTurns
from tuning.store_turns import StoreTurns


MISSES = ("savings", "overview", "history", "archive", "stuff", "summary", "details", "logbook")
WHERE_STYLES = ("the {table} table of the SQLite database {db}", "table {table} in the {db} database",
                "{db}.{table} (SQLite)", "the {db} database, table {table}", "SQLite: database {db}, table {table}")


class Builder(SqlTurns, StoreTurns, ReportedTurns):
    def __init__(self, rng: random.Random, domain: Domain, runtime_card: dict | None = None):
        self.rng, self.d = rng, variant(rng, domain)
        self.runtime_card = runtime_card      # what runtime_status reports to this task (runtime_stub.py)
        self.where_style = rng.choice(WHERE_STYLES)
        self.table = Table.choose(rng, self.d)
        self.filed: list[tuple[str, str, str, str]] = []     # (source, passage, question, key)
        self.passages_used: set = set()                          # the domain's Backgrounds drawn so far
        self.texts = ""                  # what the user called the filed passages ("tips"), if they did
        self.prefs: list[str] = []
        self.stated: set[str] = set()    # the preferences stated with a verb other than "prefer"
        self.where_note = False
        self.avoided = None              # (field, value): the records a memory note rules out
        self.notes: list[str] = []         # every memory note's text and tags, as saved
        self.knows_table = False          # the current session has seen the database and table names
        self.said: dict[str, dict] = {}   # key -> the record as the current session last heard it
        self.pending: list[dict] = []     # records told (mention) but not asked to be kept yet
        self.new_session = False
        self.session = 0                  # sessions begun before the current one
        self.reported: Report | None = None          # what the last turn's tool reported, to keep on request
        self.report_tables: list[ReportTable] = []   # the tables kept reports went into

    # -- helpers ----------------------------------------------------------------------------
    def pick(self, templates, **slots) -> str:
        return W.pick(self.rng, templates, things=self.d.things, **slots)

    def greeting_fits(self, templates) -> list[str]:
        """The wordings that greet the assistant "again" only where a new session begins."""
        return list(templates) if self.new_session else [t for t in templates if "again" not in t.lower()]

    def turn(self, user: str, steps: list[Step], kind: str, expect: Expect | None = None,
             keys: list[str] | None = None) -> TurnPlan:
        needs = {name for s in steps for name, _ in s.calls}
        plan = TurnPlan(user, steps, kind, expect or Expect(), new_session=self.new_session, needs=needs,
                        keys=keys or [])
        self.new_session, self.reported = False, None
        return plan

    def session_break(self) -> None:
        self.new_session, self.knows_table, self.said, self.pending = True, False, {}, []
        self.session, self.reported = self.session + 1, None

    def where(self) -> str:
        """How this task's answers and notes name the table: one way per task, chosen among
        several, so that no single frame is learnt as the way every answer goes."""
        return self.where_style.format(table=self.table.name, db=self.table.db)

    def records_phrase(self, records: list[dict]) -> str:
        texts = [f for f in self.d.fields[1:] if f.kind == "text"]
        if len(records) == 1 and texts and self.rng.random() < 0.25:
            # one value given as an instruction after the rest ("...; make it urgent"), as users do
            f = self.rng.choice(texts)
            said = plain_say(self.rng, [x for x in self.d.fields if x is not f])
            said = said.format(**{k: fmt(v) for k, v in records[0].items()})
            return f"{said}; " + self.rng.choice(W.SET_FIELD).format(field=f.words, value=fmt(records[0][f.name]))
        parts = [self.table.said(r) for r in records]
        if len(parts) == 2 and self.rng.random() < 0.3:      # two told as one story, each still its own row
            return self.rng.choice(W.PAIRED).format(a=parts[0], b=parts[1])
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    def opened(self, record: dict) -> str:
        """A record opened by a verb that sets one of its values ("Log a new fault: SF-112, the
        left monitor hums"): the value is stored though the user never says it."""
        field, _, verbs = self.d.opens
        rng, rest = self.rng, [f for f in self.d.fields if f.name != field]
        said_in = set(re.findall(r"{(\w+)}", self.d.says))
        told = [f for f in rest if f.name not in said_in]
        texts = [f for f in told if f.kind == "text" and f is not self.d.key]
        moved = rng.choice(texts) if texts and rng.random() < 0.35 else None   # "...; make it urgent"
        if self.d.says and rng.random() < 0.6:          # as someone's report: "Amina in flat 4 says the tap drips"
            said = self.d.says + "".join(f", {f.words} {{{f.name}}}" for f in told if f is not moved)
        else:
            said = plain_say(rng, [f for f in rest if f is not moved])
        said = said.format(**{k: fmt(v) for k, v in record.items()})
        if moved:
            instruction = rng.choice(W.SET_FIELD).format(field=moved.words, value=fmt(record[moved.name]))
            said += ". " + instruction[0].upper() + instruction[1:]
        return f"{rng.choice(verbs)}: {said}."

    def numeric(self) -> list:
        return [f for f in self.d.fields[1:] if f.kind in ("int", "real")]

    def named_place(self, db: str, table: str) -> tuple[str, str]:
        """Where a user who names it says a first keep goes: these names, or at times ones no
        domain uses, so that the names are copied from the request rather than recalled."""
        rng = self.rng
        if rng.random() < 0.5:
            db = rng.choice(W.NAMED_DBS) + (f"_{rng.choice('abcdefghst')}{rng.randint(1, 9)}" if rng.random() < 0.4 else "")
            table = rng.choice(W.NAMED_TABLES)
        return db, table

    def in_named_table(self, request: str, db: str, table: str, columns: list[str]) -> str:
        request = request.rstrip() + ("" if request.rstrip()[-1:] in ".?!" else ".")
        return self.rng.choice(W.IN_NAMED_TABLE).format(request=request, db=db, table=table, columns=", ".join(columns))

    def can_sql(self) -> bool:
        """Whether the current session can name the table: it saw it, or a note says where."""
        return self.knows_table or self.where_note

    def find_table(self) -> list[Step]:
        """In a new session the names are found again through the memory note about them."""
        if self.knows_table:
            return []
        assert self.where_note
        self.knows_table = True
        saved = {w for n in self.notes for w in re.findall(r"\w+", n.lower())}
        missing = [w for w in MISSES if not any(v.startswith(w[:4]) or w.startswith(v[:4]) for v in saved)]
        if missing and self.rng.random() < 0.25:
            # a word no note holds matches nothing, and the search returns the recent notes
            # instead (tools/memory.py); sometimes every note is read as well, never a store guessed
            miss = Step([("memory_search", {"query": self.rng.choice(missing)})])
            return [miss, Step([("memory_read", {})])] if self.rng.random() < 0.3 else [miss]
        return [Step([("memory_search", {"query": self.d.things})])]

