"""Rejected replies for preference tuning: for each recorded step, sample replies from a
served model on the very request the loop sent, and keep those whose action is wrong against
the gold one as (chosen, rejected) pairs.

A sampled reply is wrong when it calls where the gold answers or answers where it calls,
calls other tools or in another order, sends SQL of another statement kind, or over another
database or set of tables than the conversation already named, leaves out the values the gold statement writes or the text it files, or
answers without the values the gold answer quotes. A reply that does the same thing in other
words is not wrong, and is not kept.

    python -m tuning.rejected --runtime URL --examples steps.jsonl --out pairs.jsonl
"""
from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from agents.model import ChatModel, ModelError
from agents.text import missing

REFUSED = re.compile(r"^4\d\d from ")        # a ModelError for a request the runtime refused
_KIND = re.compile(r"^\s*(\w+)")
_TABLES = re.compile(r"\b(?:from|into|update|join|table(?:\s+if\s+not\s+exists)?)\s+[\"'`]?(\w+)", re.IGNORECASE)
_LITERALS = re.compile(r"'((?:[^']|'')*)'|(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")


def statement(sql: str) -> tuple[str, frozenset[str]]:
    """(kind, tables) of an SQL statement: ("insert", {"services"})."""
    kind = _KIND.match(sql)
    return (kind.group(1).lower() if kind else ""), frozenset(t.lower() for t in _TABLES.findall(sql))


def literals(sql: str) -> list[str]:
    """The values a statement is about: every literal of a write, the quoted ones of a read
    (a ROUND(..., 2) is not the point of a SELECT, the key it looks up is)."""
    read = statement(sql)[0] == "select"
    return [a or b for a, b in _LITERALS.findall(sql) if a or (b and not read)]


def arguments(call: dict) -> dict | None:
    try:
        value = json.loads(call["function"]["arguments"] or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def named(name: str, context: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name.lower())}(?![\w])", context) is not None


def said_by_agent(messages: list[dict]) -> str:
    """What the agent's side of a conversation says (its calls, their results, its answers), in
    lower case: the names it has already given. A user's words name no table."""
    return json.dumps([m for m in messages if m["role"] in ("assistant", "tool")], ensure_ascii=False).lower()


def wrong(chosen: dict, sampled: dict, keys: list[str] | None = None, context: str = "") -> str | None:
    """Why `sampled` is the wrong action where `chosen` is right, or None if it is not wrong.
    `context` is what the agent has said so far (said_by_agent): a database or table it already
    named must be the one used; a name not yet given is the model's choice."""
    gold, calls = chosen["tool_calls"], sampled["tool_calls"]
    if gold and not calls:
        return "answered where a call was due"
    if calls and not gold:
        return "called where an answer was due"
    if not gold:
        lost = missing(sampled["content"] or "", keys or [])
        return f"answer without {lost}" if lost else None
    if [c["function"]["name"] for c in gold] != [c["function"]["name"] for c in calls]:
        return "other tools or order"
    for g, s in zip(gold, calls):
        ga, sa = arguments(g), arguments(s)
        if sa is None:
            return "arguments not a JSON object"
        if "sql" in ga:
            (kind, tables), (s_kind, s_tables) = statement(ga["sql"]), statement(str(sa.get("sql", "")))
            if kind != s_kind or (tables != s_tables and any(named(t, context) for t in tables)):
                return "another statement kind or table set"
            if sa.get("db") != ga.get("db") and named(str(ga.get("db")), context):
                return "another database"
            lost = missing(str(sa.get("sql", "")), literals(ga["sql"]))
            if lost:
                return f"statement without {lost}"
        if g["function"]["name"] == "rag_ingest" and " ".join(str(sa.get("text", "")).split()) != " ".join(ga["text"].split()):
            return "filed another text"
    return None


def reply_dict(reply) -> dict:
    return {"role": "assistant", "content": reply.content, "tool_calls": [c.openai() for c in reply.calls]}


def sample_rejected(runtime_url: str, examples: Path, out: Path, samples: int = 4, temperature: float = 0.8,
                    progress: Callable[[int, int], None] | None = None, max_tokens: int = 400,
                    threads: int = 16, steps: int | None = None, seed: int = 0) -> dict:
    """Sample `samples` replies per step of `examples` (or of `steps` of them, drawn with
    `seed`) from the model at `runtime_url` and write each distinct wrong one with its step to
    `out` (the step's fields, plus "rejected" and "rejected_why"). A step the runtime refuses
    (longer than its context) is counted and skipped. `progress(done, total)` is called per
    step. Returns the counts. Bound it: on the H200, 3,842 steps x 4 samples of the 0.5B had
    not finished after 12 minutes."""
    records = [json.loads(line) for line in examples.read_text().splitlines() if line.strip()]
    if steps is not None and steps < len(records):
        records = random.Random(seed).sample(records, steps)
    model = ChatModel(runtime_url)
    refused: list[str] = []

    def sample(i: int) -> list[dict]:
        r = records[i]
        seen, pairs = set(), []
        context = said_by_agent(r["messages"])
        for k in range(samples):
            try:
                got = reply_dict(model.complete(r["messages"], r["tools"], "auto", max_tokens, temperature,
                                                seed=i * 1000 + k))
            except ModelError as e:
                if not REFUSED.match(str(e)):      # down or failing: the run stops
                    raise
                refused.append(r["id"])            # this request does not fit the model (its context)
                break
            why = wrong(r["chosen"], got, r.get("keys"), context)
            key = json.dumps(got, sort_keys=True)
            if why and key not in seen:
                seen.add(key)
                pairs.append({**r, "rejected": got, "rejected_why": why})
        return pairs

    results: list[list[dict]] = [[] for _ in records]
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        futures = [pool.submit(sample, i) for i in range(len(records))]
        for i, future in enumerate(futures):
            results[i] = future.result()
            if progress:
                progress(i + 1, len(records))
    model.close()
    pairs = [p for group in results for p in group]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    return {"examples": len(records), "samples": len(records) * samples, "pairs": len(pairs),
            "steps_with_pairs": sum(bool(g) for g in results), "refused": len(refused),
            "by_reason": dict(Counter(p["rejected_why"].split(" [")[0] for p in pairs)),
            "by_kind": dict(Counter(p["kind"] for p in pairs))}


def main(argv: list[str] | None = None) -> None:
    from tqdm import tqdm

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runtime", required=True, help="the runtime's URL, serving the model to sample")
    p.add_argument("--examples", type=Path, required=True, help="steps written by tuning.generate")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-tokens", type=int, default=400)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--steps", type=int, help="sample this many steps, drawn at random (default: all)")
    args = p.parse_args(argv)
    with tqdm(desc="steps", unit="step") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)
        result = sample_rejected(args.runtime, args.examples, args.out, args.samples, args.temperature, progress,
                                 args.max_tokens, args.threads, args.steps)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
