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
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from gguf import MODEL_TENSOR as T
from gguf import GGMLQuantizationType as Q

from runtime.gguf import GGUFModel, GGUFTensor, quick_digest
from runtime.lora import Adapter, Factors
from runtime.merge_quants import dequantize_rows, quantize_q8_0
from runtime.models.decoder import tensor_name

TENSORS = {"q_proj": T.ATTN_Q, "k_proj": T.ATTN_K, "v_proj": T.ATTN_V, "o_proj": T.ATTN_OUT,
           "gate_proj": T.FFN_GATE, "up_proj": T.FFN_UP, "down_proj": T.FFN_DOWN}
BLOCK = 32      # values per Q8_0 block
ROWS = 64       # rows merged at a time: 64 x 4864 float32 is 1.2 MB


def merge_adapter(model: GGUFModel, adapter: Adapter, qtype: Q, cache: str | Path | None = None) -> GGUFModel:
    """`model` with each adapted tensor replaced by W + B A in `qtype` (Q8_0 or F32). With a
    `cache` folder the merged tensors are kept there and read back on later loads of the same
    base and adapter: merging the default 0.5B takes 5-10 s of CPU, most of a first start."""
    assert qtype in (Q.Q8_0, Q.F32), qtype
    jobs = [(model.tensor(tensor_name(TENSORS[module], i)), factors)
            for i, layer in enumerate(adapter.layers) for module, factors in sorted(layer.items())]
    suffix = "+" + adapter.sha256[:12]
    folder = Path(cache) / f"{quick_digest(model.path)}-{adapter.sha256[:16]}-{qtype.name}" if cache else None
    merged = read_cached(folder, [t for t, _ in jobs], qtype, suffix) if folder else None
    if merged is None:
        # numpy's dequantize / quantize / matmul release the GIL: the tensors merge side by side,
        # each on one BLAS thread (a BLAS pool per merging thread halved the merge's speed on 2 cores)
        from threadpoolctl import threadpool_limits
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
            merged = list(pool.map(lambda job: merge_tensor(*job, qtype, suffix), jobs))
        if folder:
            write_cached(folder, merged)
    names = [t.name for t, _ in jobs]
    return dataclasses.replace(model, tensors=model.tensors | dict(zip(names, merged)))


def read_cached(folder: Path, bases: list[GGUFTensor], qtype: Q, suffix: str) -> list[GGUFTensor] | None:
    """The merged tensors a previous load kept in `folder`, memory-mapped; None when the folder
    is missing or any file does not have the size its tensor needs (then they are merged again)."""
    if not folder.is_dir():
        return None
    out = []
    for i, t in enumerate(bases):
        kind = held_as(t, qtype)
        want = ((t.shape[0], t.shape[1] // BLOCK * 34), np.uint8) if kind == Q.Q8_0 else (tuple(t.shape), np.float32)
        try:
            data = np.load(folder / f"{i}.npy", mmap_mode="r")
        except (OSError, ValueError):
            return None
        if (data.shape, data.dtype) != (want[0], np.dtype(want[1])):
            return None
        out.append(GGUFTensor(t.name + suffix, kind, t.shape, data))
    return out


def write_cached(folder: Path, merged: list[GGUFTensor]) -> None:
    """Kept whole or not at all: written beside `folder`, then renamed into place (a load that
    finds it never sees half of it; a failed write only costs the next start a merge)."""
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        for i, t in enumerate(merged):
            np.save(tmp / f"{i}.npy", np.asarray(t.data))
        shutil.rmtree(folder, ignore_errors=True)        # a damaged copy read_cached refused
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def held_as(t: GGUFTensor, qtype: Q) -> Q:
    """The type a merged `t` is held in: `qtype`, but F32 where rows do not fill Q8_0 blocks."""
    return Q.Q8_0 if qtype == Q.Q8_0 and t.shape[1] % BLOCK == 0 else Q.F32


def merge_tensor(t: GGUFTensor, f: Factors, qtype: Q, suffix: str) -> GGUFTensor:
    """One projection W [out, in] as W + B A; b holds the scale and the GGUF's row order (lora.py).
    The result is named `t.name + suffix`: the backends cache uploaded weights by tensor name.
    Q8_0 is made ROWS rows at a time, each chunk's passes staying in the CPU's cache."""
    if held_as(t, qtype) == Q.Q8_0:
        raw, cols = np.asarray(t.data), t.shape[1]
        out = np.empty((t.shape[0], cols // BLOCK * 34), np.uint8)       # [out, in / 32 * 34]
        delta = np.empty((ROWS, cols), np.float32)
        for r in range(0, t.shape[0], ROWS):
            w = dequantize_rows(t.qtype, raw[r:r + ROWS], cols)        # [rows, in] f32
            w += np.matmul(f.b[r:r + ROWS], f.a, out=delta[:len(w)])   # a row's sum is the same in any split
            out[r:r + ROWS] = quantize_q8_0(w)
        return GGUFTensor(t.name + suffix, Q.Q8_0, t.shape, out)
    w = t.dequantize() + f.b @ f.a            # a new array: an F32 base's dequantize is the mmap
    return GGUFTensor(t.name + suffix, Q.F32, t.shape, np.ascontiguousarray(w, np.float32))
