"""Section headings from a PDF's outline reach hits and keyword search; contents pages rank
below the pages they point to. PDFs built with fpdf2, whose start_section writes outline
entries as LaTeX and DocBook manuals do."""
from __future__ import annotations

from fpdf import FPDF

from tests.worker.conftest import TOPIC_PAGES


def _manual() -> bytes:
    """Page 1: chapter "Mailing the annotated sheets" and its first words; page 2: the rest of
    it, whose text never says mail; page 3: a new chapter with a subsection halfway down."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.start_section("Mailing the annotated sheets")
    pdf.multi_cell(0, 6, "Mailing the annotated sheets\nThe command reads a list of students and their addresses.", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.multi_cell(0, 6, "Transport arguments. The --transport-path option sets the path of the transport "
                         "program; the default is the one installed by the system.")
    pdf.add_page()
    pdf.start_section("Scanning")
    pdf.multi_cell(0, 6, "Scanning\nPut the completed sheets in the document feeder of the scanner.\n" * 3, new_x="LMARGIN", new_y="NEXT")
    pdf.start_section("Resolution", level=1)
    pdf.multi_cell(0, 6, "Resolution\nA resolution of 300 dots per inch reads every box reliably.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _search(client, query: str, **kw) -> list[dict]:
    r = client.post("/v1/rag/search", json={"query": query, "collection": "man", "k": 5, **kw})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_hits_carry_the_heading_path_in_force_where_they_start(client):
    r = client.post("/v1/rag/ingest", files={"file": ("man.pdf", _manual(), "application/pdf")},
                    data={"collection": "man"})
    assert r.status_code == 200, r.text
    by_page = {h["page"]: h for h in _search(client, "transport path scanner resolution students", mode="bm25")}
    assert by_page[2]["section"] == "Mailing the annotated sheets"       # carried over from page 1
    hits = _search(client, "dots per inch resolution", mode="bm25")
    assert hits[0]["page"] == 3 and hits[0]["section"] in ("Scanning", "Scanning > Resolution")
    # a word only its heading has finds the chunk by keyword
    assert [h["page"] for h in _search(client, "mailing", mode="bm25")][:2] in ([1, 2], [2, 1])


def test_contents_pages_rank_below_the_pages_they_list(client, make_pdf):
    titles = ["How volcanoes form from magma", "How sourdough bread rises", "The Python garbage collector",
              "How honey bees dance"]
    contents = "Contents\n" + "\n".join(f"{t} " + ". " * 30 + f"{i}" for i, t in enumerate([*titles, "Index"], start=2))
    pdf = make_pdf([contents, *TOPIC_PAGES])
    r = client.post("/v1/rag/ingest", files={"file": ("book.pdf", pdf, "application/pdf")}, data={"collection": "man"})
    assert r.status_code == 200, r.text
    for page, title in enumerate(titles, start=2):
        assert _search(client, title)[0]["page"] == page, title
