"""Conversation suites: multi-turn scenarios with per-turn checks, declared in YAML.

    name: canonical
    agent: {max_steps: 8, temperature: 0.3}    # AgentConfig fields (optional)
    hide_parameters: [rag_ingest.paths]        # optional parameters the model is not shown
    require_parameters: [rag_ingest.source]    # optional ones its schema makes required
    reset:                                     # before each seed, not by the model
      sql: [{db: "suite_{run}", sql: "DROP TABLE IF EXISTS facts"}]
      rag_sources: ["qwen-background-{run}"]   # documents deleted from `collection`
      tools: [{name: memory_clear, arguments: {}}]
    turns:
      - name: discover
        user: "Which model serves you? ..."
        tools: [runtime]                       # toolsets or tool names offered (default: all)
        new_session: false                     # true: earlier turns leave the context
        expect:
          called: [runtime_status]             # tools that must have run and succeeded
          not_called: []
          answer_contains: ["{runtime.context_length}"]
          answer_contains_any: [[database, sql]]   # each group: one of them
          answer_excludes: ["I cannot"]
          sql: [{db: suite, query: "SELECT value FROM facts", min_rows: 3, contains: [...]}]
          rag: [{query: "...", source: qwen-background, contains: [...], k: 3}]
          tool: [{name: rag_documents, arguments: {}, contains: [qwen-background]}]
          memory: [{contains: [facts]}]        # a note saved during this seed says so

Text in `user`, `reset` and every expectation may name facts of the live runtime, filled in
at run time: {runtime.model}, {runtime.backend}, {runtime.context_length},
{runtime.revision}; and {run}, the seed's name ("s3"), to keep what parallel seeds store
apart (a database suite_{run}, a source notes-{run}).
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
    db: str
    query: str
    min_rows: int = 1
    contains: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RagExpect:
    query: str
    contains: list[str] = field(default_factory=list)
    source: str | None = None
    k: int = 3
    collection: str = "default"


@dataclass(slots=True)
class ToolExpect:
    name: str
    arguments: dict = field(default_factory=dict)
    contains: list[str] = field(default_factory=list)


@dataclass(slots=True)
class MemoryExpect:
    contains: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Expect:
    called: list[str] = field(default_factory=list)
    not_called: list[str] = field(default_factory=list)
    answer_contains: list[str] = field(default_factory=list)
    answer_contains_any: list[list[str]] = field(default_factory=list)
    answer_excludes: list[str] = field(default_factory=list)
    sql: list[SqlExpect] = field(default_factory=list)
    rag: list[RagExpect] = field(default_factory=list)
    tool: list[ToolExpect] = field(default_factory=list)
    memory: list[MemoryExpect] = field(default_factory=list)


@dataclass(slots=True)
class TurnSpec:
    name: str
    user: str
    tools: list[str] | None = None
    new_session: bool = False
    expect: Expect = field(default_factory=Expect)


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
    hide_parameters: list[str] = field(default_factory=list)     # "tool.parameter"
    require_parameters: list[str] = field(default_factory=list)  # "tool.parameter"
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


def parse(data: dict, path: Path | None = None) -> Suite:
    where = str(path or "suite")
    suite = _build(Suite, {**data, "path": path}, where)
    suite.reset = _build(Reset, data.get("reset") or {}, f"{where}: reset")
    if not isinstance(data.get("turns"), list):
        raise ValueError(f"{where}: turns must be a list")
    turns = []
    for i, raw in enumerate(data["turns"]):
        turn = _build(TurnSpec, raw, f"{where}: turns[{i}]")
        e = _build(Expect, raw.get("expect") or {}, f"{where}: turns[{i}].expect")
        e.sql = _list_of(SqlExpect, e.sql, f"{where}: turns[{i}].expect.sql")
        e.rag = _list_of(RagExpect, e.rag, f"{where}: turns[{i}].expect.rag")
        e.tool = _list_of(ToolExpect, e.tool, f"{where}: turns[{i}].expect.tool")
        e.memory = _list_of(MemoryExpect, e.memory, f"{where}: turns[{i}].expect.memory")
        turn.expect = e
        turns.append(turn)
    if not turns:
        raise ValueError(f"{where}: a suite needs at least one turn")
    bad = [h for h in suite.hide_parameters + suite.require_parameters if h.count(".") != 1]
    if bad:
        raise ValueError(f"{where}: hide_ and require_parameters take tool.parameter names, not {bad}")
    suite.turns = turns
    names = [t.name for t in turns]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: turn names must be unique, got {names}")
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
        known = sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))
        raise ValueError(f"no suite named {name_or_path!r}; known: {', '.join(known)} (or give a path)")
    return path


def load(name_or_path: str) -> Suite:
    path = resolve(name_or_path)
    data = yaml.safe_load(path.read_text())
    return parse(data, path)
