"""SQL over named databases: exec (read-write), query (read-only, row- and time-limited)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from worker.deps import SqlDep

router = APIRouter()

Scalar = str | int | float | bool | None


class ExecRequest(BaseModel):
    db: str = Field(min_length=1, max_length=64, description="database name")
    sql: str = Field(min_length=1, max_length=200_000, description="one statement; :name binds")
    params: dict[str, Scalar] | list[dict[str, Scalar]] | None = Field(
        None, description="bound parameters; a list runs the statement once per item")


class QueryRequest(BaseModel):
    db: str = Field(min_length=1, max_length=64)
    sql: str = Field(min_length=1, max_length=200_000)
    params: dict[str, Scalar] | None = None


class SqlResult(BaseModel):
    db: str
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(description="true when rows stopped at the row limit or the byte limit")
    truncated_reason: str | None = Field(None, description="which limit cut the rows")
    rowcount: int | None = None
    lastrowid: int | None = None


@router.post("/exec", response_model=SqlResult)
def exec_statement(req: ExecRequest, sql: SqlDep):
    """Run one statement that may write; it commits when it succeeds."""
    return sql.execute(req.db, req.sql, req.params)


@router.post("/query", response_model=SqlResult)
def query(req: QueryRequest, sql: SqlDep):
    """Run one read-only statement; the database refuses writes."""
    return sql.query(req.db, req.sql, req.params)


@router.get("/databases")
def databases(sql: SqlDep, tables: bool = False, prefix: str = "") -> dict:
    """The databases that exist or are configured, those whose names start with `prefix`;
    `?tables=true` adds each SQLite database's tables and their columns."""
    return {"databases": sql.databases(tables, prefix)}
