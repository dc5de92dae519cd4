"""Turns that keep what a tool reported: the values a `status`, a `query` or a `search` turn
just got back (not records the user typed), stored as a row of a new table on the user's
next request, and sometimes read back later with a query.

Every other keep stores records the user wrote, so the tuned model, asked to keep facts a
tool had reported, made up a table of unrelated records instead. Here the columns are named
after what was reported (names varied per task) and the INSERT copies the reported values.

A reporting turn leaves a Report in `Builder.reported` (cleared by the next turn); a kept
Report becomes a ReportTable, readable again while its session lasts. A mixin of
blocks.Builder.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from agents.suite import Expect, SqlExpect
from tuning import answers as A
from tuning import wording as W
from tuning.disjoint import Fence
from tuning.plan import Step, TurnPlan
from tuning.records import fmt, literal

WRITES = ["sql_exec", "rag_ingest", "memory_add"]
AGAIN = {"status": ["runtime_status"], "found": ["rag_search"]}    # a kept report is read from its table, not the tool
DBS = ("notes", "records", "scratch", "workspace", "info", "mydata")
TABLES = {"status": ("model_info", "serving_setup", "stack_details", "system_info", "model_card", "llm_setup",
                     "assistant_setup", "current_model", "setup_check"),
          "figure": ("summaries", "totals", "figures", "stats", "summary", "key_figures", "results_summary"),
          "found": ("reference_notes", "kb_answers", "looked_up", "key_points", "found_values", "answers",
                    "from_documents")}
# column names per fact, one drawn per task: what a model reads off the report, never one fixed schema
COLUMNS = {"model": ("model", "model_name", "model_id", "llm", "chat_model"),
           "revision": ("revision", "weights_revision", "model_revision", "rev"),
           "backend": ("backend", "device", "runs_on", "compute_backend", "hardware"),
           "architecture": ("architecture", "arch", "model_family", "family"),
           "context_length": ("context_length", "context_tokens", "ctx_len", "context_window", "max_context"),
           "label": ("metric", "label", "statistic", "what", "description"),
           "entry": ("entry", "item", "which_one", "record"),
           "value": ("value", "figure", "amount", "result"),
           "question": ("question", "asked", "topic"),
           "answer": ("answer", "fact", "detail", "found_value"),
           "source": ("source", "document", "found_in", "source_doc")}
STATUS_WORDS = {"model": "model name", "revision": "revision", "backend": "backend", "architecture": "architecture",
                "context_length": "context length"}


@dataclass(slots=True)
class Fact:
    name: str                  # what it is, a key of COLUMNS
    words: str                 # how a user calls it
    value: object              # as the tool reported it (or, not `reported`, a label the keep gives it)
    reported: bool = True      # a tool returned it: the checks look for it in the stored row

    @property
    def sql_type(self) -> str:
        return "INTEGER" if isinstance(self.value, int) else "REAL" if isinstance(self.value, float) else "TEXT"


@dataclass(slots=True)
class Report:
    kind: str                  # status | figure | found
    facts: list[Fact]
    words: str = ""            # how a user calls it as a whole: "total cost", or the question it answers
    asked: tuple = ()          # the facts the user's question asked for (the tool may report more)


@dataclass(slots=True)
class ReportTable:
    kind: str
    db: str
    name: str
    columns: dict[str, str]    # fact name -> column
    id_column: bool
    session: int               # the session that created it (a later one does not know it)
    rows: list[list[Fact]] = field(default_factory=list)

    def create(self, facts: list[Fact]) -> str:
        cols = ", ".join(f"{self.columns[f.name]} {f.sql_type}" for f in facts)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({'id INTEGER PRIMARY KEY, ' * self.id_column}{cols})"

    def insert(self, facts: list[Fact], named: bool) -> str:
        values = ", ".join(literal(f.value) for f in facts)
        cols = f" ({', '.join(self.columns[f.name] for f in facts)})" if named or self.id_column else ""
        return f"INSERT INTO {self.name}{cols} VALUES ({values})"


@functools.cache
def fence() -> Fence:
    return Fence()


def has_letters(text: str) -> bool:
    return bool(re.search(r"[a-z]", text.lower()))


class ReportedTurns:
    # -- what a turn reported -------------------------------------------------------------
    def report_status(self, fields: list[str], asked: tuple = ()) -> None:
        """runtime_status answered, quoting `fields` of the task's card; the user asked for `asked`."""
        c = self.runtime_card
        value = {"model": c["id"], "revision": c["revision"], "backend": c["backend"],
                 "architecture": c["architecture"], "context_length": c["context_length"]}
        if not any(t.kind == "status" for t in self.report_tables):     # the same card twice would be a duplicate row
            self.reported = Report("status", [Fact(f, STATUS_WORDS[f], value[f]) for f in fields], asked=asked)

    def report_figure(self, label: str, value, entry: str | None = None) -> None:
        """An aggregate query returned `value` (and, for a largest or smallest, its `entry`)."""
        facts = [Fact("label", "label", label, reported=False)]
        facts += [Fact("entry", f"{self.d.key.words} with the {label}", entry)] if entry is not None else []
        self.reported = Report("figure", facts + [Fact("value", label, value)], label)

    def report_found(self, source: str, question: str, key: str) -> None:
        """A search returned the passage answering `question` with `key` (a bare number would
        match any table's rows, so only a value with words is kept)."""
        if has_letters(key):
            self.reported = Report("found", [Fact("question", "question", question.rstrip("?"), reported=False),
                                             Fact("answer", "answer", key), Fact("source", "source", source)], question)

    # -- keep it ------------------------------------------------------------------------------
    def report_table(self, r: Report, facts: list[Fact]) -> tuple[ReportTable, bool]:
        """A table this session made for reports of this kind and shape, or a new one; True if new."""
        names = [f.name for f in facts]
        for t in self.report_tables:
            if t.kind == r.kind and t.session == self.session and list(t.columns) == names:
                return t, False
        rng = self.rng
        taken = {t.name for t in self.report_tables} | {self.table.name}
        same_db = self.table.created and self.can_sql() and rng.random() < (0.8 if r.kind == "figure" else 0.4)
        db = self.table.db if same_db else rng.choice(DBS)
        for _ in range(50):         # names whose statements and mentions share no run of words with the suites
            name = rng.choice([n for n in TABLES[r.kind] if n not in taken] or [f"{r.kind}_{len(taken)}"])
            columns = {n: rng.choice(COLUMNS[n]) for n in names}
            if r.kind == "figure" and "entry" in columns and rng.random() < 0.5:
                columns["entry"] = self.d.key.name          # named as the records' key column is
            t = ReportTable(r.kind, db, name, columns, rng.random() < 0.3, self.session)
            said = [t.create(facts), t.insert(facts, True), f"Stored in {self.where_style.format(table=name, db=db)}:"]
            if not any(fence().leaks(text) for text in said):
                break
        self.report_tables.append(t)
        return t, True

    def keep_reported(self) -> TurnPlan:
        r, rng = self.reported, self.rng
        facts, named, counted = list(r.facts), False, False
        draw = rng.random()
        if r.kind == "status" and r.asked and len(r.asked) < len(facts) and draw < 0.35:
            # "those three": what the question asked for, not all the tool said
            facts, counted = [f for f in facts if f.name in r.asked], True
        elif r.kind == "status" and len(facts) > 2 and draw < 0.65:      # the user names some of them
            facts = [facts[0]] + sorted(rng.sample(facts[1:], rng.randint(1, len(facts) - 1)),
                                        key=lambda f: r.facts.index(f))
            named = True
        with_source = r.kind == "found" and rng.random() < 0.5
        if r.kind == "found" and not with_source:
            facts = [f for f in facts if f.name != "source"]
        t, new = self.report_table(r, facts)
        named = new and rng.random() < 0.15                  # the user says where it goes
        if named:
            t.db, t.name = self.named_place(t.db, t.name)
        if not new:             # a found answer's `words` is its question: not a name for it
            user = self.pick([w for w in W.KEEP_MORE if r.kind == "figure" or "{stat}" not in w], stat=r.words)
        elif r.kind == "status" and counted:
            user = self.pick(W.KEEP_STATUS_ASKED, count=W.count_words(len(facts)))
        elif r.kind == "status":
            user = self.pick(W.KEEP_STATUS_NAMED, fields=W.series([f.words for f in facts])) if named else \
                self.pick(W.KEEP_STATUS)
        elif r.kind == "figure":
            user = self.pick(W.KEEP_FIGURE, stat=r.words)
        else:
            user = self.pick(W.KEEP_FOUND_SOURCE if with_source else W.KEEP_FOUND)
        if named:
            user = self.in_named_table(user, t.db, t.name, [t.columns[f.name] for f in facts])
        t.rows.append(facts)
        insert = ("sql_exec", {"db": t.db, "sql": t.insert(facts, rng.random() < 0.5)})
        if not new:
            steps = [Step([insert])]
        elif rng.random() < 0.5:
            steps = [Step([("sql_exec", {"db": t.db, "sql": t.create(facts)}), insert])]
        else:
            steps = [Step([("sql_exec", {"db": t.db, "sql": t.create(facts)})]), Step([insert])]
        where = self.where_style.format(table=t.name, db=t.db)
        kept = [f for f in facts if f.reported]
        said = "; ".join(f"{f.words}: {fmt(f.value)}" for f in kept)
        opening = rng.choice(["Done.", "Saved.", "Stored.", "Okay."])

        def answer(results):
            if not A.stored_rows(results):
                return f"Nothing was stored in {where}."
            return f"{opening} {'Stored in' if new else 'Added a row to'} {where}: {said}."
        want = [fmt(f.value) for f in kept]
        # a figure (a count, a total) could sit in the records' table too: the check reads this table
        check = SqlExpect(contains=want, db=t.db, query=f"SELECT * FROM {t.name}") if r.kind == "figure" else \
            SqlExpect(contains=want, same_row=True)
        expect = Expect(called=["sql_exec"], not_called=["rag_ingest", "memory_add"], answer_contains=want, sql=[check])
        return self.turn(user, steps + [Step(answer=answer)], "keep_" + r.kind, expect, want)

    # -- read it back ---------------------------------------------------------------------------
    def known_reports(self) -> list[ReportTable]:
        return [t for t in self.report_tables if t.session == self.session]

    def read_back(self, kinds: tuple = ("status", "figure", "found")) -> tuple[ReportTable, list[Fact], Fact, str]:
        """A kept value of this session's reports of `kinds`: (its table, its row, the fact, the
        query that reads it)."""
        rng = self.rng
        t = rng.choice([t for t in self.known_reports() if t.kind in kinds])
        row = rng.choice(t.rows)
        fact = rng.choice([f for f in row if f.reported and f.name != "source"])
        sql = f"SELECT {t.columns[fact.name]} FROM {t.name}"
        if len(t.rows) > 1:
            by = row[0]
            sql += f" WHERE {t.columns[by.name]} = {literal(by.value)}"
        return t, row, fact, sql

    def lookup_reported(self) -> TurnPlan:
        """A kept value read back with a query, though the conversation has it."""
        t, row, fact, sql = self.read_back()
        if t.kind == "found":
            question = next(f.value for f in row if f.name == "question") + "?"
            user = self.pick(W.LOOKUP_FOUND, question=question, question_lc=question[:1].lower() + question[1:])
        else:
            user = self.pick(W.LOOKUP_REPORTED, fact=fact.words)
        where = self.where_style.format(table=t.name, db=t.db)

        def answer(results):
            rows = A.last_rows(results)
            return f"The stored {fact.words} is {fmt(rows[0][0])} ({where})." if rows else f"{where} has no such row."
        want = [fmt(fact.value)]
        expect = Expect(called=["sql_query"], not_called=WRITES + AGAIN.get(t.kind, []), answer_contains=want)
        return self.turn(user, [Step([("sql_query", {"db": t.db, "sql": sql})]), Step(answer=answer)],
                         "lookup_reported", expect, want)

    def recall_reported(self) -> TurnPlan:
        """A kept status or figure and a filed passage asked for at once: the value is read back
        from its table, not asked again of the tool that first reported it, the passage is
        searched, and each answer says its store (the other two-store recalls read the records'
        table)."""
        rng = self.rng
        t, _, fact, sql = self.read_back(("status", "figure"))
        source, passage, question, bkey = rng.choice(self.filed)
        calls = [("sql_query", {"db": t.db, "sql": sql}), ("rag_search", {"query": question})]
        rng.shuffle(calls)
        steps = [Step(calls)] if rng.random() < 0.6 else [Step([c]) for c in calls]
        where = self.where_style.format(table=t.name, db=t.db)

        def answer(results):
            rows, found = A.last_rows(results), A.hit_passages(results, passage)
            return (f"From the database ({where}): the stored {fact.words} is {fmt(rows[0][0]) if rows else 'not there'}. "
                    f'From the knowledge base ("{source}"): {found or "nothing found."}')
        want = [fmt(fact.value), bkey]
        expect = Expect(called=["sql_query", "rag_search"], not_called=WRITES + AGAIN.get(t.kind, []),
                        answer_contains=want)
        user = self.pick(W.RECALL_REPORTED, fact=fact.words, question=question,
                         question_lc=question[:1].lower() + question[1:])
        return self.turn(user, steps + [Step(answer=answer)], "recall_reported", expect, want)

    def reports_hold(self, *values) -> bool:
        """Whether a kept report's row holds all of `values` (as the sql check would see them)."""
        rows = [json.dumps([f.value for f in row], ensure_ascii=False).lower() for t in self.report_tables
                for row in t.rows]
        return any(all(fmt(v).lower() in text for v in values) for text in rows)
