"""A LoRA adapter merged into the base's weights at load: W' = W + B A for each adapted
projection, so a decode step runs the base's own kernels and nothing more.

Served unmerged (runtime/lora.py), the adapter adds two small products to each of a layer's
four linears; on the H100 that cost a 0.5B model 63% of its batch-1 decode speed (two more
launches a linear in a step of ~10 kernels a layer), and on the CPU it turns off the fused
one-call-a-layer decode (layer.c). Merged, the step is the base's step; what it costs is
the format of the merged tensors, which is each backend's choice (`Ops.merge_qtype`):
- blocks (CUDA, CPU int8): Q8_0, the finest format every block kernel reads; requantizing
  into the base's own 4-5-bit type would add a second rounding of the same size as the base's
  own error, swamping the adapter's small delta. A Q8_0 tensor is ~1.5-2x the bytes of a
  Q4_K/Q5_0 one.
- dense (CPU float32 / bfloat16): F32; that backend dequantizes every weight at load anyway.
Only adapted tensors are replaced; every other tensor stays the file's own (the mmap, never
written), so the base is there untouched for a rollback: loading it again is the base, bit
for bit.

The Q8_0 merge runs in the CPU kernels' C (merge.inc: one pass a row, one call a tensor, so
it runs beside the tokenizer's build without waiting on the GIL) where they are built with
FMA, else in numpy (merge_quants.py); both are gguf-py's quantize of W + B A bit for bit, the
C's B A summed in k order as numpy's BLAS sums it. The C took the default 0.5B's merge from
3.1 s of CPU to 0.33 s.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from gguf import MODEL_TENSOR as T
from gguf import GGMLQuantizationType as Q

from runtime.backends import cpu_kernels
from runtime.gguf import GGUFModel, GGUFTensor, quick_digest
from runtime.lora import Adapter, Factors
from runtime.merge_quants import dequantize_rows, quantize_q8_0
from runtime.models.decoder import tensor_name

log = logging.getLogger(__name__)
TENSORS = {"q_proj": T.ATTN_Q, "k_proj": T.ATTN_K, "v_proj": T.ATTN_V, "o_proj": T.ATTN_OUT,
           "gate_proj": T.FFN_GATE, "up_proj": T.FFN_UP, "down_proj": T.FFN_DOWN}
BLOCK = 32      # values per Q8_0 block
ROWS = 64       # rows merged at a time in numpy: 64 x 4864 float32 is 1.2 MB
ALIGN = 64      # bytes: where each merged tensor starts in the one buffer
FILE = "merged.npy"


def merge_adapter(model: GGUFModel, adapter: Adapter, qtype: Q, cache: str | Path | None = None) -> GGUFModel:
    """`model` with each adapted tensor replaced by W + B A in `qtype` (Q8_0 or F32). With a
    `cache` folder the merged tensors are kept there, in one file, and read back on later loads
    of the same base and adapter (memory-mapped: 0.03 s against the merge's 0.3-0.5 s)."""
    assert qtype in (Q.Q8_0, Q.F32), qtype
    jobs = [(model.tensor(tensor_name(TENSORS[module], i)), factors)
            for i, layer in enumerate(adapter.layers) for module, factors in sorted(layer.items())]
    bases = [t for t, _ in jobs]
    parts, size = layout(bases, qtype)
    folder = Path(cache) / f"{quick_digest(model.path)}-{adapter.sha256[:16]}-{qtype.name}" if cache else None
    data = read_cached(folder, size) if folder else None
    if data is None:
        tmp, data = cache_file(folder, size) if folder else (None, None)
        data = np.empty(size, np.uint8) if data is None else data
        try:
            merge_into(jobs, views(data, parts), qtype)
        except BaseException:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        if tmp:
            publish(tmp, folder)
    suffix = "+" + adapter.sha256[:12]
    merged = {t.name: GGUFTensor(t.name + suffix, held_as(t, qtype), t.shape, out)
              for t, out in zip(bases, views(data, parts))}
    return dataclasses.replace(model, tensors=model.tensors | merged)


def merge_into(jobs: list[tuple[GGUFTensor, Factors]], outs: list[np.ndarray], qtype: Q) -> None:
    """Each job's W + B A into its out: the C (one call for all) where the kernels have FMA and
    read the tensor's blocks, numpy for the rest."""
    kernels = cpu_kernels.load()
    fast = kernels is not None and kernels.fused_multiply_add
    in_c = [fast and held_as(t, qtype) == Q.Q8_0 and kernels.supports(t) for t, _ in jobs]
    if any(in_c):
        kernels.merge_q8_0([(t.qtype, np.asarray(t.data), t.shape[1], f.b, f.a, out)
                            for (t, f), out, c in zip(jobs, outs, in_c) if c])
    rest = [(t, f, out) for (t, f), out, c in zip(jobs, outs, in_c) if not c]
    if not rest:
        return
    # numpy's dequantize / quantize / matmul release the GIL: the tensors merge side by side,
    # each on one BLAS thread (a BLAS pool per merging thread halved the merge's speed on 2 cores)
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda job: merge_tensor(job[0], job[1], qtype, "", job[2]), rest))


def stored(t: GGUFTensor, qtype: Q) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a merged `t` as held: Q8_0 rows of bytes, or float32."""
    if held_as(t, qtype) == Q.Q8_0:
        return (t.shape[0], t.shape[1] // BLOCK * 34), np.dtype(np.uint8)
    return tuple(t.shape), np.dtype(np.float32)


def layout(bases: list[GGUFTensor], qtype: Q) -> tuple[list[tuple[int, tuple[int, ...], np.dtype]], int]:
    """Where each merged tensor lies in the one buffer that holds them all: (offset, shape,
    dtype) each, ALIGN-aligned, and the buffer's size in bytes."""
    parts, at = [], 0
    for t in bases:
        shape, dtype = stored(t, qtype)
        parts.append((at, shape, dtype))
        at += -(-math.prod(shape) * dtype.itemsize // ALIGN) * ALIGN
    return parts, at


def views(data: np.ndarray, parts: list[tuple[int, tuple[int, ...], np.dtype]]) -> list[np.ndarray]:
    return [data[at:at + math.prod(shape) * dtype.itemsize].view(dtype).reshape(shape) for at, shape, dtype in parts]


def read_cached(folder: Path, size: int) -> np.ndarray | None:
    """The merged tensors' buffer a previous load kept in `folder`, memory-mapped; None when it is
    missing or does not have the size these tensors need (then they are merged again)."""
    try:
        data = np.load(folder / FILE, mmap_mode="r")
    except (OSError, ValueError):
        return None
    return data if (data.shape, data.dtype) == ((size,), np.uint8) else None


def cache_file(folder: Path, size: int) -> tuple[Path | None, np.ndarray | None]:
    """(a folder beside `folder`, the buffer of `size` bytes memory-mapped onto a file in it): the
    merge writes straight into the page cache (a copy written afterwards cost a first start
    0.15-1 s more). The file's blocks are allocated up front, so a full disk is an OSError
    here, not a SIGBUS mid-merge; then (None, None): merged in memory, not kept."""
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    try:
        for stale in folder.parent.glob(f"{folder.name}.tmp-*"):     # a merge killed midway (0.4 GB each)
            pid = stale.name.rsplit("-", 1)[1]
            if pid.isdigit() and not running(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        tmp.mkdir(parents=True, exist_ok=True)
        data = np.lib.format.open_memmap(tmp / FILE, mode="w+", dtype=np.uint8, shape=(size,))
        fd = os.open(tmp / FILE, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return tmp, data
    except OSError as e:
        log.warning("merged weights are not kept (%s): %s", tmp, e)
        shutil.rmtree(tmp, ignore_errors=True)
        return None, None


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # another user's process
        return True
    return True


def publish(tmp: Path, folder: Path) -> None:
    """The merged file moved into place whole (a load that finds `folder` never sees half of
    it); a failed move only costs the next start a merge."""
    try:
        shutil.rmtree(folder, ignore_errors=True)        # a damaged copy read_cached refused
        os.replace(tmp, folder)
    except OSError as e:
        log.warning("merged weights are not kept (%s): %s", folder, e)
        shutil.rmtree(tmp, ignore_errors=True)


def held_as(t: GGUFTensor, qtype: Q) -> Q:
    """The type a merged `t` is held in: `qtype`, but F32 where rows do not fill Q8_0 blocks."""
    return Q.Q8_0 if qtype == Q.Q8_0 and t.shape[1] % BLOCK == 0 else Q.F32


def merge_tensor(t: GGUFTensor, f: Factors, qtype: Q, suffix: str, out: np.ndarray | None = None) -> GGUFTensor:
    """One projection W [out, in] as W + B A in numpy; b holds the scale and the GGUF's row order
    (lora.py). The result is named `t.name + suffix`: the backends cache uploaded weights by
    tensor name. Q8_0 is made ROWS rows at a time, each chunk's passes staying in the CPU's
    cache. `out`: where to write it (stored(t, qtype))."""
    shape, dtype = stored(t, qtype)
    out = np.empty(shape, dtype) if out is None else out
    if held_as(t, qtype) == Q.Q8_0:
        raw, cols = np.asarray(t.data), t.shape[1]
        delta = np.empty((ROWS, cols), np.float32)
        for r in range(0, t.shape[0], ROWS):
            d = np.matmul(f.b[r:r + ROWS], f.a, out=delta[:min(ROWS, t.shape[0] - r)])   # a row's sum: any split
            out[r:r + ROWS] = quantize_q8_0(dequantize_rows(t.qtype, raw[r:r + ROWS], cols) + d)
        return GGUFTensor(t.name + suffix, Q.Q8_0, t.shape, out)
    np.add(t.dequantize(), f.b @ f.a, out=out)      # never into an F32 base's dequantize: the file's mmap
    return GGUFTensor(t.name + suffix, Q.F32, t.shape, out)
