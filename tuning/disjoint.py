"""The generator's text stays out of the evaluation suites: no 6-word run of words that a
suite's user turn, gold argument or gold answer holds may appear in a written record, and
no domain is named after a suite's subject. `check` runs at the end of every generation and
raises, so a leak fails the run instead of inflating the held-out pass rates."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from agents.suite import SUITES_DIR

SHINGLE = 6
# The suites' subjects, in the words a domain name would use.
EVAL_TOPICS = {"runtime", "bug", "bugs", "tracker", "lab", "inventory", "freezer", "freezers", "household", "budget",
               "travel", "reading", "books", "recipe", "recipes", "experiment", "experiments", "support", "ticket",
               "tickets", "deploy", "deploys"}


class LeakError(RuntimeError):
    """Generated text shares a run of words with an evaluation suite."""


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(text: str, n: int = SHINGLE) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def eval_texts(suites_dir: Path = SUITES_DIR) -> dict[str, str]:
    """{where: text} of every user turn, gold argument and gold answer of the suites."""
    out = {}
    for path in sorted(suites_dir.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for turn in data.get("turns") or []:
            where = f"{path.stem}.{turn.get('name')}"
            out[f"{where}.user"] = str(turn.get("user") or "")
            out[f"{where}.gold_answer"] = str(turn.get("gold_answer") or "")
            for i, gold in enumerate(turn.get("gold") or []):
                out[f"{where}.gold[{i}]"] = _json(gold.get("arguments"))
    return out


class Fence:
    """The shingles of the evaluation suites, and a check of texts against them."""

    def __init__(self, texts: dict[str, str] | None = None):
        self.index: dict[tuple[str, ...], str] = {}
        for where, text in (eval_texts() if texts is None else texts).items():
            for s in shingles(text):
                self.index.setdefault(s, where)
        self.seen: set[int] = set()

    def leaks(self, text: str) -> list[str]:
        """'"six words" (suite.turn.user)' for each shingle of `text` a suite holds."""
        key = hash(text)
        if key in self.seen:
            return []
        found = [f'"{" ".join(s)}" ({self.index[s]})' for s in shingles(text) if s in self.index]
        if not found:
            self.seen.add(key)
        return found


def record_texts(record: dict) -> list[str]:
    """The texts a training record shows the model: every message and the chosen reply, the
    calls' arguments as JSON (unescaped, so words read as they were written)."""
    calls = [c for m in record["messages"] for c in m.get("tool_calls") or []] + record["chosen"]["tool_calls"]
    texts = [m.get("content") or "" for m in record["messages"]] + [record["chosen"]["content"] or ""]
    return texts + [_json(json.loads(c["function"]["arguments"])) for c in calls]


def check(records: list[dict], domains: list[str], fence: Fence | None = None) -> None:
    """Raise LeakError if a record shares a 6-word run with a suite, or a domain is named
    after a suite's subject."""
    fence = fence or Fence()
    bad_domains = [d for d in domains if set(words(d)) & EVAL_TOPICS]
    leaks = []
    for r in records:
        for text in record_texts(r):
            leaks += [f"{r['id']}: {leak}" for leak in fence.leaks(text)]
        if len(leaks) > 20:
            break
    if bad_domains or leaks:
        raise LeakError("generated data overlaps the evaluation suites: "
                        + "; ".join(([f"domains named after suite subjects: {bad_domains}"] if bad_domains else [])
                                    + leaks[:20]))
