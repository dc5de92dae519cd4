"""A task's table as the generator knows it: the names the gold calls use, the rows that
should be stored, and the SQL statements that put them there (values as literals, as the
sql tools require)."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from tuning.domains import Domain


def fmt(value) -> str:
    """A value as a user writes it and as it reads in a result: 84.5, 30, 2026-03-14."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return fmt(value)


def row_text(row: dict) -> str:
    """A row as the checks read it (JSON of its values)."""
    return json.dumps(list(row.values()), ensure_ascii=False)


@dataclass(slots=True)
class Table:
    domain: Domain
    db: str
    name: str
    id_column: bool                         # an INTEGER PRIMARY KEY first, so INSERTs name their columns
    rows: list[dict] = field(default_factory=list)
    created: bool = False

    @classmethod
    def choose(cls, rng: random.Random, domain: Domain) -> "Table":
        return cls(domain, rng.choice(domain.dbs), rng.choice(domain.tables), rng.random() < 0.3)

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.domain.fields]

    def new_record(self, rng: random.Random) -> dict:
        """A record whose key no row has yet (while the pool lasts)."""
        key = self.domain.key
        taken = {r[key.name] for r in self.rows}
        record = {f.name: f.draw(rng) for f in self.domain.fields}
        if key.kind == "text":
            free = [v for v in key.pool if v not in taken]
            record[key.name] = rng.choice(free or key.pool)
        for _ in range(100):        # codes, numbers and dates are drawn again until new
            if record[key.name] not in taken:
                break
            record[key.name] = key.draw(rng)
        return record

    def said(self, record: dict) -> str:
        return self.domain.say.format(**{k: fmt(v) for k, v in record.items()})

    def create(self) -> str:
        cols = ", ".join(f"{f.name} {f.sql_type}" for f in self.domain.fields)
        if self.id_column:
            cols = "id INTEGER PRIMARY KEY, " + cols
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({cols})"

    def insert(self, records: list[dict], named: bool = True) -> str:
        values = ", ".join("(" + ", ".join(literal(r[c]) for c in self.columns) + ")" for r in records)
        cols = f" ({', '.join(self.columns)})" if named or self.id_column else ""
        return f"INSERT INTO {self.name}{cols} VALUES {values}"

    def where(self, key) -> str:
        return f"{self.domain.key.name} = {literal(key)}"

    def has_row_with(self, *values) -> bool:
        """Whether a row's text holds all of `values` (as the sql check would see them)."""
        return any(all(fmt(v).lower() in row_text(r).lower() for v in values) for r in self.rows)
