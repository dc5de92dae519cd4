"""A domain as one task's user words it: some of its fields only, columns sometimes named
after the user's words for them, and records said as a plain list of what was given.

Every task of a domain used to keep every field under the same column names, so the tuned
model learnt those schemas and recalled them: asked to open a ticket about an invoice it made
the training domain's invoices table and invented an amount and a billing day the user never
gave. With the fields and names varied per task, the columns follow what the user said.
"""
from __future__ import annotations

import dataclasses
import random
import re
import sqlite3

from tuning.domains import Domain, Field

DROP = {"in", "of", "the", "a", "per"}
JOINS = (", ", "; ", " -- ")


def variant(rng: random.Random, d: Domain) -> Domain:
    fields = _subset(rng, d) if rng.random() < 0.5 and len(d.fields) > 3 else list(d.fields)
    renamed = {f.name: _column(f) if rng.random() < 0.5 else f.name for f in fields}
    if len(set(renamed.values())) < len(renamed):
        renamed = {f.name: f.name for f in fields}
    fields = [dataclasses.replace(f, name=renamed[f.name], label=f.words) for f in fields]
    if len(fields) < len(d.fields) or rng.random() < 0.3:
        say = plain_say(rng, fields)
    else:
        say = d.say
        for old, new in renamed.items():
            say = say.replace("{%s}" % old, "{%s}" % new)
    opens = (renamed[d.opens[0]], *d.opens[1:]) if d.opens and d.opens[0] in renamed else ()
    says = d.says if all(n in renamed for n in re.findall(r"{(\w+)}", d.says)) else ""
    for old, new in renamed.items():
        says = says.replace("{%s}" % old, "{%s}" % new)
    return dataclasses.replace(d, fields=tuple(fields), say=say, measure=renamed[d.measure],
                               topic=renamed.get(d.topic, "") if d.topic else "", opens=opens, says=says)


def _subset(rng: random.Random, d: Domain) -> list[Field]:
    """The key, the measure (queries add it up) and the subject of the background texts
    stay; one or two of the others go."""
    needed = {d.key.name, d.measure, d.topic or d.key.name}
    optional = [f for f in d.fields if f.name not in needed]
    gone = set(f.name for f in rng.sample(optional, min(len(optional), rng.randint(1, 2))))
    return [f for f in d.fields if f.name not in gone]


def _column(f: Field) -> str:
    """The column a user's word for the field suggests ("weight in kg" -> weight_kg), if it
    is a short plain identifier SQLite takes."""
    words = [w for w in re.findall(r"[a-z0-9]+", f.words.lower()) if w not in DROP]
    name = "_".join(words)
    if not words or len(words) > 3 or words[0] == "how" or name[0].isdigit():
        return f.name
    try:
        sqlite3.connect(":memory:").execute(f"CREATE TABLE t ({name} TEXT)")
    except sqlite3.Error:           # a keyword such as "order"
        return f.name
    return name


def plain_say(rng: random.Random, fields: list[Field]) -> str:
    """The key, then each field by its words ("BUG-311, severity high, 2 reports"); a text
    value sometimes bare, as users give a title or a name."""
    parts = ["{%s}" % fields[0].name]
    for f in fields[1:]:
        slot = "{%s}" % f.name
        parts.append(rng.choice([f"{f.words} {slot}", f"{f.words}: {slot}"] + [slot] * (f.kind == "text")))
    return rng.choice(JOINS).join(parts)
