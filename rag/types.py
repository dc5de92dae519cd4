"""Plain records passed between the retrieval stages."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Page:
    number: int | None        # 1-based PDF page; None for text without pages
    text: str
    sections: tuple[tuple[int, str], ...] = ()   # (offset in text, heading path) where each section starts


@dataclass(frozen=True, slots=True)
class Document:
    source: str               # what the user called it: a path, a file name, or a given name
    kind: str                 # "pdf" | "text"
    pages: tuple[Page, ...]
    content_hash: str         # sha256 of the raw bytes (or the text): the dedup key
    title: str = ""           # its own title (a PDF's metadata), "" when unknown


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    page: int | None
    index: int                # position of the chunk in its document
    start: int                # character span in its page's text
    end: int
    section: str = ""         # heading path in force at the chunk's start ("" when unknown)
    contents: bool = False    # cut from a table of contents or an index page


@dataclass(slots=True)
class Hit:
    chunk_id: str
    doc_id: str
    text: str
    source: str
    page: int | None
    section: str | None                              # heading path (from a PDF's outline)
    score: float                                     # the score the final order uses
    scores: dict[str, float] = field(default_factory=dict)  # per stage: vector, bm25, fused, phrase, rerank
