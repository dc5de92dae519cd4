"""SQL routes on PostgreSQL given by URL: the read-only refusal and the time limit are the
database's own there too. Runs where Debian's PostgreSQL 15 binaries, a `postgres` user
and psycopg are present (a throwaway cluster in tmp_path); skipped elsewhere."""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

BIN = Path("/usr/lib/postgresql/15/bin")


def _usable() -> bool:
    try:
        import psycopg  # noqa: F401
        pwd.getpwnam("postgres")
    except (ImportError, KeyError):
        return False
    return (BIN / "initdb").is_file() and shutil.which("runuser") is not None


@pytest.fixture
def postgres_url():
    if not _usable():
        pytest.skip("no PostgreSQL 15 server binaries, postgres user or psycopg here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="samevm-pg-"))   # pytest's tmp_path is closed to other users
    os.chown(folder, pwd.getpwnam("postgres").pw_uid, -1)
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = folder / "data"
    subprocess.run([*as_postgres, str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "samevm"],
                   check=True, capture_output=True)
    subprocess.run([*as_postgres, str(BIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(folder / "log"),
                    "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://samevm@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_postgres, str(BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True)
        shutil.rmtree(folder)


def test_postgres_by_url(make_client, postgres_url):
    client = make_client(databases={"pg": postgres_url}, sql_timeout_s=1.0)

    def call(route, sql, params=None):
        return client.post(f"/v1/sql/{route}", json={"db": "pg", "sql": sql, "params": params})
    assert call("exec", "CREATE TABLE facts (k text PRIMARY KEY, v int)").status_code == 200
    assert call("exec", "INSERT INTO facts VALUES (:k, :v)", [{"k": "a", "v": 1}, {"k": "b", "v": 2}]).json()["rowcount"] == 2
    assert call("query", "SELECT k, v FROM facts WHERE v > :v", {"v": 1}).json()["rows"] == [["b", 2]]
    r = call("query", "INSERT INTO facts VALUES ('c', 3)")
    assert r.status_code == 400 and "read-only transaction" in r.json()["error"]["message"]
    r = call("query", "SELECT pg_sleep(5)")
    assert r.status_code == 400 and "statement timeout" in r.json()["error"]["message"]
    assert call("query", "SELECT count(*) FROM facts").json()["rows"] == [[2]]
