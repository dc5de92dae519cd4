"""Text helpers shared by the loop, its prompts and the suite checks, so the loop's idea of
an answer stating a value is the checks' idea too."""
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


WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """The words of `text` of four characters or more, normalised."""
    return [w for w in WORD.findall(normalise(text)) if len(w) > 3]


def mentions(haystack: str, passage: str, share: float = 0.5) -> bool:
    """Whether `haystack` says what `passage` says: at least `share` of the passage's longer
    words appear in it (a retold search hit, not a quote)."""
    wanted = set(words(passage))
    return not wanted or len(wanted & set(words(haystack))) >= share * len(wanted)
