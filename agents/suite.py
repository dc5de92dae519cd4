"""Conversation suites: multi-turn scenarios with per-turn checks, declared in YAML.

    name: budget
    description: ...
    agent: {max_steps: 8, temperature: 0.3}    # AgentConfig fields (optional)
    tools: [sql, rag, memory]                  # toolsets or tool names offered (default: all)
    faults:                                    # tool failures injected by the runner
      - {tool: sql_exec, turn: log, times: 2, error: "database is locked", retryable: true}
    reset:                                     # before each seed, after its namespace is emptied
      sql: [{db: facts, sql: "CREATE TABLE ..."}]   # (easy variants only: natural suites create nothing)
      tools: [{name: memory_add, arguments: {text: "..."}}]
    turns:
      - name: log
        user: "I spent 84.50 on groceries today, keep track of it for me."
        tools: [sql]                           # this turn's own offer (default: the suite's)
        new_session: false                     # true: earlier turns leave the context
        expect:
          called: [sql_exec]                   # tools that must have run and succeeded
          called_any: [[memory_search, memory_read]]   # each group: one of them did
          not_called: [rag_ingest]             # tools that must not have been called at all
          recovered: [sql_exec]                # failed in this turn, and its last call succeeded
          answer_contains: ["84.5"]            # facts (from the user, a store or the runtime)
          answer_contains_any: [[database, sql]]   # each group: one of them
          answer_excludes: ["I cannot"]
          sql: [{contains: [groceries, "84.5"], min_rows: 1},   # any table of any database
                {contains: [groceries, "94.5"], same_row: true, absent: [groceries, "84.5"]}]
          rag: [{query: "...", contains: [...], k: 3}]         # any collection, any source
          memory: [{contains: [...], contains_any: [[...]]}]   # a note saved during this seed
          tool: [{name: rag_documents, arguments: {}, contains: [...]}]
        gold:                                  # calls a correct agent could make (never shown)
          - {name: sql_exec, arguments: {db: budget, sql: "CREATE TABLE ..."}}
        gold_answer: "..."                     # optional; else the gold results as text

Every seed runs in a namespace of its own ("s3"): the tools store the database the model
calls `budget` as `s3__budget`, and the checks read through the same namespace. So a check
need not know which names the model chose: `sql` without `db` scans every table of the
seed's databases (the memory tool's own excepted) for rows holding the values; with `db`
and no `query`, every table of that database; with both, the query's rows. `rag` without
`collection` or `source` searches every collection of the seed.

Text in `user`, `gold`, `reset` and every expectation may name facts of the live runtime,
filled in at run time: {runtime.model}, {runtime.backend}, {runtime.context_length},
{runtime.revision}; and {run}, the seed's name ("s3").
`load` takes a suite name (a file in agents/suites/) or a path to a YAML file, and refuses
unknown keys, so a typo in a check cannot silently turn it off.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

SUITES_DIR = Path(__file__).parent / "suites"


@dataclass(slots=True)
class SqlExpect:
    contains: list[str] = field(default_factory=list)
    min_rows: int = 1
    db: str | None = None
    query: str | None = None
    same_row: bool = False          # every value in one row (else: one table holds them all)
    absent: list[str] = field(default_factory=list)   # and no row holds all of these (a value replaced)


@dataclass(slots=True)
class RagExpect:
    query: str
    contains: list[str] = field(default_factory=list)
    source: str | None = None
    k: int = 3
    collection: str | None = None   # None: every collection of the seed


@dataclass(slots=True)
class ToolExpect:
    name: str
    arguments: dict = field(default_factory=dict)
    contains: list[str] = field(default_factory=list)


@dataclass(slots=True)
class MemoryExpect:
    contains: list[str] = field(default_factory=list)
    contains_any: list[list[str]] = field(default_factory=list)


@dataclass(slots=True)
class Expect:
    called: list[str] = field(default_factory=list)
    called_any: list[list[str]] = field(default_factory=list)    # each group: one of them succeeded
    not_called: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    answer_contains: list[str] = field(default_factory=list)
    answer_contains_any: list[list[str]] = field(default_factory=list)
    answer_excludes: list[str] = field(default_factory=list)
    sql: list[SqlExpect] = field(default_factory=list)
    rag: list[RagExpect] = field(default_factory=list)
    tool: list[ToolExpect] = field(default_factory=list)
    memory: list[MemoryExpect] = field(default_factory=list)


@dataclass(slots=True)
class GoldCall:
    name: str
    arguments: dict = field(default_factory=dict)


@dataclass(slots=True)
class TurnSpec:
    name: str
    user: str
    tools: list[str] | None = None
    new_session: bool = False
    expect: Expect = field(default_factory=Expect)
    gold: list[GoldCall] = field(default_factory=list)
    gold_answer: str | None = None


@dataclass(slots=True)
class Fault:
    tool: str
    turn: str
    error: str
    times: int = 1                  # calls of `tool` in `turn` that fail (the loop's own retries count)
    retryable: bool = True


@dataclass(slots=True)
class Reset:
    sql: list[dict] = field(default_factory=list)          # {db, sql}
    rag_sources: list[str] = field(default_factory=list)
    collection: str = "default"
    tools: list[dict] = field(default_factory=list)        # {name, arguments}


@dataclass(slots=True)
class Suite:
    name: str
    turns: list[TurnSpec]
    description: str = ""
    agent: dict = field(default_factory=dict)
    tools: list[str] | None = None  # offered in every turn that names none; None: every tool
    faults: list[Fault] = field(default_factory=list)
    reset: Reset = field(default_factory=Reset)
    path: Path | None = None


def _build(cls, data, where: str):
    """`cls(**data)` with a clear error for a non-mapping or an unknown key."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    try:
        return cls(**data)
    except TypeError as e:                 # a required key is missing
        raise ValueError(f"{where}: {e}") from e


def _list_of(cls, items, where: str) -> list:
    if not isinstance(items, list):
        raise ValueError(f"{where}: expected a list")
    return [_build(cls, item, f"{where}[{i}]") for i, item in enumerate(items)]


def _turn(raw, where: str) -> TurnSpec:
    turn = _build(TurnSpec, raw, where)
    e = _build(Expect, raw.get("expect") or {}, f"{where}.expect")
    e.sql = _list_of(SqlExpect, e.sql, f"{where}.expect.sql")
    if any(s.query and not s.db for s in e.sql):
        raise ValueError(f"{where}.expect.sql: a query needs the db it runs in")
    e.rag = _list_of(RagExpect, e.rag, f"{where}.expect.rag")
    e.tool = _list_of(ToolExpect, e.tool, f"{where}.expect.tool")
    e.memory = _list_of(MemoryExpect, e.memory, f"{where}.expect.memory")
    turn.expect = e
    turn.gold = _list_of(GoldCall, turn.gold, f"{where}.gold")
    return turn


def parse(data: dict, path: Path | None = None) -> Suite:
    where = str(path or "suite")
    suite = _build(Suite, {**data, "path": path}, where)
    suite.reset = _build(Reset, data.get("reset") or {}, f"{where}: reset")
    if not isinstance(data.get("turns"), list):
        raise ValueError(f"{where}: turns must be a list")
    suite.turns = [_turn(raw, f"{where}: turns[{i}]") for i, raw in enumerate(data["turns"])]
    if not suite.turns:
        raise ValueError(f"{where}: a suite needs at least one turn")
    names = [t.name for t in suite.turns]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: turn names must be unique, got {names}")
    suite.faults = _list_of(Fault, suite.faults, f"{where}: faults")
    stray = [f.turn for f in suite.faults if f.turn not in names]
    if stray or any(f.times < 1 for f in suite.faults):
        raise ValueError(f"{where}: faults need a turn of this suite ({stray} are not) and times >= 1")
    return suite


def resolve(name_or_path: str) -> Path:
    """A suite file: an existing path as given, else agents/suites/<name>.yaml."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"no suite file {path}")
        return path
    path = SUITES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ValueError(f"no suite named {name_or_path!r}; known: {', '.join(names())} (or give a path)")
    return path


def names() -> list[str]:
    """The suites of the library (agents/suites/*.yaml)."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def load(name_or_path: str) -> Suite:
    path = resolve(name_or_path)
    data = yaml.safe_load(path.read_text())
    return parse(data, path)
