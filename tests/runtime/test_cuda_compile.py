"""Every CUDA kernel compiles for sm_80 and sm_90 with nvcc, the same source NVRTC builds at
run time, so a broken kernel fails CI (which has nvcc but no GPU)."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess

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


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_kernel_compiles(src, arch, tmp_path):
    assert SOURCES, "no kernels found"
    for defines in variants(src):
        cmd = ["nvcc", f"-arch={arch}", "-cubin", "-std=c++17", f"-I{KERNELS}", str(src),
               "-o", str(tmp_path / "k.cubin"), *[f"-D{k}={v}" for k, v in defines.items()]]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_kernels_wait_before_writing(src, tmp_path):
    """Captured decode steps launch every kernel with programmatic dependent launch, so each
    may start before the previous kernel ends: every entry point must wait for it
    (griddepcontrol.wait, common.cuh pdl_wait) and store nothing before that wait."""
    ptx = tmp_path / "k.ptx"
    cmd = ["nvcc", "-arch=sm_90", "-ptx", "-std=c++17", f"-I{KERNELS}", str(src), "-o", str(ptx),
           *[f"-D{k}={v}" for k, v in variants(src)[0].items()]]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
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
