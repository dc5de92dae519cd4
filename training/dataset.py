"""Preference pairs in TRL's explicit-prompt formats, validated up front.

A dataset is JSONL, one object per line, with `prompt`, `chosen` and `rejected`, either all
plain text or all conversational (`prompt` a list of messages, `chosen`/`rejected` a list
holding the assistant's reply). Every problem found is reported with its line number
(or its position, for a list sent inline) in one DatasetError, so a user fixes them all
at once: bad JSON, missing fields, wrong types, empty text, chosen == rejected, duplicate
pairs, examples over the character limit here and over the token limit in check_lengths.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("prompt", "chosen", "rejected")
ROLES = ("system", "user", "assistant")
MAX_EXAMPLES = 20_000
MAX_CHARS = 32_000           # per example, before tokenizing: refuses pasted files early
MAX_PROBLEMS_SHOWN = 20

Text = str | list[dict]


class DatasetError(ValueError):
    """A dataset that cannot be trained on; `problems` lists each one with where it is."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(f"{len(problems)} problem(s) in the dataset:\n  " + "\n  ".join(shown) + more)


@dataclass(frozen=True, slots=True)
class PreferencePair:
    where: str                   # "line 3" or "example 3": how errors name it
    prompt: Text
    chosen: Text
    rejected: Text

    @property
    def conversational(self) -> bool:
        return isinstance(self.prompt, list)

    def row(self) -> dict:
        return {"prompt": self.prompt, "chosen": self.chosen, "rejected": self.rejected}


def _check_messages(value, name: str, assistant_only: bool) -> list[str]:
    if not value:
        return [f"`{name}` is an empty list of messages"]
    problems = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            problems.append(f"`{name}[{i}]` must be {{\"role\": one of {'/'.join(ROLES)}, \"content\": text}}")
        elif not m["content"].strip():
            problems.append(f"`{name}[{i}]` has empty content")
        elif assistant_only and m["role"] != "assistant":
            problems.append(f"`{name}[{i}]` must be an assistant message, not {m['role']!r}")
    return problems


def _check_record(obj, conversational: bool | None) -> list[str]:
    """Problems of one record; `conversational` is the dataset's format so far (None: unknown)."""
    if not isinstance(obj, dict):
        return [f"expected a JSON object with {', '.join(FIELDS)}, got {type(obj).__name__}"]
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        return [f"missing field(s): {', '.join(missing)}"]
    bad = [f"`{f}` must be text or a list of messages, not {type(obj[f]).__name__}"
           for f in FIELDS if not isinstance(obj[f], (str, list))]
    if bad:
        return bad
    kinds = {isinstance(obj[f], list) for f in FIELDS}
    if len(kinds) > 1:
        return ["`prompt`, `chosen` and `rejected` must all be text or all be message lists"]
    if conversational is not None and kinds != {conversational}:
        return [f"{'message lists' if conversational is False else 'plain text'}, but the dataset so far is "
                f"{'conversational' if conversational else 'plain text'}; use one format"]
    problems = []
    for name in FIELDS:
        if isinstance(obj[name], list):
            problems += _check_messages(obj[name], name, assistant_only=name != "prompt")
        elif not obj[name].strip():
            problems.append(f"`{name}` is empty")
    if not problems and obj["chosen"] == obj["rejected"]:
        problems.append("`chosen` and `rejected` are identical: nothing to prefer")
    if not problems and sum(len(json.dumps(obj[f])) for f in FIELDS) > MAX_CHARS:
        problems.append(f"the example is over {MAX_CHARS} characters")
    return problems


@dataclass(frozen=True, slots=True)
class _Unparsed:
    """A line that was not JSON; from_records reports it in order with the rest."""
    reason: str


def from_records(records: list, wheres: list[str] | None = None) -> list[PreferencePair]:
    """Validate already-parsed records (a JSON list sent inline, or the lines of a file);
    `wheres` names each record in messages (default "example N")."""
    if not records:
        raise DatasetError(["the dataset is empty"])
    if len(records) > MAX_EXAMPLES:
        raise DatasetError([f"the dataset has {len(records)} examples; the limit is {MAX_EXAMPLES}"])
    problems: list[str] = []
    pairs: list[PreferencePair] = []
    seen: dict[str, str] = {}
    conversational = None            # set by the first usable record; the rest must match
    wheres = wheres or [f"example {n}" for n in range(1, len(records) + 1)]
    for where, obj in zip(wheres, records):
        if isinstance(obj, _Unparsed):
            problems.append(f"{where}: {obj.reason}")
            continue
        found = _check_record(obj, conversational)
        if found:
            problems += [f"{where}: {p}" for p in found]
            continue
        pair = PreferencePair(where, obj["prompt"], obj["chosen"], obj["rejected"])
        conversational = pair.conversational if conversational is None else conversational
        key = json.dumps(pair.row(), sort_keys=True)
        if key in seen:
            problems.append(f"{where}: duplicate of {seen[key]}")
            continue
        seen[key] = where
        pairs.append(pair)
    if problems:
        raise DatasetError(problems)
    return pairs


def parse_jsonl(text: str) -> list[PreferencePair]:
    """Validate JSONL text; blank lines are skipped but still counted."""
    records: list = []
    wheres: list[str] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            records.append(_Unparsed(f"not valid JSON ({e.msg} at column {e.colno})"))
        wheres.append(f"line {n}")
    return from_records(records, wheres)


def load_jsonl(path: str | Path) -> list[PreferencePair]:
    path = Path(path)
    if not path.is_file():
        raise DatasetError([f"{path}: no such file"])
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError([f"{path}: not UTF-8 text ({e.reason} at byte {e.start})"]) from e
    return parse_jsonl(text)


def dataset_hash(pairs: list[PreferencePair]) -> str:
    """sha256 of the pairs in order, independent of formatting and extra fields."""
    h = hashlib.sha256()
    for p in pairs:
        h.update(json.dumps(p.row(), sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def to_jsonl(pairs: list[PreferencePair]) -> str:
    return "".join(json.dumps(p.row(), ensure_ascii=False) + "\n" for p in pairs)


def check_lengths(pairs: list[PreferencePair], tokenizer, max_length: int) -> None:
    """Refuse examples whose prompt + completion exceed `max_length` tokens as the model
    will see them (through the chat template when conversational)."""
    problems = []
    for p in pairs:
        for name in ("chosen", "rejected"):
            if p.conversational:
                text = tokenizer.apply_chat_template(p.prompt + getattr(p, name), tokenize=False)
            else:
                text = p.prompt + getattr(p, name)
            n = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            if n > max_length:
                problems.append(f"{p.where}: prompt + {name} is {n} tokens; max_length is {max_length}")
    if problems:
        raise DatasetError(problems)
