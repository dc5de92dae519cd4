"""The domains the generator's tasks are about (declared in domain_data/*.yaml): what a user keeps
records of, in which fields, with random values, background text worth filing and
preferences worth remembering.

None of them is a domain of the evaluation suites (runtime facts, bugs, lab freezers, a
household budget, travel, books, recipes, experiments, support tickets): the tuned model is
to learn the tools, not the suites' subjects. disjoint.py checks the names.

A Field draws its values: text from a pool (the first field is the record's key and its
values are distinct within a task), a list of a few of a pool's items, whole numbers,
quarter amounts (exact in binary, so a sum in SQLite equals the sum in Python), dates, clock
times, or codes from a pattern ("RX-###": `#` a digit, `@` a capital letter) so that
identifiers are copied, not recalled.
"""
from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from pathlib import Path

import yaml

DOMAINS_DIR = Path(__file__).with_name("domain_data")


@dataclass(frozen=True, slots=True)
class Field:
    name: str                       # the column
    kind: str = "text"              # text | list | int | real | date | time | code
    pool: tuple = ()                # text values; for a code, its patterns
    lo: float = 0
    hi: float = 0
    label: str = ""                 # how a user calls it, a noun phrase: "what {label} does X have"

    @property
    def sql_type(self) -> str:
        return {"int": "INTEGER", "real": "REAL"}.get(self.kind, "TEXT")

    @property
    def words(self) -> str:
        return self.label or self.name.replace("_", " ")

    @property
    def distinct(self) -> int:
        """How many different values a draw can give, near enough."""
        return len(self.pool) if self.kind == "text" else 1000

    def draw(self, rng: random.Random):
        if self.kind == "text":
            return rng.choice(self.pool)
        if self.kind == "list":           # a few of the pool's items, as a user lists them
            return ", ".join(rng.sample(self.pool, rng.randint(2, 3)))
        if self.kind == "int":
            return rng.randint(int(self.lo), int(self.hi))
        if self.kind == "real":
            return rng.randint(int(self.lo * 4), int(self.hi * 4)) / 4
        if self.kind == "time":
            return f"{rng.randint(6, 22):02d}:{rng.randrange(0, 60, 5):02d}"
        if self.kind == "code":
            return "".join(rng.choice("0123456789") if c == "#" else rng.choice("ABCDEFGHJKLMNPRSTUVWXYZ") if c == "@"
                           else c for c in rng.choice(self.pool))
        day = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randint(0, 700))
        return day.isoformat()


@dataclass(frozen=True, slots=True)
class Background:
    """A passage worth filing: its text, a question it answers and the value that shows it did.
    Slots: {k} a value of the domain's subject field, {n} 2-40, {m} 100-9000, {p} 5-60."""
    text: str
    question: str
    key: str


@dataclass(frozen=True, slots=True)
class Domain:
    name: str
    things: str                     # "car services": what the records are, in a user's words
    dbs: tuple                      # database names a model might choose
    tables: tuple
    fields: tuple                   # the first is the key
    say: str                        # one record in a user's words, from its fields
    measure: str                    # the numeric field to add up and compare
    backgrounds: tuple = ()
    prefs: tuple = ()               # things a user prefers, to remember
    topic: str = ""                 # the field whose values background text is about (default: the key)
    opens: tuple = ()               # (field, value, verbs): a request whose verb sets that value ("Log a fault: ...")
    says: str = ""                  # a record as someone's report ("{tenant} says {problem}"), where it reads so

    @property
    def key(self) -> Field:
        return self.fields[0]

    @property
    def subject(self) -> Field:
        return self.field(self.topic) if self.topic else self.key

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def _domain(raw: dict) -> Domain:
    fields = tuple(Field(f["name"], f.get("kind", "text"), tuple(f.get("pool", ())), f.get("lo", 0), f.get("hi", 0),
                         f.get("label", "")) for f in raw["fields"])
    # A value inside `things` (as the checks match, in part of a word too) would show up in
    # "keep those {things}" before it is stored.
    inside = [v for f in fields if f.kind in ("text", "list") for v in f.pool if v.lower() in raw["things"].lower()]
    if inside:
        raise ValueError(f"domain {raw['name']}: values {inside} appear in its `things`")
    backgrounds = tuple(Background(**b) for b in raw.get("backgrounds", ()))
    opens = raw.get("opens")
    opens = (opens["field"], opens["value"], tuple(opens["verbs"])) if opens else ()
    return Domain(raw["name"], raw["things"], tuple(raw["dbs"]), tuple(raw["tables"]), fields, raw["say"],
                  raw["measure"], backgrounds, tuple(raw.get("prefs", ())), raw.get("topic", ""), opens,
                  raw.get("says", ""))


DOMAINS: tuple[Domain, ...] = tuple(_domain(d) for path in sorted(DOMAINS_DIR.glob("*.yaml"))
                                    for d in yaml.safe_load(path.read_text()))
BY_NAME = {d.name: d for d in DOMAINS}
