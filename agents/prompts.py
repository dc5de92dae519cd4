"""What the loop says to the model: the system prompt, the final_answer tool, and tool results
as `role: tool` messages. Short on purpose: a 0.5B model follows one plain instruction better
than a page of rules, and every token here is prefilled on each step."""
from __future__ import annotations

import json

SYSTEM = (
    "You are an assistant running on the user's own machine, with tools for its SQLite databases, "
    "knowledge base and memory. When a request needs a tool, call it: never write out SQL or a "
    "call for the user instead of running it. Several calls go one per line, in order; read each "
    "result, then go on. Keep exact facts the user wants kept in a SQLite table (create it first "
    "if it does not exist), longer background text in the knowledge base, and short notes in "
    "memory, only when the request asks for that. When asked to look something up or check it, "
    "call the tool even if you remember the answer. Use the exact values from the user's messages "
    "and from tool results. When the request is done, or if it needs no tool, reply to the user "
    "in plain sentences."
)


def tables_line(summary: str) -> str:
    """The system prompt's last line when the agent has SQLite tables (tables_in_prompt)."""
    return f"\n\nYour SQLite tables so far (database: table(columns)): {summary}." if summary else ""


FINAL_ANSWER_NAME = "final_answer"
# An answer does not open like JSON, a tag or a code fence and holds no JSON object (no `{`
# before a `"`), so a reply forced to be the answer cannot paste a call or a result back, not
# even behind one character (`>{"name": ...}`, seen from the 0.5B). The same pattern as the
# runtime's text under strict tools (runtime/server/grammar.py TEXT_PATTERN; the agent reaches
# the runtime over HTTP only, so it keeps its own copy).
ANSWER_REGEX = r'''[^\s{\[<`]([^{<]|\{\s*[^\s"'{<]|<[^A-Za-z\/|!?{<])*(\{\s*|<)?'''




def final_answer_tool(max_chars: int) -> dict:
    """The tool that ends a turn. The answer may not open like JSON, a tag or a code fence:
    decoded under the grammar, a reply cannot paste a tool result or a call back as its answer."""
    return {"type": "function", "function": {
        "name": FINAL_ANSWER_NAME,
        "description": "Reply to the user and end your turn: when the request is done, when it needs no "
                       "tool, or to ask the user something. Plain sentences with the exact values found.",
        "parameters": {"type": "object", "properties": {"answer": {
            "type": "string", "description": "your reply to the user", "minLength": 1, "maxLength": max_chars,
            "pattern": f"^{ANSWER_REGEX}$"}},
            "required": ["answer"], "additionalProperties": False}}}


TOOL_ERROR_HINT = "Read the error, fix the arguments and call the tool again, or try another tool."
REPEATED = ("not run again: this exact call was already made in this turn and its result is above. "
            "Do the next step, or give the answer.")
LAST_REPEAT = ("not run again: this exact call was already made in this turn and its result is above. "
               "No more calls this turn: answer from the results above, and say plainly what failed or "
               "was not found rather than filling it in.")
NOT_RUN = "not run: an earlier call in the same reply failed. Fix that one first, then make this call if still needed."
REFUSED = "Your call could not be run, fix it and call again, or answer in plain text: "
CUT_OFF = "Your reply was cut off at the token limit before the call was complete. Keep the arguments shorter."


def strict(tools: list[dict]) -> list[dict]:
    """The tools marked `strict`: under tool_choice auto the runtime then decodes a reply as
    calls that validate against these schemas, or plain text."""
    return [{**t, "function": {**t["function"], "strict": True}} for t in tools]


def final_answer(calls: list) -> str | None:
    """The answer of the first final_answer call among `calls`, if any."""
    for c in calls:
        if c.name == FINAL_ANSWER_NAME and isinstance(c.arguments, dict):
            return str(c.arguments.get("answer", "")).strip() or None
    return None


def observation(record, limit: int) -> str:
    """A tool result as the model reads it: the envelope as JSON, cut to `limit` characters,
    with a hint when the tool itself failed."""
    envelope = record.result
    if not envelope.get("ok") and not record.skipped:
        envelope = {**envelope, "hint": TOOL_ERROR_HINT}
    text = json.dumps(envelope, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


def call_messages(content: str, calls: list, records: list, limit: int) -> list[dict]:
    """The assistant message with `calls` and one `role: tool` message per record, by call id."""
    if not calls:
        return []
    return [{"role": "assistant", "content": content or "", "tool_calls": [c.openai() for c in calls]}] + [
        {"role": "tool", "tool_call_id": r.id, "name": r.name, "content": observation(r, limit)} for r in records]
