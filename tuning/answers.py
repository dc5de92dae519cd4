"""Final answers computed from the tool results a turn really got: the oracle quotes the
values the stores returned, so a wrong call shows as a wrong answer and the task's checks
drop it. Each function takes the turn's results (parsed envelopes, or {"raw": text} where an
observation was cut) and returns the text."""
from __future__ import annotations

import json

from tuning.records import fmt


def parse(observation: str) -> dict:
    try:
        value = json.loads(observation)
    except ValueError:
        return {"raw": observation}
    return value if isinstance(value, dict) else {"raw": observation}


def ok_data(results: list[dict]) -> list:
    return [r["data"] for r in results if r.get("ok") and isinstance(r.get("data"), dict)]


def last_rows(results: list[dict]) -> list[list]:
    """Rows of the last successful query among the results."""
    rows = [d["rows"] for d in ok_data(results) if "rows" in d and d.get("columns")]
    return rows[-1] if rows else []


def stored_rows(results: list[dict]) -> int:
    return sum(d.get("rowcount") or 0 for d in ok_data(results) if (d.get("rowcount") or 0) > 0)


def text_of(results: list[dict]) -> str:
    return " ".join(r.get("raw") or json.dumps(r, ensure_ascii=False) for r in results)


def rows_phrase(rows: list[list]) -> str:
    return "; ".join(", ".join(fmt(v) for v in row) for row in rows) or "no rows"


def notes(results: list[dict]) -> list[str]:
    return [n["text"] for d in ok_data(results) for n in d.get("notes", [])]


def hit_passages(results: list[dict], passage: str) -> str | None:
    """The passage if a search result really returned it (whole, or its text cut at the end)."""
    found = text_of(results)
    return passage if passage[:120] in found or json.dumps(passage)[1:121] in found else None
