"""What a task offers the model, varied so that it learns to read the offer rather than
memorise one (Hammer's function masking, TinyAgent's tool retrieval): the tools a turn needs
among a random number of others, in random order; in a fraction of tasks the descriptions
are reworded (the names stay: they are the product's); sometimes another system prompt, as a
user's own agent would have."""
from __future__ import annotations

import random

from agents import prompts

PARAPHRASES = {
    "sql_exec": ("Run one SQL statement that writes to a local SQLite database (CREATE TABLE IF NOT EXISTS, "
                 "INSERT, UPDATE, DELETE). Use it for records with exact values; the database appears on first "
                 "use. Reads go through sql_query.",
                 "Change data in a named SQLite database on this machine with a single statement whose values are "
                 "written in it as literals. Create a table before inserting into it."),
    "sql_query": ("Read rows from a local SQLite database with one SELECT statement.",
                  "Answer questions about stored records: run a single read-only SELECT on a named SQLite database "
                  "and get the rows back."),
    "rag_ingest": ("Add a piece of background text to the searchable knowledge base under a short source name. "
                   "Records with exact values go to SQLite, not here.",
                   "Save prose (notes, articles, instructions) word for word in the document index so rag_search "
                   "can find it later."),
    "rag_search": ("Find passages in the knowledge base that answer a question, with their source names.",
                   "Semantic search over the stored documents; returns matching passages and where each came from."),
    "memory_add": ("Write a short note to long-term memory that later conversations can read.",
                   "Remember something for future sessions (a preference, where something was kept) as a note."),
    "memory_search": ("Look through saved memory notes for words of the query.",
                      "Search your long-term notes; best matches first."),
    "memory_read": ("List the latest memory notes, or one by id.",
                    "Read back recent notes from long-term memory."),
    "rag_documents": ("Show which documents the knowledge base holds.",),
}

SYSTEMS = (
    prompts.SYSTEM,
    "You are a helpful assistant with access to tools. Call a tool when the request needs one; otherwise answer "
    "directly. Quote exact values from tool results.",
    "You are Wren, the household helper of the Alvarez family. You keep their records in SQLite, their reference "
    "texts in a knowledge base and reminders in memory. Be brief.",
    "Assistant for a small workshop. Use the offered functions to store and look up data. Never invent results: "
    "if you need a value, query for it.",
    "You help one user organise their hobby data on their own computer. Use tools for storing and finding "
    "things, and reply in plain short sentences.",
)


def system_prompt(rng: random.Random) -> str:
    return prompts.SYSTEM if rng.random() < 0.6 else rng.choice(SYSTEMS[1:])


def reworded(schema: dict, rng: random.Random) -> dict:
    """The schema with its description replaced by a paraphrase, where one is written, and
    sometimes without its parameters' descriptions (the names and types still say enough)."""
    function = dict(schema["function"])
    if function["name"] in PARAPHRASES:
        function["description"] = rng.choice(PARAPHRASES[function["name"]])
    if rng.random() < 0.3:
        params = function["parameters"]
        function["parameters"] = {**params, "properties": {
            k: {a: v for a, v in p.items() if a != "description"} for k, p in params["properties"].items()}}
    return {**schema, "function": function}


class Offer:
    """The tools of one task: `tools(needs)` gives a turn's schemas."""

    def __init__(self, rng: random.Random, schemas: list[dict], needs: set[str]):
        self.rng, self.schemas = rng, {s["function"]["name"]: s for s in schemas}
        self.paraphrase = rng.random() < 0.25
        self.per_turn = rng.random() < 0.3                  # a tool retriever's offer, turn by turn
        self.fixed = self._draw(needs)

    def _draw(self, needs: set[str]) -> list[dict]:
        others = sorted(n for n in self.schemas if n not in needs)
        extra = self.rng.sample(others, self.rng.choice([0, 1, 2, 3, 3, 4, 5, 6, 8]))
        if not needs and not extra:
            extra = self.rng.sample(others, 2)
        names = sorted(needs) + extra
        self.rng.shuffle(names)
        return [reworded(self.schemas[n], self.rng) if self.paraphrase else self.schemas[n] for n in names]

    def tools(self, needs: set[str]) -> list[dict]:
        return self._draw(needs) if self.per_turn else self.fixed
