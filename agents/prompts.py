"""What the loop says to the model. Short on purpose: a 0.5B model follows one plain
instruction better than a page of rules, and every token here is prefilled on each step."""
from __future__ import annotations

import json
import re

from agents.text import WORD, clip, mentions, missing as lacks

SYSTEM = (
    "You are a helpful assistant running on the user's own machine. Use the tools to do what "
    "the user asks: call one tool at a time by replying with only a JSON object "
    '{"name": "<tool>", "arguments": {...}}. Use exact values from tool results. '
    "When the task is done, answer in one or two plain sentences, without JSON."
)

MALFORMED = (
    "Your tool call could not be used: {errors}. Reply with one JSON object "
    '{{"name": "<tool>", "arguments": {{...}}}} whose arguments match the tool\'s parameters, '
    "or answer in plain text."
)

PLAIN_CALL = ('To call a tool, reply with only the JSON object {"name": "<tool>", "arguments": {...}}, '
              "nothing around it.")

CUT_OFF = ("Your reply was cut off at the token limit before it was complete. Keep tool "
           "arguments short, or answer in plain text.")

PROGRESS_NOW = ("Do not repeat a step that is done. If the request needs a step that is not done "
                "yet, call the tool for it now; if everything is done, answer in plain sentences.")

DRAFT = "Your draft answer was: {answer}"

DONE_SO_FAR = "Done so far, with what the tools returned:"

ANSWER_SYSTEM = ("You are a helpful assistant running on the user's own machine. Answer in plain "
                 "sentences, using exact values. Never write JSON or code.")

# Replayed on recorded canonical turns (greedy, 3 seeds): asked for one or two sentences with
# the earlier turns in context, the 0.5B restated an earlier answer ('the background is in the
# knowledge base') on every recall; asked to quote values and name tools it pasted the result
# lists, which later turns then imitated. Without the earlier turns and with this closing it
# answered discover, store_facts and recall from the results, 9 of 9.
ANSWER_NOW = ("Answer the request now in two or three plain sentences, with the exact values from "
              "these results, and say which tool gave each value. Do not write JSON.")

# Shown in answer mode, as its own paragraph, when the results hold fields the request names.
# Replayed on the recorded discover turn (greedy, 6 working directories in the results):
# without it the 0.5B left out the model or the backend in 3 of 8 answers; with it 6 of 6
# named all three. A draft followed by "it leaves out ..." was pasted back verbatim instead.
NEEDS = "Your answer must give each of: {fields}."

# Replayed on the recall turns whose first answer-mode answer left out the knowledge base
# passage (greedy): told only the name ("the rag_search passage") the 0.5B left it out again,
# 0 of 2; given the passage too, 1 of 2.
LEFT_OUT = "Your last answer left out {fields}."

PLAIN_ANSWER = "That was JSON, not an answer: answer in plain sentences."

TOOL_ERROR_HINT = "Read the error, fix the arguments and call the tool again, or try another tool."

VERIFY = ("Check your answer against the tool results above: is every value exact and is "
          "every part of the request done? If something is missing or wrong, call a tool to "
          "fix or look it up; otherwise repeat your answer in plain text.")


def observation(envelope: dict, limit: int) -> str:
    """A tool result as the model reads it: the envelope as JSON, cut to `limit` characters,
    with a hint when the call failed."""
    if not envelope.get("ok"):
        envelope = {**envelope, "hint": TOOL_ERROR_HINT}
    text = json.dumps(envelope, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


def facts(value, path: str = "") -> list[str]:
    """A tool result as `path: value` lines (lists of plain values joined by commas, a table's
    rows as `column=value` pairs, empty values left out): small models copy JSON they are
    shown, so answer mode shows none."""
    if isinstance(value, dict) and isinstance(value.get("columns"), list) and isinstance(value.get("rows"), list):
        rest = facts({k: v for k, v in value.items() if k not in ("columns", "rows")}, path)
        if not value["columns"]:                 # a statement that returns no table (INSERT ...)
            return rest
        rows = [f"{path} row {i}: ".lstrip() + ", ".join(f"{c}={v}" for c, v in zip(value["columns"], row))
                for i, row in enumerate(value["rows"][:20], 1) if isinstance(row, list)]
        return (rows or [f"{path} rows: none".lstrip()]) + rest
    if isinstance(value, dict):
        return [line for k, v in value.items() for line in facts(v, f"{path} {k}".strip())]
    if value is None or value == []:
        return []
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return [f"{path}: {', '.join(map(str, value))}" if path else ", ".join(map(str, value))]
    if isinstance(value, list):
        return [line for i, v in enumerate(value[:20], 1) for line in facts(v, f"{path} {i}".strip())]
    return [f"{path}: {value}" if path else str(value)]


def flat_request(user: str, calls: list, note: str, closing: str, limit: int, tools_offered: bool = True) -> str:
    """The user's request, the turn's tool results as plain lines under each call (each call's
    lines cut to `limit` characters), what the loop has to say, and the closing instruction,
    as one message. A failed call asks for a fix only while tools are offered."""
    parts = [user]
    if calls:
        lines = []
        for c in calls:
            if c.ok:
                args = ", ".join(f"{k}={clip(str(v), 150)}" for k, v in c.arguments.items()) \
                    if isinstance(c.arguments, dict) else clip(c.arguments, 150)
                found = [f"  {clip(line, 300)}" for line in facts(c.result.get("data"))] or ["  (nothing)"]
                lines += [f"- {c.name}({args}) returned:", clip_lines(found, limit)]
            else:     # without its arguments: shown them, small models send the same again
                lines.append(f"- {c.name} failed: {clip(str(c.result.get('error')), 300)}."
                             + (" Fix the arguments and call it again." if tools_offered else ""))
        parts.append(DONE_SO_FAR + "\n" + "\n".join(lines))
    if note:
        parts.append(note)
    parts.append(closing)
    return "\n\n".join(parts)


def clip_lines(lines: list[str], limit: int) -> str:
    out, used = [], 0
    for line in lines:
        used += len(line) + 1
        if used > limit:
            out.append("  ...")
            break
        out.append(line)
    return "\n".join(out)


MAX_NEEDED = 8
MAX_VALUE_CHARS = 80
PASSAGE_WORDS = 8          # a result text this long is a passage (a search hit, a note), not a value
PASSAGE_CHARS = 200
NOT_PASSAGES = {"error", "hint", "note", "url"}     # what a tool says to the model, not content


def stems(text: str) -> set[str]:
    """The words of `text` (three letters or more) cut to five letters, so 'length' in a request
    matches the field 'context_length' and 'models' matches 'model'."""
    return {w[:5] for w in WORD.findall(text.lower()) if len(w) > 2}


def fields(value, key: str = ""):
    """(field name, value) for every scalar in a tool result; a table's cells are named by
    their columns."""
    if isinstance(value, dict) and isinstance(value.get("columns"), list) and isinstance(value.get("rows"), list):
        for row in value["rows"][:20]:
            if isinstance(row, list):
                yield from zip(value["columns"], row)
        value = {k: v for k, v in value.items() if k not in ("columns", "rows")}
    if isinstance(value, dict):
        for k, v in value.items():
            yield from fields(v, str(k))
    elif isinstance(value, list):
        for v in value[:20]:
            yield from fields(v, key)
    elif value is not None and not isinstance(value, bool):
        yield key, value


def requested(user: str, calls: list) -> list[tuple[str, str]]:
    """What a complete answer has to state: the short values in the turn's results whose field
    names the request uses, every word of the name (the request 'what is its context length'
    and the field context_length), then each lookup's first passage, all of them left out
    where the request already holds them (a source name it gave, a text it quoted)."""
    want, given, out = stems(user), user.lower(), []
    for c in calls:
        if not c.ok:
            continue
        for name, value in fields(c.result.get("data")):
            text = str(value).strip()
            key = stems(name)
            if key and key <= want and 0 < len(text) <= MAX_VALUE_CHARS and text.lower() not in given \
                    and (name, text) not in out:
                out.append((name, text))
    return out[:MAX_NEEDED] + passages(user, calls)


def passages(user: str, calls: list) -> list[tuple[str, str]]:
    """Each successful call's first long text (the top search hit, a note) that neither the
    request nor the call's own arguments hold, cut to PASSAGE_CHARS. Replayed on recorded
    recall turns (greedy, 7 sets of results): listed among the values an answer must give, the
    0.5B told what the knowledge base passage says in 5 of 7 answers; without it, in 0 of 7
    (it restated the memory note, 'the background is in the knowledge base')."""
    given, out = user.lower(), []
    for c in calls:
        if not c.ok:
            continue
        echoed = {str(v).strip().lower() for v in (c.arguments.values() if isinstance(c.arguments, dict) else [])}
        for name, value in fields(c.result.get("data")):
            text = " ".join(str(value).split())
            if isinstance(value, str) and name not in NOT_PASSAGES and is_passage(text) \
                    and text.lower() not in given and text.lower() not in echoed:
                out.append((f"the {c.name} passage", clip(text, PASSAGE_CHARS)))
                break
    return out


def is_passage(text: str) -> bool:
    return len(text.split()) >= PASSAGE_WORDS


def missing(answer: str, needed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The needed (field, value) pairs an answer does not state: a value word for word, a
    passage by what it says."""
    answer = answer or ""
    absent = set(lacks(answer, [value for _, value in needed if not is_passage(value)]))
    return [(name, value) for name, value in needed
            if (not mentions(answer, value) if is_passage(value) else value in absent)]


def listing(needed: list[tuple[str, str]]) -> str:
    """Needed values as the model reads them: 'backend (cpu), context_length (4096)'."""
    return ", ".join(f"{name} ({value})" for name, value in needed)


def needs(needed: list[tuple[str, str]]) -> str:
    return NEEDS.format(fields=listing(needed)) if needed else ""
