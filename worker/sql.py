"""Named SQL databases over SQLAlchemy, with bound parameters.

A name is a SQLite file `<home>/sql/<name>.db` (created by the first exec), unless the
settings map it to an SQLAlchemy URL (PostgreSQL and others). `query` runs on a read-only
connection, so the database itself refuses writes: SQLite opens the file with
`mode=ro`; PostgreSQL and MySQL start the transaction with SET TRANSACTION READ ONLY.
Results are cut at a row limit and at a byte limit (counted as rows are read, so a result
never grows past it; on SQLite no single value may be larger either, so `zeroblob(1e9)` is
refused before it is built); a statement running past the time limit is interrupted
(SQLite: a progress handler; PostgreSQL: statement_timeout). On SQLite, ATTACH and VACUUM
INTO are denied so a statement cannot write outside the data directory. Database errors
come back as APIError(400) with the database's own message; where SQLite names a table or
column that does not exist, the message also lists what does (as PostgreSQL hints), so a
caller, a small model above all, can mend the statement without a round trip to the schema.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import re
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from httpkit.errors import APIError

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")      # fullmatch: `$` would let "t\n" through
_MISSING_NAME = re.compile(r"^(no such (column|table)|table \S+ has no column named|\d+ values for \d+ columns|"
                           r"table \S+ has \d+ columns but)")
HINT_CHARS = 400
Params = dict[str, Any] | list[dict[str, Any]] | None


def _deny_attach(action, *_):
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def json_size(value: Any) -> int:
    """About how many bytes a jsonable() value takes in the response."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, dict):      # {"base64": ...}
        return len(value["base64"]) + 14
    return 8


def jsonable(value: Any) -> Any:
    """A database value as JSON can carry it: bytes as {"base64": ...}, inf/nan as strings."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.time, dt.datetime)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


class SqlService:
    def __init__(self, sql_dir: Path, urls: dict[str, str], row_limit: int, timeout_s: float,
                 max_result_bytes: int = 8 << 20):
        self.sql_dir, self.urls = Path(sql_dir), dict(urls)
        self.row_limit, self.timeout_s, self.max_result_bytes = row_limit, timeout_s, max_result_bytes
        self._engines: dict[tuple[str, bool], Engine] = {}
        self._lock = threading.Lock()

    def databases(self, tables: bool = False, prefix: str = "") -> list[dict]:
        """The SQLite files and configured URLs whose names start with `prefix`; with `tables`,
        each SQLite database's tables and their columns too (only files named as exec names
        them are opened)."""
        files = sorted(p.stem for p in self.sql_dir.glob("*.db") if p.stem.startswith(prefix)) \
            if self.sql_dir.is_dir() else []

        def readable(db: str) -> dict[str, list[str]] | None:
            if not _NAME.fullmatch(db):
                return None
            try:
                return self.tables(db)
            except sqlite3.Error:          # not a database, or locked: listed without its tables
                return None
        return [{"name": n, "kind": "sqlite", "path": str(self.sql_dir / f"{n}.db"),
                 **({"tables": readable(n)} if tables else {})} for n in files] + \
               [{"name": n, "kind": "url", "dialect": u.split(":", 1)[0]} for n, u in sorted(self.urls.items())
                if n.startswith(prefix)]

    def tables(self, db: str) -> dict[str, list[str]]:
        """Table name -> column names of SQLite database `db`, read-only, leaving out SQLite's
        own tables and a full-text index with its shadow tables; raises sqlite3.Error."""
        uri = (self.sql_dir / f"{db}.db").resolve().as_uri() + "?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=1)) as conn:
            rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
            virtual = [n for n, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL")]
            names = [n for n, _ in rows if not n.startswith("sqlite_") and n not in virtual
                     and not any(n.startswith(v + "_") for v in virtual)]
            return {n: [c[1] for c in conn.execute(f"PRAGMA table_info({_quote(n)})")] for n in names}

    def _engine(self, db: str, readonly: bool) -> Engine:
        if db not in self.urls and not _NAME.fullmatch(db):
            raise APIError(400, f"database name {db!r}: use up to 64 letters, digits, '_' or '-'")
        with self._lock:
            engine = self._engines.get((db, readonly))
            if engine is None:
                engine = self._engines[(db, readonly)] = self._create(db, readonly)
            return engine

    def _create(self, db: str, readonly: bool) -> Engine:
        if db in self.urls:
            return create_engine(self.urls[db], pool_pre_ping=True)
        path = self.sql_dir / f"{db}.db"
        if readonly:
            if not path.is_file():
                known = ", ".join(d["name"] for d in self.databases()[:20]) or "none yet"
                raise APIError(404, f"unknown database {db!r} (an exec creates it; databases: {known})",
                               code="not_found_error")
            engine = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true", connect_args={"timeout": 5})
        else:
            self.sql_dir.mkdir(parents=True, exist_ok=True)
            engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 5})
        event.listen(engine, "connect", self._confine)
        return engine

    def _confine(self, conn: sqlite3.Connection, _record) -> None:
        conn.set_authorizer(_deny_attach)
        # a value can be no larger than a whole result may be (a base64 blob is 4/3 of it)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_result_bytes * 3 // 4)

    def _run(self, conn: Connection, sql: str, params: Params, readonly: bool):
        dialect = conn.dialect.name
        if dialect == "postgresql":
            conn.execute(text(f"SET LOCAL statement_timeout = {int(self.timeout_s * 1000)}"))
        if readonly and dialect in ("postgresql", "mysql", "mariadb"):
            conn.execute(text("SET TRANSACTION READ ONLY"))
        deadline = time.monotonic() + self.timeout_s
        raw = conn.connection.dbapi_connection if dialect == "sqlite" else None
        if raw is not None:   # returning non-zero makes SQLite abort with "interrupted"
            raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            result = conn.execute(text(sql), params if params is not None else {})
            out: dict[str, Any] = {"columns": [], "rows": [], "truncated": False, "truncated_reason": None}
            if result.returns_rows:
                out["columns"] = list(result.keys())
                out["rows"], out["truncated_reason"] = self._read_rows(result)
                out["truncated"] = out["truncated_reason"] is not None
            out["rowcount"] = result.rowcount if result.rowcount is not None and result.rowcount >= 0 else None
            out["lastrowid"] = getattr(result, "lastrowid", None) if not readonly else None
            return out
        finally:
            if raw is not None:
                raw.set_progress_handler(None, 0)

    def _read_rows(self, result) -> tuple[list[list[Any]], str | None]:
        """Rows until the row or byte limit, and which limit cut them (None: all came)."""
        rows, size = [], 0
        for row in result:
            if len(rows) == self.row_limit:
                return rows, f"more than {self.row_limit} rows"
            values = [jsonable(v) for v in row]
            size += sum(map(json_size, values))
            if size > self.max_result_bytes:
                return rows, f"over {self.max_result_bytes} bytes"
            rows.append(values)
        return rows, None

    def _call(self, db: str, sql: str, params: Params, readonly: bool) -> dict:
        if not sql.strip():
            raise APIError(400, "the SQL statement is empty")
        if readonly and isinstance(params, list):
            raise APIError(400, "query takes one parameter set (a list is for exec)")
        if params == []:
            raise APIError(400, "params is an empty list: give one set per run, or none")
        engine = self._engine(db, readonly)
        try:
            with engine.begin() as conn:
                return {"db": db, **self._run(conn, sql, params, readonly)}
        except SQLAlchemyError as e:
            orig = getattr(e, "orig", None)
            message = str(orig) if orig is not None else str(e).split("\n")[0]
            if "interrupted" in message:
                message = f"interrupted: the statement ran past the {self.timeout_s:g} s limit"
            elif "too big" in message:
                message += f" (a value may hold at most {self.max_result_bytes * 3 // 4} bytes)"
            elif _MISSING_NAME.match(message) and db not in self.urls:
                message += f" ({self.schema_hint(db)})"
            raise APIError(400, f"{db}: {message}", code="database_error") from e
        except (OverflowError, ValueError, TypeError) as e:   # parameters sqlite cannot bind
            raise APIError(400, f"{db}: bad parameter ({e})", code="database_error") from e

    def schema_hint(self, db: str) -> str:
        """The tables of SQLite database `db` with their columns, in a few hundred characters."""
        try:
            tables = [f"{n}({', '.join(cols)})" for n, cols in self.tables(db).items()]
        except sqlite3.Error:
            return "its tables could not be read"
        if not tables:
            return f"database {db} has no tables yet"
        hint = f"database {db} has: " + "; ".join(tables)
        return hint if len(hint) <= HINT_CHARS else hint[:HINT_CHARS - 3] + "..."

    def execute(self, db: str, sql: str, params: Params = None) -> dict:
        return self._call(db, sql, params, readonly=False)

    def query(self, db: str, sql: str, params: dict[str, Any] | None = None) -> dict:
        return self._call(db, sql, params, readonly=True)

    def close(self) -> None:
        with self._lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
