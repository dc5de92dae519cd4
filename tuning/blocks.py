"""The turns a task is built from, one method each: keep records, add, update, delete, query
and aggregate, look up again, answer from the conversation, file and search background
text, save and recall memory notes, answer from a note in the message, small talk, requests
no tool fits, everything in one request, and a recall from every store.

A Builder holds what the conversation has done so far (the table and its rows, the texts
filed, the notes saved, what the current session has said), so each turn's gold calls and
checks follow from it. Recovery is planned here too: a wrong statement first (no table yet,
a guessed column, a SELECT sent to sql_exec) and its fix.
"""
from __future__ import annotations

import random
import re

from agents.suite import Expect, MemoryExpect, RagExpect, SqlExpect
from tuning import answers as A
from tuning import wording as W
from tuning.domains import Domain
from tuning.plan import Step, TurnPlan
from tuning.records import Table, fmt, row_text

WRITES = ["sql_exec", "rag_ingest", "memory_add"]
STOP = {"a", "an", "the", "of", "for", "to", "in", "on", "at", "is", "and", "or", "after", "with", "by", "its"}
EVERY_STORE = ["sql_exec", "sql_query", "rag_ingest", "rag_search", "memory_add", "memory_search", "memory_read"]


def slug(text: str, words: int = 3) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower())[:words])


class Builder:
    def __init__(self, rng: random.Random, domain: Domain):
        self.rng, self.d = rng, domain
        self.table = Table.choose(rng, domain)
        self.filed: list[tuple[str, str, str, str]] = []     # (source, passage, question, key)
        self.prefs: list[str] = []
        self.where_note = False
        self.knows_table = False          # the current session has seen the database and table names
        self.said: dict[str, dict] = {}   # key -> the record as the current session last heard it
        self.new_session = False

    # -- helpers ----------------------------------------------------------------------------
    def pick(self, templates, **slots) -> str:
        return W.pick(self.rng, templates, things=self.d.things, **slots)

    def turn(self, user: str, steps: list[Step], kind: str, expect: Expect | None = None,
             keys: list[str] | None = None) -> TurnPlan:
        needs = {name for s in steps for name, _ in s.calls}
        plan = TurnPlan(user, steps, kind, expect or Expect(), new_session=self.new_session, needs=needs,
                        keys=keys or [])
        self.new_session = False
        return plan

    def session_break(self) -> None:
        self.new_session, self.knows_table, self.said = True, False, {}

    def where(self) -> str:
        return f"the {self.table.name} table of the SQLite database {self.table.db}"

    def records_phrase(self, records: list[dict]) -> str:
        parts = [self.table.said(r) for r in records]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    def numeric(self) -> list:
        return [f for f in self.d.fields[1:] if f.kind in ("int", "real")]

    def can_sql(self) -> bool:
        """Whether the current session can name the table: it saw it, or a note says where."""
        return self.knows_table or self.where_note

    def find_table(self) -> list[Step]:
        """In a new session the names are found again through the memory note about them."""
        if self.knows_table:
            return []
        assert self.where_note
        self.knows_table = True
        return [Step([("memory_search", {"query": self.d.things})])]

    # -- records ----------------------------------------------------------------------------
    def keep(self, n: int, wrong_first: bool = False) -> TurnPlan:
        t, rng = self.table, self.rng
        records = []
        for _ in range(n):
            records.append(t.new_record(rng))
            t.rows.append(records[-1])
        # after a failed INSERT the fix must differ from it: the loop does not run a failed call again
        wrong_first = wrong_first and n > 1 and not t.created
        one = (n == 1 or rng.random() < 0.6) and not wrong_first
        inserts = [t.insert(records, rng.random() < 0.5)] if one else [t.insert([r], rng.random() < 0.5) for r in records]
        calls = [("sql_exec", {"db": t.db, "sql": s}) for s in inserts]
        steps = self.find_table() if t.created else []
        if not t.created:
            create = ("sql_exec", {"db": t.db, "sql": t.create()})
            if wrong_first:
                wrong = ("sql_exec", {"db": t.db, "sql": t.insert(records)})
                steps += [Step([wrong], fails=True, train=False), Step([create] + calls)]
            elif rng.random() < 0.5:
                steps += [Step([create] + calls)]
            else:
                steps += [Step([create]), Step(calls)]
        else:
            steps += [Step(calls)] if rng.random() < 0.6 else [Step([c]) for c in calls]
        created, t.created, self.knows_table = not t.created, True, True
        for r in records:
            self.said[r[self.d.key.name]] = dict(r)
        where = self.where()
        stored = "; ".join(", ".join(fmt(v) for v in r.values()) for r in records)   # now: a later turn may update a row

        def answer(results):
            n_rows = A.stored_rows(results)
            made = f"I created {where} and " if created else f"In {where} I "
            return f"Done. {made}stored {n_rows} row{'s' * (n_rows != 1)}: {stored}."
        template = W.KEEP if created else W.ADD
        user = self.pick(template, records=self.records_phrase(records))
        expect = Expect(called=["sql_exec"], not_called=["rag_ingest", "memory_add"],
                        answer_contains=[fmt(v) for r in records for v in r.values()],
                        sql=[SqlExpect(contains=[fmt(v) for v in r.values()], same_row=True) for r in records])
        return self.turn(user, steps + [Step(answer=answer)], "keep" if created else "add", expect)

    def update(self) -> TurnPlan:
        t, rng = self.table, self.rng
        row = rng.choice(t.rows)
        f = rng.choice(self.numeric())
        old, key = row[f.name], row[self.d.key.name]
        new = f.draw(rng)
        while new == old:
            new = f.draw(rng)
        row[f.name] = new
        self.said[key] = dict(row)
        sql = f"UPDATE {t.name} SET {f.name} = {fmt(new)} WHERE {t.where(key)}"
        absent = [key, fmt(old)] if len(fmt(old)) >= 3 and not t.has_row_with(key, old) else []
        expect = Expect(called=["sql_exec"], sql=[SqlExpect(contains=[key, fmt(new)], same_row=True, absent=absent)])
        steps = self.find_table() + [Step([("sql_exec", {"db": t.db, "sql": sql})])]
        where = self.where()

        def answer(results):
            n = A.stored_rows(results)
            return f"Updated {n} row in {where}: {key} now has {f.words} {fmt(new)}." if n else \
                f"No row of {where} matched {key}; nothing changed."
        user = self.pick(W.UPDATE, field=f.words, key=key, new=fmt(new), old=fmt(old))
        return self.turn(user, steps + [Step(answer=answer)], "update", expect)

    def delete(self) -> TurnPlan:
        t = self.table
        row = self.rng.choice(t.rows)
        key = row[self.d.key.name]
        t.rows.remove(row)
        self.said.pop(key, None)
        absent = [] if t.has_row_with(key) else [key]
        others = [r[self.d.key.name] for r in t.rows]
        expect = Expect(called=["sql_exec"], sql=[SqlExpect(contains=others, min_rows=len(others), absent=absent)])
        steps = self.find_table() + [Step([("sql_exec", {"db": t.db, "sql": f"DELETE FROM {t.name} WHERE {t.where(key)}"})])]
        where = self.where()
        return self.turn(self.pick(W.DELETE, key=key), steps + [Step(
            answer=lambda results: f"Deleted {A.stored_rows(results)} row ({key}) from {where}.")], "delete", expect)

    def query(self) -> TurnPlan | None:
        """An aggregate over the stored rows, answered with the value the query returned."""
        t, rng, key = self.table, self.rng, self.d.key.name
        m = self.d.field(self.d.measure)
        values = [r[m.name] for r in t.rows]
        op = rng.choice(list(W.QUERY))
        threshold = None
        if op == "sum":
            sql, want = f"SELECT {'ROUND(SUM(%s), 2)' % m.name if m.kind == 'real' else 'SUM(%s)' % m.name} AS total FROM {t.name}", \
                [fmt(round(sum(values), 2) if m.kind == "real" else sum(values))]
        elif op == "count":
            sql, want = f"SELECT COUNT(*) FROM {t.name}", [str(len(values))]
        elif op == "avg":
            mean = round(sum(values) / len(values), 2)
            sql, want = f"SELECT ROUND(AVG({m.name}), 2) AS average FROM {t.name}", [fmt(float(mean))]
        elif op in ("max", "min"):
            best = (max if op == "max" else min)(values)
            if values.count(best) > 1:
                return None
            row = next(r for r in t.rows if r[m.name] == best)
            sql = f"SELECT {key}, {m.name} FROM {t.name} ORDER BY {m.name} {'DESC' if op == 'max' else 'ASC'} LIMIT 1"
            want = [row[key], fmt(best)]
        else:
            ordered = sorted(set(values))
            if len(ordered) < 2:
                return None
            threshold = int(ordered[rng.randrange(len(ordered) - 1)])
            above = [r for r in t.rows if r[m.name] > threshold]
            if not above or len(above) == len(t.rows):
                return None
            sql = f"SELECT {key}, {m.name} FROM {t.name} WHERE {m.name} > {threshold} ORDER BY {m.name}"
            want = [r[key] for r in above]
        where = self.where()
        steps = self.find_table() + self.wrong_query(sql) + [Step([("sql_query", {"db": t.db, "sql": sql})])]
        user = self.pick(W.QUERY[op], measure=m.words, threshold=threshold)

        label = {"sum": f"The total {m.words} is", "count": f"The number of {self.d.things} stored is",
                 "avg": f"The average {m.words} is", "max": f"The highest {m.words} is",
                 "min": f"The lowest {m.words} is", "above": f"Above {threshold}:"}[op]

        def answer(results):
            return f"{label} {A.rows_phrase(A.last_rows(results))} (from {where})."
        expect = Expect(called=["sql_query"], not_called=["sql_exec"] if not steps[0].fails else [],
                        answer_contains=want)
        return self.turn(user, steps + [Step(answer=answer)], "query", expect, want)

    def wrong_query(self, sql: str) -> list[Step]:
        """Sometimes a first try that fails: the SELECT sent to sql_exec."""
        if self.rng.random() < 0.1:
            return [Step([("sql_exec", {"db": self.table.db, "sql": sql})], fails=True, train=False)]
        return []

    def lookup(self, again: bool = True) -> TurnPlan:
        """The user asks to check a stored value: the query is made even when the conversation
        has the value. A guessed column name first fails, sometimes, and the schema is read."""
        t, rng = self.table, self.rng
        row = rng.choice(t.rows)
        f = rng.choice(self.d.fields[1:])
        key = row[self.d.key.name]
        sql = f"SELECT {f.name} FROM {t.name} WHERE {t.where(key)}"
        steps = self.find_table()
        if rng.random() < 0.12:
            guess = "_".join(f.words.split()[:2]) + ("_value" if "_".join(f.words.split()[:2]) == f.name else "")
            steps += [Step([("sql_query", {"db": t.db, "sql": sql.replace(f"SELECT {f.name}", f"SELECT {guess}")})],
                           fails=True, train=False),
                      Step([("sql_query", {"db": t.db, "sql": f"SELECT sql FROM sqlite_master WHERE name = '{t.name}'"})])]
        else:
            steps += self.wrong_query(sql)
        steps.append(Step([("sql_query", {"db": t.db, "sql": sql})]))
        where = self.where()
        self.said[key] = dict(row)

        def answer(results):
            rows = A.last_rows(results)
            return f"The {f.words} of {key} is {fmt(rows[0][0])}, as stored in {where}." if rows else \
                f"{where} has no row for {key}."
        user = self.pick(W.LOOKUP, field=f.words, key=key)
        expect = Expect(called=["sql_query"], answer_contains=[fmt(row[f.name])])
        return self.turn(user, steps + [Step(answer=answer)], "lookup", expect, [fmt(row[f.name])])

    def from_conversation(self) -> TurnPlan:
        key = self.rng.choice(sorted(self.said))
        f = self.rng.choice(self.d.fields[1:])
        value = fmt(self.said[key][f.name])
        user = self.pick(W.FROM_CONVERSATION, field=f.words, key=key)
        expect = Expect(not_called=EVERY_STORE, answer_contains=[value])
        return self.turn(user, [Step(answer=lambda _: f"You gave {key} a {f.words} of {value}.")],
                         "from_conversation", expect, [value])

    # -- knowledge base and memory ----------------------------------------------------------
    def background(self) -> tuple[str, str, str, str]:
        rng = self.rng
        b = rng.choice(self.d.backgrounds)
        slots = {"k": rng.choice(self.d.subject.pool), "n": rng.randint(2, 40), "m": rng.randint(100, 9000),
                 "p": rng.randint(5, 60)}
        passage, question, key = b.text.format(**slots), b.question.format(**slots), b.key.format(**slots)
        source = rng.choice([slug(self.d.name) + "-notes", slug(self.d.things, 1) + "-" + slug(slots["k"]),
                             "-".join(w for w in slug(passage, 8).split("-") if w not in STOP)[:40].strip("-")])
        return source, passage, question, key

    def file(self) -> TurnPlan:
        source, passage, question, key = self.background()
        self.filed.append((source, passage, question, key))
        expect = Expect(called=["rag_ingest"], not_called=["sql_exec"],
                        rag=[RagExpect(query=question, contains=[key], k=3)])
        steps = [Step([("rag_ingest", {"text": passage, "source": source})]),
                 Step(answer=lambda results: f'Filed in the knowledge base as "{source}".')]
        return self.turn(self.pick(W.FILE, passage=passage), steps, "file", expect)

    def search(self) -> TurnPlan:
        source, passage, question, key = self.rng.choice(self.filed)
        args = {"query": question} if self.rng.random() < 0.6 else {"query": question, "k": self.rng.choice([2, 3])}

        def answer(results):
            found = A.hit_passages(results, passage)
            return f'The knowledge base says (source "{source}"): {found}' if found else \
                "The knowledge base has nothing on that."
        expect = Expect(called=["rag_search"], not_called=WRITES, answer_contains=[key])
        return self.turn(self.pick(W.SEARCH, question=question), [Step([("rag_search", args)]), Step(answer=answer)],
                         "search", expect, [key])

    def documents(self) -> TurnPlan:
        """What the knowledge base holds, from its own list."""
        sources = [f[0] for f in self.filed]

        def answer(results):
            listed = [doc["source"] for d in A.ok_data(results) for doc in d.get("documents", [])]
            return "The knowledge base holds: " + (", ".join(listed) if listed else "nothing yet") + "."
        expect = Expect(called=["rag_documents"], not_called=WRITES, answer_contains=sources)
        return self.turn(self.pick(W.DOCUMENTS), [Step([("rag_documents", {})]), Step(answer=answer)], "documents",
                         expect, sources)

    def similar(self, others: list[str]) -> TurnPlan:
        """Which of a few texts is closest in meaning to a question, by the embedding model."""
        _, passage, question, key = self.background()
        candidates = others + [passage]
        self.rng.shuffle(candidates)

        def answer(results):
            ranked = [r["text"] for d in A.ok_data(results) for r in d.get("results", [])]
            return f'The closest in meaning is: "{ranked[0]}"' if ranked else "I could not score them."
        expect = Expect(called=["similarity"], not_called=WRITES, answer_contains=[key])
        user = self.pick(W.SIMILAR, question=question, options="\n".join(f"- {c}" for c in candidates))
        return self.turn(user, [Step([("similarity", {"text": question, "candidates": candidates})]),
                                Step(answer=answer)], "similar", expect, [key])

    def note(self, where: bool | None = None) -> TurnPlan:
        """A memory note: where the table is (`where`), or a preference; None: either."""
        rng = self.rng
        if where is None:
            where = not self.where_note and self.table.created and rng.random() < 0.6
        if where:
            self.where_note = True
            text = f"The user's {self.d.things} are kept in {self.where()}."
            user, want = self.pick(W.NOTE_WHERE), [self.table.db, self.table.name]
        else:
            pref = rng.choice([p for p in self.d.prefs if p not in self.prefs] or self.d.prefs)
            self.prefs.append(pref)
            text = rng.choice([f"Preference: the user prefers {pref}.",
                               f"User preference ({self.d.things}): the user prefers {pref}."])
            user, want = self.pick(W.NOTE_PREF, pref=pref), [pref]
        args = {"text": text}
        if rng.random() < 0.4:
            args["tags"] = [slug(self.d.things, 1), "location" if self.table.db in want else "preference"]
        expect = Expect(called=["memory_add"], not_called=["sql_exec", "rag_ingest"], memory=[MemoryExpect(contains=want)])
        return self.turn(user, [Step([("memory_add", args)]), Step(answer=lambda _: f"Noted: {text}")], "note", expect)

    def recall(self) -> TurnPlan:
        pref = self.rng.choice(self.prefs)
        query = self.rng.choice(["prefers", "preference", pref])
        call = ("memory_search", {"query": query}) if self.rng.random() < 0.8 else ("memory_read", {})

        def answer(results):
            hits = [n for n in A.notes(results) if pref in n]
            return f"Your note says: {hits[0]}" if hits else "I have no note about that."
        expect = Expect(called_any=[["memory_search", "memory_read"]], not_called=WRITES, answer_contains=[pref])
        return self.turn(self.pick(W.RECALL_PREF), [Step([call]), Step(answer=answer)], "recall", expect, [pref])

    def note_in_message(self) -> TurnPlan:
        record = self.table.new_record(self.rng)
        f = self.rng.choice(self.d.fields[1:])
        key, value = record[self.d.key.name], fmt(record[f.name])
        fact = f"{key}: {f.words} {value}."
        question = f"what {f.words} does {key} have?"
        expect = Expect(not_called=EVERY_STORE, answer_contains=[value])
        return self.turn(self.pick(W.NOTE_IN_MESSAGE, fact=fact, question=question),
                         [Step(answer=lambda _: f"By your note, {key} has {f.words} {value}.")], "note_in_message",
                         expect, [value])

    # -- no tool ----------------------------------------------------------------------------
    def small_talk(self, closing: bool = False) -> TurnPlan:
        if closing:
            user, reply = self.rng.choice(W.THANKS), self.rng.choice(["You're welcome!", "Glad to help. Bye!",
                                                                       "Any time."])
        else:
            user = self.rng.choice(W.GREETING)
            reply = f"Hello! I can keep your {self.d.things} in a database, file background text and remember notes."
        return self.turn(user, [Step(answer=lambda _: reply)], "small_talk", Expect(not_called=EVERY_STORE))

    def irrelevant(self) -> TurnPlan:
        rng = self.rng
        op = rng.choice(list(W.IRRELEVANT))
        a, b, word = rng.randint(3, 99), rng.randint(3, 99), rng.choice(W.WORDS)
        value = {"multiply": a * b, "add": a + b, "reverse": word[::-1], "celsius": fmt(a * 9 / 5 + 32),
                 "count": len(word)}[op]
        user = W.pick(rng, W.IRRELEVANT[op], a=a, b=b, word=word)
        answer = {"multiply": f"{a} times {b} is {value}.", "add": f"{a} plus {b} is {value}.",
                  "reverse": f"'{word}' backwards is '{value}'.", "celsius": f"{a} degrees Celsius is {value} degrees Fahrenheit.",
                  "count": f"'{word}' has {value} letters."}[op]
        return self.turn(user, [Step(answer=lambda _: answer)], "irrelevant",
                         Expect(not_called=EVERY_STORE, answer_contains=[str(value)]), [str(value)])

    # -- several stores -----------------------------------------------------------------------
    def all_in_one(self) -> TurnPlan:
        kept = self.keep(self.rng.randint(1, 3))
        filed = self.file()
        self.where_note = True
        pref = self.rng.choice(self.d.prefs)
        self.prefs.append(pref)
        text = f"Preference: the user prefers {pref}. The {self.d.things} are in {self.where()}; background is in the knowledge base as \"{filed.steps[0].calls[0][1]['source']}\"."
        calls = [c for s in kept.steps if s.calls for c in s.calls] + filed.steps[0].calls + [("memory_add", {"text": text})]
        if self.rng.random() < 0.5:
            steps = [Step(calls)]
        else:
            steps = [s for s in kept.steps if s.calls] + [filed.steps[0], Step([calls[-1]])]
        source = filed.steps[0].calls[0][1]["source"]
        where = self.where()
        steps.append(Step(answer=lambda results: f"Stored {A.stored_rows(results)} rows in {where}, filed the text as "
                                                 f'"{source}" in the knowledge base, and saved a memory note.'))
        expect = Expect(called=["sql_exec", "rag_ingest", "memory_add"], sql=kept.expect.sql, rag=filed.expect.rag,
                        memory=[MemoryExpect(contains=[pref])])
        records = [r for r in self.table.rows[-len(kept.expect.sql):]]
        user = self.pick(W.ALL_IN_ONE, records=self.records_phrase(records), passage=filed.steps[0].calls[0][1]["text"],
                         pref=pref)
        return self.turn(user, steps, "all_in_one", expect)

    def recall_all(self) -> TurnPlan:
        t, rng = self.table, self.rng
        row = rng.choice(t.rows)
        f = rng.choice(self.d.fields[1:])
        key = row[self.d.key.name]
        source, passage, question, bkey = rng.choice(self.filed)
        pref = self.prefs[-1]
        sql = ("sql_query", {"db": t.db, "sql": f"SELECT {f.name} FROM {t.name} WHERE {t.where(key)}"})
        search = ("rag_search", {"query": question})
        memory = ("memory_search", {"query": "prefers"})
        if self.knows_table:
            steps = [Step([sql, search, memory])] if rng.random() < 0.5 else [Step([sql]), Step([search]), Step([memory])]
        else:
            self.knows_table = True
            steps = [Step([("memory_search", {"query": self.d.things + " prefers"})]), Step([sql, search])]
        where = self.where()

        def answer(results):
            rows, found = A.last_rows(results), A.hit_passages(results, passage)
            mem = [n for n in A.notes(results) if pref in n]
            return (f"From the database ({where}): the {f.words} of {key} is {fmt(rows[0][0]) if rows else 'not stored'}. "
                    f'From the knowledge base ("{source}"): {found or "nothing found"} '
                    f"From memory: {mem[0] if mem else 'no note found'}")
        want = [fmt(row[f.name]), bkey, pref]
        expect = Expect(called=["sql_query", "rag_search"], called_any=[["memory_search", "memory_read"]],
                        not_called=WRITES, answer_contains=want)
        user = self.pick(W.RECALL_ALL, field=f.words, key=key, question=question)
        return self.turn(user, steps + [Step(answer=answer)], "recall_all", expect, want)
