"""The ops in torch on the CPU: the reference every other backend is checked against,
and the fallback on a machine without a GPU.

float32 / bfloat16: weights dequantized once at load (gguf.quants), the reference.
int8: weights stay in their GGUF blocks (the file's mmap) and are multiplied by the int8
kernels of cpu_kernels/ with activations quantized per 32 values; a block type they do not
read, or a build without the extension, falls back to per-row int8 made at load.
The KV cache is one tensor [layers, 2, blocks * block_size, Hkv, D].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType as Q
from gguf import quants

from runtime.backends import AttentionParams, ForwardBatch, cpu_kernels
from runtime.backends.cpu_kernels import BlockWeight
from runtime.gguf import GGUFTensor
from runtime.lora import FusedLoRA
from runtime.sampling import SampleOutput, SamplingBatch


def dequantize(t: GGUFTensor) -> np.ndarray:
    """Raw GGUF blocks -> float32 array of the tensor's logical shape."""
    return np.asarray(quants.dequantize(t.data, t.qtype), dtype=np.float32).reshape(t.shape)


@dataclass(slots=True)
class CPUBatch:
    host: ForwardBatch
    input_ids: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    logits_indices: torch.Tensor
    seq_slots: list[torch.Tensor]        # per sequence: cache slots of positions 0..len-1
    query_ranges: list[tuple[int, int]]
    ctx: torch.Tensor | None = None      # decode with the kernels: seq_slots concatenated
    ctx_start: torch.Tensor | None = None  # [S + 1] where each sequence's slots start in ctx


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
        self.kernels = cpu_kernels.load(torch.get_num_threads()) if self.int8 else None
        if self.kernels is not None:
            self.weights = f"int8 on GGUF blocks ({self.kernels.level})"
            # The kernels' threads take the cores; torch's, spinning after each of its ops on
            # the same cores, made a decode step 4x slower. The ops left to torch are small.
            torch.set_num_threads(1)
        self._loaded: dict[tuple[str, ...], torch.Tensor] = {}
        self._decode_layers: tuple[tuple[int, int], list] | None = None   # ((model, cache) ids, layers)

    # ---- weights -------------------------------------------------------------------
    def linear_weight(self, parts: list[GGUFTensor]) -> torch.Tensor | Int8Weight | BlockWeight:
        if self.kernels is not None and all(self.kernels.supports(p) for p in parts):
            return self.kernels.weight(parts)
        if self.int8:
            return Int8Weight.quantize(np.concatenate([dequantize(p) for p in parts], axis=0))
        return self._dense(parts)

    def _dense(self, parts: list[GGUFTensor]) -> torch.Tensor:
        key = tuple(p.name for p in parts)
        if key not in self._loaded:
            w = np.concatenate([dequantize(p) for p in parts], axis=0)  # [out, in]
            self._loaded[key] = torch.from_numpy(w).to(self.dtype).contiguous()
        return self._loaded[key]

    def lora_weight(self, fused: FusedLoRA) -> tuple[torch.Tensor, torch.Tensor]:
        """(A [P r, in], block-diagonal B [out, P r]) in the activations' dtype."""
        return (torch.from_numpy(fused.a).to(self.dtype).contiguous(),
                torch.from_numpy(fused.block_b()).to(self.dtype).contiguous())

    def vector(self, parts: list[GGUFTensor]) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([dequantize(p).reshape(-1) for p in parts]))

    def embedding(self, table: GGUFTensor) -> torch.Tensor | BlockWeight:
        if self.kernels is not None and self.kernels.supports(table):
            return self.kernels.weight([table])       # rows dequantized as the steps need them
        return self._dense([table])

    def rope_cache(self, cos: np.ndarray, sin: np.ndarray) -> RopeCache:
        return RopeCache(torch.from_numpy(cos), torch.from_numpy(sin))

    def kv_cache(self, n_layers, num_blocks, block_size, n_kv_heads, head_dim, n_heads) -> torch.Tensor:
        shape = (n_layers, 2, num_blocks * block_size, n_kv_heads, head_dim)
        if self.kernels is not None:       # a slot is read only once written: pages stay unused until then
            return torch.empty(shape, dtype=self.dtype)
        return torch.zeros(shape, dtype=self.dtype)

    # ---- per step ------------------------------------------------------------------
    def prepare(self, b: ForwardBatch) -> CPUBatch:
        block_size = b.block_size
        seq_slots, ranges = [], []
        for i in range(b.num_seqs):
            n = int(b.context_lens[i])
            pos = np.arange(n)
            table = b.block_tables[i]
            seq_slots.append(torch.from_numpy((table[pos // block_size] * block_size + pos % block_size)
                                              .astype(np.int64)))
            ranges.append((int(b.query_starts[i]), int(b.query_starts[i + 1])))
        as_long = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
        fb = CPUBatch(b, as_long(b.input_ids), as_long(b.positions), as_long(b.slot_mapping),
                      as_long(b.logits_indices), seq_slots, ranges)
        if self.kernels is not None and b.is_decode:
            fb.ctx = torch.cat(seq_slots)
            fb.ctx_start = as_long(np.concatenate([[0], np.cumsum(b.context_lens)]))
        return fb

    def run_forward(self, forward, batch: ForwardBatch, kv: torch.Tensor) -> torch.Tensor:
        """DecoderLM.run's hook: a decode step on the kernels runs each layer as one C call
        (cpu_kernels/layer.c), the same kernels as forward() without its Python between them."""
        fb = self.prepare(batch)
        model = forward.__self__
        layers = self._fused_layers(model, kv) if fb.ctx is not None else None
        if layers is None:
            return forward(fb, kv)
        p, eps = model.layers[0].attn, model.spec.norm_eps
        x = self.embed(model.embed_table, fb)                               # [S, H]
        r = torch.zeros_like(x)
        ptr = lambda t: t.data_ptr()  # noqa: E731
        step = cpu_kernels.DecodeStep(x.shape[0], x.shape[1], p.n_heads, p.n_kv_heads, p.head_dim, int(p.interleaved),
                                      eps, p.scale, ptr(fb.slots), ptr(fb.positions), ptr(fb.ctx), ptr(fb.ctx_start),
                                      ptr(model.rope.cos), ptr(model.rope.sin))
        for layer in layers:
            self.kernels.run_layer(layer, step, x, r)
        h, _ = self.rms_norm(x, model.norm, eps, r)
        return self.linear(self.gather(h, fb), model.lm_head)

    def _fused_layers(self, model, kv: torch.Tensor) -> list | None:
        """The model's layers as layer.c structs, or None where a layer needs the op-by-op path."""
        key = (id(model), kv.data_ptr())
        if self._decode_layers is None or self._decode_layers[0] != key:
            # layer.c has no LoRA product: a layer with adapter factors stays op by op
            ok = kv.dtype == torch.float32 and all(
                L.attn.q_norm is None and not any(f is not None for f in L.lora.values())
                and all(isinstance(w, BlockWeight) and len(w.parts) <= 3 for w in (L.qkv, L.o_proj, L.gate_up, L.down))
                for L in model.layers)
            built = [self.kernels.decode_layer(L.attn_norm, L.qkv, L.qkv_bias, L.o_proj, L.ffn_norm, L.gate_up,
                                               L.down, kv[i, 0], kv[i, 1]) for i, L in enumerate(model.layers)] if ok else None
            self._decode_layers = (key, built)
        return self._decode_layers[1]

    def embed(self, table: torch.Tensor | BlockWeight, fb: CPUBatch) -> torch.Tensor:
        if isinstance(table, BlockWeight):
            part = table.parts[0]
            rows = part.raw[fb.input_ids.numpy()]
            return torch.from_numpy(self.kernels.dequantize(part.qtype, rows, part.cols))
        return table[fb.input_ids]

    def rms_norm(self, x, weight, eps, residual=None):
        if self.kernels is not None and x.dim() == 2 and x.dtype == torch.float32:
            return self.kernels.rms_norm(x, weight, eps, residual)
        if residual is not None:
            x = x + residual
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight
        return h.to(x.dtype), x

    def linear(self, x, weight, bias=None, act=None, lora=None):
        y = weight.matmul(x) if isinstance(weight, (Int8Weight, BlockWeight)) else F.linear(x, weight)
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
        if fb.ctx is not None and p.q_norm is None and kv.dtype == torch.float32:
            return self.kernels.attention_decode(qkv.contiguous(), kv[layer, 0], kv[layer, 1], fb.slots, fb.positions,
                                                 rope.cos, rope.sin, p.interleaved, fb.ctx, fb.ctx_start,
                                                 p.n_heads, p.n_kv_heads, p.head_dim, p.scale)
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
            if self.kernels is not None:        # causal (half the work), heads over the kernels' threads
                out[qs:qe] = self.kernels.attention_prefill(q[qs:qe], keys, values, p.scale)
            else:
                out[qs:qe] = _grouped_attention(q[qs:qe], keys, values, p.scale)
        return out.reshape(T, p.n_heads * D)

    def gather(self, x, fb: CPUBatch):
        return x[fb.logits_indices]

    def logits_to_host(self, logits):
        return logits.float().numpy()

    def sample(self, logits: torch.Tensor, sb: SamplingBatch) -> SampleOutput:
        logits = logits.float()
        raw = torch.log_softmax(logits, dim=-1)
        entropy = -(raw.exp() * raw).nan_to_num().sum(-1)
        if sb.masks is not None:
            logits = logits.masked_fill(~_unpack_mask(sb.masks, logits.shape[1]), float("-inf"))
        if sb.any_penalty:
            logits = _apply_penalties(logits, sb)
        greedy = torch.from_numpy(sb.temperature == 0)
        ids = logits.argmax(-1)
        if not sb.all_greedy:
            ids = torch.where(greedy, ids, _sample_filtered(logits, sb))
        top_ids = top_lp = None
        if sb.num_top:
            top_lp, top_ids = raw.topk(sb.num_top, dim=-1)
            top_ids, top_lp = top_ids.numpy(), top_lp.numpy()
        chosen = raw.gather(1, ids[:, None]).squeeze(1)
        return SampleOutput(ids.numpy(), chosen.numpy(), entropy.numpy(), top_ids, top_lp)


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


def _unpack_mask(words: np.ndarray, vocab: int) -> torch.Tensor:
    """[S, W] int32 bitmask (bit j of word w = token 32w + j) -> [S, vocab] bool."""
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")
    return torch.from_numpy(bits[:, :vocab].astype(bool))


def _apply_penalties(logits: torch.Tensor, sb: SamplingBatch) -> torch.Tensor:
    if len(sb.seen_ids):
        rows, ids = torch.from_numpy(sb.seen_rows).long(), torch.from_numpy(sb.seen_ids).long()
        pen = torch.from_numpy(sb.repetition)[rows]
        vals = logits[rows, ids]
        logits[rows, ids] = torch.where(vals > 0, vals / pen, vals * pen)
    if len(sb.out_ids):
        rows, ids = torch.from_numpy(sb.out_rows).long(), torch.from_numpy(sb.out_ids).long()
        counts = torch.from_numpy(sb.out_counts)
        logits[rows, ids] -= (torch.from_numpy(sb.frequency)[rows] * counts
                              + torch.from_numpy(sb.presence)[rows])
    return logits


def _sample_filtered(logits: torch.Tensor, sb: SamplingBatch) -> torch.Tensor:
    """Temperature, top-k, top-p, min-p, then inverse-CDF with the batch's uniforms."""
    temp = torch.from_numpy(np.where(sb.temperature > 0, sb.temperature, 1.0))[:, None]
    probs = torch.softmax(logits / temp, dim=-1)
    if not ((sb.top_k > 0) & (sb.top_k < probs.shape[1]) | (sb.top_p < 1) | (sb.min_p > 0)).any():
        filtered = probs                                # no rule set: skip the sort of the vocabulary
    else:
        filtered = _filtered(probs, sb)
    cdf = filtered.cumsum(-1)
    target = torch.from_numpy(sb.uniforms)[:, None] * cdf[:, -1:]
    ids = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return ids.clamp_(max=probs.shape[1] - 1)


def _filtered(probs: torch.Tensor, sb: SamplingBatch) -> torch.Tensor:
    """`probs` with the tokens outside each row's top-k / top-p / min-p set to zero."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    rank = torch.arange(probs.shape[1])[None, :]
    top_k = torch.from_numpy(np.where(sb.top_k > 0, sb.top_k, probs.shape[1]))[:, None]
    keep = rank < top_k
    before = sorted_p.cumsum(-1) - sorted_p            # mass strictly ahead of each token
    keep &= before < torch.from_numpy(sb.top_p)[:, None]
    keep &= sorted_p >= torch.from_numpy(sb.min_p)[:, None] * sorted_p[:, :1]
    keep[:, 0] = True
    return torch.zeros_like(probs).scatter(1, order, torch.where(keep, sorted_p, 0.0))
