"""The ops in torch on the CPU: the reference every other backend is checked against.

float32 / bfloat16: weights dequantized once at load (gguf.quants), the reference.
int8: per-row int8 weights made at load, for a build without the block kernels (with them,
create_backend serves int8 from cpu_blocks.py instead, on the GGUF blocks, without torch).
Sampling is cpu_sampler's, shared with cpu_blocks. The KV cache is one tensor
[layers, 2, blocks * block_size, Hkv, D].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType as Q

from runtime.backends import AttentionParams, ForwardBatch, cpu_sampler
from runtime.gguf import GGUFTensor
from runtime.lora import FusedLoRA
from runtime.sampling import SampleOutput, SamplingBatch


@dataclass(slots=True)
class CPUBatch:
    host: ForwardBatch
    input_ids: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    logits_indices: torch.Tensor
    seq_slots: list[torch.Tensor]        # per sequence: cache slots of positions 0..len-1
    query_ranges: list[tuple[int, int]]


@dataclass(slots=True)
class Int8Weight:
    """Per-output-row symmetric int8 (w ~ q * scale) for the fast CPU mode: a quarter of the
    bytes of float32, multiplied by torch's weight-only int8 kernel for every batch. That
    kernel computes each row alone (checked: a row's result is bit-identical at any batch
    size), so a request gives the same tokens alone or in company; expanding to bf16 for
    large batches was up to 1.5x faster at prefill but changed results with batch size."""
    q: torch.Tensor       # [out, in] int8
    scale: torch.Tensor   # [out] bf16

    @classmethod
    def quantize(cls, w: np.ndarray) -> Int8Weight:
        w = torch.from_numpy(w)
        scale = (w.abs().amax(dim=1) / 127.0).clamp_(min=1e-12)
        return cls(torch.round(w / scale[:, None]).to(torch.int8).contiguous(), scale.to(torch.bfloat16))

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int8pack_mm(x.to(torch.bfloat16), self.q, self.scale).to(x.dtype)


@dataclass(slots=True)
class RopeCache:
    cos: torch.Tensor   # [max_pos, D/2]
    sin: torch.Tensor


class CPUOps:
    name = "cpu"

    def __init__(self, dtype: str = "float32", threads: int | None = None):
        """dtype: float32 (the reference), bfloat16, or int8 (int8 weights, float32 activations)."""
        self.int8 = dtype == "int8"
        self.weights = dtype                  # what the weights are held in, for logs and status
        self.dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int8": torch.float32}[dtype]
        # an adapter merged at load: int8 keeps it in blocks its kernels (and layer.c) read; the
        # dense modes dequantize every weight anyway, so F32 costs them nothing
        self.merge_qtype = Q.Q8_0 if self.int8 else Q.F32
        if threads:
            torch.set_num_threads(threads)
        self._loaded: dict[tuple[str, ...], torch.Tensor] = {}

    # ---- weights -------------------------------------------------------------------
    def linear_weight(self, parts: list[GGUFTensor]) -> torch.Tensor | Int8Weight:
        if self.int8:
            return Int8Weight.quantize(np.concatenate([p.dequantize() for p in parts], axis=0))
        return self._dense(parts)

    def _dense(self, parts: list[GGUFTensor]) -> torch.Tensor:
        key = tuple(p.name for p in parts)
        if key not in self._loaded:
            w = np.concatenate([p.dequantize() for p in parts], axis=0)  # [out, in]
            self._loaded[key] = torch.from_numpy(w).to(self.dtype).contiguous()
        return self._loaded[key]

    def lora_weight(self, fused: FusedLoRA) -> tuple[torch.Tensor, torch.Tensor]:
        """(A [P r, in], block-diagonal B [out, P r]) in the activations' dtype."""
        return (torch.from_numpy(fused.a).to(self.dtype).contiguous(),
                torch.from_numpy(fused.block_b()).to(self.dtype).contiguous())

    def vector(self, parts: list[GGUFTensor]) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([p.dequantize().reshape(-1) for p in parts]))

    def embedding(self, table: GGUFTensor) -> torch.Tensor:
        return self._dense([table])

    def rope_cache(self, cos: np.ndarray, sin: np.ndarray) -> RopeCache:
        return RopeCache(torch.from_numpy(cos), torch.from_numpy(sin))

    def kv_cache(self, n_layers, num_blocks, block_size, n_kv_heads, head_dim, n_heads) -> torch.Tensor:
        return torch.zeros((n_layers, 2, num_blocks * block_size, n_kv_heads, head_dim), dtype=self.dtype)

    # ---- per step ------------------------------------------------------------------
    def prepare(self, b: ForwardBatch) -> CPUBatch:
        as_long = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
        return CPUBatch(b, as_long(b.input_ids), as_long(b.positions), as_long(b.slot_mapping),
                        as_long(b.logits_indices), [torch.from_numpy(s) for s in b.seq_slots()], b.query_ranges())

    def embed(self, table: torch.Tensor, fb: CPUBatch) -> torch.Tensor:
        return table[fb.input_ids]

    def rms_norm(self, x, weight, eps, residual=None):
        if residual is not None:
            x = x + residual
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight
        return h.to(x.dtype), x

    def linear(self, x, weight, bias=None, act=None, lora=None):
        y = weight.matmul(x) if isinstance(weight, Int8Weight) else F.linear(x, weight)
        if lora is not None:
            a, b = lora
            y = y + F.linear(F.linear(x.to(a.dtype), a), b).to(y.dtype)     # [T, P r] -> [T, out]
        if bias is not None:
            y = (y.float() + bias).to(x.dtype)
        if act == "silu_mul":
            gate, up = y.chunk(2, dim=-1)
            y = F.silu(gate) * up
        else:
            assert act is None, act
        return y

    def attention(self, qkv, kv, layer, fb: CPUBatch, rope: RopeCache, p: AttentionParams):
        T, D = qkv.shape[0], p.head_dim
        q, k, v = qkv.split([p.n_heads * D, p.n_kv_heads * D, p.n_kv_heads * D], dim=-1)
        q = q.reshape(T, p.n_heads, D)
        k = k.reshape(T, p.n_kv_heads, D)
        v = v.reshape(T, p.n_kv_heads, D)
        if p.q_norm is not None:
            q, _ = self.rms_norm(q, p.q_norm, p.norm_eps)
            k, _ = self.rms_norm(k, p.k_norm, p.norm_eps)
        cos = rope.cos[fb.positions].unsqueeze(1)   # [T, 1, D/2]
        sin = rope.sin[fb.positions].unsqueeze(1)
        q, k = _rotate(q, cos, sin, p.interleaved), _rotate(k, cos, sin, p.interleaved)
        k_cache, v_cache = kv[layer, 0], kv[layer, 1]
        k_cache[fb.slots] = k.to(k_cache.dtype)
        v_cache[fb.slots] = v.to(v_cache.dtype)
        out = torch.empty(T, p.n_heads, D, dtype=q.dtype)
        for slots, (qs, qe) in zip(fb.seq_slots, fb.query_ranges):
            keys = k_cache.index_select(0, slots).to(q.dtype)       # [L, Hkv, D]
            values = v_cache.index_select(0, slots).to(q.dtype)
            out[qs:qe] = _grouped_attention(q[qs:qe], keys, values, p.scale)
        return out.reshape(T, p.n_heads * D)

    def gather(self, x, fb: CPUBatch):
        return x[fb.logits_indices]

    def logits_to_host(self, logits):
        return logits.float().numpy()

    def sample(self, logits: torch.Tensor, sb: SamplingBatch) -> SampleOutput:
        return cpu_sampler.sample(logits.float().numpy(), sb)


SCORE_ELEMENTS = 1 << 24     # attention scores held at once (64 MB in f32); longer prompts go in slices


def _grouped_attention(q, keys, values, scale: float):
    """Causal attention of one sequence: q [n_q, Hq, D] are the last n_q positions of a context
    of keys/values [L, Hkv, D]; each KV head serves Hq/Hkv query heads (GQA) through one
    batched matmul, without expanding K/V. (torch's CPU SDPA expands them and takes ~20x
    longer for a decode query.)"""
    n_q, n_heads, d = q.shape
    n_ctx, n_kv = keys.shape[0], keys.shape[1]
    group = n_heads // n_kv
    k = keys.permute(1, 2, 0)                                    # [Hkv, D, L]
    v = values.transpose(0, 1)                                   # [Hkv, L, D]
    out = torch.empty_like(q)
    rows = max(1, SCORE_ELEMENTS // (n_heads * n_ctx))
    for a in range(0, n_q, rows):
        b = min(n_q, a + rows)
        qg = q[a:b].reshape(b - a, n_kv, group, d).permute(1, 2, 0, 3).reshape(n_kv, group * (b - a), d)
        scores = torch.bmm(qg, k).mul_(scale).view(n_kv, group, b - a, n_ctx)
        if n_q > 1:                                              # query i sits at position n_ctx - n_q + i
            first = n_ctx - n_q
            future = torch.arange(n_ctx)[None, :] > torch.arange(first + a, first + b)[:, None]
            scores.masked_fill_(future, float("-inf"))
        probs = torch.softmax(scores.view(n_kv, group * (b - a), n_ctx), dim=-1, dtype=torch.float32)
        o = torch.bmm(probs.to(v.dtype), v)                      # [Hkv, G * rows, D]
        out[a:b] = o.view(n_kv, group, b - a, d).permute(2, 0, 1, 3).reshape(b - a, n_heads, d)
    return out


def _rotate(x, cos, sin, interleaved: bool):
    """RoPE on [T, H, D]: pairs (2i, 2i+1) if interleaved, else (i, i + D/2)."""
    xf = x.float()
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2).to(x.dtype)
    x1, x2 = xf.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
