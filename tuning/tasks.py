"""Tasks: a domain, a workflow of turns built by blocks.py, faults planned on some turns,
the tools each turn offers and the system prompt. `build(index, seed, schemas)` is
deterministic in (index, seed): the same command writes the same file."""
from __future__ import annotations

import random

from agents.suite import Fault
from tuning.blocks import Builder
from tuning.domains import DOMAINS
from tuning.offer import Offer, system_prompt
from tuning.plan import Step, Task, TurnPlan
from tuning.runtime_stub import card

ERRORS = ("503 from the worker: service temporarily unavailable", "the worker timed out after 120 s",
          "connection reset by peer", "429 from the worker: too many requests, try again shortly")


def records(b: Builder) -> list[TurnPlan]:
    rng = b.rng
    turns = [b.small_talk(intent=rng.random() < 0.5)] if rng.random() < 0.3 else []
    turns.append(b.keep(rng.randint(2, 4)))
    for _ in range(rng.randint(2, 7)):
        turns.append(next_turn(b, ["add", "update", "delete", "query", "lookup", "from_conversation", "irrelevant",
                                   "keep_reported", "lookup_reported"]))
    return turns + ([b.small_talk(closing=True)] if rng.random() < 0.4 else [])


def persistence(b: Builder) -> list[TurnPlan]:
    turns = [b.keep(b.rng.randint(2, 3)), b.file(), b.note(where=True), b.note(where=False)]
    later(b)
    turns.append(b.rng.choice([b.recall_all, b.recall_both])())
    return turns + ([b.search()] if b.rng.random() < 0.4 else [])


def intake(b: Builder) -> list[TurnPlan]:
    """Records told first and kept on a later request, background filed, a note of where
    everything is, and later (a new session or the same one) a question that needs the table and the text."""
    rng = b.rng
    turns = [b.small_talk(intent=True)] if rng.random() < 0.4 else []
    turns += [b.mention(rng.randint(2, 4)), b.keep_those()]
    if rng.random() < 0.5:
        turns.append(next_turn(b, ["lookup", "from_conversation", "query"]))
    turns += [b.file(), b.note(where=True)]
    if rng.random() < 0.3:
        turns.append(b.small_talk(closing=True))
    later(b)
    return turns + [b.recall_both()]


def later(b: Builder) -> None:
    """The recall that ends a workflow comes in a new session (the names found again through the
    memory note) or in the same one (the names are in the conversation: query at once)."""
    if b.rng.random() < 0.5:
        b.session_break()


def reported(b: Builder) -> list[TurnPlan]:
    """A tool reports something (the runtime's card, an aggregate of the stored records, a
    passage found) and the user asks to keep it, in words that never repeat the values; later
    turns sometimes read it back from its table."""
    rng = b.rng
    turns = [b.small_talk()] if rng.random() < 0.2 else []
    source = rng.choice(["status", "figure", "found"])
    if source == "figure":
        turns.append(b.keep(rng.randint(2, 4)))
        turns += [next_turn(b, ["add", "update", "lookup"]) for _ in range(rng.randint(0, 2))]
        turns.append(figure(b))
        if b.rng.random() < 0.35:             # a second figure, kept in the same table
            first = b.reported.words
            turns += [b.keep_reported(), figure(b, other_than=first)]
    elif source == "found":
        turns += [b.file() for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.4:
            b.session_break()
        turns.append(b.search())
    if b.reported is None:          # the passage's answer was a bare number: keep the runtime's card instead
        turns.append(b.status())
    turns.append(b.keep_reported())
    if source != "found" and rng.random() < 0.5:       # asked for again beside a text filed since
        turns += [b.file() for _ in range(rng.randint(1, 2))] + [b.recall_reported()]
    for _ in range(rng.randint(0, 3)):
        turns.append(next_turn(b, ["lookup_reported", "lookup_reported", "status", "query", "search", "keep_reported",
                                   "irrelevant", "from_conversation", "recall_reported"]))
    return turns


def figure(b: Builder, other_than: str = "") -> TurnPlan:
    """A query whose answer is one figure, not the one called `other_than` (a tie for the
    largest value is drawn again)."""
    while True:
        turn = b.query(ops=("sum", "count", "avg", "max", "min"))
        if turn is not None and b.reported.words != other_than:
            return turn


def decide(b: Builder) -> list[TurnPlan]:
    """Records kept, a constraint on them remembered, and later (often a new session, the table
    found through the note of where it is) a suggestion among them that honours the constraint."""
    rng = b.rng
    turns = [b.keep(rng.randint(3, 5))]
    turns += [next_turn(b, ["add", "lookup", "query"]) for _ in range(rng.randint(0, 1))]
    if rng.random() < 0.6:
        turns.append(b.note(where=True))
    avoid = b.avoid()
    if avoid is None:
        return turns + [next_turn(b, ["lookup", "query"])]
    turns.append(avoid)
    if b.where_note and rng.random() < 0.6:
        b.session_break()
    elif rng.random() < 0.4:
        turns.append(next_turn(b, ["irrelevant", "small_talk", "lookup"]))
    return turns + [b.choose()]


def all_in_one(b: Builder) -> list[TurnPlan]:
    turns = [b.all_in_one()]
    if b.rng.random() < 0.5:
        b.session_break()
        turns.append(b.recall_all() if b.prefs else b.recall_both())
    return turns


def knowledge(b: Builder) -> list[TurnPlan]:
    turns = [b.file() for _ in range(b.rng.randint(1, 2))] + [b.search()]
    turns += [b.rng.choice([b.documents, lambda: b.similar(strangers(b))])()] if b.rng.random() < 0.5 else []
    if b.rng.random() < 0.5:
        b.session_break()
        turns.append(b.search())
    if b.reported and b.rng.random() < 0.2:
        turns.append(b.keep_reported())
    return turns + ([b.irrelevant()] if b.rng.random() < 0.3 else [])


def memory(b: Builder) -> list[TurnPlan]:
    turns = [b.note(where=False)] + ([b.small_talk(closing=True)] if b.rng.random() < 0.5 else [])
    b.session_break()
    return turns + [b.recall(), b.note_in_message()]


def chat(b: Builder) -> list[TurnPlan]:
    rng = b.rng
    turns = [b.small_talk()]
    for _ in range(rng.randint(1, 3)):
        turns.append(rng.choice([b.irrelevant, b.note_in_message, b.status])())
        if b.reported and rng.random() < 0.2:
            turns.append(b.keep_reported())
    return turns + ([b.small_talk(closing=True)] if rng.random() < 0.5 else [])


def recovery(b: Builder) -> list[TurnPlan]:
    turns = [b.keep(b.rng.randint(2, 3), wrong_first=b.rng.random() < 0.5)]
    return turns + [next_turn(b, ["query", "lookup", "add", "update"]) for _ in range(b.rng.randint(1, 3))]


def mixed(b: Builder) -> list[TurnPlan]:
    turns = []
    for i in range(b.rng.randint(3, 10)):
        if i and b.rng.random() < 0.12:
            b.session_break()
        turns.append(next_turn(b, list(BLOCKS)))
    return turns


BLOCKS = {
    "keep": (3, lambda b: not b.table.created, lambda b: b.keep(b.rng.randint(1, 4))),
    "add": (2, lambda b: b.table.created and len(b.table.rows) < min(6, b.d.key.distinct - 2) and b.can_sql(), lambda b: b.keep(b.rng.randint(1, 2))),
    "update": (2, lambda b: b.table.rows and b.can_sql(), lambda b: b.update()),
    "delete": (1, lambda b: len(b.table.rows) >= 2 and b.can_sql(), lambda b: b.delete()),
    "query": (3, lambda b: len(b.table.rows) >= 2 and b.can_sql(), lambda b: b.query()),
    "lookup": (3, lambda b: b.table.rows and b.can_sql(), lambda b: b.lookup()),
    "from_conversation": (2, lambda b: b.said, lambda b: b.from_conversation()),
    "file": (2, lambda b: len(b.filed) < 2, lambda b: b.file()),
    "search": (2, lambda b: b.filed, lambda b: b.search()),
    "documents": (1, lambda b: b.filed, lambda b: b.documents()),
    "similar": (1, lambda b: True, lambda b: b.similar(strangers(b))),
    "note": (2, lambda b: len(b.prefs) < 2 or not b.where_note, lambda b: b.note()),
    "recall": (2, lambda b: b.prefs, lambda b: b.recall()),
    "note_in_message": (1, lambda b: True, lambda b: b.note_in_message()),
    "irrelevant": (1, lambda b: True, lambda b: b.irrelevant()),
    "status": (1, lambda b: True, lambda b: b.status()),
    "small_talk": (1, lambda b: True, lambda b: b.small_talk(closing=b.rng.random() < 0.5)),
    "recall_all": (2, lambda b: b.table.rows and b.filed and b.prefs and b.can_sql(), lambda b: b.recall_all()),
    "recall_both": (2, lambda b: b.table.rows and b.filed and b.can_sql(), lambda b: b.recall_both()),
    "mention": (1, lambda b: not b.pending and len(b.table.rows) < b.d.key.distinct, lambda b: b.mention(b.rng.randint(2, 3))),
    "keep_those": (4, lambda b: b.pending and (not b.table.created or b.can_sql()), lambda b: b.keep_those()),
    "keep_reported": (2, lambda b: b.reported, lambda b: b.keep_reported()),
    "lookup_reported": (2, lambda b: b.known_reports(), lambda b: b.lookup_reported()),
    "recall_reported": (2, lambda b: b.filed and any(t.kind != "found" for t in b.known_reports()),
                        lambda b: b.recall_reported()),
}


def strangers(b: Builder) -> list[str]:
    """Two background passages of other domains, to set beside one of this domain's."""
    picked = b.rng.sample([d for d in DOMAINS if d is not b.d], 2)
    return [Builder(random.Random(b.rng.random()), d).background()[1] for d in picked]


def next_turn(b: Builder, allowed: list[str]) -> TurnPlan:
    """A random block among `allowed` whose preconditions hold (a query that cannot be asked
    unambiguously, a tie for the largest value, is drawn again)."""
    while True:
        ready = [n for n in allowed if BLOCKS[n][1](b)] or ["irrelevant"]
        name = b.rng.choices(ready, [BLOCKS[n][0] for n in ready])[0]
        turn = BLOCKS[name][2](b)
        if turn is not None:
            return turn


FLOWS = {"records": (4, records), "persistence": (2, persistence), "intake": (3, intake), "all_in_one": (3, all_in_one),
         "knowledge": (1, knowledge), "memory": (1, memory), "chat": (2, chat), "recovery": (2, recovery),
         "mixed": (4, mixed), "reported": (2, reported), "decide": (2, decide)}


def add_fault(turn: TurnPlan, name: str, rng: random.Random) -> bool:
    """A retryable failure of the turn's first call, outlasting the loop's own retry, so the
    model sees it and makes the call again."""
    i = next((i for i, s in enumerate(turn.steps) if s.calls), None)
    if i is None or turn.steps[i].fails:
        return False
    step = turn.steps[i]
    tool = step.calls[0][0]
    turn.faults.append(Fault(tool=tool, turn=name, error=rng.choice(ERRORS), times=2, retryable=True))
    turn.steps[i:i + 1] = [Step(list(step.calls), fails=True), step]
    turn.expect.recovered.append(tool)
    return True


def build(index: int, seed: int, schemas: list[dict], domains: tuple = DOMAINS) -> Task:
    rng = random.Random(f"{seed}:{index}")
    domain = rng.choice(domains)
    workflow = rng.choices(list(FLOWS), [w for w, _ in FLOWS.values()])[0]
    if any(f.kind == "list" for f in domain.fields) and rng.random() < 0.5:
        workflow = "decide"           # the few domains with a list field: a constraint on an item of it
    task_id = f"{seed}-{index}"
    b = Builder(rng, domain, runtime_card=card(task_id))
    turns = FLOWS[workflow][1](b)
    fault_rate = 0.5 if workflow == "recovery" else 0.06
    for i, turn in enumerate(turns):
        if rng.random() < fault_rate:
            add_fault(turn, f"t{i}", rng)
    offer = Offer(rng, schemas, set().union(*(t.needs for t in turns)))
    for t in turns:
        t.tools = offer.tools(t.needs)
    return Task(task_id, domain.name, workflow, turns, system_prompt(rng), f"g{seed}x{index}")
