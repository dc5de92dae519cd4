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
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from gguf import MODEL_TENSOR as T
from gguf import GGMLQuantizationType as Q
from gguf import quants

from runtime.backends.cpu import dequantize
from runtime.gguf import GGUFModel, GGUFTensor
from runtime.lora import Adapter, Factors
from runtime.models.decoder import tensor_name

TENSORS = {"q_proj": T.ATTN_Q, "k_proj": T.ATTN_K, "v_proj": T.ATTN_V, "o_proj": T.ATTN_OUT,
           "gate_proj": T.FFN_GATE, "up_proj": T.FFN_UP, "down_proj": T.FFN_DOWN}
BLOCK = 32      # values per Q8_0 block


def merge_adapter(model: GGUFModel, adapter: Adapter, qtype: Q) -> GGUFModel:
    """`model` with each adapted tensor replaced by W + B A in `qtype` (Q8_0 or F32)."""
    assert qtype in (Q.Q8_0, Q.F32), qtype
    jobs = [(model.tensor(tensor_name(TENSORS[module], i)), factors)
            for i, layer in enumerate(adapter.layers) for module, factors in sorted(layer.items())]
    # numpy's dequantize / quantize / matmul release the GIL: the tensors merge side by side
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
        merged = list(pool.map(lambda job: merge_tensor(*job, qtype, "+" + adapter.sha256[:12]), jobs))
    names = [t.name for t, _ in jobs]
    return dataclasses.replace(model, tensors=model.tensors | dict(zip(names, merged)))


def merge_tensor(t: GGUFTensor, f: Factors, qtype: Q, suffix: str) -> GGUFTensor:
    """One projection W [out, in] as W + B A; b holds the scale and the GGUF's row order (lora.py).
    The result is named `t.name + suffix`: the backends cache uploaded weights by tensor name."""
    w = dequantize(t) + f.b @ f.a            # [out, in] f32, a new array: an F32 base's dequantize is the mmap
    if qtype == Q.Q8_0 and t.shape[1] % BLOCK == 0:
        return GGUFTensor(t.name + suffix, Q.Q8_0, t.shape, quants.quantize(w, Q.Q8_0))   # [out, in / 32 * 34] u8
    return GGUFTensor(t.name + suffix, Q.F32, t.shape, np.ascontiguousarray(w, np.float32))
