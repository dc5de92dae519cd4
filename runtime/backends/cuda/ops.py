"""The ops of runtime/backends/__init__.py on an NVIDIA GPU, with CuPy and our own kernels.

Weights stay in their GGUF formats (weights.py). Activations are f32. `rms_norm` returns a
lazy `Normed` that the next `linear` fuses into its matvec (or materializes for cuBLAS);
the residual it returns is filled by that same kernel. Decode steps and short one-sequence
prefills replay one CUDA graph per padded shape (graphs.py) through `run_forward`, which
DecoderLM.run calls when a backend has it. Its options are one `config.CudaOptions`.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

from runtime.backends import AttentionParams, ForwardBatch
from runtime.backends.cuda import attention as attn
from runtime.backends.cuda import linear as lin
from runtime.backends.cuda import lora as low_rank
from runtime.backends.cuda.batch import CUDABatch, pack, views
from runtime.backends.cuda.graphs import StepGraphs
from runtime.backends.cuda.sampler import Logits, Sampler
from runtime.backends.cuda.weights import QuantLinear, upload_linear
from runtime.config import CudaOptions
from runtime.gguf import GGUFTensor
from runtime.lora import FusedLoRA
from runtime.sampling import SampleOutput, SamplingBatch


SCRATCH_VALUES = 16 << 20      # 32 MB in f16: a slice dequantized by dequant.cu is still in L2 for cuBLAS
FEED_ROWS = 4096               # sampled rows a step can hand to the next on the device (sampler.py)


class RopeTables:
    def __init__(self, cos, sin):
        self.cos, self.sin = cos, sin    # device f32 [max_pos, D/2]


class CUDAOps:
    name = "cuda"
    overlaps_steps = True       # token ids -(j + 1) read row j of the last sampling step (dequant.cu)
    feed_rows = FEED_ROWS       # ... for steps of up to this many sampled rows
    merge_qtype = Q.Q8_0        # a merged LoRA: the finest block format the matvec and dequant kernels read

    def __init__(self, options: CudaOptions | None = None, device=None, **overrides):
        """options (or CudaOptions fields as keywords); device: a CupyDevice (the default) or
        dev/cuda/emulator's EmuDevice."""
        opts = self.options = CudaOptions(**overrides) if options is None else options
        assert options is None or not overrides, "pass options or keywords, not both"
        if device is None:
            from runtime.backends.cuda.device import CupyDevice
            device = CupyDevice(pdl=opts.pdl)
        self.dev, self.xp = device, device.xp
        self.kv_ctype, self.dtype = attn.KV_TYPES[opts.kv_dtype][0], np.dtype(attn.KV_TYPES[opts.kv_dtype][1])
        self.gemm_dtype = np.dtype(opts.gemm_dtype)
        self.matvec_max_tokens, self.matmul_max_tokens = opts.matvec_max_tokens, opts.matmul_max_tokens
        self.use_graphs, self.max_graph_batch, self.max_prefill_graph = opts.graphs, opts.max_graph_batch, \
            opts.max_prefill_graph
        self.sampler = Sampler(self)
        self.feed = self.xp.zeros(FEED_ROWS, np.int32)     # the last sampling step's ids
        self.graphs: StepGraphs | None = None
        self.trash_block = 0
        self.tile_queries = 1       # queries a prefill tile (kv_cache: attention.tile_queries)
        self._loaded: dict[tuple[str, ...], QuantLinear] = {}
        self._scratch = None
        self._arena = None

    # ---- memory --------------------------------------------------------------------
    def alloc(self, shape, dtype, zero: bool = False):
        if self._arena is not None:
            return self._arena.take(shape, dtype, zero)
        return self.xp.zeros(shape, dtype) if zero else self.xp.empty(shape, dtype)

    @contextmanager
    def arena(self, arena):
        self._arena = arena
        try:
            yield arena
        finally:
            self._arena = None

    def scratch(self, dtype):
        """The dequantization buffer of the cuBLAS path: SCRATCH_VALUES values of dtype."""
        if self._scratch is None:
            self._scratch = self.xp.empty(SCRATCH_VALUES * 4, np.uint8)
        return self._scratch[:SCRATCH_VALUES * np.dtype(dtype).itemsize].view(dtype)

    def attention_kernels(self, head_dim: int, group: int, seqs: int = 1) -> dict:
        """The attention kernels for this head size and `group` query heads a KV head, as
        attention.py's settings choose them at this call for decode steps of `seqs` sequences
        (attention_decode's per-head arrays are sized by its next power of two)."""
        defines = {"HEAD_DIM": head_dim, "KV_T": self.kv_ctype}
        opts = self.options
        prefill = attn.prefill_kernel(opts, self.kv_ctype, head_dim)
        mods = {f: self.dev.kernels(f, **defines) for f in (prefill, "rope_kv")}
        decode = attn.decode_kernel(opts, self.kv_ctype, head_dim, seqs)
        mods[decode] = self.dev.kernels(decode, MAX_GROUP=1 << (group - 1).bit_length(),
                                        MIN_SPLIT_POSITIONS=opts.min_split_positions, **defines)
        return mods

    # ---- weights, once at load -----------------------------------------------------
    def linear_weight(self, parts: list[GGUFTensor]) -> QuantLinear:
        key = tuple(p.name for p in parts)
        if key not in self._loaded:
            self.dev.use()
            self._loaded[key] = upload_linear(self.dev, parts)
        return self._loaded[key]

    def lora_weight(self, fused: FusedLoRA) -> low_rank.LoRAWeight:
        self.dev.use()
        return low_rank.upload(self.dev, fused)

    def vector(self, parts: list[GGUFTensor]):
        values = [np.asarray(quants.dequantize(p.data, p.qtype), np.float32).reshape(-1) for p in parts]
        return self.dev.upload(np.concatenate(values))

    def embedding(self, table: GGUFTensor) -> QuantLinear:
        return self.linear_weight([table])

    def rope_cache(self, cos: np.ndarray, sin: np.ndarray) -> RopeTables:
        return RopeTables(self.dev.upload(cos.astype(np.float32)), self.dev.upload(sin.astype(np.float32)))

    def kv_cache(self, n_layers, num_blocks, block_size, n_kv_heads, head_dim, n_heads):
        self.dev.use()
        # compile (or load from CuPy's cache) now, not mid-request
        for seqs in (1, self.options.decode_tc_max_seqs + 1):
            self.attention_kernels(head_dim, n_heads // n_kv_heads, seqs)
        self.trash_block = num_blocks
        self.tile_queries = attn.tile_queries(self.options, self.kv_ctype, head_dim, n_heads // n_kv_heads)
        max_blocks = max(1, num_blocks)
        self.graphs = StepGraphs(self, max_blocks, self.max_graph_batch, self.max_prefill_graph) \
            if self.use_graphs else None
        return self.xp.zeros((n_layers, 2, (num_blocks + 1) * block_size, n_kv_heads, head_dim), self.dtype)

    # ---- per step ------------------------------------------------------------------
    def prepare(self, batch: ForwardBatch) -> CUDABatch:
        self.dev.use()
        host, where, rows = pack(batch, self.tile_queries)
        return views(batch, self.dev.upload(host), where, rows, batch.is_decode)

    def run_forward(self, forward, batch: ForwardBatch, kv) -> Logits:
        """DecoderLM.run's hook: decode steps and short prefills through a bucket's CUDA graph."""
        self.dev.use()
        key = self.graphs.key(batch) if self.graphs is not None else None
        if key is None:
            values = forward(self.prepare(batch), kv)
            return Logits(values, values.shape[0])
        values, stats = self.graphs.run(forward, batch, kv, key)
        return Logits(values, len(batch.logits_indices), stats)

    def embed(self, table: QuantLinear, fb: CUDABatch):
        T = fb.num_tokens
        out = self.alloc((T, table.cols), np.float32)
        self.dev.kernels("dequant").dequant_f32((T,), (64,), (
            table.table, np.int32(len(table.segments)), np.int32(table.cols), fb.ids, self.feed, np.int32(0), out,
            np.int32(table.cols)))
        return out

    def rms_norm(self, x, weight, eps, residual=None):
        if residual is None:
            return lin.Normed(x, None, weight, eps, None), x
        new_residual = self.alloc(x.shape, np.float32)
        return lin.Normed(x, residual, weight, eps, new_residual), new_residual

    def linear(self, x, weight: QuantLinear, bias=None, act=None, lora=None):
        if lora is None:
            return lin.linear(self, x, weight, bias, act)
        return low_rank.apply(self, x, lin.linear(self, x, weight, bias), lora, act)

    def attention(self, qkv, kv, layer: int, fb: CUDABatch, rope: RopeTables, p: AttentionParams):
        return attn.attention(self, qkv, kv, layer, fb, rope, p)

    def gather(self, x, fb: CUDABatch):
        if fb.all_rows:
            return x
        if isinstance(x, lin.Normed):   # the final norm: only the sampled rows are normed
            return lin.Normed(self._rows(x.a, fb), None if x.b is None else self._rows(x.b, fb),
                              x.weight, x.eps, None)
        return self._rows(x, fb)

    def _rows(self, x, fb: CUDABatch):
        R, K = fb.num_rows, x.shape[1]
        out = self.alloc((R, K), np.float32)
        if R:
            self.dev.kernels("gather_rows").gather_rows((R,), (256,), (x, np.int32(K), fb.rows, out))
        return out

    def sample(self, logits, sb: SamplingBatch) -> SampleOutput:
        return self.sample_async(logits, sb).result()

    def sample_async(self, logits, sb: SamplingBatch):
        """Queue the sampling and its copy to the host; .result() waits for that copy."""
        self.dev.use()
        if not isinstance(logits, Logits):
            logits = Logits(logits, logits.shape[0])
        return self.sampler.launch(logits, sb)

    def logits_to_host(self, logits) -> np.ndarray:
        if isinstance(logits, Logits):
            return self.dev.to_host(logits.values)[:logits.rows]
        return self.dev.to_host(logits)
