"""Turn what a caller gives (text, uploaded bytes, or local paths) into Documents.

Local paths are accepted only inside the allowed roots, after resolving symlinks, so a
link that points outside a root is refused like a plain outside path, and only regular
files are read: a FIFO or a device would block the reading thread or never end. The check
is made on the opened descriptor (opened non-blocking), so a file swapped for a FIFO after
the listing is refused too. Files are read by suffix: .pdf through rag.pdf,
.txt/.md/.rst/.csv/.json/.html as UTF-8 text.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from rag.budget import Budget
from rag.errors import InputError
from rag.pdf import clean_text, read_pdf
from rag.types import Document, Page

TEXT_SUFFIXES = {".txt", ".md", ".rst", ".csv", ".json", ".html", ".htm", ".xml", ".log", ""}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | {".pdf"}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _unicode(text: str, what: str) -> str:
    """`text` if it can be written as UTF-8 (JSON can carry lone surrogates, which cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(f"{what} is not valid Unicode (a lone surrogate at {e.start})") from e
    return text


def from_text(text: str, source: str) -> Document:
    _unicode(source, "the source name")
    cleaned = clean_text(_unicode(text, f"{source[:200]}: the text"))
    if not cleaned:
        raise InputError(f"{source}: the text is empty")
    return Document(source, "text", (Page(None, cleaned),), _sha256(text.encode()))


def from_bytes(data: bytes, filename: str, source: str | None = None, budget: Budget | None = None) -> Document:
    """An uploaded or read file; its kind comes from the suffix, checked against the bytes."""
    source = source or filename
    suffix = Path(filename).suffix.lower()
    if not data:
        raise InputError(f"{source}: the file is empty")
    if suffix == ".pdf":
        return Document(source, "pdf", tuple(read_pdf(data, source, budget)), _sha256(data))
    if suffix not in TEXT_SUFFIXES:
        raise InputError(f"{source}: unsupported file type {suffix!r}; "
                         f"supported: {', '.join(sorted(s for s in SUPPORTED_SUFFIXES if s))}")
    if data.startswith(b"%PDF-"):
        raise InputError(f"{source}: PDF bytes under a {suffix or 'suffix-less'} name; name it .pdf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{source}: not UTF-8 text (byte {e.start})") from e
    doc = from_text(text, source)
    return Document(doc.source, doc.kind, doc.pages, _sha256(data))


def resolve_allowed(path: str | Path, roots: list[Path]) -> Path:
    """The real path of `path` if it lies inside one of `roots` (symlinks resolved)."""
    if not roots:
        raise InputError("reading local paths is disabled: no allowed roots are configured")
    if "\x00" in str(path):
        raise InputError(f"{str(path)[:200]!r}: a path cannot contain a NUL byte")
    _unicode(str(path), "the path")
    real = Path(path).expanduser().resolve()
    if not any(real.is_relative_to(root.expanduser().resolve()) for root in roots):
        raise InputError(f"{path}: outside the allowed roots "
                         f"({', '.join(str(r) for r in roots)})")
    if not real.exists():
        raise InputError(f"{path}: no such file or directory")
    if not (real.is_file() or real.is_dir()):
        raise InputError(f"{path}: not a regular file or a folder (a FIFO, socket or device is never read)")
    return real


def expand(paths: list[str | Path], roots: list[Path], max_files: int = 1000) -> list[Path]:
    """Real paths of the supported files in `paths` (directories walked, sorted), each
    inside the allowed roots: a symlink found while walking is checked like a given path."""
    files: list[Path] = []
    for given in paths:
        path = resolve_allowed(given, roots)
        found = sorted(p for p in path.rglob("*") if p.is_file()
                       and p.suffix.lower() in SUPPORTED_SUFFIXES - {""}) if path.is_dir() else [path]
        files.extend(resolve_allowed(p, roots) for p in found)
        if len(files) > max_files:
            raise InputError(f"more than {max_files} files under {given}; ingest fewer at a time")
    return files


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file, refused before reading when it is anything else or too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise InputError(f"{path}: cannot open ({e.strerror})") from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, socket or device is never read)")
        if info.st_size > max_bytes:
            raise InputError(f"{path}: {info.st_size} bytes is over the limit of {max_bytes}")
        return f.read(max_bytes + 1)


def from_path(path: Path, max_bytes: int, budget: Budget | None = None) -> Document:
    """Read one file already checked by resolve_allowed."""
    return from_bytes(read_regular(path, max_bytes), path.name, source=str(path), budget=budget)
