"""PDF bytes -> one Page per physical PDF page, text cleaned for retrieval.

Text comes from rag.extract: poppler's pdftotext by default (it keeps the spaces between
words that pypdf drops in many real manuals; see benchmarks/results/rag_eval.json), pdfium
where pdftotext is missing or fails, and pdfium again for any single page the first
extractor left blank. Each page carries the section headings of the PDF's outline
(rag.outline). Page numbers are physical (1 = the first page of the file), never
the printed ones. Refuses (InputError) bytes that are not a PDF, encrypted PDFs it cannot
open with an empty password, PDFs pypdf cannot parse, PDFs over the budget's pages or time,
and PDFs without any extractable text (scans).
"""
from __future__ import annotations

import io
import logging
import re
import unicodedata
from functools import cache

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from rag import extract
from rag.budget import Budget
from rag.errors import InputError
from rag.outline import outline_entries, with_sections
from rag.types import Page

log = logging.getLogger(__name__)

_HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")    # "read-\ning" -> "reading"
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def clean_text(text: str) -> str:
    """NFKC (ligatures such as "ﬁ" become "fi"), rejoin words hyphenated at a line end,
    squeeze runs of spaces and blank lines."""
    text = unicodedata.normalize("NFKC", text).replace("\x00", "")
    text = _HYPHEN_BREAK.sub(r"\1\2", text)
    text = _SPACES.sub(" ", text)
    return _BLANK_LINES.sub("\n\n", text).strip()


def _open(data: bytes, name: str) -> PdfReader:
    if b"%PDF-" not in data[:1024]:     # the header may follow a little junk, as in pypdf
        raise InputError(f"{name}: not a PDF (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise InputError(f"{name}: the PDF is encrypted with a password")
        len(reader.pages)          # forces the page tree to be read: broken files fail here
        return reader
    except (FileNotDecryptedError, DependencyError) as e:
        raise InputError(f"{name}: the PDF is encrypted and cannot be opened ({e})") from e
    except InputError:
        raise
    except Exception as e:  # pypdf raises many types on malformed input; all mean "broken"
        raise InputError(f"{name}: unreadable PDF ({type(e).__name__}: {e})") from e


@cache
def _say_fallback(why: str) -> None:
    log.warning("%s; reading PDFs with pypdfium2 instead (install poppler-utils: `make setup`)", why)


def _fallback_page(data: bytes, index: int) -> str:
    import pypdfium2 as pdfium_lib
    pdf = pdfium_lib.PdfDocument(data)
    try:
        page = pdf[index]
        textpage = page.get_textpage()
        return textpage.get_text_range()
    finally:
        pdf.close()


def extract_pages(data: bytes, name: str, extractor: str, budget: Budget, reader: PdfReader) -> list[str]:
    """Raw text of each physical page: `extractor`, else the fallback for the whole file."""
    n = len(reader.pages)
    budget.check_pages(n, name)
    texts: list[str] | None = None
    try:
        texts = extract.EXTRACTORS[extractor](data, budget)
        if len(texts) != n:
            raise extract.ExtractError(f"{extractor} gave {len(texts)} pages, the file has {n}")
    except extract.ExtractError as e:
        if extractor == extract.FALLBACK:
            raise InputError(f"{name}: cannot extract text ({e})") from e
        if extract.pdftotext_path() is None:
            _say_fallback(str(e))
        else:
            log.warning("%s: %s; falling back to %s", name, e, extract.FALLBACK)
        texts = extract.EXTRACTORS[extract.FALLBACK](data, budget)
        extractor = extract.FALLBACK
    if extractor != extract.FALLBACK:
        for i, text in enumerate(texts):   # one page the extractor could not read: try pdfium on it
            if not text.strip():
                budget.check()
                try:
                    texts[i] = _fallback_page(data, i)
                except Exception as e:  # pdfium's errors on one broken page: that page stays blank
                    log.warning("%s: page %d: pdfium failed too (%s)", name, i + 1, e)
    return texts


_DIGITS = re.compile(r"\d+")
EDGE_LINES = 3          # lines at the top and at the bottom of a page where running heads sit


def _key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()))


def strip_running_lines(texts: list[str]) -> list[str]:
    """Drop running heads and feet: a line (digits aside) among the first or last few lines
    of at least 30% of the pages, such as "Network UPS Tools User Manual" or "52 / 92".
    They carry nothing a question asks about and blur every chunk's vector."""
    if len(texts) < 4:
        return texts
    edges = []
    for text in texts:
        lines = [i for i, line in enumerate(text.split("\n")) if line.strip()]
        edges.append(set(lines[:EDGE_LINES] + lines[-EDGE_LINES:]))
    counts: dict[str, int] = {}
    for text, edge in zip(texts, edges):
        lines = text.split("\n")
        for key in {_key(lines[i]) for i in edge}:
            counts[key] = counts.get(key, 0) + 1
    running = {k for k, n in counts.items() if n >= max(3, 0.3 * len(texts))}
    if not running:
        return texts
    return ["\n".join(line for i, line in enumerate(text.split("\n")) if i not in edge or _key(line) not in running)
            for text, edge in zip(texts, edges)]


def read_pdf(data: bytes, name: str = "document.pdf", budget: Budget | None = None,
             extractor: str = extract.DEFAULT) -> list[Page]:
    budget = budget or Budget()
    reader = _open(data, name)
    texts = strip_running_lines([clean_text(raw) for raw in extract_pages(data, name, extractor, budget, reader)])
    pages = with_sections([Page(number, clean_text(text)) for number, text in enumerate(texts, start=1)],
                          outline_entries(reader))
    if not any(p.text for p in pages):
        raise InputError(f"{name}: no extractable text in {len(pages)} page(s) "
                         "(a scanned PDF? OCR is not supported)")
    return pages


def pdf_title(data: bytes, name: str = "document.pdf") -> str:
    """The title in the PDF's document information ("" when it has none)."""
    info = _open(data, name).metadata
    return " ".join(str(info.title).split()) if info and info.title else ""


def glue_rate(texts: list[str]) -> float:
    """Share of letters that sit in "words" of 20 or more letters: text whose spaces were lost."""
    words = re.findall(r"[^\W\d_]+", " ".join(texts))
    letters = sum(map(len, words))
    return sum(len(w) for w in words if len(w) >= 20) / letters if letters else 0.0
