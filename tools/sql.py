"""The `sql` toolset: statements against the worker's named SQLite databases (POST
/v1/sql/exec and /v1/sql/query). Values travel as bound parameters, never pasted into SQL.
Database names are the model's; the context's namespace maps them to the worker's."""
from __future__ import annotations

import re
from typing import Any

from tools.context import ToolContext, ToolError
from tools.registry import Registry

MAX_ROWS = 50          # rows shown to the model; the rest is counted, not pasted into its context
_SELECT = re.compile(r"^(\s|--[^\n]*\n|/\*.*?\*/)*select\b", re.IGNORECASE | re.DOTALL)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def check_placeholders(sql: str, params: dict | None) -> None:
    """Refuse :name placeholders that `params` does not fill, saying how to fix the call (the
    database's own error names one parameter and a URL). Seen on the 1.5B with params left out
    of the schema: 'VALUES (:service, :version, :day)' and no values, in 5 of 10 runs."""
    missing = [n for n in dict.fromkeys(_PLACEHOLDER.findall(_QUOTED.sub("''", sql))) if n not in (params or {})]
    if missing:
        names = ", ".join(":" + n for n in missing)
        raise ToolError(f"the statement has placeholders ({names}) that no value fills: write the values into "
                        "the statement as literals ('orion', 42), or pass them in params")


def rows_result(result: dict, max_rows: int = MAX_ROWS) -> dict:
    """The worker's SQL result trimmed for a model: columns, rows (as lists), counts."""
    rows = result.get("rows", [])
    out = {"columns": result.get("columns", []), "rows": rows[:max_rows], "row_count": len(rows)}
    if len(rows) > max_rows or result.get("truncated"):
        out["truncated"] = True
    return out


def register(registry: Registry) -> None:
    @registry.tool(toolset="sql")
    def sql_exec(ctx: ToolContext, db: str, sql: str, params: dict[str, Any] | None = None) -> dict:
        """Run one SQL statement that changes data (CREATE TABLE, INSERT, UPDATE, DELETE) in a
        local SQLite database; the database is created on first use and the statement commits.
        Read rows with sql_query.

        Args:
            db: database name (letters, digits, '_' or '-')
            sql: one SQL statement; write :name where a value goes
            params: values for the :name placeholders
        """
        if _SELECT.match(sql):
            # As the MCP reference SQLite server's write_query does: with the read sent to the
            # tool for reading, a caller's log says which calls could have changed data.
            raise ToolError("sql_exec is for statements that change data; run a SELECT with sql_query")
        check_placeholders(sql, params)
        result = ctx.worker("POST", "/v1/sql/exec", json={"db": ctx.scoped(db), "sql": sql, "params": params})
        out = rows_result(result)
        out["rowcount"] = result.get("rowcount")
        if result.get("lastrowid") is not None:
            out["lastrowid"] = result["lastrowid"]
        return out

    @registry.tool(toolset="sql")
    def sql_query(ctx: ToolContext, db: str, sql: str, params: dict[str, Any] | None = None) -> dict:
        """Run one read-only SQL query (SELECT) in a local SQLite database and return its rows.

        Args:
            db: database name
            sql: one SELECT statement; write :name where a value goes
            params: values for the :name placeholders
        """
        check_placeholders(sql, params)
        return rows_result(ctx.worker("POST", "/v1/sql/query", json={"db": ctx.scoped(db), "sql": sql, "params": params}))
