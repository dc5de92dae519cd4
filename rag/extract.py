"""PDF text extractors: PDF bytes -> one raw text per physical page, in page order.

- "pdftotext": poppler's pdftotext (Debian poppler-utils) in a child process, pages split
  at the form feeds it writes after each page. Chosen by measurement
  (benchmarks/results/rag_eval.json): it keeps the spaces between words where pypdf glues
  them, and as a child process it can be killed when a budget runs out or the client leaves.
- "pdfium": pypdfium2 (Chrome's PDFium) in this process: the fallback where pdftotext is
  missing or fails.
- "pypdf", "pypdf-layout", "pdfminer": compared in the eval, not used by default.

Each function takes the bytes, a Budget (checked between pages), and returns a list of
strings, or raises ExtractError; rag.pdf picks, falls back and cleans.
"""
from __future__ import annotations

import io
import shutil
import subprocess
import tempfile

from rag.budget import Budget


class ExtractError(RuntimeError):
    """This extractor could not read the document (another one may)."""


def pdftotext_path() -> str | None:
    return shutil.which("pdftotext")


def pdftotext(data: bytes, budget: Budget) -> list[str]:
    exe = pdftotext_path()
    if exe is None:
        raise ExtractError("pdftotext is not installed (Debian package poppler-utils)")
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:   # pdftotext seeks: no stdin
        f.write(data)
        f.flush()
        args = [exe, "-q", "-enc", "UTF-8", "-l", str(budget.max_pages), f.name, "-"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        budget.watch(proc)
        try:
            out, _ = proc.communicate(timeout=budget.seconds_left())
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        finally:
            budget.unwatch(proc)
    budget.check()                     # over time or cancelled: the kill above is why it ended
    if proc.returncode != 0:
        raise ExtractError(f"pdftotext exited with {proc.returncode}")
    pages = out.decode("utf-8", "replace").split("\f")
    return pages[:-1] if pages and not pages[-1].strip() else pages


def pdfium(data: bytes, budget: Budget) -> list[str]:
    import pypdfium2 as pdfium_lib
    try:
        pdf = pdfium_lib.PdfDocument(data)
    except pdfium_lib.PdfiumError as e:
        raise ExtractError(f"pdfium cannot open it ({e})") from e
    try:
        texts = []
        for i in range(min(len(pdf), budget.max_pages)):
            budget.check()
            page = pdf[i]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n"))
            textpage.close()
            page.close()
        return texts
    finally:
        pdf.close()


def _pypdf(data: bytes, budget: Budget, mode: str) -> list[str]:
    from pypdf import PdfReader
    reader = PdfReader(io.BytesIO(data))
    texts = []
    for page in reader.pages[:budget.max_pages]:
        budget.check()
        texts.append(page.extract_text(extraction_mode=mode) or "")
    return texts


def pypdf_plain(data: bytes, budget: Budget) -> list[str]:
    return _pypdf(data, budget, "plain")


def pypdf_layout(data: bytes, budget: Budget) -> list[str]:
    return _pypdf(data, budget, "layout")


def pdfminer(data: bytes, budget: Budget) -> list[str]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextContainer
    texts = []
    for page in extract_pages(io.BytesIO(data), maxpages=budget.max_pages):
        budget.check()
        texts.append("".join(el.get_text() for el in page if isinstance(el, LTTextContainer)))
    return texts


EXTRACTORS = {"pdftotext": pdftotext, "pdfium": pdfium, "pypdf": pypdf_plain,
              "pypdf-layout": pypdf_layout, "pdfminer": pdfminer}
DEFAULT = "pdftotext"
FALLBACK = "pdfium"


def page_count(data: bytes) -> int:
    """Physical pages, from pdfium (fast; it also repairs what pdftotext may read differently)."""
    import pypdfium2 as pdfium_lib
    try:
        pdf = pdfium_lib.PdfDocument(data)
    except pdfium_lib.PdfiumError as e:
        raise ExtractError(f"pdfium cannot open it ({e})") from e
    try:
        return len(pdf)
    finally:
        pdf.close()

