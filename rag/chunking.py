"""Split pages into overlapping chunks measured in the embedding model's own tokens, cut
at sentence and section boundaries where one is near.

A chunk never crosses a page (so every chunk has one page number) and never holds more
tokens than the model reads (all-MiniLM-L6-v2 truncates at 256 word pieces: a longer
chunk would be embedded by its head only). A window ends at the last sentence end (".",
"!", "?" or ":" before a space, or a line break) in its second half, else at a word
boundary; the next window starts at the sentence start nearest `overlap` tokens back
(within twice that), else at a word start. `offsets(text)` gives the (start, end) character span of each token, special
tokens excluded, as a fast tokenizer's offset mapping does.

Each chunk carries the heading path in force where it starts (from the page's `sections`)
and whether its page is a table of contents or an index: five or more lines ending in a
dot leader (". . . . 42"). Such pages name every topic and answer none; search ranks them
a little lower (rag.index).
"""
from __future__ import annotations

import bisect
import re
from typing import Callable, Iterable

from rag.types import Chunk, Page

Offsets = Callable[[str], list[tuple[int, int]]]
_SENTENCE_END = re.compile(r"[.!?:;]['\")\]]?$")
_LEADER = re.compile(r"(?:\. ?){5,}\s*\S*\d+\s*$|(?:\. ?){5,}$", re.M)   # ". . . . . 42" / "......"
CONTENTS_LINES = 5


def _starts(text: str, spans: list[tuple[int, int]]) -> tuple[list[bool], list[bool]]:
    """Per token: does a word start here; does a sentence (or a line) start here."""
    word, sentence = [True], [True]
    for (_, prev_end), (start, _) in zip(spans, spans[1:]):
        gap = text[prev_end:start]
        word.append(bool(gap))
        sentence.append("\n" in gap or (bool(gap) and bool(_SENTENCE_END.search(text[max(0, prev_end - 3):prev_end]))))
    return word, sentence


def _windows(text: str, spans: list[tuple[int, int]], size: int, overlap: int) -> Iterable[tuple[int, int]]:
    """Token index ranges [i, j) of at most `size` tokens, about `overlap` shared between neighbours."""
    n, i = len(spans), 0
    word, sentence = _starts(text, spans)
    while i < n:
        j = min(i + size, n)
        if j < n:   # end before a sentence start in the window's second half, else before a word start
            cut = next((t for t in range(j, i + size // 2, -1) if sentence[t]), None)
            cut = cut or next((t for t in range(j, i + size // 2, -1) if word[t]), j)
            j = cut
        yield i, j
        if j == n:
            return
        want = max(j - overlap, i + 1)    # a sentence start near `overlap` tokens back, else a word start
        starts = [t for t in range(max(j - 2 * overlap, i + 1), j) if sentence[t]]
        i = min(starts, key=lambda t: abs(t - want)) if starts else next((t for t in range(want, j) if word[t]), j)


def chunk_pages(pages: Iterable[Page], offsets: Offsets, size: int, overlap: int) -> list[Chunk]:
    assert 0 <= overlap < size, (size, overlap)
    chunks: list[Chunk] = []
    for page in pages:
        spans = offsets(page.text)
        contents = is_contents(page.text)
        starts = [offset for offset, _ in page.sections]
        for i, j in _windows(page.text, spans, size, overlap):
            start, end = spans[i][0], spans[j - 1][1]
            text = page.text[start:end].strip()
            at = bisect.bisect_right(starts, start) - 1
            if text:
                chunks.append(Chunk(text, page.number, len(chunks), start, end,
                                    page.sections[at][1] if at >= 0 else "", contents))
    return chunks


def is_contents(text: str) -> bool:
    """A table of contents or an index page: many lines end in a dot leader."""
    return len(_LEADER.findall(text)) >= CONTENTS_LINES


def word_offsets(text: str) -> list[tuple[int, int]]:
    """Whitespace-word spans: a tokenizer-free stand-in where no model is wanted."""
    return [m.span() for m in re.finditer(r"\S+", text)]
