"""Turns about a table of records: keep (CREATE TABLE, then INSERTs, in one reply or in
steps), add, update, delete, aggregate queries answered with the value returned, a look-up
made again even when the conversation has the value, and a question answered from the
conversation without a tool. Recovery is planned here too: a wrong statement first (no
table yet, a guessed column, a SELECT sent to sql_exec) and its fix. A mixin of
blocks.Builder, whose state (the table, what the session has said) it reads and updates."""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from agents.suite import Expect, SqlExpect
from tuning import answers as A
from tuning import wording as W
from tuning.plan import Step, TurnPlan
from tuning.records import fmt, literal

EVERY_STORE = ["sql_exec", "sql_query", "rag_ingest", "rag_search", "memory_add", "memory_search", "memory_read"]


class SqlTurns:
    def keep(self, n: int, wrong_first: bool = False, given: list[dict] | None = None) -> TurnPlan:
        """Records kept in the table: `n` new ones told in this message, or the `given` ones an
        earlier message told (mention), which the user now refers to without repeating them."""
        t, rng = self.table, self.rng
        named = not t.created and rng.random() < 0.12        # the user says where it goes
        if named:
            t.db, t.name = self.named_place(t.db, t.name)
        records = list(given or [])
        t.rows.extend(records)
        opening = self.d.opens and not given and not wrong_first and rng.random() < 0.35
        for _ in range(0 if given else 1 if opening else n):
            records.append(t.new_record(rng))       # a key no row has yet: the row goes in first
            t.rows.append(records[-1])
        if opening:
            records[0][self.d.opens[0]] = self.d.opens[1]
        n = len(records)
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
        done = rng.choice(["Done.", "Saved.", "All stored.", "Okay."])

        def answer(results):
            n_rows = A.stored_rows(results)
            made = f"I created {where} and " if created else f"In {where} I "
            return f"{done} {made}stored {n_rows} row{'s' * (n_rows != 1)}: {stored}."
        template = W.KEEP_THOSE if given else W.KEEP if created else W.ADD
        if opening:
            user = self.opened(records[0])
        else:
            user = self.pick(template, records=self.records_phrase(records), count=W.count_words(n),
                             field=rng.choice(self.d.fields[1:]).words)
        if named:
            user = self.in_named_table(user, t.db, t.name, t.columns)
        expect = Expect(called=["sql_exec"], not_called=["rag_ingest", "memory_add"],
                        answer_contains=[fmt(v) for r in records for v in r.values()],
                        sql=[SqlExpect(contains=[fmt(v) for v in r.values()], same_row=True) for r in records])
        return self.turn(user, steps + [Step(answer=answer)], "keep_those" if given else "keep" if created else "add",
                         expect)

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
        absent = [key, fmt(old)] if len(fmt(old)) >= 3 and not t.has_row_with(key, old) \
            and not self.reports_hold(key, old) else []     # a kept figure may still name the old value
        expect = Expect(called=["sql_exec"], sql=[SqlExpect(contains=[key, fmt(new)], same_row=True, absent=absent)])
        steps = self.find_table() + [Step([("sql_exec", {"db": t.db, "sql": sql})])]
        where = self.where()

        def answer(results):
            n = A.stored_rows(results)
            return f"Updated {n} row in {where}: {key} now has {f.words} {fmt(new)}." if n else \
                f"No row of {where} matched {key}; nothing changed."
        said_new, said_old = fmt(new), fmt(old)
        if f.kind == "real" and rng.random() < 0.3:           # money as people write it: 94.50
            said_new, said_old = f"{new:.2f}", f"{old:.2f}"
        unnamed = all(fmt(row[g.name]) != fmt(old) for g in self.numeric())   # no other field of the row says old
        templates = W.UPDATE_UNNAMED if unnamed and rng.random() < 0.3 else W.UPDATE
        user = self.pick(templates, field=f.words, key=key, new=said_new, old=said_old)
        return self.turn(user, steps + [Step(answer=answer)], "update", expect)

    def delete(self) -> TurnPlan:
        t = self.table
        row = self.rng.choice(t.rows)
        key = row[self.d.key.name]
        t.rows.remove(row)
        self.said.pop(key, None)
        absent = [] if t.has_row_with(key) or self.reports_hold(key) else [key]
        others = [r[self.d.key.name] for r in t.rows]
        expect = Expect(called=["sql_exec"], sql=[SqlExpect(contains=others, min_rows=len(others), absent=absent)])
        steps = self.find_table() + [Step([("sql_exec", {"db": t.db, "sql": f"DELETE FROM {t.name} WHERE {t.where(key)}"})])]
        where = self.where()
        return self.turn(self.pick(W.DELETE, key=key), steps + [Step(
            answer=lambda results: f"Deleted {A.stored_rows(results)} row ({key}) from {where}.")], "delete", expect)

    def query(self, ops: tuple = tuple(W.QUERY)) -> TurnPlan | None:
        """An aggregate over the stored rows (one of `ops`), answered with the value the query
        returned; the figure is left for a keep_figure to store."""
        t, rng, key = self.table, self.rng, self.d.key.name
        op = rng.choice(list(ops))
        m = self.d.field(self.d.measure)
        if op in ("latest", "earliest"):      # the record that comes last or first by a date
            dates = [f for f in self.d.fields[1:] if f.kind == "date"]
            if not dates:
                return None
            m = rng.choice(dates)
        values = [r[m.name] for r in t.rows]
        threshold, entry = None, None
        if op == "sum":
            figure = round(sum(values), 2) if m.kind == "real" else sum(values)
            sql, want = f"SELECT {'ROUND(SUM(%s), 2)' % m.name if m.kind == 'real' else 'SUM(%s)' % m.name} AS total FROM {t.name}", \
                [fmt(figure)]
        elif op == "count":
            figure = len(values)
            sql, want = f"SELECT COUNT(*) FROM {t.name}", [str(figure)]
        elif op == "avg":
            mean = (Decimal(str(sum(values))) / len(values)).quantize(Decimal("0.01"), ROUND_HALF_UP)  # as SQLite rounds
            figure = float(mean)
            sql, want = f"SELECT ROUND(AVG({m.name}), 2) AS average FROM {t.name}", [fmt(figure)]
        elif op in ("max", "min", "latest", "earliest"):
            figure = (max if op in ("max", "latest") else min)(values)
            if values.count(figure) > 1:
                return None
            row = next(r for r in t.rows if r[m.name] == figure)
            entry = row[key]
            sql = f"SELECT {key}, {m.name} FROM {t.name} ORDER BY {m.name} {'DESC' if op in ('max', 'latest') else 'ASC'} LIMIT 1"
            want = [row[key], fmt(figure)]
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
                 "min": f"The lowest {m.words} is", "above": f"Above {threshold}:",
                 "latest": f"Last by {m.words}:", "earliest": f"First by {m.words}:"}[op]

        def answer(results):
            return f"{label} {A.rows_phrase(A.last_rows(results))} (from {where})."
        expect = Expect(called=["sql_query"], not_called=[] if any(s.fails for s in steps) else ["sql_exec"],
                        answer_contains=want)
        plan = self.turn(user, steps + [Step(answer=answer)], "query", expect, want)
        if op not in ("above", "latest", "earliest"):
            noun = m.name.replace("_", " ") if m.words.startswith("how") else m.words   # not "total how many"
            stat = {"sum": f"total {noun}", "count": f"number of {self.d.things}", "avg": f"average {noun}",
                    "max": f"highest {noun}", "min": f"lowest {noun}"}[op]
            self.report_figure(stat, figure, entry)
        return plan

    def wrong_query(self, sql: str) -> list[Step]:
        """Sometimes a first try that fails: the SELECT sent to sql_exec."""
        if self.rng.random() < 0.1:
            return [Step([("sql_exec", {"db": self.table.db, "sql": sql})], fails=True, train=False)]
        return []

    def schema_first(self, f, sql: str) -> list[Step]:
        """Before the query of `sql`, sometimes: a guessed column name fails (the error lists
        the table's columns) and the query is made again with the right one, or the schema is
        read first; or, in a new session (the note names the table, not its columns), the
        schema is read first. A model that invented the table's columns earlier must find them
        again rather than guess twice. After the failure the wrong query is sometimes sent once
        more and declined by the loop as a repeat: what follows that refusal is learnt too
        (small models sent the same failing query until made to answer, then made up a figure)."""
        t, rng = self.table, self.rng
        read = Step([("sql_query", {"db": t.db, "sql": f"SELECT sql FROM sqlite_master WHERE name = '{t.name}'"})])
        if rng.random() < 0.3:
            guess = "_".join(f.words.split()[:2])
            guess += "_value" if guess.lower() == f.name.lower() else ""      # SQLite names ignore case
            wrong = Step([("sql_query", {"db": t.db, "sql": sql.replace(f"SELECT {f.name}", f"SELECT {guess}")})],
                         fails=True, train=False)
            again = [wrong] if rng.random() < 0.35 else []
            return [wrong] + again + ([read] if rng.random() < 0.4 else [])
        return [read] if self.new_session and rng.random() < 0.3 else []

    def lookup(self, plain: bool = False) -> TurnPlan:
        """The user asks to check a stored value: the query is made even when the conversation
        has the value. A guessed column name first fails, sometimes, and the schema is read.
        Sometimes the question goes the other way (which record has this value?) or names a
        record that was never stored (the empty result is said, not filled in)."""
        t, rng = self.table, self.rng
        draw = 1.0 if plain else rng.random()
        if draw < 0.2:
            turn = self.lookup_which()
            if turn is not None:
                return turn
        elif draw < 0.3:
            return self.lookup_missing()
        elif draw < 0.6 and len(self.d.fields) > 2:     # v11 answered one of two selected values
            return self.lookup_two()
        row = rng.choice(t.rows)
        f = rng.choice(self.d.fields[1:])
        key = row[self.d.key.name]
        sql = f"SELECT {f.name} FROM {t.name} WHERE {t.where(key)}"
        steps = self.find_table()
        steps += self.schema_first(f, sql) or self.wrong_query(sql)
        steps.append(Step([("sql_query", {"db": t.db, "sql": sql})]))
        where = self.where()
        self.said[key] = dict(row)
        phrase = rng.choice(["The {field} of {key} is {value}, as stored in {where}.",
                             "In {where}, {key} has {field} {value}.",
                             "I checked {where}: {key} has {field} {value}."])

        def answer(results):
            rows = A.last_rows(results)
            return phrase.format(field=f.words, key=key, value=fmt(rows[0][0]), where=where) if rows else \
                f"{where} has no row for {key}."
        user = self.pick(W.LOOKUP, field=f.words, key=key)
        expect = Expect(called=["sql_query"], answer_contains=[fmt(row[f.name])])
        return self.turn(user, steps + [Step(answer=answer)], "lookup", expect, [fmt(row[f.name])])

    def lookup_two(self) -> TurnPlan:
        """Two values of one stored record asked at once ("the status and priority of ..."),
        the record named by its key or by a value only it has ("the one with tenant Amina Yusuf")."""
        t, rng, key = self.table, self.rng, self.d.key.name
        row = rng.choice(t.rows)
        f, g = rng.sample(list(self.d.fields[1:]), 2)
        own = [(h, row[h.name]) for h in self.d.fields[1:] if h.kind == "text" and h not in (f, g)
               and sum(r[h.name] == row[h.name] for r in t.rows) == 1]
        by = rng.choice(own) if own and rng.random() < 0.4 else None
        if by:
            where_sql, ident = f"{by[0].name} = {literal(by[1])}", f"the one with {by[0].words} {fmt(by[1])}"
        else:
            where_sql, ident = t.where(row[key]), str(row[key])
        sql = f"SELECT {f.name}, {g.name} FROM {t.name} WHERE {where_sql}"
        steps = self.find_table() + self.schema_first(f, sql) + [Step([("sql_query", {"db": t.db, "sql": sql})])]
        where = self.where()
        self.said[row[key]] = dict(row)

        # the single look-up's frames, carried on to the second value: a model that opens an
        # answer the one-value way must still learn to give both (v11 gave one of the two)
        phrase = rng.choice(["The {f} of {ident} is {a} and its {g} is {b}, as stored in {where}.",
                             "In {where}, {ident} has {f} {a} and {g} {b}.",
                             "I checked {where}: {ident} has {f} {a}, and {g} {b}."])

        def answer(results):
            rows = A.last_rows(results)
            return phrase.format(f=f.words, g=g.words, ident=ident, a=fmt(rows[0][0]), b=fmt(rows[0][1]), where=where) \
                if rows else f"{where} has no row for {ident}."
        want = [fmt(row[f.name]), fmt(row[g.name])]
        forms = [w for w in W.LOOKUP if "{key}'s" not in w] if by else W.LOOKUP      # not "the one with X's"
        user = self.pick(forms, field=f"{f.words} and {g.words}", key=ident)
        return self.turn(user, steps + [Step(answer=answer)], "lookup",
                         Expect(called=["sql_query"], not_called=["sql_exec"], answer_contains=want), want)

    def unique_value(self, records: list[dict]):
        """A (field, value) that exactly one of `records` has, on a field other than the key and
        not a quarter amount (a value a user would name to pick a record out), or None."""
        options = [(f, r[f.name]) for f in self.d.fields[1:] for r in records
                   if f.kind not in ("real", "list") and sum(o[f.name] == r[f.name] for o in records) == 1]
        return self.rng.choice(options) if options else None

    def lookup_which(self) -> TurnPlan | None:
        """Which stored record has a given value: the key is selected by the value."""
        t = self.table
        found = self.unique_value(t.rows)
        if found is None:
            return None
        f, value = found
        key = self.d.key
        row = next(r for r in t.rows if r[f.name] == value)
        sql = f"SELECT {key.name} FROM {t.name} WHERE {f.name} = {literal(value)}"
        steps = self.find_table() + self.schema_first(key, sql) + [Step([("sql_query", {"db": t.db, "sql": sql})])]
        where = self.where()
        self.said[row[key.name]] = dict(row)

        def answer(results):
            rows = A.last_rows(results)
            return f"{W.series([fmt(r[0]) for r in rows])} has {f.words} {fmt(value)} (from {where})." if rows else \
                f"No row in {where} has {f.words} {fmt(value)}."
        want = [fmt(row[key.name])]
        user = self.pick(W.LOOKUP_WHICH, field=f.words, value=fmt(value))
        return self.turn(user, steps + [Step(answer=answer)], "lookup_which",
                         Expect(called=["sql_query"], not_called=["sql_exec"], answer_contains=want), want)

    def lookup_missing(self) -> TurnPlan:
        """A look-up of a record that was never stored: the query comes back empty, and the
        answer says so rather than taking a value from elsewhere."""
        t = self.table
        key = self.d.key.name
        known = {r[key] for r in t.rows} | set(self.said)
        absent = next((r[key] for r in (t.new_record(self.rng) for _ in range(20)) if r[key] not in known), None)
        if absent is None:          # the key's pool is used up
            return self.lookup(plain=True)
        f = self.rng.choice(self.d.fields[1:])
        sql = f"SELECT {f.name} FROM {t.name} WHERE {t.where(absent)}"
        steps = self.find_table() + [Step([("sql_query", {"db": t.db, "sql": sql})])]
        where = self.where()
        reply = self.rng.choice(["{where} has no row for {key}: it was never stored, so I have no {field} for it.",
                                 "Nothing for {key} in {where}: no {field} is stored for it.",
                                 "I checked {where}: there is no {key} there, so no {field} either."])

        def answer(results):
            rows = A.last_rows(results)
            return reply.format(where=where, key=absent, field=f.words) if not rows else \
                f"{absent} has {f.words} {fmt(rows[0][0])} (from {where})."
        user = self.pick(W.LOOKUP, field=f.words, key=absent)
        return self.turn(user, steps + [Step(answer=answer)], "lookup_missing",
                         Expect(called=["sql_query"], not_called=["sql_exec"], answer_contains=[fmt(absent)]))

    def mention(self, n: int) -> TurnPlan:
        """Records told with a question about them and no wish to keep them: answered from the
        message, no tool. They wait in `pending` for a later "keep those" (keep(given=...))."""
        t, rng, key = self.table, self.rng, self.d.key.name
        records = []
        for _ in range(n):
            r = t.new_record(rng)
            if all(r[key] != o[key] for o in records + t.rows):
                records.append(r)
        m = self.d.field(self.d.measure)
        values = [r[m.name] for r in records]
        which = self.unique_value(records) if len(records) >= 2 and rng.random() < 0.3 else None
        if which is not None:
            f, value = which
            row = next(r for r in records if r[f.name] == value)
            question, want = rng.choice(W.WHICH_ONE).format(field=f.words, value=fmt(value)), [row[key]]
            reply = f"{row[key]} has {f.words} {fmt(value)}."
        elif len(records) >= 2 and not m.words.startswith("how") and rng.random() < 0.5 and \
                values.count(extreme := rng.choice([max, min])(values)) == 1:
            word = "highest" if extreme == max(values) else "lowest"
            row = next(r for r in records if r[m.name] == extreme)
            question, want = f"which one has the {word} {m.words}?", [row[key]]
            reply = f"{row[key]} has the {word} {m.words}, {fmt(extreme)}."
        else:
            row, f = rng.choice(records), rng.choice(self.d.fields[1:])
            question, want = f"what {f.words} does {row[key]} have?", [fmt(row[f.name])]
            reply = f"By what you just said, {row[key]} has {f.words} {fmt(row[f.name])}."
        self.pending = records
        for r in records:
            self.said[r[key]] = dict(r)
        user = self.pick(W.MENTION, records=self.records_phrase(records), question=question)
        return self.turn(user, [Step(answer=lambda _: reply)], "mention",
                         Expect(not_called=EVERY_STORE, answer_contains=want), want)

    def keep_those(self) -> TurnPlan:
        records, self.pending = self.pending, []
        return self.keep(len(records), given=records)

    def from_conversation(self) -> TurnPlan:
        which = self.unique_value(list(self.said.values())) if len(self.said) >= 2 and self.rng.random() < 0.3 else None
        if which is not None:
            f, value = which
            key = next(k for k, r in self.said.items() if r[f.name] == value)
            user = self.pick(W.FROM_CONVERSATION_WHICH, field=f.words, value=fmt(value))
            expect = Expect(not_called=EVERY_STORE, answer_contains=[fmt(key)])
            return self.turn(user, [Step(answer=lambda _: f"By what you told me, {key} has {f.words} {fmt(value)}.")],
                             "from_conversation", expect, [fmt(key)])
        key = self.rng.choice(sorted(self.said))
        f = self.rng.choice(self.d.fields[1:])
        value = fmt(self.said[key][f.name])
        user = self.pick(W.FROM_CONVERSATION, field=f.words, key=key)
        expect = Expect(not_called=EVERY_STORE, answer_contains=[value])
        return self.turn(user, [Step(answer=lambda _: f"You gave {key} a {f.words} of {value}.")],
                         "from_conversation", expect, [value])

