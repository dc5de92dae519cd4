"""Turn what a caller gives (text, uploaded bytes, or local paths) into Documents.

Local paths are accepted only inside the allowed roots, after resolving symlinks, so a
link that points outside a root is refused like a plain outside path. Files are read by
suffix: .pdf through rag.pdf, .txt/.md/.rst/.csv/.json/.html as UTF-8 text.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from rag.errors import InputError
from rag.pdf import clean_text, read_pdf
from rag.types import Document, Page

TEXT_SUFFIXES = {".txt", ".md", ".rst", ".csv", ".json", ".html", ".htm", ".xml", ".log", ""}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | {".pdf"}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_text(text: str, source: str) -> Document:
    cleaned = clean_text(text)
    if not cleaned:
        raise InputError(f"{source}: the text is empty")
    return Document(source, "text", (Page(None, cleaned),), _sha256(text.encode()))


def from_bytes(data: bytes, filename: str, source: str | None = None) -> Document:
    """An uploaded or read file; its kind comes from the suffix, checked against the bytes."""
    source = source or filename
    suffix = Path(filename).suffix.lower()
    if not data:
        raise InputError(f"{source}: the file is empty")
    if suffix == ".pdf":
        return Document(source, "pdf", tuple(read_pdf(data, source)), _sha256(data))
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
    real = Path(path).expanduser().resolve()
    if not any(real.is_relative_to(root.expanduser().resolve()) for root in roots):
        raise InputError(f"{path}: outside the allowed roots "
                         f"({', '.join(str(r) for r in roots)})")
    if not real.exists():
        raise InputError(f"{path}: no such file or directory")
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


def from_path(path: Path, max_bytes: int) -> Document:
    """Read one file already checked by resolve_allowed."""
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(f"{path}: {size} bytes is over the limit of {max_bytes}")
    return from_bytes(path.read_bytes(), path.name, source=str(path))
