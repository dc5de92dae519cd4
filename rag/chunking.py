"""Split pages into overlapping chunks measured in the embedding model's own tokens.

A chunk never crosses a page (so every chunk has one page number) and never holds more
tokens than the model reads (all-MiniLM-L6-v2 truncates at 256 word pieces: a longer
chunk would be embedded by its head only). Windows end and start on word boundaries.
`offsets(text)` gives the (start, end) character span of each token, special tokens
excluded, as a fast tokenizer's offset mapping does.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable

from rag.types import Chunk, Page

Offsets = Callable[[str], list[tuple[int, int]]]


def _windows(spans: list[tuple[int, int]], size: int, overlap: int) -> Iterable[tuple[int, int]]:
    """Token index ranges [i, j) of at most `size` tokens, `overlap` shared between neighbours."""
    n, i = len(spans), 0
    while i < n:
        j = min(i + size, n)
        # Pull the end back while token j continues the word that token j-1 is in
        # (no gap between them), but never below half a window.
        while i + size // 2 < j < n and spans[j][0] == spans[j - 1][1]:
            j -= 1
        yield i, j
        if j == n:
            return
        nxt = max(j - overlap, i + 1)
        while nxt < j and spans[nxt][0] == spans[nxt - 1][1]:   # start on a word start
            nxt += 1
        i = nxt


def chunk_pages(pages: Iterable[Page], offsets: Offsets, size: int, overlap: int) -> list[Chunk]:
    assert 0 <= overlap < size, (size, overlap)
    chunks: list[Chunk] = []
    for page in pages:
        spans = offsets(page.text)
        for i, j in _windows(spans, size, overlap):
            start, end = spans[i][0], spans[j - 1][1]
            text = page.text[start:end].strip()
            if text:
                chunks.append(Chunk(text, page.number, len(chunks), start, end))
    return chunks


def word_offsets(text: str) -> list[tuple[int, int]]:
    """Whitespace-word spans: a tokenizer-free stand-in where no model is wanted."""
    return [m.span() for m in re.finditer(r"\S+", text)]
