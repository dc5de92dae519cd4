"""PDF bytes -> one Page per PDF page, through pypdf, with the text cleaned for retrieval.

Refuses (InputError) bytes that are not a PDF, encrypted PDFs it cannot open with an empty
password, PDFs pypdf cannot parse, and PDFs without any extractable text (scans).
pypdf's "plain" mode is used: on the Debian manuals tried (R, ReportLab, gnuplot,
asymptote) "layout" mode split no more words correctly and was 1.2-1.5x slower.
"""
from __future__ import annotations

import io
import logging
import re
import unicodedata

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from rag.errors import InputError
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


def read_pdf(data: bytes, name: str = "document.pdf") -> list[Page]:
    reader = _open(data, name)
    pages = []
    for number, page in enumerate(reader.pages, start=1):
        try:
            raw = page.extract_text() or ""
        except Exception as e:  # same reason as in _open; say which page broke
            raise InputError(f"{name}: cannot extract text from page {number} "
                             f"({type(e).__name__}: {e})") from e
        pages.append(Page(number, clean_text(raw)))
    if not any(p.text for p in pages):
        raise InputError(f"{name}: no extractable text in {len(pages)} page(s) "
                         "(a scanned PDF? OCR is not supported)")
    return pages
