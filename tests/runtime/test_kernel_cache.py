"""Where compiled CUDA kernels are kept: under the data directory, in a folder named by the
kernel sources, headers included (CuPy's own cache key leaves included headers out)."""
from __future__ import annotations

import os
import shutil

from runtime.backends.cuda import device
from samevm.cli import build_parser
from samevm.commands.serve import build_config
from samevm.settings import Settings


def test_the_cache_folder_follows_every_kernel_file(tmp_path, monkeypatch):
    kernels = tmp_path / "kernels"
    shutil.copytree(device.KERNELS, kernels)
    monkeypatch.setattr(device, "KERNELS", kernels)
    monkeypatch.setenv("CUPY_CACHE_DIR", "/elsewhere")
    first = device.keep_kernels_in(tmp_path / "cache")
    assert first.is_dir() and first.parent == tmp_path / "cache" and os.environ["CUPY_CACHE_DIR"] == str(first)
    assert device.keep_kernels_in(tmp_path / "cache") == first             # same sources: same binaries
    header = kernels / "common.cuh"
    header.write_text(header.read_text() + "\n// changed\n")
    assert device.keep_kernels_in(tmp_path / "cache") != first             # a header alone changed


def test_serve_keeps_kernels_under_the_data_directory(tmp_path, tiny_gguf):
    args = build_parser().parse_args(["serve", "--model", tiny_gguf("qwen2")])
    config = build_config(args, Settings(home=tmp_path))
    assert config.engine.kernel_cache == str(tmp_path / "cache" / "kernels")
