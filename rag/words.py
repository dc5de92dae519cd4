"""Words for keyword search out of identifiers, compounds and text whose spaces were lost.

`Splitter(vocabulary)` turns text into lower-case terms: each run of letters and digits
as a whole, plus its parts at underscores, digit/letter changes and camelCase humps
(`snake_case2D` -> snake_case2d, snake, case, 2, d), plus each dotted, dashed or slashed
compound whole (`2.0.0`, `upsd.conf`, `--sendmail-path` -> sendmail-path): its parts alone
are common words or digits, the whole names one thing; plus, for a run of 12 or more
letters seen at most twice, its most likely split into words known from the
collection itself (unigram Viterbi: `anrsakeywith` -> an rsa key with). The
vocabulary is counted from the same texts, so no dictionary ships.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable

_TOKEN = re.compile(r"\w+")
_COMPOUND = re.compile(r"\w+(?:[.:/-]\w+)+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
GLUED = 12            # letters: a rare "word" this long may be several glued ones
_MAX_WORD = 18


def vocabulary(texts: Iterable[str]) -> Counter:
    """How often each plain word (up to 18 letters, lower case) occurs in `texts`."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(w for w in re.findall(r"[^\W\d_]+", text.lower()) if len(w) <= _MAX_WORD)
    return counts


class Splitter:
    def __init__(self, counts: Counter | None = None):
        counts = counts or Counter()
        total = sum(counts.values()) + 1
        self._cost = {w: math.log(total / c) for w, c in counts.items()}
        self._rare = {w for w, c in counts.items() if len(w) >= GLUED and c <= 2}
        self._unknown = math.log(total) + 8.0       # per letter: worse than any known word

    def segment(self, word: str) -> list[str]:
        """The cheapest split of `word` into two or more known words ([] when letters stay
        unexplained or the pieces are too short to be words)."""
        n = len(word)
        best = [0.0] + [math.inf] * n
        back = [0] * (n + 1)
        for end in range(1, n + 1):
            for start in range(max(0, end - _MAX_WORD), end):
                piece = word[start:end]
                if end - start == n:
                    continue
                c = self._cost.get(piece, self._unknown * len(piece) if len(piece) == 1 else math.inf)
                if best[start] + c < best[end]:
                    best[end], back[end] = best[start] + c, start
        pieces, end = [], n
        while end > 0:
            pieces.append(word[back[end]:end])
            end = back[end]
        pieces.reverse()
        unexplained = sum(1 for p in pieces if p not in self._cost)
        ok = len(pieces) >= 2 and unexplained <= len(word) // 10 and len(word) >= 3 * len(pieces)
        return pieces if ok else []

    def __call__(self, text: str) -> list[str]:
        terms: list[str] = []
        for m in _TOKEN.finditer(text):
            token = m.group()
            terms.append(token.lower())
            runs = [r.lower() for r in re.findall(r"[^\W\d_]+", token) if len(r) >= GLUED]
            runs = [r for r in runs if r in self._rare or r not in self._cost]
            if runs:         # glued words: their camelCase humps would be noise
                for run in runs:
                    terms.extend(self.segment(run))
                continue
            parts = _PARTS.findall(token)
            if len(parts) > 1:
                terms.extend(p.lower() for p in parts)
        terms.extend(m.group().lower() for m in _COMPOUND.finditer(text))
        return terms
