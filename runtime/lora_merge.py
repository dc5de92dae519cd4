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

The Q8_0 merge runs in the CPU kernels' C (merge.inc, one pass a row) where they are built,
else in numpy (merge_quants.py); both are gguf-py's quantize of W + B A, bit for bit, B A
made by numpy's matmul either way. The C pass took the default 0.5B's merge from 2-3 s to
about 0.3 s of a first start on two cores.
"""
from __future__ import annotations

import dataclasses
import logging
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
ROWS = 64       # rows merged at a time: 64 x 4864 float32 is 1.2 MB


def merge_adapter(model: GGUFModel, adapter: Adapter, qtype: Q, cache: str | Path | None = None) -> GGUFModel:
    """`model` with each adapted tensor replaced by W + B A in `qtype` (Q8_0 or F32). With a
    `cache` folder the merged tensors are kept there and read back on later loads of the same
    base and adapter (memory-mapped: 0.03 s against the merge's 0.3-0.5 s on two cores)."""
    assert qtype in (Q.Q8_0, Q.F32), qtype
    jobs = [(model.tensor(tensor_name(TENSORS[module], i)), factors)
            for i, layer in enumerate(adapter.layers) for module, factors in sorted(layer.items())]
    bases = [t for t, _ in jobs]
    suffix = "+" + adapter.sha256[:12]
    folder = Path(cache) / f"{quick_digest(model.path)}-{adapter.sha256[:16]}-{qtype.name}" if cache else None
    merged = read_cached(folder, bases, qtype, suffix) if folder else None
    if merged is None:
        tmp, outs = cache_files(folder, bases, qtype) if folder else (None, [None] * len(jobs))
        # the C merge and numpy's matmul release the GIL: the tensors merge side by side, each
        # on one BLAS thread (a BLAS pool per merging thread halved the merge's speed on 2 cores)
        from threadpoolctl import threadpool_limits
        kernels = cpu_kernels.load()
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
            merged = list(pool.map(lambda job, out: merge_tensor(*job, qtype, suffix, kernels, out), jobs, outs))
        if tmp:
            publish(tmp, folder)
    names = [t.name for t, _ in jobs]
    return dataclasses.replace(model, tensors=model.tensors | dict(zip(names, merged)))


def stored(t: GGUFTensor, qtype: Q) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a merged `t` as held: Q8_0 rows of bytes, or float32."""
    if held_as(t, qtype) == Q.Q8_0:
        return (t.shape[0], t.shape[1] // BLOCK * 34), np.dtype(np.uint8)
    return tuple(t.shape), np.dtype(np.float32)


def read_cached(folder: Path, bases: list[GGUFTensor], qtype: Q, suffix: str) -> list[GGUFTensor] | None:
    """The merged tensors a previous load kept in `folder`, memory-mapped; None when the folder
    is missing or any file does not have the size its tensor needs (then they are merged again)."""
    if not folder.is_dir():
        return None
    out = []
    for i, t in enumerate(bases):
        try:
            data = np.load(folder / f"{i}.npy", mmap_mode="r")
        except (OSError, ValueError):
            return None
        if (data.shape, data.dtype) != stored(t, qtype):
            return None
        out.append(GGUFTensor(t.name + suffix, held_as(t, qtype), t.shape, data))
    return out


def cache_files(folder: Path, bases: list[GGUFTensor], qtype: Q) -> tuple[Path | None, list[np.ndarray | None]]:
    """(a folder beside `folder`, an .npy file memory-mapped for each merged tensor in it): the
    merge writes its output straight into the page cache (a copy written afterwards cost a
    first start 0.15-1 s more). Each file's blocks are allocated up front, so a full disk is
    an OSError here, not a SIGBUS mid-merge; then (None, no files): merged in memory, not kept."""
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        outs = []
        for i, t in enumerate(bases):
            shape, dtype = stored(t, qtype)
            out = np.lib.format.open_memmap(tmp / f"{i}.npy", mode="w+", dtype=dtype, shape=shape)
            fd = os.open(tmp / f"{i}.npy", os.O_RDWR)
            try:
                os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
            finally:
                os.close(fd)
            outs.append(out)
        return tmp, outs
    except OSError as e:
        log.warning("merged weights are not kept (%s): %s", tmp, e)
        shutil.rmtree(tmp, ignore_errors=True)
        return None, [None] * len(bases)


def publish(tmp: Path, folder: Path) -> None:
    """The merged files moved into place whole (a load that finds `folder` never sees half of
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


def merge_tensor(t: GGUFTensor, f: Factors, qtype: Q, suffix: str, kernels: cpu_kernels.Kernels | None = None,
                 out: np.ndarray | None = None) -> GGUFTensor:
    """One projection W [out, in] as W + B A; b holds the scale and the GGUF's row order (lora.py).
    The result is named `t.name + suffix`: the backends cache uploaded weights by tensor name.
    Q8_0 is made ROWS rows at a time, each chunk's passes staying in the CPU's cache; with
    `kernels`, in their C where they read t's blocks. `out`: where to write it (stored(t, qtype))."""
    shape, dtype = stored(t, qtype)
    out = np.empty(shape, dtype) if out is None else out
    if held_as(t, qtype) == Q.Q8_0:
        raw, cols = np.asarray(t.data), t.shape[1]
        delta = np.empty((ROWS, cols), np.float32)
        in_c = kernels is not None and kernels.supports(t)
        for r in range(0, t.shape[0], ROWS):
            d = np.matmul(f.b[r:r + ROWS], f.a, out=delta[:min(ROWS, t.shape[0] - r)])   # a row's sum: any split
            if in_c:
                kernels.merge_q8_0(t.qtype, raw[r:r + ROWS], cols, d, out[r:r + ROWS])
            else:
                out[r:r + ROWS] = quantize_q8_0(dequantize_rows(t.qtype, raw[r:r + ROWS], cols) + d)
        return GGUFTensor(t.name + suffix, Q.Q8_0, t.shape, out)
    np.add(t.dequantize(), f.b @ f.a, out=out)      # never into an F32 base's dequantize: the file's mmap
    return GGUFTensor(t.name + suffix, Q.F32, t.shape, out)
