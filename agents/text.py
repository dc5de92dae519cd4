"""Text helpers for the suite checks and reports: one line of text cut to a length, and
matching that ignores case and thousands separators."""
from __future__ import annotations

import re


def clip(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " ..."


def normalise(text: str) -> str:
    """Lower case, thousands separators dropped (32,768 -> 32768)."""
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text).lower()


def missing(haystack: str, needles: list[str]) -> list[str]:
    """The needles `haystack` does not contain, compared normalised."""
    hay = normalise(haystack)
    return [n for n in needles if normalise(n) not in hay]
