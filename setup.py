"""The one compiled part of samevm: the CPU block kernels (runtime/backends/cpu_kernels).

Everything else is in pyproject.toml. The extension is optional: where gcc is missing or
fails, the install goes on and the CPU backend falls back to int8 weights made at load
(and says so in its log). It is a plain C library loaded through ctypes, built for every
x86 instruction set it has a kernel for and choosing one at run time.
"""
from setuptools import Extension, setup

KERNELS = "runtime/backends/cpu_kernels/"

setup(ext_modules=[Extension(
    "runtime.backends.cpu_kernels._qmatmul",
    sources=[KERNELS + f for f in ("qmatmul.c", "kern_avx512.c", "kern_avx2.c", "kern_scalar.c", "attention.c", "layer.c",
                                   "merge.c")],
    depends=[KERNELS + f for f in ("kern.inc", "merge.inc", "kern_api.h", "unpack.h")],
    extra_compile_args=["-O3", "-std=gnu11"],
    libraries=["pthread", "m"],
    optional=True,
)])
