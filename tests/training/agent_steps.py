"""Agent steps written by hand in the generator's record format (one JSONL line per step):
calls and answers over two strict tools, multi-turn (earlier calls and tool results are
context), some with a rejected reply. Tiny random models learn them in a few dozen steps."""
from __future__ import annotations

import json

SYSTEM = "You keep facts for the user. Call a tool when the request needs one."
TOOLS = [
    {"type": "function", "function": {
        "name": "sql_exec", "description": "Run one SQL statement on the user's database.", "strict": True,
        "parameters": {"type": "object", "properties": {"database": {"type": "string"}, "sql": {"type": "string"}},
                       "required": ["database", "sql"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "memory_save", "description": "Save a note for later sessions.", "strict": True,
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                       "required": ["text"], "additionalProperties": False}}},
]
FACTS = [("books", "Dune", 1965), ("books", "Emma", 1815), ("trips", "Oslo", 2024), ("trips", "Lima", 2023),
         ("plants", "fern", 3), ("plants", "cactus", 1), ("bugs", "crash on save", 2), ("bugs", "slow login", 5)]


def call(name: str, n: int, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def steps() -> list[dict]:
    """Three steps per fact: the call, the answer after its result, a memory call in a later turn."""
    out = []
    for i, (table, item, number) in enumerate(FACTS):
        user = {"role": "user", "content": f"Keep {item} ({number}) in my {table} list."}
        first = call("sql_exec", i, database=table, sql=f"INSERT INTO {table} VALUES ('{item}', {number})")
        result = {"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps({"ok": True, "data": {"rows": 1}})}
        answer = {"role": "assistant", "content": f"Saved {item} ({number}) in {table}."}
        later = {"role": "user", "content": f"Remember that {item} matters to me."}
        base = {"task": f"task-{i}", "domain": table, "tools": TOOLS}
        head = [{"role": "system", "content": SYSTEM}, user]
        wrong = call("memory_save", i, text=f"{table} {item}")
        out += [
            {**base, "id": f"{i}-0", "kind": "call", "messages": head, "chosen": first, "rejected": wrong},
            {**base, "id": f"{i}-1", "kind": "answer", "messages": head + [first, result], "chosen": answer,
             "rejected": {"role": "assistant", "content": "I cannot do that."}},
            {**base, "id": f"{i}-2", "kind": "call", "messages": head + [first, result, answer, later],
             "chosen": call("memory_save", 100 + i, text=f"{item} matters to the user")},
        ]
    return out


def write(path) -> str:
    path.write_text("".join(json.dumps(s) + "\n" for s in steps()))
    return str(path)
