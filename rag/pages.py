"""Page evidence: a chunk's score raised by a share of the best other chunk of its page.

A result list shows pages (at most `per_page` chunks of one), yet each page is scored by
its best chunk alone. An answer that runs across a chunk boundary, or a page whose
paragraphs each match part of the question, has a second chunk that also scores well;
a page that matched by one stray sentence has not. Page-level evidence from the best
passage plus the rest of the document is Callan's (SIGIR 1994) passage/document
combination; here the "document" is the page and the rest is its best other chunk.

score'(i) = score(i) + share * max(score(j) for the other chunks j of i's page, floor)
where the floor is the query's median chunk score: only a neighbour better than a typical
chunk adds, so a page is not raised for being long. The best chunk of a page stays its best
(score(i) >= score(j) gives score'(i) >= score'(j)), so hits keep their clean chunk text.
"""
from __future__ import annotations

import numpy as np


def page_groups(metas: list[dict]) -> np.ndarray:
    """[n] an id per (document, page); chunks without a page each get their own."""
    ids: dict[tuple, int] = {}
    return np.array([ids.setdefault((m["doc_id"], m.get("page"), None if m.get("page") is not None else i), len(ids))
                     for i, m in enumerate(metas)], np.int64)


def with_page_evidence(score: np.ndarray, groups: np.ndarray, share: float) -> np.ndarray:
    """[n] each chunk's score plus `share` times its page's best other chunk's excess over
    the median score (0 for a page of one chunk)."""
    if not share or score.size == 0:
        return score
    floor = float(np.median(score))
    order = np.lexsort((-score, groups))              # by page, best chunk first
    s, g = score[order], groups[order]
    first = np.r_[True, g[1:] != g[:-1]]              # [n] in `order`: the page's best chunk
    best = np.maximum.accumulate(np.where(first, np.arange(g.size), 0))   # where each one's page best sits
    runner_up = np.where(np.r_[~first[1:], False], np.r_[s[1:], floor], floor)   # the next one, same page
    other = np.where(first, runner_up, s[best])       # best chunk: the runner-up; the others: the best
    out = np.empty_like(score)
    out[order] = s + share * np.maximum(other - floor, 0.0)
    return out
