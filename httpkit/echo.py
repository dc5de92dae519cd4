"""Bounded echoes: an error message may quote the client's input (a name, a path, a SQL
fragment); quoted whole, a 40 MB name would come back as a 40 MB error. Messages are cut
to MAX_MESSAGE characters with a note of how much was left out."""
from __future__ import annotations

MAX_MESSAGE = 2000


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    if len(message) <= limit:
        return message
    keep = limit // 2
    return f"{message[:keep]}... ({len(message) - 2 * keep} characters left out) ...{message[-keep:]}"
