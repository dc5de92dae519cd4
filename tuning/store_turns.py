"""Turns about the knowledge base, memory and no store at all: file background text and
search it, list what is filed, rank texts by meaning, save a memory note and recall it,
answer from a note in the user's own message, small talk, requests no tool fits, everything
in one request, and a recall from every store saying where each answer came from. A mixin
of blocks.Builder."""
from __future__ import annotations

import re

from agents.suite import Expect, MemoryExpect, RagExpect
from tuning import answers as A
from tuning import general
from tuning import wording as W
from tuning.plan import Step, TurnPlan
from tuning.records import fmt, literal
from tuning.sql_turns import EVERY_STORE

WRITES = ["sql_exec", "rag_ingest", "memory_add"]
FILED = ('Filed in the knowledge base as "{source}".', 'Stored the text in the knowledge base under "{source}".',
         'Done: the passage is in the knowledge base (source "{source}").')
STOP = {"a", "an", "the", "of", "for", "to", "in", "on", "at", "is", "and", "or", "after", "with", "by", "its"}


def slug(text: str, words: int = 3) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower())[:words])


class StoreTurns:
    def background(self, filing: bool = False) -> tuple[str, str, str, str]:
        """(source, passage, question, key) of a kind of passage not filed yet in this task: two of
        one kind with other numbers would contradict each other."""
        rng = self.rng
        b = rng.choice([b for b in self.d.backgrounds if b not in self.passages_used] or self.d.backgrounds)
        if filing:
            self.passages_used.add(b)
        slots = {"k": self.d.subject.draw(rng), "n": rng.randint(2, 40), "m": rng.randint(100, 9000),
                 "p": rng.randint(5, 60)}
        passage, question, key = b.text.format(**slots), b.question.format(**slots), b.key.format(**slots)
        # a source is named from the text's own words (with the kind of record it is about), so
        # that a note citing it says what it is about; never from a subject the text lacks
        words = [w for w in slug(passage, 12).split("-") if w not in STOP]
        head = "-".join(words[:next((i for i in range(len(words), 0, -1) if len("-".join(words[:i])) <= 40), 1)])
        options = [slug(self.d.things, 1) + "-" + "-".join(words[:3]), head]
        if "{k}" in b.text:
            options.append(slug(self.d.things, 1) + "-" + slug(slots["k"]))
        taken = {f[0] for f in self.filed}          # a new text under a taken source would replace it
        source = rng.choice([o for o in options if o not in taken] or [f"{options[0]}-{len(taken) + 1}"])
        return source, passage, question, key

    def file(self, may_name: bool = True) -> TurnPlan:
        """A passage filed, sometimes under a source name the user gives (which the call then
        uses; not `may_name`: the caller words the request and gives none), sometimes with a
        search asked for afterwards to show it can be found."""
        rng = self.rng
        source, passage, question, key = self.background(filing=True)
        named = may_name and rng.random() < 0.15
        if named:
            source = rng.choice([f"{slug(self.d.things, 1)}-{rng.choice(W.WORDS)}-{rng.randint(1, 99)}",
                                 f"{rng.choice(W.WORDS)}-{rng.choice(['notes', 'ref', 'doc', 'background'])}"])
        self.filed.append((source, passage, question, key))
        reply = rng.choice(FILED).format(source=source)
        expect = Expect(called=["rag_ingest"], not_called=["sql_exec"],
                        rag=[RagExpect(query=question, contains=[key], k=3)])
        steps = [Step([("rag_ingest", {"text": passage, "source": source})])]
        check = rng.random() < 0.15
        if check:
            def answer(results):
                found = A.hit_passages(results, passage)
                return reply + (f" A search finds it: {found}" if found else " A search did not find it yet.")
            steps += [Step([("rag_search", {"query": question})]), Step(answer=answer)]
            expect.called.append("rag_search")
        else:
            steps.append(Step(answer=lambda results: reply))
        if named:
            user = self.pick(W.FILE_AS, passage=passage, source=source)
        elif rng.random() < 0.35:       # the user names what kind of text it is, and may call it that later
            kind, self.texts = rng.choice(W.TEXT_KINDS)
            user = self.pick(W.FILE_KIND, passage=passage, kind=kind)
        else:
            user = self.pick(W.FILE, passage=passage)
        if check:
            user = user.rstrip() + " " + rng.choice(W.FILE_CHECK)
        return self.turn(user, steps, "file", expect)

    def search(self) -> TurnPlan:
        source, passage, question, key = self.rng.choice(self.filed)
        args = {"query": question} if self.rng.random() < 0.6 else {"query": question, "k": self.rng.choice([2, 3])}

        def answer(results):
            found = A.hit_passages(results, passage)
            return f'The knowledge base says (source "{source}"): {found}' if found else \
                "The knowledge base has nothing on that."
        expect = Expect(called=["rag_search"], not_called=WRITES, answer_contains=[key])
        plan = self.turn(self.pick(W.SEARCH, question=question), [Step([("rag_search", args)]), Step(answer=answer)],
                         "search", expect, [key])
        self.report_found(source, question, key)
        return plan

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
        """A memory note: where things are kept (`where`: the table, and the knowledge base's
        sources when texts were filed; sometimes with a preference in the same note), or a
        preference alone; None: either."""
        rng = self.rng
        if where is None:
            where = not self.where_note and self.table.created and rng.random() < 0.6
        if where:
            self.where_note = True
            text = f"The user's {self.d.things} are kept in {self.where()}."
            user, want = self.pick(W.NOTE_WHERE), [self.table.db, self.table.name]
            if self.filed and rng.random() < 0.7:
                sources = ", ".join(f'"{f[0]}"' for f in self.filed)
                text = (f"The user's {self.d.things} are in {self.where()}; the background texts are in the "
                        f"knowledge base (sources {sources}).")
                if self.texts:
                    text = (f"The user's {self.d.things} are in {self.where()}; the {self.texts} they gave went into "
                            f"the knowledge base (sources {sources}).")
                user = self.pick(W.NOTE_WHERE_NAMED, texts=self.texts) if self.texts and rng.random() < 0.7 else \
                    self.pick(W.NOTE_WHERE_ALL)
                want = [self.table.db, "knowledge base"]
                if rng.random() < 0.25:      # the user dictates the note: it says what they said
                    texts = f"the {self.texts}" if self.texts else rng.choice(["the background", "the reference text"])
                    place = f"are in {self.where()}, and {texts} {'are' if self.texts else 'is'} filed in the knowledge base"
                    user = self.pick(W.NOTE_DICTATED, fact=f"my {self.d.things} {place}")
                    text = f"The user's {self.d.things} {place}."
            elif rng.random() < 0.3:
                pref, stmt, clause = self.statement()
                text = f"{clause}. Their {self.d.things} are kept in {self.where()}."
                user = self.pick(W.NOTE_STATEMENT_WHERE, stmt=stmt) if stmt else self.pick(W.NOTE_PREF_WHERE, pref=pref)
                want = [pref, self.table.db]
        else:
            pref, stmt, clause = self.statement()
            text = rng.choice([f"{clause}.", f"Note ({self.d.things}): {clause[0].lower()}{clause[1:]}."])
            user, want = (self.pick(W.NOTE_STATEMENT, stmt=stmt) if stmt else self.pick(W.NOTE_PREF, pref=pref)), [pref]
        args = {"text": text}
        if rng.random() < 0.4:
            args["tags"] = [slug(self.d.things, 1), "location" if self.table.db in want else "preference"]
        self.notes.append(" ".join([text, *args.get("tags", [])]))
        expect = Expect(called=["memory_add"], not_called=["sql_exec", "rag_ingest"], memory=[MemoryExpect(contains=want)])
        reply = rng.choice(["Noted: {}", "Saved to memory: {}", "I'll remember that. The note reads: {}",
                            "Done, my memory now holds: {}"]).format(text)
        return self.turn(user, [Step([("memory_add", args)]), Step(answer=lambda _: reply)], "note", expect)

    def statement(self) -> tuple[str, str, str]:
        """A preference not stated yet, as (the thing, the user's sentence or "" for the plain
        "I prefer" wordings, the note's clause keeping the user's subject and verb)."""
        rng = self.rng
        pref = rng.choice([p for p in self.d.prefs if p not in self.prefs] or self.d.prefs)
        self.prefs.append(pref)
        if rng.random() < 0.35:
            return pref, "", f"The user prefers {pref}"
        (first, third), (subject, noted, person) = rng.choice(W.RELATIONS), rng.choice(W.SUBJECTS)
        self.stated.add(pref)
        return pref, f"{subject} {first if person == 1 else third} {pref}", f"{noted} {third} {pref}"

    def recall(self) -> TurnPlan:
        pref = self.rng.choice(self.prefs)
        # the search matches whole words: the note holds the preference's words (and "prefers"
        # only where the user said prefer)
        query = pref if pref in self.stated or self.rng.random() < 0.5 else "prefers"
        call = ("memory_search", {"query": query}) if self.rng.random() < 0.8 else ("memory_read", {})

        def answer(results):
            hits = [n for n in A.notes(results) if pref in n]
            return f"Your note says: {hits[0]}" if hits else "I have no note about that."
        expect = Expect(called_any=[["memory_search", "memory_read"]], not_called=WRITES, answer_contains=[pref])
        asks = W.RECALL_ABOUT if pref in self.stated else W.RECALL_PREF
        return self.turn(self.pick(asks), [Step([call]), Step(answer=answer)], "recall", expect, [pref])

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

    def small_talk(self, closing: bool = False, intent: bool = False) -> TurnPlan:
        """A greeting, a goodbye, or (`intent`) what the user means to do with no data given yet:
        nothing to call, the reply asks for what is missing."""
        if closing:
            user, reply = self.rng.choice(W.THANKS), self.rng.choice(["You're welcome!", "Glad to help. Bye!",
                                                                       "Any time."])
        elif intent:
            user = self.pick(W.INTENT)
            reply = self.rng.choice([f"Sure. Tell me the {self.d.things} you want kept and I'll store them in a table.",
                                     f"Happy to. Send me the first {self.d.things} with their details.",
                                     f"Of course. What are the {self.d.things}? Give me the details and I'll keep them."])
        else:
            user = self.rng.choice(W.GREETING)
            reply = f"Hello! I can keep your {self.d.things} in a database, file background text and remember notes."
        return self.turn(user, [Step(answer=lambda _: reply)], "small_talk", Expect(not_called=EVERY_STORE))

    def status(self) -> TurnPlan:
        """What serves the user, from runtime_status, quoted as the tool reported it."""
        c = self.runtime_card
        phrase, quoted = self.rng.choice([
            ("You are talking to {model} (revision {revision}) on the {backend} backend, with a context of "
             "{context_length} tokens.", ["model", "revision", "backend", "context_length"]),
            ("The runtime serves {model}, a {architecture} model, on {backend}; it takes {context_length} tokens of "
             "context.", ["model", "architecture", "backend", "context_length"]),
            ("Model: {model}. Backend: {backend}. Context length: {context_length} tokens.",
             ["model", "backend", "context_length"])])

        def answer(results):
            found = [d["runtime"] for d in A.ok_data(results) if d.get("runtime", {}).get("healthy")]
            return phrase.format(**found[0]) if found else "The runtime does not answer right now."
        want = [c["id"], c["backend"], str(c["context_length"])]
        expect = Expect(called=["runtime_status"], not_called=WRITES, answer_contains=want)
        question, asked = self.rng.choice(W.STATUS)
        plan = self.turn(self.pick([question]), [Step([("runtime_status", {})]), Step(answer=answer)], "status",
                         expect, want)
        self.report_status(quoted, asked)
        return plan

    def irrelevant(self) -> TurnPlan:
        """A request no tool fits: half the time arithmetic or a word game, else a general
        request (code, a translation, a fact, a term: general.py), answered in text."""
        rng = self.rng
        if rng.random() < 0.5:
            user, reply, key = general.request(rng)
            return self.turn(user, [Step(answer=lambda _: reply)], "general",
                             Expect(not_called=EVERY_STORE, answer_contains=[key]), [key])
        op = rng.choice(list(W.IRRELEVANT))
        a, b, word = rng.randint(3, 99), rng.randint(3, 99), rng.choice(W.WORDS)
        value = {"multiply": a * b, "add": a + b, "reverse": word[::-1], "celsius": fmt(a * 9 / 5 + 32),
                 "count": len(word), "subtract": a - b, "upper": word.upper(), "minutes": a * 60}[op]
        user = W.pick(rng, W.IRRELEVANT[op], a=a, b=b, word=word)
        answer = {"multiply": f"{a} times {b} is {value}.", "add": f"{a} plus {b} is {value}.",
                  "reverse": f"'{word}' backwards is '{value}'.", "celsius": f"{a} degrees Celsius is {value} degrees Fahrenheit.",
                  "count": f"'{word}' has {value} letters.", "subtract": f"{a} minus {b} is {value}.",
                  "upper": f"In capitals: {value}", "minutes": f"{a} hours is {value} minutes."}[op]
        return self.turn(user, [Step(answer=lambda _: answer)], "irrelevant",
                         Expect(not_called=EVERY_STORE, answer_contains=[str(value)]), [str(value)])

    # -- several stores -----------------------------------------------------------------------
    def all_in_one(self) -> TurnPlan:
        kept = self.keep(self.rng.randint(1, 3))
        filed = self.file(may_name=False)
        self.where_note = True
        source = filed.steps[0].calls[0][1]["source"]
        where_only = self.rng.random() < 0.5      # the note says where things went, and nothing more
        if where_only:
            pref, want = "", [self.table.db, "knowledge base"]
            text = f"The user's {self.d.things} are in {self.where()}; the background text is in the knowledge base as \"{source}\"."
        else:
            pref = self.rng.choice(self.d.prefs)
            self.prefs.append(pref)
            want = [pref]
            text = f"Preference: the user prefers {pref}. The {self.d.things} are in {self.where()}; background is in the knowledge base as \"{source}\"."
        self.notes.append(text)
        calls = [c for s in kept.steps if s.calls for c in s.calls] + filed.steps[0].calls + [("memory_add", {"text": text})]
        if self.rng.random() < 0.5:
            steps = [Step(calls)]
        else:
            steps = [s for s in kept.steps if s.calls] + [filed.steps[0], Step([calls[-1]])]
        where = self.where()
        steps.append(Step(answer=lambda results: f"Stored {A.stored_rows(results)} rows in {where}, filed the text as "
                                                 f'"{source}" in the knowledge base, and saved a memory note.'))
        expect = Expect(called=["sql_exec", "rag_ingest", "memory_add"], sql=kept.expect.sql, rag=filed.expect.rag,
                        memory=[MemoryExpect(contains=want)])
        records = [r for r in self.table.rows[-len(kept.expect.sql):]]
        user = self.pick(W.ALL_IN_ONE_WHERE if where_only else W.ALL_IN_ONE, records=self.records_phrase(records),
                         passage=filed.steps[0].calls[0][1]["text"], pref=pref)
        return self.turn(user, steps, "all_in_one", expect)

    def recall_both(self) -> TurnPlan:
        """A stored value and a filed passage in one question, the stores often not named: a
        query and a search (after the memory note, in a new session), each answer attributed."""
        t, rng = self.table, self.rng
        row, f = rng.choice(t.rows), rng.choice(self.d.fields[1:])
        key = row[self.d.key.name]
        source, passage, question, bkey = rng.choice(self.filed)
        sql = f"SELECT {f.name} FROM {t.name} WHERE {t.where(key)}"
        calls = [("sql_query", {"db": t.db, "sql": sql}), ("rag_search", {"query": question})]
        rng.shuffle(calls)
        steps = self.find_table()
        steps += self.schema_first(f, sql)
        steps += [Step(calls)] if rng.random() < 0.6 else [Step([c]) for c in calls]
        where = self.where()

        def answer(results):
            rows, found = A.last_rows(results), A.hit_passages(results, passage)
            return (f"From the database ({where}): {key} has {f.words} {fmt(rows[0][0]) if rows else 'not stored'}. "
                    f'From the knowledge base ("{source}"): {found or "nothing found."}')
        want = [fmt(row[f.name]), bkey]
        expect = Expect(called=["sql_query", "rag_search"], not_called=WRITES, answer_contains=want)
        user = self.pick(self.greeting_fits(W.RECALL_BOTH), field=f.words, key=key, question=question,
                         question_lc=question[:1].lower() + question[1:])
        return self.turn(user, steps + [Step(answer=answer)], "recall_both", expect, want)

    def recall_all(self) -> TurnPlan:
        t, rng = self.table, self.rng
        row = rng.choice(t.rows)
        f = rng.choice(self.d.fields[1:])
        key = row[self.d.key.name]
        source, passage, question, bkey = rng.choice(self.filed)
        pref = self.prefs[-1]
        query = f"SELECT {f.name} FROM {t.name} WHERE {t.where(key)}"
        sql = ("sql_query", {"db": t.db, "sql": query})
        search = ("rag_search", {"query": question})
        memory = ("memory_search", {"query": pref})
        if self.knows_table:
            steps = self.schema_first(f, query)
            steps += [Step([sql, search, memory])] if rng.random() < 0.5 else [Step([sql]), Step([search]), Step([memory])]
        else:
            self.knows_table = True
            steps = [Step([("memory_search", {"query": f"{self.d.things} {pref}"})])] + self.schema_first(f, query)
            steps += [Step([sql, search])]
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
        user = self.pick(self.greeting_fits(W.RECALL_ALL), field=f.words, key=key, question=question)
        return self.turn(user, steps + [Step(answer=answer)], "recall_all", expect, want)


    # -- a choice among the records that a remembered constraint narrows ---------------------
    def avoid(self) -> TurnPlan | None:
        """A constraint on the records, kept as a memory note: no record whose text field has
        a value (or whose list field holds an item) that some stored rows have and others
        lack. None when no field splits the rows."""
        rows, rng = self.table.rows, self.rng
        splits = [(f, v) for f in self.d.fields[1:] if f.kind in ("text", "list") for v in sorted(
            {v for r in rows for v in values(f, r)}) if 0 < sum(ruled_out(f, v, r[f.name]) for r in rows) < len(rows)]
        if not splits:
            return None
        items = [s for s in splits if s[0].kind == "list"]
        f, value = rng.choice(items if items and rng.random() < 0.7 else splits)
        self.avoided = (f, value)
        if f.kind == "list":
            text = rng.choice([f"The user avoids {self.d.things} whose {f.words} include {value}.",
                               f"Constraint ({self.d.things}): nothing with {value} among its {f.words}.",
                               f"The user can't have {value}: leave out {self.d.things} that contain it."])
            templates = W.NOTE_AVOID_ITEM
        else:
            text = rng.choice([f"The user avoids {self.d.things} whose {f.words} is {value}.",
                               f"Constraint ({self.d.things}): never suggest one with {f.words} {value}.",
                               f"The user does not want {self.d.things} with {f.words} {value}."])
            templates = W.NOTE_AVOID
        args = {"text": text} if rng.random() < 0.6 else {"text": text, "tags": [slug(self.d.things, 1), "constraint"]}
        self.notes.append(" ".join([text, *args.get("tags", [])]))
        expect = Expect(called=["memory_add"], not_called=["sql_exec", "rag_ingest"], memory=[MemoryExpect(contains=[value])])
        reply = rng.choice(["Noted: {}", "Saved to memory: {}", "I'll keep that in mind. The note reads: {}"]).format(text)
        user = self.pick(templates, field=f.words, value=value)
        return self.turn(user, [Step([("memory_add", args)]), Step(answer=lambda _: reply)], "avoid", expect)

    def choose(self) -> TurnPlan | None:
        """A suggestion among the stored records that honours the remembered constraint: the
        note is read and the table queried (in a new session the same search finds where the
        table is), and the answer names the records the constraint leaves. None when it leaves none."""
        t, rng = self.table, self.rng
        f, value = self.avoided
        key = self.d.key.name
        allowed = [r[key] for r in t.rows if not ruled_out(f, value, r[f.name])]
        if not allowed or not (self.knows_table or self.where_note):
            return None
        words = [w for w in self.d.things.split() if len(w) > 3]
        memory = ("memory_search", {"query": rng.choice(words)}) if words and rng.random() < 0.75 else ("memory_read", {})
        filtered = rng.random() < 0.4
        sql = f"SELECT {f.name}, {key} FROM {t.name}"
        steps = [Step([memory])]
        if self.knows_table and not filtered and rng.random() < 0.5:
            steps = []                                   # the note and the rows fetched side by side
        else:
            rule = f"NOT LIKE {literal('%' + value + '%')}" if f.kind == "list" else f"!= {literal(value)}"
            sql += f" WHERE {f.name} {rule}" if filtered else ""
        self.knows_table = True
        query = ("sql_query", {"db": t.db, "sql": sql})
        steps += self.schema_first(f, sql) + [Step([memory, query] if not steps else [query])]
        where = self.where()

        def answer(results):
            left = [fmt(r[1]) for r in A.last_rows(results) if not ruled_out(f, value, r[0])]
            out = [k for k in (r[key] for r in t.rows) if fmt(k) not in left]
            avoided = f"{value} in the {f.words}" if f.kind == "list" else f"{f.words} {value}"
            said = f"Leaving out {', '.join(map(fmt, out))} ({avoided}, which you avoid), " if out else \
                f"None of them has {avoided}, which you avoid, so "
            return said + (f"I'd suggest {W.series(left)} (from {where})." if left else f"{where} has nothing left to suggest.")
        want = [fmt(k) for k in allowed]
        expect = Expect(called=["sql_query"], called_any=[["memory_search", "memory_read"]], not_called=WRITES,
                        answer_contains=want)
        return self.turn(self.pick(self.greeting_fits(W.CHOOSE)), steps + [Step(answer=answer)], "choose", expect, want)


def values(f, record: dict) -> list[str]:
    """The values of field `f` a constraint can name: a list field's items, else the value."""
    return record[f.name].split(", ") if f.kind == "list" else [record[f.name]]


def ruled_out(f, value: str, stored) -> bool:
    """Whether a stored value of field `f` falls under the constraint "none with `value`"."""
    return value in stored.split(", ") if f.kind == "list" else stored == value
