"""PDFs written byte by byte for tests: what generators such as pdfTeX emit and fpdf2 does not."""
from __future__ import annotations


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF file of these objects (numbered from 1; object 1 is the catalog)."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(content: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
# Helvetica with a space as wide as an em, as some embedded subset fonts declare: a
# reader that takes a gap for a space only when it nears the space's width sees none
WIDE_SPACE_FONT = (b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /FirstChar 32 /LastChar 126 /Widths ["
                   + b"1000 " + b"556 " * 94 + b"] >>")


def kerned_words(pages: list[list[str]]) -> bytes:
    """One line of words a page, the spaces between words drawn as TJ kerning (as pdfTeX
    does) rather than as space characters: text whose words pypdf glues together."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages))).encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(pages), WIDE_SPACE_FONT]
    for i, words in enumerate(pages):
        tj = b" -300 ".join(b"(" + w.encode() + b")" for w in words)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                       b" /Contents %d 0 R >>" % (5 + 2 * i))
        objects.append(_stream(b"BT /F1 11 Tf 40 700 Td [" + tj + b"] TJ ET"))
    return _pdf(objects)


def page_bomb(levels: int, fanout: int = 10) -> bytes:
    """fanout ** levels pages from a few hundred bytes: every Pages node lists the same
    child `fanout` times, down to one shared page."""
    objects = [b"<< /Type /Catalog /Pages 3 0 R >>", FONT]
    for level in range(levels):          # object 3 + level is the Pages node of that level
        child = 3 + level + 1
        objects.append(b"<< /Type /Pages /Kids [" + b" ".join([b"%d 0 R" % child] * fanout) +
                       b"] /Count %d >>" % fanout ** (levels - level))
    page = 3 + levels
    objects.append(b"<< /Type /Page /MediaBox [0 0 612 792] /Resources << /Font << /F1 2 0 R >> >>"
                   b" /Contents %d 0 R >>" % (page + 1))
    objects.append(_stream(b"BT /F1 11 Tf 40 700 Td (the same page again) Tj ET"))
    return _pdf(objects)
