"""A LoRA adapter's product on the GPU (kernels/lora.cu), beside a linear whose weight stays
in its GGUF blocks: y = W x (linear.py) then y += B (A x), with SwiGLU after the sum when the
linear is gate/up. The factors are small dense f32 arrays (runtime/lora.py FusedLoRA); the
two launches take fixed shapes per step bucket, so the decode graphs capture them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.backends.cuda.linear import Normed
from runtime.lora import FusedLoRA

DOWN_TOKENS = 8         # lora.cu's tokens a lora_down block


@dataclass(slots=True)
class LoRAWeight:
    a: object               # device f32 [P r, K]
    b: object               # device f32 [N, r]
    ends: tuple[int, int]   # rows where parts 1 and 2 begin (N where there is no such part)


def upload(dev, fused: FusedLoRA) -> LoRAWeight:
    ends = list(fused.ends[:-1]) + [fused.b.shape[0]] * (3 - len(fused.ends))
    assert len(fused.ends) <= 3, "fused linears have at most 3 parts"
    return LoRAWeight(dev.upload(fused.a), dev.upload(fused.b), (ends[0], ends[1]))


def apply(ops, x, y, w: LoRAWeight, act: str | None):
    """act(y + B (A x)) for x [T, K] (or a Normed x) and y = W x [T, N]."""
    T, N = y.shape
    F = N // 2 if act == "silu_mul" else N
    if T == 0:
        return y if act is None else ops.alloc((0, F), np.float32)
    R, K = w.a.shape
    u = ops.alloc((T, R), np.float32)
    if isinstance(x, Normed):
        inputs = (None, x.a, x.b, x.weight, np.float32(x.eps))
    else:
        inputs = (x, None, None, None, np.float32(0))
    module = ops.dev.kernels("lora")
    module.lora_down((R, -(-T // DOWN_TOKENS)), (128,), (*inputs, w.a, np.int32(K), np.int32(T), u, np.int32(R)))
    out = ops.alloc((T, F), np.float32) if act else y
    blocks = max(1, min(4096, -(-T * F // 256)))
    module.lora_up((blocks,), (256,), (u, np.int32(R), w.b, np.int32(w.b.shape[1]), np.int32(N), np.int32(w.ends[0]),
                                       np.int32(w.ends[1]), y, np.int32(T), np.int32(act == "silu_mul"), out))
    return out
