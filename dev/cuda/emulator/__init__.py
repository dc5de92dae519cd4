"""Run the CUDA backend's kernels on the CPU: each kernels/<name>.cu is compiled by g++ with
cuda_emu.h (CUDA threads as fibers, see there) into a shared library, and `EmuDevice` offers
the same interface as device.CupyDevice over numpy arrays.

Slow (a few million thread-switches a second) but exact in what it checks: indexing, data
layouts, barriers and the host-side glue, on machines with no GPU (CI, laptops). Needs g++
and the CUDA headers (cuda_fp16.h) of an installed toolkit.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from runtime.backends.cuda.device import KERNELS, Kernels

HERE = Path(__file__).parent
_CTYPE = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
          np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float}


def cuda_include() -> Path | None:
    nvcc = shutil.which("nvcc")
    for root in ([Path(nvcc).resolve().parent.parent] if nvcc else []) + [Path("/usr/local/cuda")]:
        if (root / "include" / "cuda_fp16.h").exists():
            return root / "include"
    return None


def available() -> bool:
    return shutil.which("g++") is not None and cuda_include() is not None


def _flags() -> list[str]:
    return ["-std=c++17", "-O1", "-fPIC", "-fno-strict-aliasing", "-w", f"-I{HERE}", f"-I{KERNELS}",
            f"-I{cuda_include()}", "-include", "cuda_emu.h"]


def _digest(flags: list[str], files: list[Path]) -> str:
    h = hashlib.sha256(" ".join(flags).encode())
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _scheduler(cache: Path) -> Path:
    """fibers.cpp compiled once (cached) and linked into every module: compiling it again for
    each module was a third of the module's build, and a fresh test run builds about 60."""
    obj = cache / f"fibers-{_digest(_flags(), sorted(HERE.glob('*.[ch]*')))}.o"
    if not obj.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / obj.name
            done = subprocess.run(["g++", *_flags(), "-c", str(HERE / "fibers.cpp"), "-o", str(out)],
                                  capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"emulator build of fibers.cpp failed:\n{done.stderr[-4000:]}")
            shutil.move(str(out), obj)
    return obj


def build(file: str, defines: dict, cache: Path) -> Path:
    """Compile kernels/<file>.cu for the emulator; returns the shared library (cached)."""
    flags = _flags() + [f"-D{k}={v}" for k, v in sorted(defines.items())]
    lib = cache / f"{file}-{_digest(flags, sorted(KERNELS.glob('*.cu*')) + sorted(HERE.glob('*.[ch]*')))}.so"
    if lib.exists():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    src = KERNELS / f"{file}.cu"
    expanded = subprocess.run(["g++", "-E", "-x", "c++", *flags, str(src)], capture_output=True, text=True)
    if expanded.returncode:
        raise RuntimeError(f"emulator preprocessing of {file}.cu failed:\n{expanded.stderr[-4000:]}")
    names = re.findall(r'extern\s+"C"\s+void\s+(\w+)\s*\(', expanded.stdout)
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "wrapper.cpp"
        wrapper.write_text(f'#include "{src}"\nnamespace {{\n' + "".join(
            f'void call_{n}(void** a) {{ emu::invoke({n}, a); }}\n'
            f'int reg_{n} = emu::register_kernel("{n}", call_{n});\n' for n in names) + "}\n")
        out = Path(tmp) / lib.name
        done = subprocess.run(["g++", *flags, "-shared", str(wrapper), str(_scheduler(cache)), "-o", str(out)],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"emulator build of {file}.cu failed:\n{done.stderr[-4000:]}")
        shutil.move(str(out), lib)
    return lib


class EmuDevice:
    name = "emulator"
    device_name = "CPU emulator"
    max_smem = 227 * 1024
    smem_per_sm = 228 * 1024
    smem_reserved = 1024
    pdl = True                      # as an H100: the launches linear.py picks there (staged ones)

    def __init__(self, cache: str | Path | None = None, sm_count: int = 132):
        """sm_count: 132 as an H100, so launch shapes match the real ones; fewer make a small
        model's launches fewer blocks (each block's threads are emulated one by one)."""
        self.sm_count = sm_count
        self.xp = np
        self.cache = Path(cache or os.environ.get("SAMEVM_EMU_CACHE", Path(tempfile.gettempdir()) / "samevm-emu"))
        self._modules: dict[tuple, Kernels] = {}
        self._recording: list | None = None

    def use(self) -> None:
        pass

    def kernels(self, file: str, **defines) -> Kernels:
        key = (file, tuple(sorted(defines.items())))
        if key not in self._modules:
            lib = ctypes.CDLL(str(build(file, dict(key[1]), self.cache)))
            lib.emu_launch.restype = ctypes.c_int
            self._modules[key] = Kernels(lambda name: _EmuLauncher(lib, name, self))
        return self._modules[key]

    def ptr(self, a) -> int:
        return a.ctypes.data

    def upload(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True, order="C")

    def copy_in(self, dst, host: np.ndarray) -> None:
        dst.reshape(-1)[:host.size] = host.reshape(-1)

    def to_host(self, a) -> np.ndarray:
        return np.array(a, copy=True)

    def synchronize(self) -> None:
        pass

    def to_host_async(self, *arrays):
        copies = [np.array(a, copy=True) for a in arrays]   # kernels have already run
        return lambda: copies

    def gemm(self, x, w, y, out_col0: int = 0) -> None:
        def run():
            y[:, out_col0:out_col0 + w.shape[0]] = x.astype(np.float32) @ w.astype(np.float32).T
        self._run(run)

    def capture(self, fn):
        self._recording = []
        try:
            result = fn()
        finally:
            ops, self._recording = self._recording, None
        return result, _EmuGraph(ops)

    def _run(self, op) -> None:
        if self._recording is not None:
            self._recording.append(op)
        else:
            op()


class _EmuLauncher:
    def __init__(self, lib, name: str, dev: EmuDevice):
        self.lib, self.name, self.dev = lib, name.encode(), dev

    def prefer_shared(self) -> None:       # the carveout: nothing to set on the CPU
        pass

    def __call__(self, grid, block, args, smem: int = 0):
        grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
        assert min(grid + block) >= 1, f"{self.name.decode()}: CUDA refuses a launch of grid {grid}, block {block}"
        values = []
        for a in args:
            if a is None:
                values.append(ctypes.c_void_p(0))
            elif isinstance(a, np.ndarray):
                assert a.flags.c_contiguous or a.ndim <= 1, "kernel arrays must be contiguous"
                values.append(ctypes.c_void_p(a.ctypes.data))
            else:
                values.append(_CTYPE[np.asarray(a).dtype](a))
        argv = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])

        def run():
            rc = self.lib.emu_launch(self.name, *[ctypes.c_uint(v) for v in grid + block],
                                     ctypes.c_size_t(smem), argv)
            assert rc == 0, f"emulator: cannot launch {self.name.decode()} ({rc})"
        run.keep = (values, argv, args)    # the recorded graph keeps its arguments alive
        self.dev._run(run)


class _EmuGraph:
    def __init__(self, ops):
        self.ops = ops

    def replay(self) -> None:
        for op in self.ops:
            op()
