"""Every CUDA kernel compiles for sm_80 and sm_90 with nvcc, the same source NVRTC builds at
run time, so a broken kernel fails CI (which has nvcc but no GPU)."""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

from runtime.backends.cuda import device
from runtime.backends.cuda.device import KERNELS
from dev.cuda.emulator import cuda_include

SOURCES = sorted(KERNELS.glob("*.cu"))
TEMPLATED = {"attention_decode.cu", "attention_prefill.cu", "rope_kv.cu"}   # HEAD_DIM and KV_T


def variants(src):
    if src.name in ("attention_prefill_tc.cu", "attention_decode_tc.cu"):   # f16 caches, head sizes 32 to 128
        return [{"HEAD_DIM": 128, "KV_T": "__half"}, {"HEAD_DIM": 64, "KV_T": "__half"}, {"HEAD_DIM": 96, "KV_T": "__half"}]
    if src.name == "matvec.cu":                    # f32 dots, and int8 ones at one token
        return [{}, {"Q8X": 1}]
    if src.name not in TEMPLATED:
        return [{}]
    return [{"HEAD_DIM": 128, "KV_T": "__half"}, {"HEAD_DIM": 64, "KV_T": "__nv_bfloat16"},
            {"HEAD_DIM": 16, "KV_T": "float"}, {"HEAD_DIM": 256, "KV_T": "__half"},
            {"HEAD_DIM": 128, "KV_T": "__half", "MAX_GROUP": 2}]


ARCHS = ("sm_80", "sm_90")


class Build(NamedTuple):
    arch: str
    variant: int
    folder: Path
    cmd: list[str]
    job: Future

    def check(self) -> None:
        done = self.job.result()
        assert done.returncode == 0, f"{' '.join(self.cmd)}\n{done.stderr}"


@pytest.fixture(scope="module")
def nvcc(tmp_path_factory):
    """nvcc(src) -> its Builds: every variant for every arch, submitted the first time a test
    asks and run as many at once as there are cores (an nvcc uses one; one after another, this
    file was 14% of the default run). -keep leaves the PTX beside each cubin, which
    test_kernels_wait_before_writing reads instead of compiling again."""
    root, builds = tmp_path_factory.mktemp("nvcc"), {}
    with ThreadPoolExecutor(len(os.sched_getaffinity(0))) as pool:
        def submit(src: Path) -> list[Build]:
            if src not in builds:
                builds[src] = []
                for arch in ARCHS:
                    for i, defines in enumerate(variants(src)):
                        folder = root / f"{src.stem}-{arch}-{i}"
                        folder.mkdir()
                        cmd = ["nvcc", f"-arch={arch}", "-cubin", "-keep", f"-keep-dir={folder}", "-std=c++17",
                               f"-I{KERNELS}", str(src), "-o", str(folder / "k.cubin"),
                               *[f"-D{k}={v}" for k, v in defines.items()]]
                        job = pool.submit(subprocess.run, cmd, capture_output=True, text=True)
                        builds[src].append(Build(arch, i, folder, cmd, job))
            return builds[src]
        yield submit


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_kernel_compiles(src, arch, nvcc):
    assert SOURCES, "no kernels found"
    for build in nvcc(src):
        if build.arch == arch:
            build.check()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_kernels_wait_before_writing(src, nvcc):
    """Captured decode steps launch every kernel with programmatic dependent launch, so each
    may start before the previous kernel ends: every entry point must wait for it
    (griddepcontrol.wait, common.cuh pdl_wait) and store nothing before that wait."""
    build = next(b for b in nvcc(src) if (b.arch, b.variant) == ("sm_90", 0))
    build.check()
    text = (build.folder / f"{src.stem}.ptx").read_text()
    entries = list(re.finditer(r"\.entry (\w+)\(", text))
    assert entries, "no kernels in the PTX"
    for entry in entries:
        body = text[entry.end():text.find("\n}\n", entry.end())]
        wait = body.find("griddepcontrol.wait")
        assert wait > 0, f"{entry.group(1)} never calls pdl_wait()"
        early = re.findall(r"\b(?:st\.global|atom\.global|red\.global)\S*", body[:wait])
        assert not early, f"{entry.group(1)} writes before pdl_wait(): {early}"


@pytest.mark.skipif(shutil.which("g++") is None or cuda_include() is None, reason="needs g++ and cuda.h")
def test_launch_structs_match_the_driver_header(tmp_path):
    """device.py hand-writes CUlaunchConfig / CUlaunchAttribute for cuLaunchKernelEx (the PDL
    launches of captured decode steps): their layout must be cuda.h's."""
    src = tmp_path / "layout.cpp"
    src.write_text("""#include <cuda.h>
#include <cstddef>
#include <cstdio>
int main() {
  std::printf("%zu %zu %zu %zu %zu %d\\n", sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream),
              offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs), sizeof(CUlaunchAttribute),
              (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
}
""")
    exe = tmp_path / "layout"
    done = subprocess.run(["g++", f"-I{cuda_include()}", str(src), "-o", str(exe)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    ours = [ctypes.sizeof(device._LaunchConfig), device._LaunchConfig.stream.offset,
            device._LaunchConfig.attrs.offset, device._LaunchConfig.num_attrs.offset,
            ctypes.sizeof(device._LaunchAttribute), device._ATTR_PROGRAMMATIC_STREAM_SERIALIZATION]
    assert ours == got
