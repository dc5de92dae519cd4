"""Text extraction: words kept apart where pypdf glues them, physical pages, the fallback
when pdftotext is missing or leaves a page blank, and the page/time budget."""
from __future__ import annotations

import logging

import pytest

from rag import extract
from rag.budget import Budget, OverBudget
from rag.pdf import glue_rate, read_pdf, strip_running_lines
from tests.rag.pdfs import kerned_words, page_bomb

SENTENCE = ["Currently,", "an", "RSA", "key", "with", "many", "bits", "is", "a", "good", "idea."]
PAGES = [SENTENCE, ["nothing", "to", "see", "here"], ["Glaciers", "carve", "valleys", "slowly."]]


def test_pypdf_glues_these_words_and_the_default_reader_does_not():
    data = kerned_words(PAGES)
    glued = extract.pypdf_plain(data, Budget())[0]
    assert "anRSAkeywith" in glued and glue_rate([glued]) > 0.5        # the failure being fixed
    pages = read_pdf(data, "kerned.pdf")
    assert [p.number for p in pages] == [1, 2, 3]
    assert pages[0].text == "Currently, an RSA key with many bits is a good idea."
    assert pages[2].text == "Glaciers carve valleys slowly."
    assert glue_rate([p.text for p in pages]) == 0


@pytest.mark.skipif(extract.pdftotext_path() is None, reason="poppler-utils is not installed")
def test_pdftotext_is_the_default_and_splits_pages_at_form_feeds():
    texts = extract.pdftotext(kerned_words(PAGES), Budget())
    assert len(texts) == 3 and texts[1].split() == ["nothing", "to", "see", "here"]


def test_without_pdftotext_it_says_so_and_reads_with_pdfium(monkeypatch, caplog):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert extract.pdftotext_path() is None
    with caplog.at_level(logging.WARNING):
        pages = read_pdf(kerned_words(PAGES), "kerned.pdf")
    assert pages[0].text == "Currently, an RSA key with many bits is a good idea."
    assert "poppler-utils" in caplog.text


def test_a_page_the_first_extractor_leaves_blank_is_read_by_the_fallback(monkeypatch):
    def loses_page_two(data, budget):
        return ["Currently, an RSA key", "", "Glaciers carve valleys slowly."]
    monkeypatch.setitem(extract.EXTRACTORS, "pdftotext", loses_page_two)
    pages = read_pdf(kerned_words(PAGES), "kerned.pdf")
    assert [p.text for p in pages] == ["Currently, an RSA key", "nothing to see here",
                                       "Glaciers carve valleys slowly."]


def test_a_tiny_file_with_ten_thousand_pages_is_refused_before_extraction(monkeypatch):
    data = page_bomb(4)
    assert len(data) < 2000
    called = []
    monkeypatch.setitem(extract.EXTRACTORS, "pdftotext", lambda d, b: called.append(1) or [])
    with pytest.raises(OverBudget, match="10000 pages is over the limit of 5000"):
        read_pdf(data, "bomb.pdf", Budget(max_pages=5000))
    assert not called


def test_time_budget_and_cancel_stop_extraction():
    data = kerned_words(PAGES * 20)
    with pytest.raises(OverBudget, match="longer than the budget"):
        read_pdf(data, "slow.pdf", Budget(seconds=0))
    budget = Budget()
    budget.cancel()
    with pytest.raises(Exception, match="client went away"):
        extract.pdfium(data, budget)


def test_running_heads_and_page_numbers_are_dropped_from_the_edges_only():
    topics = ["lava", "bread", "bees", "ice", "tides", "ferns", "moss", "owls", "rust", "salt"]
    pages = [f"User Manual\n{i} / 40\nThe User Manual on {t}.\nUser Manual" for i, t in enumerate(topics, 1)]
    out = strip_running_lines(pages)
    assert out[3] == "The User Manual on ice."
    assert strip_running_lines(pages[:3]) == pages[:3]        # too few pages to tell


def test_sources_refuse_text_and_paths_that_are_not_unicode(tmp_path):
    from rag import sources
    from rag.errors import InputError
    with pytest.raises(InputError, match="not valid Unicode"):
        sources.from_text("x\ud800", "notes")
    with pytest.raises(InputError, match="not valid Unicode"):
        sources.resolve_allowed(tmp_path / "a\ud800.pdf", [tmp_path])
