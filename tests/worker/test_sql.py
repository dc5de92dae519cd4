"""SQL routes against a real SQLite file under the data directory."""
from __future__ import annotations

import sqlite3


def exec_(client, sql, params=None, db="notes"):
    return client.post("/v1/sql/exec", json={"db": db, "sql": sql, "params": params})


def query(client, sql, params=None, db="notes"):
    return client.post("/v1/sql/query", json={"db": db, "sql": sql, "params": params})


def test_exec_then_query_with_bound_parameters(client, tmp_path):
    assert exec_(client, "CREATE TABLE facts (k TEXT PRIMARY KEY, v REAL)").status_code == 200
    r = exec_(client, "INSERT INTO facts VALUES (:k, :v)", [{"k": "pi", "v": 3.14}, {"k": "e", "v": 2.72}])
    assert r.status_code == 200, r.text
    assert r.json()["rowcount"] == 2
    # a value that would break string-built SQL is just a value when bound
    exec_(client, "INSERT INTO facts VALUES (:k, :v)", {"k": "x'); DROP TABLE facts; --", "v": 1})
    r = query(client, "SELECT k, v FROM facts WHERE v > :min ORDER BY v", {"min": 2.0})
    assert r.status_code == 200, r.text
    assert r.json()["columns"] == ["k", "v"] and r.json()["rows"] == [["e", 2.72], ["pi", 3.14]]
    # an independent reader sees the same rows in the real file under the data directory
    path = tmp_path / "home" / "sql" / "notes.db"
    rows = sqlite3.connect(path).execute("SELECT count(*) FROM facts").fetchone()
    assert rows == (3,)
    assert client.get("/v1/sql/databases").json()["databases"][0]["name"] == "notes"


def test_query_is_read_only_by_the_database(client):
    exec_(client, "CREATE TABLE t (x INTEGER)")
    for sql in ("INSERT INTO t VALUES (1)", "DELETE FROM t", "DROP TABLE t", "CREATE TABLE u (y)",
                "/* looks harmless */ insert into t values (2)"):
        r = query(client, sql)
        assert r.status_code == 400, (sql, r.text)
        assert "readonly" in r.json()["error"]["message"], r.text
    assert query(client, "SELECT count(*) FROM t").json()["rows"] == [[0]]


def test_attach_and_vacuum_into_cannot_write_outside(client, tmp_path):
    exec_(client, "CREATE TABLE t (x)")
    outside = tmp_path / "outside.db"
    for sql in (f"ATTACH DATABASE '{outside}' AS o", f"VACUUM INTO '{outside}'"):
        for call in (exec_, query):
            assert call(client, sql).status_code == 400
    assert not outside.exists()


def test_errors_are_structured_400s_with_the_database_message(client):
    r = query(client, "SELECT 1")
    assert r.status_code == 404 and "unknown database" in r.json()["error"]["message"]
    r = exec_(client, "SELEC nonsense")
    assert r.status_code == 400 and 'near "SELEC"' in r.json()["error"]["message"]
    r = query(client, "SELECT * FROM missing_table")
    assert r.status_code == 400 and "no such table" in r.json()["error"]["message"]
    assert exec_(client, "SELECT 1", db="../escape").status_code == 400
    r = exec_(client, "SELECT :a")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_row_and_time_limits(make_client):
    client = make_client(sql_row_limit=5, sql_timeout_s=0.5)
    exec_(client, "CREATE TABLE n (i INTEGER)")
    exec_(client, "INSERT INTO n VALUES (:i)", [{"i": i} for i in range(20)])
    r = query(client, "SELECT i FROM n")
    assert len(r.json()["rows"]) == 5 and r.json()["truncated"] is True
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    r = query(client, endless)
    assert r.status_code == 400 and "interrupted" in r.json()["error"]["message"]


def test_values_json_cannot_carry_come_back_encoded(client):
    r = exec_(client, "SELECT x'00ff' AS b, 1e999 AS inf, NULL AS n")
    assert r.json()["rows"] == [[{"base64": "AP8="}, "inf", None]]


def test_a_database_given_by_url(make_client, tmp_path):
    client = make_client(databases={"shared": f"sqlite:///{tmp_path / 'elsewhere.db'}"})
    assert exec_(client, "CREATE TABLE t (x)", db="shared").status_code == 200
    assert exec_(client, "INSERT INTO t VALUES (7)", db="shared").status_code == 200
    assert query(client, "SELECT x FROM t", db="shared").json()["rows"] == [[7]]
    assert (tmp_path / "elsewhere.db").is_file()


def test_a_missing_table_or_column_is_answered_with_what_the_database_has(client):
    # a small model guesses column names; the error names the real ones so the next call can use them
    exec_(client, "CREATE TABLE charges (id INTEGER PRIMARY KEY, client TEXT, invoice_ref TEXT)")
    exec_(client, 'CREATE TABLE "odd name" (x)')
    for call, sql in ((query, "SELECT status FROM charges"), (query, "SELECT * FROM tickets"),
                      (exec_, "INSERT INTO charges (client, priority) VALUES ('Dana', 'urgent')"),
                      (exec_, "INSERT INTO charges VALUES ('Dana', 'INV-1')")):
        r = call(client, sql)
        message = r.json()["error"]["message"]
        assert r.status_code == 400 and "charges(id, client, invoice_ref)" in message and "odd name(x)" in message, message
    r = query(client, "SELECT nonsense(")
    assert r.status_code == 400 and "charges(" not in r.json()["error"]["message"]
    r = query(client, "SELECT 1", db="other")
    assert r.status_code == 404 and "databases: notes" in r.json()["error"]["message"]


def test_databases_can_list_their_tables_and_columns(client, tmp_path):
    exec_(client, "CREATE TABLE spending (item TEXT, price REAL, date TEXT)")
    exec_(client, "CREATE TABLE budgets (month TEXT, cap REAL)", db="plans")
    exec_(client, "CREATE VIRTUAL TABLE budgets_fts USING fts5(month)", db="plans")   # not the user's: left out
    (tmp_path / "home" / "sql" / "junk.db").write_bytes(b"not a database at all" * 100)
    (tmp_path / "home" / "sql" / "a?b.db").write_bytes(b"")    # a name exec would refuse: listed, not opened
    plain = client.get("/v1/sql/databases").json()["databases"]
    assert all("tables" not in d for d in plain)
    r = client.get("/v1/sql/databases", params={"tables": "true"})
    assert r.status_code == 200, r.text
    listed = {d["name"]: d["tables"] for d in r.json()["databases"]}
    assert listed == {"a?b": None, "junk": None, "notes": {"spending": ["item", "price", "date"]},
                      "plans": {"budgets": ["month", "cap"]}}
    assert sorted(p.name for p in (tmp_path / "home" / "sql").iterdir() if not p.name.endswith(".db")) == []
    only = client.get("/v1/sql/databases", params={"tables": "true", "prefix": "pl"}).json()["databases"]
    assert [d["name"] for d in only] == ["plans"]
