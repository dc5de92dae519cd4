"""The CPU ops on the GGUF blocks themselves: the compiled kernels of cpu_kernels/ (int8 dot
products on the file's mmap, activations quantized per 32 values) with numpy between them.

What `samevm serve` runs on a machine without a GPU (cpu_dtype int8, the extension built).
It imports no torch: that import was about half of a later start, and nothing here needs it.
A tensor type the kernels do not read (F16, BF16, Q2_K, ...) is dequantized to float32 at
load and multiplied by numpy. cpu.py (torch) stays the reference every path is checked
against. Activations are float32 numpy arrays; the KV cache is one array
[layers, 2, blocks * block_size, Hkv, D].
"""
from __future__ import annotations

import functools
import math
import mmap
from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType as Q

from runtime.backends import AttentionParams, ForwardBatch, cpu_kernels, cpu_sampler
from runtime.backends.cpu_kernels import BlockWeight, Kernels
from runtime.gguf import GGUFTensor
from runtime.lora import FusedLoRA
from runtime.sampling import SampleOutput, SamplingBatch


@dataclass(slots=True)
class BlockBatch:
    host: ForwardBatch
    input_ids: np.ndarray                # [T] i64
    positions: np.ndarray                # [T] i64
    slots: np.ndarray                    # [T] i64 cache slot of each token
    logits_indices: np.ndarray           # [S] i64
    seq_slots: list[np.ndarray]          # per sequence: cache slots of positions 0..len-1
    query_ranges: list[tuple[int, int]]
    ctx: np.ndarray | None = None        # decode: seq_slots concatenated
    ctx_start: np.ndarray | None = None  # [S + 1] where each sequence's slots start in ctx


@dataclass(slots=True)
class RopeCache:
    cos: np.ndarray     # [max_pos, D/2] f32
    sin: np.ndarray


class BlockOps:
    name = "cpu"
    merge_qtype = Q.Q8_0        # a merged LoRA: every block kernel, layer.c included, reads Q8_0
    dtype = np.dtype(np.float32)          # activations and KV cache

    def __init__(self, kernels: Kernels):
        self.kernels = kernels
        self.weights = f"int8 on GGUF blocks ({kernels.level})"    # for logs and status
        self._decode_layers: tuple[tuple, list | None] | None = None  # ((model, cache), layers)

    # ---- weights -------------------------------------------------------------------
    def linear_weight(self, parts: list[GGUFTensor]) -> BlockWeight | np.ndarray:
        """Blocks the kernels read, else float32 [out, in] (numpy's BLAS multiplies it)."""
        if all(self.kernels.supports(p) for p in parts):
            return self.kernels.weight(parts)
        _one_blas_thread()
        return np.concatenate([p.dequantize() for p in parts], axis=0)

    def lora_weight(self, fused: FusedLoRA) -> tuple[np.ndarray, np.ndarray]:
        """(A [P r, in], block-diagonal B [out, P r]), float32, multiplied by numpy's BLAS."""
        _one_blas_thread()
        return np.ascontiguousarray(fused.a, np.float32), np.ascontiguousarray(fused.block_b(), np.float32)

    def vector(self, parts: list[GGUFTensor]) -> np.ndarray:
        return np.concatenate([p.dequantize().reshape(-1) for p in parts])

    def embedding(self, table: GGUFTensor) -> BlockWeight | np.ndarray:
        return self.linear_weight([table])       # block rows dequantized as the steps need them

    def rope_cache(self, cos: np.ndarray, sin: np.ndarray) -> RopeCache:
        return RopeCache(np.ascontiguousarray(cos, np.float32), np.ascontiguousarray(sin, np.float32))

    def kv_cache(self, n_layers, num_blocks, block_size, n_kv_heads, head_dim, n_heads) -> np.ndarray:
        """Anonymous memory, each page zeroed by the kernel as it is first written (a slot is read
        only once written). Not np.empty: numpy asks for transparent huge pages above 4 MB, and
        faulting in a 2 MB page for each layer's keys and values cost a first prefill 0.1-0.3 s."""
        shape = (n_layers, 2, num_blocks * block_size, n_kv_heads, head_dim)
        return np.frombuffer(mmap.mmap(-1, math.prod(shape) * 4), np.float32).reshape(shape)

    # ---- per step ------------------------------------------------------------------
    def prepare(self, b: ForwardBatch) -> BlockBatch:
        i64 = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
        seq_slots = b.seq_slots()
        fb = BlockBatch(b, i64(b.input_ids), i64(b.positions), i64(b.slot_mapping), i64(b.logits_indices),
                        seq_slots, b.query_ranges())
        if b.is_decode:
            fb.ctx = np.concatenate(seq_slots)
            fb.ctx_start = i64(np.concatenate([[0], np.cumsum(b.context_lens)]))
        return fb

    def run_forward(self, forward, batch: ForwardBatch, kv: np.ndarray) -> np.ndarray:
        """DecoderLM.run's hook: a decode step runs each layer as one C call (cpu_kernels/layer.c),
        the same kernels as forward() without the Python between them."""
        fb = self.prepare(batch)
        model = forward.__self__
        layers = self._fused_layers(model, kv) if fb.ctx is not None else None
        if layers is None:
            return forward(fb, kv)
        p, eps = model.layers[0].attn, model.spec.norm_eps
        x = self.embed(model.embed_table, fb)                               # [S, H]
        r = np.zeros_like(x)
        step = cpu_kernels.DecodeStep(x.shape[0], x.shape[1], p.n_heads, p.n_kv_heads, p.head_dim, int(p.interleaved),
                                      eps, p.scale, fb.slots.ctypes.data, fb.positions.ctypes.data, fb.ctx.ctypes.data,
                                      fb.ctx_start.ctypes.data, model.rope.cos.ctypes.data, model.rope.sin.ctypes.data)
        for layer in layers:
            self.kernels.run_layer(layer, step, x, r)
        h, _ = self.rms_norm(x, model.norm, eps, r)
        return self.linear(self.gather(h, fb), model.lm_head)

    def _fused_layers(self, model, kv: np.ndarray) -> list | None:
        """The model's layers as layer.c structs, or None where a layer needs the op-by-op path."""
        # the structs hold raw pointers into the model's arrays and the cache: the key holds the
        # objects themselves, so a freed model's id or a reused cache address can never match
        key = (model, kv)
        if self._decode_layers is None or any(a is not b for a, b in zip(self._decode_layers[0], key)):
            # layer.c has no LoRA product and no q/k norm: such a layer stays op by op
            ok = all(L.attn.q_norm is None and not any(f is not None for f in L.lora.values())
                     and all(isinstance(w, BlockWeight) and len(w.parts) <= 3 for w in (L.qkv, L.o_proj, L.gate_up, L.down))
                     for L in model.layers)
            built = [self.kernels.decode_layer(L.attn_norm, L.qkv, L.qkv_bias, L.o_proj, L.ffn_norm, L.gate_up,
                                               L.down, kv[i, 0], kv[i, 1]) for i, L in enumerate(model.layers)] if ok else None
            self._decode_layers = (key, built)
        return self._decode_layers[1]

    def embed(self, table: BlockWeight | np.ndarray, fb: BlockBatch) -> np.ndarray:
        if isinstance(table, BlockWeight):
            part = table.parts[0]
            return self.kernels.dequantize(part.qtype, part.raw[fb.input_ids], part.cols)
        return table[fb.input_ids]

    def rms_norm(self, x, weight, eps, residual=None):
        """Over the last axis, of [T, K] or [T, H, D] (q/k norm)."""
        shape = x.shape
        flat = lambda a: None if a is None else a.reshape(-1, shape[-1])  # noqa: E731
        out, total = self.kernels.rms_norm(flat(x), weight, eps, flat(residual))
        return out.reshape(shape), total.reshape(shape)

    def linear(self, x, weight, bias=None, act=None, lora=None):
        y = weight.matmul(x) if isinstance(weight, BlockWeight) else x @ weight.T
        if lora is not None:
            a, b = lora
            y += (x @ a.T) @ b.T                                    # [T, P r] -> [T, out]
        if bias is not None:
            y += bias
        if act == "silu_mul":
            y = _silu_mul(y)
        else:
            assert act is None, act
        return y

    def attention(self, qkv, kv, layer, fb: BlockBatch, rope: RopeCache, p: AttentionParams):
        k_cache, v_cache = kv[layer, 0], kv[layer, 1]
        if fb.ctx is not None and p.q_norm is None:
            return self.kernels.attention_decode(qkv, k_cache, v_cache, fb.slots, fb.positions, rope.cos, rope.sin,
                                                 p.interleaved, fb.ctx, fb.ctx_start, p.n_heads, p.n_kv_heads,
                                                 p.head_dim, p.scale)
        T, D = qkv.shape[0], p.head_dim
        q, k, v = np.split(qkv, [p.n_heads * D, (p.n_heads + p.n_kv_heads) * D], axis=-1)
        q, k, v = q.reshape(T, p.n_heads, D), k.reshape(T, p.n_kv_heads, D), v.reshape(T, p.n_kv_heads, D)
        if p.q_norm is not None:
            q, _ = self.rms_norm(q, p.q_norm, p.norm_eps)
            k, _ = self.rms_norm(k, p.k_norm, p.norm_eps)
        cos, sin = rope.cos[fb.positions][:, None], rope.sin[fb.positions][:, None]   # [T, 1, D/2]
        q, k = _rotate(q, cos, sin, p.interleaved), _rotate(k, cos, sin, p.interleaved)
        k_cache[fb.slots] = k
        v_cache[fb.slots] = v
        out = np.empty((T, p.n_heads, D), np.float32)
        for slots, (qs, qe) in zip(fb.seq_slots, fb.query_ranges):
            # causal (half the work), the heads over the kernels' threads
            out[qs:qe] = self.kernels.attention_prefill(q[qs:qe], k_cache[slots], v_cache[slots], p.scale)
        return out.reshape(T, p.n_heads * D)

    def gather(self, x, fb: BlockBatch):
        return x[fb.logits_indices]

    def logits_to_host(self, logits):
        return logits

    def sample(self, logits: np.ndarray, sb: SamplingBatch) -> SampleOutput:
        return cpu_sampler.sample(logits, sb)


@functools.cache
def _one_blas_thread() -> None:
    """numpy's BLAS on one thread, for the products the kernels do not run (adapters, tensor
    types they do not read): its threads, spinning on the cores the kernels' pool works on,
    made a prefill with an adapter 2x slower (torch's did the same to the op-by-op path)."""
    from threadpoolctl import threadpool_limits
    threadpool_limits(1, user_api="blas")


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """RoPE on [T, H, D]: pairs (2i, 2i+1) if interleaved, else (i, i + D/2)."""
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return np.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1).reshape(x.shape)
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


def _silu_mul(y: np.ndarray) -> np.ndarray:
    """silu(gate) * up of y = [gate | up] [T, 2F] -> [T, F], in one buffer (a prefill's
    temporaries were twice the time of the arithmetic)."""
    gate, up = np.split(y, 2, axis=-1)
    out = np.negative(gate)
    with np.errstate(over="ignore"):                        # exp(-gate) = inf: silu is -0
        np.exp(out, out=out)
    out += 1
    np.divide(gate, out, out=out)
    out *= up
    return out
