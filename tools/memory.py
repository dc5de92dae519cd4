"""The `memory` toolset: persistent notes an agent keeps across sessions, stored in the
worker's SQLite database `memory` (table `notes`, full-text indexed by an FTS5 table kept
in step by a trigger, words matched by their stems; under a namespace, `s3__memory`).
Everything goes through the worker's SQL API; the schema is created on the first write.

A search whose words no note holds also returns the most recent notes (under `recent`,
`notes` stays empty): an agent in a new session searches with its own words ("cooking")
for a note written in the user's ("recipes"), and a small model then answered from nothing
or guessed where things were instead of reading its notes."""
from __future__ import annotations

import re

from tools.context import ToolContext, ToolError
from tools.registry import Registry

DB = "memory"
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL, "
    "tags TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL DEFAULT (datetime('now')))",
    "CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(text, tags, content='notes', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS notes_ai AFTER INSERT ON notes BEGIN "
    "INSERT INTO notes_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags); END",
]
COLUMNS = "n.id, n.text, n.tags, n.created_at"


def _missing(e: ToolError) -> bool:
    """True when the error says the memory database or its table does not exist yet."""
    return "no such table" in str(e) or "unknown database" in str(e)


def _notes(result: dict) -> list[dict]:
    return [{"id": r[0], "text": r[1], "tags": [t for t in r[2].split(",") if t], "created_at": r[3]}
            for r in result["rows"]]


def _fts_query(text: str) -> str:
    """An FTS5 query matching any word of `text` (each quoted, so punctuation is literal)."""
    words = re.findall(r"\w+", text)
    if not words:
        raise ToolError("the search needs at least one word")
    return " OR ".join(f'"{w}"' for w in words)


def _select(ctx: ToolContext, sql: str, params: dict) -> list[dict]:
    try:
        return _notes(ctx.worker("POST", "/v1/sql/query", json={"db": ctx.scoped(DB), "sql": sql, "params": params}))
    except ToolError as e:
        if _missing(e):
            return []                # nothing was ever saved
        raise


def register(registry: Registry) -> None:
    @registry.tool(toolset="memory")
    def memory_add(ctx: ToolContext, text: str, tags: list[str] | None = None) -> dict:
        """Save a short note to yourself in long-term memory, to recall in later conversations
        (where you kept something, what the user prefers).

        Args:
            text: the note, written so it makes sense on its own later
            tags: a few keywords to find it by
        """
        if not text.strip():
            raise ToolError("the note is empty")
        params = {"text": text.strip(), "tags": ",".join(t.strip() for t in tags or [] if t.strip())}
        insert = {"db": ctx.scoped(DB), "sql": "INSERT INTO notes (text, tags) VALUES (:text, :tags)", "params": params}
        try:
            result = ctx.worker("POST", "/v1/sql/exec", json=insert)
        except ToolError as e:
            if not _missing(e):
                raise
            for statement in SCHEMA:
                ctx.worker("POST", "/v1/sql/exec", json={"db": ctx.scoped(DB), "sql": statement})
            result = ctx.worker("POST", "/v1/sql/exec", json=insert)
        return {"id": result["lastrowid"], "saved": params["text"]}

    @registry.tool(toolset="memory")
    def memory_read(ctx: ToolContext, limit: int = 10, note_id: int | None = None) -> dict:
        """Read saved notes: the most recent ones, or one note by its id.

        Args:
            limit: how many recent notes to return
            note_id: the id of one note to read
        """
        if note_id is not None:
            notes = _select(ctx, f"SELECT {COLUMNS} FROM notes n WHERE n.id = :id", {"id": note_id})
            if not notes:
                raise ToolError(f"no note with id {note_id}")
            return {"notes": notes}
        return {"notes": _select(ctx, f"SELECT {COLUMNS} FROM notes n ORDER BY n.id DESC LIMIT :limit",
                                 {"limit": max(1, min(limit, 100))})}

    @registry.tool(toolset="memory")
    def memory_search(ctx: ToolContext, query: str, limit: int = 5) -> dict:
        """Find saved notes that mention any of the query's words, best match first.

        Args:
            query: words to look for
            limit: how many notes to return
        """
        limit = max(1, min(limit, 50))
        sql = (f"SELECT {COLUMNS} FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid "
               "WHERE notes_fts MATCH :q ORDER BY bm25(notes_fts) LIMIT :limit")
        notes = _select(ctx, sql, {"q": _fts_query(query), "limit": limit})
        if notes:
            return {"notes": notes}
        recent = _select(ctx, f"SELECT {COLUMNS} FROM notes n ORDER BY n.id DESC LIMIT :limit", {"limit": limit})
        if not recent:
            return {"notes": [], "note": "memory holds no notes yet"}
        return {"notes": [], "recent": recent,
                "note": f"no note mentions {query!r}; the {len(recent)} most recent notes are under recent"}
