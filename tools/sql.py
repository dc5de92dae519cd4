"""The `sql` toolset: statements against the worker's named SQLite databases (POST
/v1/sql/exec and /v1/sql/query). A tool takes a database and one statement with its values
as SQL literals: given an optional `params` object, small models filled it with values
borrowed from elsewhere in their context. (Clients that bind parameters use the worker's
HTTP API, which takes `params`.) Database names are the model's; the context's namespace
maps them to the worker's."""
from __future__ import annotations

import re
from functools import partial
from typing import Callable

from tools.context import NAMESPACE_SEP, ToolContext, ToolError
from tools.memory import DB as MEMORY_DB
from tools.registry import Registry

MAX_ROWS = 50          # rows shown to the model; the rest is counted, not pasted into its context
_SELECT = re.compile(r"^(\s|--[^\n]*\n|/\*.*?\*/)*select\b", re.IGNORECASE | re.DOTALL)
_CHANGES = re.compile(r"^(\s|--[^\n]*\n|/\*.*?\*/)*(update|delete)\b", re.IGNORECASE | re.DOTALL)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def check_placeholders(sql: str) -> None:
    """Refuse :name placeholders, saying how to fix the call (the database's own error names
    one parameter and a URL): the values belong in the statement as literals."""
    found = list(dict.fromkeys(_PLACEHOLDER.findall(_QUOTED.sub("''", sql))))
    if found:
        names = ", ".join(":" + n for n in found)
        raise ToolError(f"the statement has placeholders ({names}) that no value fills: write the values into "
                        "the statement as SQL literals ('orion', 42)")


def rows_result(result: dict, max_rows: int = MAX_ROWS) -> dict:
    """The worker's SQL result trimmed for a model: columns, rows (as lists), counts."""
    rows = result.get("rows", [])
    out = {"columns": result.get("columns", []), "rows": rows[:max_rows], "row_count": len(rows)}
    if len(rows) > max_rows or result.get("truncated"):
        out["truncated"] = True
    return out


def kept_tables(ctx: ToolContext, max_chars: int = 600) -> str:
    """The SQLite tables of the context's namespace with their columns, named as the model
    names them ("budget: spending(item, price, date)"), whole tables up to `max_chars` and then
    how many were left off; "" when none, or when the worker cannot say (the list is an aid: a
    turn goes on without it). The memory tool's own database is not the user's tables."""
    try:
        databases = ctx.worker("GET", "/v1/sql/databases", params={"tables": "true", "prefix": ctx.prefix})["databases"]
    except ToolError:
        return ""
    tables = [f"{ctx.unscoped(d['name'])}: {t}({', '.join(cols)})" for d in databases
              if d.get("tables") and d["name"] != ctx.scoped(MEMORY_DB) and (ctx.prefix or NAMESPACE_SEP not in d["name"])
              for t, cols in d["tables"].items()]
    text = ""
    for n, table in enumerate(tables):
        more = f" (and {len(tables) - n} more tables)"
        if len(text) + len(table) + 2 + (len(more) if n + 1 < len(tables) else 0) > max_chars:
            return text + more
        text += ("; " if text else "") + table
    return text


def table_lister(tools) -> Callable[[], str] | None:
    """What lists the SQLite tables a registry's context keeps (the agent's tables_in_prompt)."""
    ctx = getattr(tools, "context", None)
    return None if ctx is None else partial(kept_tables, ctx)


def register(registry: Registry) -> None:
    @registry.tool(toolset="sql")
    def sql_exec(ctx: ToolContext, db: str, sql: str) -> dict:
        """Keep exact facts and records (names, numbers, dates, amounts) in a table of a local
        SQLite database: run one statement that changes data (CREATE TABLE IF NOT EXISTS first,
        then INSERT; UPDATE, DELETE). The database is created on first use and the statement
        commits. Read rows back with sql_query.

        Args:
            db: database name (letters, digits, '_' or '-')
            sql: one SQL statement, with its values written in it as SQL literals
        """
        if _SELECT.match(sql):
            # As the MCP reference SQLite server's write_query does: with the read sent to the
            # tool for reading, a caller's log says which calls could have changed data.
            raise ToolError("sql_exec is for statements that change data; run a SELECT with sql_query")
        check_placeholders(sql)
        result = ctx.worker("POST", "/v1/sql/exec", json={"db": ctx.scoped(db), "sql": sql})
        out = rows_result(result)
        out["rowcount"] = result.get("rowcount")
        if result.get("lastrowid") is not None:
            out["lastrowid"] = result["lastrowid"]
        if out["rowcount"] == 0 and _CHANGES.match(sql):
            # said in words: small models read "rowcount": 0 as done and reported the change
            out["note"] = "no row matched: nothing was changed"
        return out

    @registry.tool(toolset="sql")
    def sql_query(ctx: ToolContext, db: str, sql: str) -> dict:
        """Look up exact facts and records kept in a local SQLite database: run one read-only
        query (SELECT) and return its rows.

        Args:
            db: database name
            sql: one SELECT statement
        """
        check_placeholders(sql)
        out = rows_result(ctx.worker("POST", "/v1/sql/query", json={"db": ctx.scoped(db), "sql": sql}))
        if not out["row_count"]:
            # said in words: small models answered from an empty result with values from elsewhere
            out["note"] = "no row matched: the database has nothing that answers this query"
        return out
