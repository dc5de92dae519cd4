"""The adapter shipped with a known model (runtime/adapters/, runtime/catalog.py): served on
that model by default ("auto"), refused when its weights' sha256 is not the catalog's, never
put on another model, and left off with "none"."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from runtime import catalog
from runtime.gguf import ModelLoadError
from samevm.cli import build_parser
from samevm.commands.serve import build_config
from samevm.settings import Settings
from tests.runtime.lora_fixtures import make_adapter


@pytest.fixture
def known_tiny(tiny_gguf, tmp_path, monkeypatch):
    """A known model 'tiny-known' installed under tmp_path/home, with an adapter shipped for it."""
    base = Path(tiny_gguf("qwen2"))
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    shutil.copyfile(base, home / "models" / "tiny-known.gguf")
    shipped = tmp_path / "adapters"
    make_adapter(str(base), shipped / "tiny-tools", seed=3)
    digest = hashlib.sha256((shipped / "tiny-tools" / "adapter_model.safetensors").read_bytes()).hexdigest()
    entry = dataclasses.replace(catalog.KNOWN_MODELS["smollm2-135m"], name="tiny-known", filename="tiny-known.gguf",
                                adapter="tiny-tools", adapter_sha256=digest)
    monkeypatch.setitem(catalog.KNOWN_MODELS, "tiny-known", entry)
    monkeypatch.setattr(catalog, "ADAPTERS", shipped)
    return home, shipped / "tiny-tools"


def served_lora(home: Path, *argv: str, **settings) -> str | None:
    args = build_parser().parse_args(["serve", *argv])
    return build_config(args, Settings(home=home, **settings)).engine.lora


def test_a_known_model_is_served_with_its_shipped_adapter_by_default(known_tiny):
    home, folder = known_tiny
    assert Settings(home=home).lora == "auto"
    assert served_lora(home, "--model", "tiny-known") == str(folder)
    assert served_lora(home, "--model", "tiny-known", "--lora", "none") is None
    assert served_lora(home, "--model", "tiny-known", lora="none") is None
    # the same file by path is not the known model: nothing is put on a model the adapter was not made for
    assert served_lora(home, "--model", str(home / "models" / "tiny-known.gguf")) is None


def test_a_changed_shipped_adapter_is_refused_with_the_reason(known_tiny):
    home, folder = known_tiny
    weights = folder / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="sha256"):
        served_lora(home, "--model", "tiny-known")
    weights.unlink()
    with pytest.raises(ModelLoadError, match="missing"):
        served_lora(home, "--model", "tiny-known")


def test_a_shipped_adapter_changed_after_its_check_is_refused(known_tiny, monkeypatch):
    """Its digest is kept per file version (runtime/file_digest.py): the next check of the same
    file is not read again, and a rewrite with the old size and mtime is still seen."""
    from runtime import file_digest
    monkeypatch.setattr(file_digest, "RACY_NS", 0)      # keep digests of files this test just wrote
    home, folder = known_tiny
    weights = folder / "adapter_model.safetensors"
    before = weights.stat()
    assert served_lora(home, "--model", "tiny-known") == str(folder)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ModelLoadError, match="sha256"):
        served_lora(home, "--model", "tiny-known")


def test_every_shipped_adapter_matches_its_catalog_entry():
    shipped = [m for m in catalog.KNOWN_MODELS.values() if m.adapter]
    for m in shipped:
        folder = Path(catalog.adapter_for(m.name, "auto"))
        assert folder.parent == catalog.ADAPTERS and (folder / "adapter_config.json").is_file()
        size = (folder / "adapter_model.safetensors").stat().st_size
        assert size <= 16_500_000, f"{m.adapter} is {size} bytes; the shipped adapter stays small"



def test_a_later_start_takes_the_shipped_adapter_s_digest_from_the_data_directory(known_tiny, monkeypatch):
    """The check's sha256 is kept under <home>/cache/digests per file version: a new process
    serving the same files does not hash the adapter again."""
    from runtime import file_digest
    monkeypatch.setattr(file_digest, "RACY_NS", 0)      # keep digests of files this test just wrote
    home, folder = known_tiny
    assert served_lora(home, "--model", "tiny-known") == str(folder)
    monkeypatch.setattr(file_digest, "_kept", {})       # a new process: nothing kept in memory

    def hashed_again(*args, **kwargs):
        raise AssertionError("the adapter was hashed again")
    monkeypatch.setattr(file_digest.hashlib, "file_digest", hashed_again)
    assert served_lora(home, "--model", "tiny-known") == str(folder)
