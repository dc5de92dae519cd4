"""The block formats a LoRA merge reads and writes (lora_merge.py), bit for bit gguf-py's
`quants` in fewer numpy passes: merging the shipped adapter into the default 0.5B (168
projections, 358M weights) spent 10 s of CPU, most of a first start, in gguf-py's Q5_0
dequantize and Q8_0 quantize, which work 16 rows at a time in uint32 and float arrays.

- Q5_0 and Q8_0 rows are unpacked in uint8 (the high bits with np.unpackbits), then scaled as
  gguf-py scales them (d * q in float32); other types go to gguf-py's own dequantize.
- Q8_0 keeps gguf-py's arithmetic (d = amax / 127, q = roundf(x / d)) with two exact
  shortcuts: |x| as the float's bits without the sign (a non-negative float orders as its bits
  do, so their integer max is the largest |x|), and roundf(y) = trunc(y) + trunc(2 (y -
  trunc(y))), exact for every float (the fraction and its double are exact).
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

Q5_0_BYTES, Q8_0_BYTES = 22, 34      # per block of 32 values: f16 scale, [4 bytes high bits], quants


def dequantize_rows(qtype: Q, raw: np.ndarray, cols: int) -> np.ndarray:
    """Rows of a tensor as stored ([n, bytes] uint8, or typed) -> float32 [n, cols], a new array."""
    if qtype == Q.Q5_0:
        blocks = raw.reshape(-1, Q5_0_BYTES)
        q = np.empty((blocks.shape[0], 32), np.uint8)
        np.bitwise_and(blocks[:, 6:], 0x0F, out=q[:, :16])          # values 0-15: low nibbles
        np.right_shift(blocks[:, 6:], 4, out=q[:, 16:])             # values 16-31: high nibbles
        high = np.unpackbits(blocks[:, 2:6], axis=1, bitorder="little")     # bit i of the u32: value i
        q |= high << 4
        values = (q.view(np.int8) - np.int8(16)).astype(np.float32)
    elif qtype == Q.Q8_0:
        blocks = raw.reshape(-1, Q8_0_BYTES)
        values = blocks[:, 2:].view(np.int8).astype(np.float32)
    else:
        return np.array(quants.dequantize(raw, qtype), np.float32).reshape(raw.shape[0], cols)   # F32's is the mmap
    scale = np.ascontiguousarray(blocks[:, :2]).view(np.float16).astype(np.float32)    # [blocks, 1]
    return (scale * values).reshape(raw.shape[0], cols)


def quantize_q8_0(w: np.ndarray) -> np.ndarray:
    """float32 [n, cols] -> Q8_0 rows [n, cols / 32 * 34] uint8, as gguf-py's quants.quantize."""
    blocks = w.reshape(-1, 32)
    bits = blocks.view(np.uint32) & np.uint32(0x7FFFFFFF)                 # |x|, as bits
    amax = np.ascontiguousarray(bits.T).max(axis=0)[:, None].view(np.float32)    # numpy reduces a long axis 2x faster
    d = amax / 127
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, 0, 1 / d)
    y = blocks * inv
    whole = np.trunc(y)
    y -= whole
    y *= 2
    np.trunc(y, out=y)
    y += whole                                   # roundf: halves away from zero
    out = np.empty((blocks.shape[0], Q8_0_BYTES), np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8)
    out[:, 2:] = y.astype(np.int8).view(np.uint8)
    return out.reshape(w.shape[0], -1)
