"""The decoder-only transformer, written once against the backend ops.

The architecture families differ only in which optional tensors they have (ARCHS below),
so they share this one file: tensor names come from gguf's own maps (gguf.TENSOR_NAMES),
not a table kept here, and llama's interleaved RoPE is the GGUF's row order
(ModelSpec.rope_interleaved). forward() reads top to bottom:

    x = embed(ids)
    per layer:  h = norm(x + r);  x = o_proj(attention(qkv(h)));  h = norm(x + r);  x = down(silu(gate) * up)
    logits = lm_head(norm(x + r)[sampled rows])

With a LoRA adapter served unmerged (runtime/lora.py) each of the four linears of a layer also
adds its low-rank product, inside the backend's linear (before gate/up's SwiGLU); one merged
at load (runtime/lora_merge.py) is already in the weights this model is given.
"""
from __future__ import annotations

from dataclasses import dataclass

from gguf import MODEL_TENSOR as T
from gguf import TENSOR_NAMES

from runtime.backends import AttentionParams, ForwardBatch, Ops
from runtime.gguf import GGUFModel, ModelLoadError
from runtime.lora import FUSED, Adapter
from runtime.models.rope import rope_tables, scaling_for


@dataclass(frozen=True, slots=True)
class Arch:
    name: str
    qkv_bias: bool = False      # qwen2
    qk_norm: bool = False       # qwen3: RMSNorm over each head of q and k before RoPE


# What differs per family:
#   llama (SmolLM2, Llama 2/3): no attention bias, no q/k norm; the GGUF stores Q/K rows
#       permuted for interleaved RoPE
#   qwen2 (Qwen2, Qwen2.5, Qwen2.5-Coder): bias on q, k and v; NeoX RoPE
#   qwen3: no attention bias; per-head RMSNorm of q and k before RoPE; NeoX RoPE
ARCHS = {a.name: a for a in (Arch("llama"), Arch("qwen2", qkv_bias=True), Arch("qwen3", qk_norm=True))}


def tensor_name(kind: T, layer: int | None = None, suffix: str = "weight") -> str:
    return TENSOR_NAMES[kind].format(bid=layer) + "." + suffix


@dataclass(slots=True)
class Layer:
    attn_norm: object
    qkv: object
    qkv_bias: object
    attn: AttentionParams
    o_proj: object
    ffn_norm: object
    gate_up: object
    down: object
    lora: dict              # linear name (lora.FUSED) -> the backend's adapter factors or None


class DecoderLM:
    def __init__(self, model: GGUFModel, arch: Arch, ops: Ops, max_positions: int, adapter: Adapter | None = None):
        spec, self.ops, self.spec, self.adapter = model.spec, ops, model.spec, adapter
        if spec.n_heads % spec.n_kv_heads:
            raise ModelLoadError(f"{model.path.name}: {spec.n_heads} heads not divisible by "
                                 f"{spec.n_kv_heads} KV heads")
        w = lambda kind, i=None, suffix="weight": model.tensor(tensor_name(kind, i, suffix))  # noqa: E731
        self.embed_table = ops.embedding(w(T.TOKEN_EMBD))
        head = T.OUTPUT if model.has(tensor_name(T.OUTPUT)) else T.TOKEN_EMBD
        self.lm_head = ops.linear_weight([w(head)])
        self.norm = ops.vector([w(T.OUTPUT_NORM)])
        self.rope_scaling = scaling_for(spec, max_positions)
        cos, sin = rope_tables(spec.head_dim, spec.rope_base, self.rope_scaling, max_positions)
        self.rope = ops.rope_cache(cos, sin)
        self.layers = []
        for i in range(spec.n_layers):
            attn = AttentionParams(
                n_heads=spec.n_heads, n_kv_heads=spec.n_kv_heads, head_dim=spec.head_dim,
                scale=spec.head_dim ** -0.5, interleaved=spec.rope_interleaved, norm_eps=spec.norm_eps,
                q_norm=ops.vector([w(T.ATTN_Q_NORM, i)]) if arch.qk_norm else None,
                k_norm=ops.vector([w(T.ATTN_K_NORM, i)]) if arch.qk_norm else None)
            qkv = [T.ATTN_Q, T.ATTN_K, T.ATTN_V]
            self.layers.append(Layer(
                attn_norm=ops.vector([w(T.ATTN_NORM, i)]),
                qkv=ops.linear_weight([w(k, i) for k in qkv]),
                qkv_bias=ops.vector([w(k, i, "bias") for k in qkv]) if arch.qkv_bias else None,
                attn=attn,
                o_proj=ops.linear_weight([w(T.ATTN_OUT, i)]),
                ffn_norm=ops.vector([w(T.FFN_NORM, i)]),
                gate_up=ops.linear_weight([w(T.FFN_GATE, i), w(T.FFN_UP, i)]),
                down=ops.linear_weight([w(T.FFN_DOWN, i)]),
                lora={name: self._lora(i, name) for name in FUSED},
            ))

    def _lora(self, layer: int, linear: str):
        fused = self.adapter.fused(layer, linear) if self.adapter is not None else None
        return None if fused is None else self.ops.lora_weight(fused)

    def forward(self, fb, kv):
        """fb: the backend's prepared batch; returns logits [S, vocab] for the sampled rows."""
        ops, eps = self.ops, self.spec.norm_eps
        x = ops.embed(self.embed_table, fb)                          # [T, H]
        residual = None
        for i, layer in enumerate(self.layers):
            h, residual = ops.rms_norm(x, layer.attn_norm, eps, residual)
            lora = layer.lora
            qkv = ops.linear(h, layer.qkv, layer.qkv_bias, lora=lora["qkv"])   # [T, (Hq + 2 Hkv) D]
            o = ops.attention(qkv, kv, i, fb, self.rope, layer.attn)  # [T, Hq D]
            x = ops.linear(o, layer.o_proj, lora=lora["o_proj"])
            h, residual = ops.rms_norm(x, layer.ffn_norm, eps, residual)
            g = ops.linear(h, layer.gate_up, act="silu_mul", lora=lora["gate_up"])
            x = ops.linear(g, layer.down, lora=lora["down"])
        h, _ = ops.rms_norm(x, self.norm, eps, residual)
        return ops.linear(ops.gather(h, fb), self.lm_head)            # [S, V]

    def run(self, batch: ForwardBatch, kv):
        run_forward = getattr(self.ops, "run_forward", None)   # CUDA: decode steps replay a graph
        if run_forward is not None:
            return run_forward(self.forward, batch, kv)
        return self.forward(self.ops.prepare(batch), kv)
