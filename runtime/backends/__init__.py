"""Backends implement the small set of ops the model files are written against.

An `Ops` object owns device memory. Weights are handed over once, as raw GGUF tensors;
what the backend keeps (dequantized tensors, quantized blocks on the GPU) is its own
business. Per step the model calls, in order: `prepare`, `embed`, then per layer
`rms_norm`, `linear` (fused QKV), `attention` (q/k norm, RoPE, KV-cache write, paged
attention), `linear`, `rms_norm`, `linear` (gate+up with act="silu_mul"), `linear`,
and finally `rms_norm`, `gather`, `linear` (logits) and `sample`.

Shapes: x [T, hidden] for the T tokens of the step; qkv [T, (Hq + 2 Hkv) D].

A backend with `overlaps_steps` also has `sample_async` (whose result() waits) and takes
input id -(j + 1) as "the token row j of the last sampling step chose", still on the
device, for steps of up to `feed_rows` sampled rows: the engine then launches a step before
it has read the previous one's tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from gguf import GGMLQuantizationType

from runtime.config import CudaOptions
from runtime.gguf import GGUFTensor
from runtime.lora import FusedLoRA
from runtime.sampling import SampleOutput, SamplingBatch


@dataclass(slots=True)
class ForwardBatch:
    """Host-side description of one forward pass over mixed prefill and decode sequences."""
    input_ids: np.ndarray       # [T] i32
    positions: np.ndarray       # [T] i32
    slot_mapping: np.ndarray    # [T] i32 cache slot (block * block_size + offset) of each token
    query_starts: np.ndarray    # [B+1] i32 cumulative query lengths
    context_lens: np.ndarray    # [B] i32 tokens in the cache for each sequence after this step
    block_tables: np.ndarray    # [B, max_blocks] i32, padded with 0
    logits_indices: np.ndarray  # [S] i32 rows of T whose next token is sampled
    block_size: int

    @property
    def num_seqs(self) -> int:
        return len(self.context_lens)

    @property
    def is_decode(self) -> bool:
        return len(self.input_ids) == self.num_seqs

    def seq_slots(self) -> list[np.ndarray]:
        """Per sequence, the cache slots [len] i64 of its positions 0..len-1."""
        out = []
        for i in range(self.num_seqs):
            pos = np.arange(int(self.context_lens[i]))
            table = self.block_tables[i]
            out.append((table[pos // self.block_size] * self.block_size + pos % self.block_size).astype(np.int64))
        return out

    def query_ranges(self) -> list[tuple[int, int]]:
        """Per sequence, its rows [start, end) of the step's tokens."""
        return [(int(self.query_starts[i]), int(self.query_starts[i + 1])) for i in range(self.num_seqs)]


@dataclass(slots=True)
class AttentionParams:
    n_heads: int
    n_kv_heads: int
    head_dim: int
    scale: float
    interleaved: bool           # rotation pairs adjacent (llama GGUF) or half a head apart (NeoX)
    norm_eps: float
    q_norm: Any = None          # per-head RMSNorm weights [D] (qwen3), else None
    k_norm: Any = None


class Ops(Protocol):
    name: str
    merge_qtype: GGMLQuantizationType   # what a LoRA merged at load is held in (runtime/lora_merge.py)

    # weights, once at load
    def linear_weight(self, parts: list[GGUFTensor]) -> Any: ...   # concatenated along out
    def lora_weight(self, fused: FusedLoRA) -> Any: ...            # an adapter's factors of one linear
    def vector(self, parts: list[GGUFTensor]) -> Any: ...          # f32 1-D, concatenated
    def embedding(self, table: GGUFTensor) -> Any: ...
    def rope_cache(self, cos: np.ndarray, sin: np.ndarray) -> Any: ...
    def kv_cache(self, n_layers: int, num_blocks: int, block_size: int,
                 n_kv_heads: int, head_dim: int, n_heads: int) -> Any: ...

    # per step
    def prepare(self, batch: ForwardBatch) -> Any: ...
    def embed(self, table: Any, fb: Any) -> Any: ...
    def rms_norm(self, x: Any, weight: Any, eps: float, residual: Any = None) -> tuple[Any, Any]: ...
    def linear(self, x: Any, weight: Any, bias: Any = None, act: str | None = None,
               lora: Any = None) -> Any: ...   # act(x W^T + bias + LoRA product), see runtime/lora.py
    def attention(self, qkv: Any, kv: Any, layer: int, fb: Any, rope: Any,
                  p: AttentionParams) -> Any: ...
    def gather(self, x: Any, fb: Any) -> Any: ...
    def sample(self, logits: Any, sb: SamplingBatch) -> SampleOutput: ...
    def logits_to_host(self, logits: Any) -> np.ndarray: ...        # tests and parity checks only
    # optional: run_forward(forward, batch, kv) -> logits, used by DecoderLM.run instead of
    # forward(prepare(batch), kv) (the CUDA backend replays decode steps as CUDA graphs)


def create_backend(name: str, cpu_dtype: str = "float32", cuda: CudaOptions | None = None,
                   kernel_cache: str | None = None) -> Ops:
    """'cpu', 'cuda', or 'auto' (CUDA when CuPy sees a GPU, else CPU). `kernel_cache`: the
    folder CUDA kernels compiled by NVRTC are kept in across processes."""
    if name == "auto":
        name = "cuda" if cuda_available() else "cpu"
    if name == "cpu":
        if cpu_dtype == "int8":             # on the GGUF blocks where the kernels are built: no torch
            from runtime.backends import cpu_kernels
            kernels = cpu_kernels.load()
            if kernels is not None:
                from runtime.backends.cpu_blocks import BlockOps
                return BlockOps(kernels)
        from runtime.backends.cpu import CPUOps
        return CPUOps(dtype=cpu_dtype)
    if name == "cuda":
        from runtime.backends.cuda import CUDAOps
        from runtime.backends.cuda.device import keep_kernels_in
        if kernel_cache:
            keep_kernels_in(kernel_cache)
        return CUDAOps(cuda or CudaOptions())
    raise ValueError(f"unknown backend {name!r} (cpu, cuda, auto)")


def cuda_available() -> bool:
    try:
        import cupy
    except ImportError:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver or no device
        return False
