"""The task plans, without a worker: the variety the generator promises is there, every turn
offers the tools its gold steps call, and no plan's text overlaps the evaluation suites."""
from __future__ import annotations

import difflib
import json
import random
import re
from collections import Counter

import pytest

from agents import prompts
from tools.context import ToolContext
from tools.toolsets import build_registry
from tuning.disjoint import Fence
from tuning.domains import BY_NAME, Domain, Field, _domain
from tuning.offer import PARAPHRASES
from tuning.records import Table, fmt
from tuning.runtime_stub import card
from tuning.tasks import FLOWS, build
from tuning.wording import SET_FIELD

N = 400


@pytest.fixture(scope="module")
def plans():
    schemas = build_registry(ToolContext()).openai_tools()
    return schemas, [build(i, 1, schemas) for i in range(N)]


def test_plans_are_deterministic(plans):
    schemas, tasks = plans
    again = build(7, 1, schemas)
    assert [t.user for t in again.turns] == [t.user for t in tasks[7].turns]
    assert [t.user for t in build(7, 2, schemas).turns] != [t.user for t in tasks[7].turns]


def test_the_plans_vary_as_promised(plans):
    schemas, tasks = plans
    turns = [t for task in tasks for t in task.turns]
    assert {t.workflow for t in tasks} == set(FLOWS)
    assert len({t.domain for t in tasks}) >= 20
    assert {len(t.turns) for t in tasks} >= set(range(1, 11))
    kinds = Counter(t.kind for t in turns)
    assert {"keep", "add", "update", "delete", "query", "lookup", "from_conversation", "file", "search", "note",
            "recall", "note_in_message", "small_talk", "irrelevant", "all_in_one", "recall_all", "mention",
            "keep_those", "recall_both", "status", "keep_status", "keep_figure", "keep_found",
            "lookup_reported"} <= set(kinds)
    assert any(t.new_session for t in turns) and any(t.faults for t in turns)
    assert any(s.fails and not s.train for t in turns for s in t.steps)            # a wrong statement, then its fix
    assert any(len(s.calls) >= 3 for t in turns for s in t.steps)                  # several calls in one reply
    assert len({len(t.tools) for t in turns}) >= 8                                 # offers of many sizes
    orders = {tuple(x["function"]["name"] for x in t.tools) for t in turns if len(t.tools) >= 3}
    assert len(orders) > N / 2
    defaults = {s["function"]["name"]: s["function"]["description"] for s in schemas}
    schemas_by_name = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    reworded = [x for t in turns for x in t.tools if x["function"]["description"] != defaults[x["function"]["name"]]]
    assert reworded and all(x["function"]["name"] in PARAPHRASES for x in reworded)
    bare = [x for t in turns for x in t.tools if x["function"]["parameters"]["properties"]
            and not any("description" in p for p in x["function"]["parameters"]["properties"].values())]
    assert bare and all(x["function"]["parameters"]["required"] == schemas_by_name[x["function"]["name"]]["required"]
                        for x in bare)
    systems = Counter(t.system == prompts.SYSTEM for t in tasks)
    assert systems[True] > systems[False] > N / 10


def test_every_turn_offers_what_its_gold_calls_and_no_tool_turns_offer_something(plans):
    _, tasks = plans
    for task in tasks:
        for t in task.turns:
            offered = {x["function"]["name"] for x in t.tools}
            assert t.needs <= offered, (task.id, t.kind)
            assert offered, (task.id, t.kind)
            assert t.steps[-1].answer is not None and all(s.calls for s in t.steps[:-1])


def test_no_plan_text_overlaps_the_suites(plans):
    _, tasks = plans
    fence = Fence()
    leaks = [(task.id, leak) for task in tasks for t in task.turns
             for text in [t.user] + [json.dumps(a, ensure_ascii=False) for s in t.steps for _, a in s.calls]
             for leak in fence.leaks(text)]
    assert not leaks, leaks[:5]


def test_records_told_first_are_kept_later_from_the_earlier_message(plans):
    # the user tells records with a question (no tool), then asks to keep "those": the INSERT
    # carries the earlier message's values, which the later request does not repeat
    _, tasks = plans
    pairs = [(a, b) for task in tasks for a, b in zip(task.turns, task.turns[1:])
             if a.kind == "mention" and b.kind == "keep_those"]
    assert len(pairs) > 10
    for told, kept in pairs:
        assert not told.needs and told.expect.not_called
        inserted = " ".join(a["sql"] for s in kept.steps for name, a in s.calls if name == "sql_exec")
        values = [v for sql in kept.expect.sql for v in sql.contains]
        assert values and all(v in told.user and v in inserted and v not in kept.user for v in values)


def test_a_note_of_where_things_are_names_every_store_in_use(plans):
    _, tasks = plans
    notes = [a["text"] for task in tasks for t in task.turns if t.kind == "note" for s in t.steps
             for name, a in s.calls if name == "memory_add" and "knowledge base" in a["text"]]
    assert len(notes) > 10 and all("database" in n.lower() or "sqlite" in n.lower() for n in notes)


def test_code_keys_are_drawn_fresh_and_distinct():
    """A code key is drawn from its pattern, never the pattern itself, and no two rows share one."""
    d = Domain("lockers", "pickups", ("lockers",), ("pickups",),
               (Field("parcel", "code", ("PK-##",)), Field("at", "time")), "{parcel} at {at}", "at")
    table, rng = Table(d, "lockers", "pickups", False), random.Random(1)
    for _ in range(40):
        table.rows.append(table.new_record(rng))
    keys = [r["parcel"] for r in table.rows]
    assert len(set(keys)) == 40 and all(k.startswith("PK-") and k[3:].isdigit() for k in keys)
    assert all(len(r["at"]) == 5 and r["at"][2] == ":" for r in table.rows)


def test_a_domain_whose_values_sit_in_its_things_is_refused():
    """'keep those films to watch' would hold the status 'to watch' before anything is stored."""
    raw = {"name": "films", "things": "films to watch", "dbs": ["f"], "tables": ["f"], "say": "{title} {status}",
           "measure": "n", "fields": [{"name": "title", "pool": ["Heat"]}, {"name": "status", "pool": ["to watch"]}]}
    with pytest.raises(ValueError, match="to watch"):
        _domain(raw)
    _domain({**raw, "things": "films on my list"})


def creates(task) -> list[str]:
    return [a["sql"] for t in task.turns for s in t.steps for name, a in s.calls
            if name == "sql_exec" and a["sql"].startswith("CREATE")]


def test_one_domain_is_kept_under_many_schemas_and_only_what_the_user_said_is_stored(plans):
    # a single schema per domain is what the tuned model memorised and recalled on new subjects
    _, tasks = plans
    by_domain: dict[str, set] = {}
    for task in tasks:
        for sql in creates(task):
            by_domain.setdefault(task.domain, set()).add(sql[sql.index("(", sql.index(" IF NOT EXISTS ")):])
    assert sum(len(s) >= 3 for s in by_domain.values()) >= 10
    fewer = 0
    for task in tasks:
        for t in task.turns:
            if t.kind in ("keep", "add"):
                values = [v for sql in t.expect.sql for v in sql.contains]
                _, implied, verbs = BY_NAME[task.domain].opens or (None, None, ())
                if any(t.user.startswith(v + ":") for v in verbs):   # "Log a new fault: ..." sets the status
                    values.remove(implied)
                assert all(v in t.user for v in values), (task.id, t.user, values)
                fewer += any(len(sql.contains) < 4 for sql in t.expect.sql)
    assert fewer > 20


def test_the_closing_recall_comes_in_the_same_session_or_a_new_one(plans):
    # in the same session the names are in the conversation: the query goes out at once
    _, tasks = plans
    recalls = [t for task in tasks if task.workflow in ("persistence", "intake") for t in task.turns[-2:]
               if t.kind in ("recall_both", "recall_all")]
    first = [t.steps[0].calls[0][0] for t in recalls]
    assert first.count("memory_search") > 5
    same = [t for t in recalls if not t.new_session]
    assert len(same) > 5 and all(t.steps[0].calls[0][0] != "memory_search" for t in same if t.kind == "recall_both")
    assert not any(re.search(r"\b(hello|back) again", t.user.lower()) for t in same)   # a passage may say "again"


def test_queries_sometimes_read_the_schema_first_in_a_new_session_and_after_a_guessed_column(plans):
    # a model that invented its table's columns must find them again, not guess twice
    _, tasks = plans
    schema = "SELECT sql FROM sqlite_master"
    first_read = [t for task in tasks for t in task.turns if t.new_session and t.kind in ("recall_both", "recall_all")
                  and any(a["sql"].startswith(schema) for s in t.steps[:2] for name, a in s.calls if name == "sql_query")]
    after_guess = [t.steps[i + 1].calls[0][1].get("sql", "").startswith(schema)
                   for task in tasks for t in task.turns if t.kind in ("recall_both", "recall_all", "lookup")
                   for i, s in enumerate(t.steps[:-1]) if s.fails and not s.train and "sqlite_master" not in
                   s.calls[0][1].get("sql", "") and s.calls[0][0] == "sql_query"]
    # after a guessed column the error lists the columns: the query is made again at once, or the schema read
    assert first_read and any(after_guess) and not all(after_guess)


KEEP_REPORTED = ("keep_status", "keep_figure", "keep_found")


def test_what_a_tool_reported_is_kept_from_its_result_not_from_the_request(plans):
    # right after a status, an aggregate query or a search, "keep that": the INSERT carries the
    # values the tool returned (the card, the query's figure, the passage's answer and source),
    # which the request does not say
    _, tasks = plans
    kept = [(task, before, t) for task in tasks for before, t in zip(task.turns, task.turns[1:])
            if t.kind in KEEP_REPORTED]
    assert 0.04 * N < len({task.id for task, _, _ in kept}) < 0.15 * N
    assert Counter(t.kind for _, _, t in kept).keys() == set(KEEP_REPORTED)
    for task, before, t in kept:
        values = [v for sql in t.expect.sql for v in sql.contains]
        inserted = " ".join(a["sql"] for s in t.steps for name, a in s.calls
                            if name == "sql_exec" and a["sql"].startswith("INSERT"))
        assert values and not t.new_session, (task.id, t.kind)
        assert all(v in inserted and v not in t.user for v in values), (task.id, t.user, inserted, values)
        assert before.kind == t.kind.replace("keep_", "").replace("figure", "query").replace("found", "search")
        if t.kind == "keep_status":
            assert set(values) <= {str(v) for v in card(task.id).values()}
            assert t.expect.sql[0].same_row
        else:      # the figure or the answer the earlier turn quoted, and the source of the passage
            filed = {a["source"] for x in task.turns for s in x.steps for name, a in s.calls if name == "rag_ingest"}
            assert set(before.keys) <= set(values) <= set(before.keys) | filed, (task.id, values, before.keys)


def test_kept_reports_get_columns_named_after_what_was_reported_under_varied_names(plans):
    schemas, tasks = plans
    tasks = tasks + [build(i, 1, schemas) for i in range(N, 3 * N)]       # status keeps are a few in a hundred
    creates = [a["sql"] for task in tasks for t in task.turns if t.kind == "keep_status" for s in t.steps
               for name, a in s.calls if a.get("sql", "").startswith("CREATE")]
    shapes = {sql[sql.index("("):] for sql in creates}
    assert len(creates) >= 8 and len(shapes) > len(creates) / 2
    assert all(re.search(r"\b(model|model_name|model_id|llm|chat_model) TEXT", sql) for sql in creates)
    tables = {re.search(r"EXISTS (\w+)", sql).group(1) for sql in creates}
    assert len(tables) >= 4 and not {"sessions"} & tables


def test_a_kept_report_is_read_back_by_a_query_of_its_own_table(plans):
    _, tasks = plans
    lookups = 0
    for task in tasks:
        made: dict[str, str] = {}        # table -> the INSERTs of this session
        for t in task.turns:
            if t.new_session:
                made = {}
            for s in t.steps:
                for name, a in s.calls:
                    if name == "sql_exec" and a["sql"].startswith("INSERT"):
                        table = a["sql"].split()[2]
                        made[table] = made.get(table, "") + a["sql"]
            if t.kind == "lookup_reported":
                lookups += 1
                (name, a), = t.steps[0].calls
                table = re.search(r"FROM (\w+)", a["sql"]).group(1)
                assert name == "sql_query" and table in made, (task.id, a)
                assert all(v in made[table] for v in t.keys) and "sql_query" in t.expect.called
    assert lookups > 10


def test_a_kept_status_or_figure_is_recalled_from_its_table_beside_a_filed_text(plans):
    # "look both up and say where each came from", after keeping what runtime_status reported:
    # the value is read back from the table it went into, the text searched, runtime_status not
    # asked again (v15's adapter asked the tool; every two-store recall it saw read records)
    schemas, tasks = plans
    seen = Counter()
    for task in tasks + [build(i, 1, schemas) for i in range(N, 2 * N)]:
        kept: dict[str, str] = {}          # table -> the kind of report kept in it this session
        for t in task.turns:
            if t.new_session:
                kept = {}
            if t.kind in ("keep_status", "keep_figure", "keep_found"):
                create = next((a["sql"] for s in t.steps for _, a in s.calls if a["sql"].startswith("CREATE")), "")
                if create:
                    kept[re.search(r"EXISTS (\w+)", create).group(1)] = t.kind.removeprefix("keep_")
            if t.kind != "recall_reported":
                continue
            calls = [(n, a) for s in t.steps if not s.fails for n, a in s.calls]       # a planned fault repeats one
            (query,) = [a["sql"] for n, a in calls if n == "sql_query"]
            table = re.search(r"FROM (\w+)", query).group(1)
            assert kept.get(table) in ("status", "figure"), (task.id, query, kept)
            assert {n for n, _ in calls} == {"sql_query", "rag_search"} and len(t.keys) == 2
            assert {"sql_query", "rag_search"} <= set(t.expect.called)
            if kept[table] == "status":
                assert "runtime_status" in t.expect.not_called and str(t.keys[0]) in str(card(task.id).values())
            seen[kept[table]] += 1
    assert seen["status"] >= 5 and seen["figure"] >= 5, seen


def test_a_source_the_generator_names_is_made_of_words_of_its_text(plans):
    # a note that cites the source then says what the text is about; 'vet-notes' or a subject the
    # text never mentions did not (45% of v15's generated sources shared no word with their text)
    schemas, tasks = plans
    named = 0
    for task in tasks:
        for t in task.turns:
            for s in t.steps:
                for name, a in s.calls:
                    if name != "rag_ingest" or a["source"] in t.user:
                        continue
                    text = set(re.findall(r"[a-z0-9]+", a["text"].lower()))
                    first, *rest = a["source"].split("-")
                    assert rest and set(rest) <= text and (first in text or first in BY_NAME[task.domain].things.lower()), \
                        (a["source"], a["text"])
                    named += 1
    assert named > N / 2


def test_a_memory_search_that_finds_nothing_still_finds_the_table_through_the_recent_notes(plans):
    # v5 searched its memory for a word its note did not hold, found nothing and guessed a database;
    # the search now returns the recent notes, and the gold goes on from them (at times reading all)
    _, tasks = plans
    misses = read_after = 0
    for task in tasks:
        notes = " ".join(a["text"] + " " + " ".join(a.get("tags", [])) for t in task.turns for s in t.steps
                         for name, a in s.calls if name == "memory_add").lower()
        for t in task.turns:
            if not t.new_session:
                continue
            for i, s in enumerate(t.steps[:-1]):
                if s.calls and s.calls[0][0] == "memory_search" and s.calls[0][1]["query"] not in notes \
                        and not any(w in notes for w in s.calls[0][1]["query"].split()):
                    misses += 1
                    following = t.steps[i + 1].calls
                    read_after += any(n == "memory_read" for n, _ in following)
                    assert following and {n for n, _ in following} <= {"memory_read", "sql_query", "sql_exec",
                                                                         "rag_search"}, t.user
    assert misses > 3 and 0 < read_after < misses, (misses, read_after)


def test_requests_no_tool_fits_are_answered_in_text_with_tools_offered(plans):
    _, tasks = plans
    turns = [t for task in tasks for t in task.turns if t.kind == "general"]
    assert len(turns) > 20 and all(t.tools and not any(s.calls for s in t.steps) for t in turns)
    answers = [t.steps[-1].answer([]) for t in turns]
    assert all(k in a for t, a in zip(turns, answers) for k in t.expect.answer_contains)
    assert any("```python" in a for a in answers) and any(a.startswith("In ") for a in answers)


# what each taught function must do: its arguments -> its result
BEHAVES = {"sum_of_squares": (([1, 2, 3],), 14), "count_vowels": (("Education",), 5), "is_prime": ((97,), True),
           "unique": (([3, 1, 3, 2, 1],), [3, 1, 2]), "factorial": ((5,), 120), "is_palindrome": (("Level",), True),
           "fibonacci": ((10,), 55), "flatten": (([[1], [2, 3], []],), [1, 2, 3]), "count_words": (("one two  three",), 3),
           "merge": (({"a": 1}, {"a": 2, "b": 3}), {"a": 2, "b": 3}), "largest": (([4, 9, 2],), 9),
           "to_celsius": ((212,), 100)}


def test_the_code_the_generator_teaches_works():
    from tuning.general import CODE
    for code in CODE.values():
        scope: dict = {}
        exec(code, scope)
        name = code.split("(")[0].removeprefix("def ")
        args, result = BEHAVES[name]
        assert scope[name](*args) == result, name


def test_a_record_said_with_one_value_as_an_instruction_still_says_every_value():
    # "RQ-123, tenant Amina, flat 4; make it urgent": the instruction form moves a value, never drops one
    from tuning.blocks import Builder
    from tuning.domains import BY_NAME
    seen = 0
    for i in range(200):
        b = Builder(random.Random(i), BY_NAME["tenant-requests"])
        record = b.table.new_record(b.rng)
        phrase = b.records_phrase([record])
        assert all(str(v) in phrase for v in record.values()), (phrase, record)
        seen += any(f"; {form.split(' {')[0]}" in phrase for form in SET_FIELD)
    assert 20 < seen < 120


def test_a_first_keep_goes_where_the_user_says(plans):
    # "... Database main, table entries, please.": the gold's CREATE and INSERTs use those names
    from tuning.wording import IN_NAMED_TABLE
    shapes = [re.compile(re.escape(t).replace(r"\{request\}", ".*").replace(r"\{db\}", r"(?P<db>\w+)")
                         .replace(r"\{table\}", r"(?P<table>\w+)").replace(r"\{columns\}", r"[\w, ]+") + "$", re.S)
              for t in IN_NAMED_TABLE]
    schemas, tasks = plans
    named = 0
    for task in tasks + [build(i, 1, schemas) for i in range(N, 2 * N)]:
        for t in task.turns:
            m = next((m for m in (s.search(t.user) for s in shapes) if m), None)
            if m is None or not t.kind.startswith("keep"):
                continue
            calls = [a for s in t.steps if not s.fails for name, a in s.calls if name == "sql_exec"]
            assert calls and all(a["db"] == m["db"] and f" {m['table']} " in a["sql"] for a in calls), (t.user, calls)
            named += 1
    assert named >= 10


def test_those_n_details_are_the_ones_the_user_asked_about(plans):
    # runtime_status reports more than was asked; "those three" keeps the three asked for
    from tuning.wording import KEEP_STATUS_ASKED, STATUS, count_words
    numbers = {count_words(n): n for n in range(1, 6)}
    shapes = [re.compile(re.escape(k).replace(r"\{count\}", r"(?P<count>\w+)")) for k in KEEP_STATUS_ASKED]
    schemas, tasks = plans
    seen = 0
    for task in tasks + [build(i, 1, schemas) for i in range(N, 3 * N)]:
        asked = None
        for t in task.turns:
            if t.kind == "status":
                # the question, maybe with a typo: the wording closest to it
                asked = max(STATUS, key=lambda qa: difflib.SequenceMatcher(None, qa[0], t.user).ratio())[1]
            m = next((m for m in (s.fullmatch(t.user) for s in shapes) if m), None)
            if t.kind == "keep_status" and m:
                count = numbers[m["count"]]
                insert = next(a["sql"] for s in t.steps for name, a in s.calls if a["sql"].startswith("INSERT"))
                values = insert.split("VALUES (", 1)[1].rstrip(")").split(", ")
                assert asked and len(values) == count == len(asked), (t.user, insert, asked)
                seen += 1
    assert seen >= 3


def test_records_just_told_are_asked_about_their_lowest_value_as_well_as_their_highest():
    from tuning.blocks import Builder
    from tuning.domains import DOMAINS
    asked = {"highest": 0, "lowest": 0}
    for i in range(300):
        b = Builder(random.Random(i), DOMAINS[i % len(DOMAINS)])
        turn = b.mention(3)
        m = b.d.field(b.d.measure)
        for word, pick in (("highest", max), ("lowest", min)):
            if f"the {word} {m.words}?" in turn.user:
                best = pick(r[m.name] for r in b.pending)
                assert turn.keys == [next(r[b.d.key.name] for r in b.pending if r[m.name] == best)], turn.user
                asked[word] += 1
    assert asked["highest"] >= 10 and asked["lowest"] >= 10, asked


def test_a_note_of_where_things_are_calls_the_filed_texts_what_the_user_called_them(plans):
    from tuning.wording import TEXT_KINDS
    schemas, tasks = plans
    named = 0
    for task in tasks + [build(i, 1, schemas) for i in range(N, 2 * N)]:
        called = None
        for t in task.turns:
            if t.kind == "file":
                called = next((many for one, many in TEXT_KINDS if f" {one} " in t.user or f"{one} in" in t.user), called)
            notes = [a["text"] for s in t.steps for name, a in s.calls if name == "memory_add"]
            if t.kind == "note" and called and notes and f" {called} " in t.user:
                assert f"the {called} " in notes[0] and "knowledge base" in notes[0], (t.user, notes)
                named += 1
    assert named >= 3


def test_a_constraint_on_one_item_of_a_list_rules_out_exactly_the_records_whose_list_holds_it():
    # "my partner can't have peanuts" against recipes listing their ingredients: the pick must
    # leave out each record that lists the item, and only those
    from tuning.blocks import Builder
    checked = filtered = 0
    for i in range(400):
        b = Builder(random.Random(i), BY_NAME[("pet-foods", "skincare-products", "craft-kits")[i % 3]])
        keep = b.keep(4)
        avoid = b.avoid()
        if avoid is None or b.avoided[0].kind != "list":
            continue
        f, item = b.avoided
        assert item in avoid.steps[0].calls[0][1]["text"]
        choose = b.choose()
        if choose is None:
            continue
        key = b.d.key.name
        allowed = sorted(r[key] for r in b.table.rows if not re.search(rf"(^|, ){re.escape(item)}(,|$)", r[f.name]))
        assert sorted(choose.expect.answer_contains) == sorted(map(str, allowed)), (item, b.table.rows)
        db = replayed(keep)
        sql = [a["sql"] for s in choose.steps for n, a in s.calls if n == "sql_query" and "sqlite_master" not in a["sql"]][-1]
        rows = db.execute(sql).fetchall()
        if "WHERE" in sql:
            filtered += 1
            assert sorted(r[1] for r in rows) == sorted(allowed), sql
        checked += 1
    assert checked >= 30 and filtered >= 5, (checked, filtered)


def test_a_record_opened_by_a_verb_stores_the_value_the_verb_implies():
    # "Log a new fault: SF-112, the left monitor hums" is stored with status "reported"
    from tuning.blocks import Builder
    seen = says = 0
    for i in range(400):
        b = Builder(random.Random(i), BY_NAME[("studio-faults", "pothole-reports", "3d-prints", "tenant-requests")[i % 4]])
        turn = b.keep(2)
        field, value, verbs = b.d.opens or (None, None, ())
        verb = next((v for v in verbs if turn.user.startswith(v + ":")), None)
        if verb is None:
            continue
        seen += 1
        rows = b.table.rows
        assert len(rows) == 1 and rows[0][field] == value
        told = turn.user[len(verb) + 1:]
        assert all(fmt(v) in told for k, v in rows[0].items() if k != field), turn.user
        inserts = [a["sql"] for s in turn.steps for n, a in s.calls if "INSERT" in a.get("sql", "")]
        assert inserts and all(f"'{value}'" in sql for sql in inserts), inserts
        says += " says " in told          # told as someone's report ("Amina in flat 4 says the tap drips")
    assert seen >= 20 and says >= 3, (seen, says)


def test_filing_uses_a_source_the_user_names_and_searches_afterwards_when_asked(plans):
    from tuning.wording import FILE_CHECK
    schemas, tasks = plans
    named = checked = 0
    for task in tasks + [build(i, 1, schemas) for i in range(N, 2 * N)]:
        for t in task.turns:
            if t.kind != "file":
                continue
            calls = [(n, a) for s in t.steps for n, a in s.calls]
            source = calls[0][1]["source"]
            if f'"{source}"' in t.user or f"source name {source}:" in t.user or f"source {source}." in t.user:
                named += 1
            if any(t.user.endswith(c) for c in FILE_CHECK):
                checked += 1
                assert [n for n, _ in calls][-1] == "rag_search" and "rag_search" in t.expect.called, t.user
            else:
                assert "rag_search" not in [n for n, _ in calls]
    assert named >= 5 and checked >= 5, (named, checked)


def test_a_note_the_user_dictates_says_what_the_user_said():
    from tuning.blocks import Builder
    from tuning.wording import NOTE_DICTATED
    seen = 0
    for i in range(600):
        b = Builder(random.Random(i), BY_NAME["hiring-candidates"])
        b.keep(2)
        b.file()
        turn = b.note(where=True)
        form = next((f for f in NOTE_DICTATED if t_prefix(f) and turn.user.startswith(t_prefix(f))), None)
        if form is None:
            continue
        seen += 1
        told = turn.user[len(t_prefix(form)):].rstrip(".").replace("my job candidates", "job candidates", 1)
        note = turn.steps[0].calls[0][1]["text"]
        assert told in note and b.table.name in note and "knowledge base" in note, (turn.user, note)
    assert seen >= 10


def t_prefix(form: str) -> str:
    return form.split("{fact}")[0]


def test_two_records_told_as_one_story_are_two_rows():
    from tuning.blocks import Builder
    from tuning.wording import PAIRED
    seen = 0
    for i in range(300):
        b = Builder(random.Random(i), BY_NAME["sales-deals"])
        turn = b.keep(2)
        joins = [p.replace("{a}", "").replace("{b}", "") for p in PAIRED]
        if not any(j.strip(" ,;-") and j in turn.user for j in joins):
            continue
        seen += 1
        assert len(turn.expect.sql) == 2 and all(x.same_row for x in turn.expect.sql)
        inserts = [a["sql"] for s in turn.steps for n, a in s.calls if "INSERT" in a.get("sql", "")]
        assert sum(sql.count("), (") + 1 for sql in inserts) == 2, inserts
    assert seen >= 20


def test_two_values_of_one_record_are_asked_at_once_by_its_key_or_a_value_only_it_has():
    from tuning.blocks import Builder
    by_value, openings = 0, set()
    for i in range(200):
        b = Builder(random.Random(i), BY_NAME[("tenant-requests", "hiring-candidates")[i % 2]])
        keep = b.keep(4)
        turn = b.lookup_two()
        db = replayed(keep)
        sql = turn.steps[-2].calls[0][1]["sql"]
        rows = db.execute(sql).fetchall()
        assert len(rows) == 1 and [fmt(v) for v in rows[0]] == turn.expect.answer_contains, (sql, turn.user)
        # the gold answer gives both values, whichever frame it opens with
        result = {"ok": True, "data": {"columns": ["a", "b"], "rows": [list(rows[0])]}}
        answer = turn.steps[-1].answer([result])
        assert all(v in answer for v in turn.expect.answer_contains), answer
        openings.add(answer.split()[0])
        by_value += "the one with" in turn.user
    assert by_value >= 10
    # it opens the ways a one-value answer does too ("The status of X is open ..."): a model
    # that learnt that frame only for one value gave one of the two (v11, support-tickets)
    assert {"The", "In", "I"} <= openings, openings


def test_the_record_that_comes_last_or_first_by_a_date_is_found_by_ordering_the_dates():
    # "which flight takes me home": the later of two records, read off the dates, not guessed
    from tuning.blocks import Builder
    seen = set()
    for i in range(200):
        b = Builder(random.Random(i), BY_NAME["sales-deals"])
        keep = b.keep(3)
        op = ("latest", "earliest")[i % 2]
        turn = b.query(ops=(op,))
        if turn is None:
            continue
        db = replayed(keep)
        sql = [a["sql"] for s in turn.steps for n, a in s.calls if n == "sql_query"][-1]
        date = next(f for f in b.d.fields if f.kind == "date")
        pick = (max if op == "latest" else min)(b.table.rows, key=lambda r: r[date.name])
        assert db.execute(sql).fetchall()[0][0] == pick[b.d.key.name] == turn.expect.answer_contains[0], sql
        seen.add(op)
    assert seen == {"latest", "earliest"}


def replayed(keep):
    """An in-memory SQLite database after a keep turn's gold statements."""
    import sqlite3
    db = sqlite3.connect(":memory:")
    for s in keep.steps:
        for _, args in s.calls:
            db.execute(args["sql"])
    return db
