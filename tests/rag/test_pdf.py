"""PDF reading: text cleaning, page numbers, and refusals of bad PDFs."""
from __future__ import annotations

import pytest
from fpdf import FPDF

from rag.errors import InputError
from rag.pdf import clean_text, pdf_title, read_pdf


def pdf_bytes(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def test_clean_text_normalises_ligatures_hyphenation_and_spacing():
    assert clean_text("e\ufb03cient \ufb01le") == "efficient file"
    assert clean_text("read-\ning the manu-\nal") == "reading the manual"
    assert clean_text("a   b\t\tc\n\n\n\nd\x00") == "a b c\n\nd"


def test_pages_keep_their_numbers_and_text():
    pages = read_pdf(pdf_bytes(["first page text", "", "third page text"]), "t.pdf")
    assert [(p.number, p.text) for p in pages] == [(1, "first page text"), (2, ""), (3, "third page text")]


@pytest.mark.parametrize("data,message", [
    (b"GIF89a not a pdf", "not a PDF"),
    (b"%PDF-1.7\n%%EOF", "unreadable PDF"),
    (pdf_bytes([""]), "no extractable text"),
])
def test_bad_pdfs_are_refused(data, message):
    with pytest.raises(InputError, match=message):
        read_pdf(data, "bad.pdf")


def test_pages_carry_the_outline_headings():
    from fpdf import FPDF
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for chapter, sections in (("Install", ["From source"]), ("Usage", [])):
        pdf.add_page()
        pdf.start_section(chapter)
        pdf.multi_cell(0, 6, f"{chapter}\nSome words about it.", new_x="LMARGIN", new_y="NEXT")
        for s in sections:
            pdf.start_section(s, level=1)
            pdf.multi_cell(0, 6, f"{s}\nRun the build.", new_x="LMARGIN", new_y="NEXT")
        pdf.add_page()
        pdf.multi_cell(0, 6, "More words on a page without a heading.", new_x="LMARGIN", new_y="NEXT")
    pages = read_pdf(bytes(pdf.output()))
    first = pages[0]
    assert [path for _, path in first.sections] == ["Install", "Install > From source"]
    assert first.text[first.sections[1][0]:].startswith("From source")
    assert pages[1].sections == ((0, "Install > From source"),)
    assert [path for _, path in pages[2].sections] == ["Usage"] and pages[3].sections == ((0, "Usage"),)


def test_the_title_comes_from_the_document_information():
    pdf = FPDF()
    pdf.set_title("Auto  Multiple\nChoice")
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "text")
    assert pdf_title(bytes(pdf.output()), "t.pdf") == "Auto Multiple Choice"
    assert pdf_title(pdf_bytes(["untitled"]), "u.pdf") == ""
