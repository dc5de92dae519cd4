"""The two ways training state reaches disk: JSON files replaced whole (a reader never sees
half a file, a crash leaves the old one) and append-only JSON-lines event logs."""
from __future__ import annotations

import json
import os
from pathlib import Path


def write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    os.replace(tmp, path)


def read_json(path: Path):
    return json.loads(path.read_text())


def append_jsonl(path: Path, record: dict) -> None:
    # one write() of one line under O_APPEND: lines from two processes never interleave
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_jsonl(path: Path, start: int = 0) -> list[dict]:
    """Complete lines from line `start` on; a line still being written is left for later."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]        # the part after the last newline is not complete yet
    return [json.loads(line) for line in lines[start:] if line]
