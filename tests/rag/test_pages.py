"""Page evidence through RagIndex.search: each chunk's score gains a share of its page's
best other chunk's excess over the query's median score, as a brute-force loop computes it."""
from __future__ import annotations

import numpy as np

from rag.types import Document, Page

TOPICS = ["the scanner reads the answer sheets", "students tick the boxes with a pen",
          "the teacher sends the marks by e-mail", "the server keeps the UPS online",
          "the compiler places variables in external memory", "paragraph styles set the font size"]


def _page(number: int) -> Page:
    """Several chunks' worth of sentences, a different mix of topics on each page."""
    sentences = [f"On page {number}, {TOPICS[(number + i) % len(TOPICS)]} in step {i}." for i in range(40)]
    return Page(number, " ".join(sentences))


def test_scores_match_the_brute_force_page_evidence(index, search):
    index.ingest(Document("manual.pdf", "pdf", tuple(_page(n) for n in (1, 2, 3)), "pages-hash"), "pages")
    query = "how are the marks sent to students by e-mail"
    hits = search(query, "pages", per_page=0, page_share=0.5)
    assert len({h.page for h in hits}) == 3 and len(hits) > 6
    corpus = index.corpus("pages")
    cos = corpus.vectors @ index.embedder.embed([query])[0]
    median = np.median(cos)
    page = [m["page"] for m in corpus.metas]
    want = {}
    for i in range(corpus.count):
        others = [cos[j] for j in range(corpus.count) if j != i and page[j] == page[i]]
        want[corpus.ids[i]] = cos[i] + 0.5 * max(max(others, default=median) - median, 0.0)
    for h in hits:
        assert abs(h.scores["page"] - want[h.chunk_id]) < 1e-5
        assert h.score == h.scores["page"]
    assert [h.chunk_id for h in hits] == sorted(want, key=lambda c: -want[c])


def test_a_page_keeps_its_best_chunk_on_top(index, search):
    """The raise never reorders the chunks of one page: with one hit a page, each hit is
    its page's best chunk by cosine, so hits quote the passage that matched."""
    query = "the compiler places variables in external memory"
    top = search(query, "pages", k=3, page_share=0.5)
    corpus = index.corpus("pages")
    cos = corpus.vectors @ index.embedder.embed([query])[0]
    for h in top:
        best = max((i for i, m in enumerate(corpus.metas) if m["page"] == h.page), key=lambda i: cos[i])
        assert h.chunk_id == corpus.ids[best] and h.text == corpus.texts[best]
