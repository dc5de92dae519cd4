"""Section headings for each page from a PDF's outline (its bookmarks).

A chunk cut from the middle of a section often lacks the words its section title has
("Transport sendmail ... --sendmail-path" under "auto-multiple-choice-mailing"); search
adds the heading path to the chunk's keyword text (rag.corpus), and hits carry it so a
reader can tell where a passage sits. Most generated manuals (LaTeX, DocBook, Sphinx,
Texinfo) carry an outline; a PDF without one gets no headings.

Each outline entry names a page; it is placed on its page where its title first appears
(case and spacing aside) after the previous entry of that page, else after that previous
entry. A page's `sections` list (offset, "Chapter > Section") in text order, starting with the
heading in force at its top (carried over from earlier pages).
"""
from __future__ import annotations

import logging
import re

from pypdf import PdfReader

from rag.types import Page

log = logging.getLogger(__name__)
SEPARATOR = " > "


def outline_entries(reader: PdfReader) -> list[tuple[int, str, int]]:
    """[(depth, title, 1-based page)] in outline order; entries without a page are skipped."""
    out: list[tuple[int, str, int]] = []

    def walk(items, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception as e:  # pypdf raises many types on a broken destination: skip that entry
                log.debug("outline entry %r has no page (%s)", getattr(item, "title", item), e)
                continue
            title = " ".join(str(item.title).split())
            if page is not None and page >= 0 and title:
                out.append((depth, title, page + 1))

    try:
        walk(reader.outline, 0)
    except Exception as e:  # a malformed outline costs its headings, not the document
        log.warning("unreadable PDF outline (%s): no section headings", e)
    return out


def with_sections(pages: list[Page], entries: list[tuple[int, str, int]]) -> list[Page]:
    """The pages with `sections` filled from the outline entries."""
    texts = {p.number: p.text for p in pages}
    marks: dict[int, list[tuple[int, str]]] = {}
    path: list[str] = []
    for depth, title, number in entries:
        path = path[:depth] + [title]
        if number not in texts:
            continue
        placed = marks.setdefault(number, [])
        after = placed[-1][0] if placed else 0
        found = re.compile(r"\s+".join(map(re.escape, title.split())), re.I).search(texts[number], after)
        placed.append((found.start() if found else after, SEPARATOR.join(path)))
    out, current = [], None
    for page in pages:
        here = sorted(marks.get(page.number, []), key=lambda m: m[0])   # stable: outline order on ties
        if current and (not here or here[0][0] > 0):
            here.insert(0, (0, current))
        if here:
            current = here[-1][1]
        out.append(Page(page.number, page.text, tuple(here)))
    return out
