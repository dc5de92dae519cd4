"""The engine's configuration objects, validated once where they are built."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True, slots=True)
class CudaOptions:
    """What the CUDA backend can be asked for. The defaults are what serves best (measured on an
    H100; benchmarks/NOTES-cuda.md); the rest exist to check each kernel path
    (dev/cuda/check.py), to A/B them (benchmarks/step_settings.py) and to debug."""
    kv_dtype: str = "float16"          # KV cache storage: float16 | bfloat16 | float32
    gemm_dtype: str = "float16"        # float16: tensor-core kernels from 2 rows (matvec_tc.cu, matmul.cu), int8 x at
    #                                    one token, f16 cuBLAS; float32: exact matvec.cu and f32 cuBLAS (parity tests)
    matvec_max_tokens: int = 8         # rows up to which linear layers use a matvec kernel (graph-capturable)
    matmul_max_tokens: int = 32        # rows up to which they use matmul.cu (64 for wide weights; 0 off)
    graphs: bool = True                # capture decode steps and short prefills (off: every step eager)
    max_graph_batch: int = 64          # decode steps of up to this many sequences replay a graph
    max_prefill_graph: int = 128       # one-sequence prefills up to this many tokens replay a graph (0: none)
    pdl: bool = True                   # kernels of a captured step may overlap (programmatic dependent launch, Hopper+)
    stage_weights: bool = True         # one-token matvecs copy a weight that fits into shared memory first (needs pdl)
    matvec_unroll: int = 2             # 16-byte chunks of a row a lane of matvec.cu loads before decoding (one token)
    matvec_split: int | None = None    # warps sharing a row team, forced (None: linear.mv_split chooses)
    norm_once_rows: int = 65536        # from this many outputs an f32-dot norm-fused matvec norms x first (lm_head)
    attention_tc: bool = True          # tensor-core attention kernels for an f16 cache
    decode_tc_max_seqs: int = 16       # sequences a decode step up to which attention_decode_tc.cu runs
    min_split_positions: int = 48      # positions a split of flash-decoding takes at least

    def __post_init__(self):
        checks = [
            (self.kv_dtype in ("float16", "bfloat16", "float32"), "kv_dtype must be float16, bfloat16 or float32"),
            (self.gemm_dtype in ("float16", "float32"), "gemm_dtype must be float16 or float32"),
            (self.matvec_max_tokens >= 0 and self.matmul_max_tokens >= 0, "matvec/matmul_max_tokens must be >= 0"),
            (self.max_graph_batch >= 1 and self.max_prefill_graph >= 0, "max_graph_batch >= 1, max_prefill_graph >= 0"),
            (self.matvec_unroll >= 1, "matvec_unroll must be >= 1"),
            (self.matvec_split in (None, 1, 2, 4, 8), "matvec_split must be None, 1, 2, 4 or 8"),
            (self.norm_once_rows >= 1, "norm_once_rows must be >= 1"),
            (self.decode_tc_max_seqs >= 0 and self.min_split_positions >= 0,
             "decode_tc_max_seqs and min_split_positions must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"CUDA option: {message}")

    @classmethod
    def parse(cls, items: Mapping[str, object] | list[str]) -> CudaOptions:
        """From NAME=VALUE strings (the CLI) or a mapping (settings); values as text are read
        by the field's type (true/false, integers, none)."""
        if isinstance(items, list):
            pairs = [item.partition("=") for item in items]
            if any(not sep for _, sep, _ in pairs):
                raise ValueError(f"CUDA options are NAME=VALUE, not {items!r}")
            items = {k.strip(): v.strip() for k, _, v in pairs}
        defaults = {f.name: f.default for f in fields(cls)}
        unknown = set(items) - set(defaults)
        if unknown:
            raise ValueError(f"unknown CUDA option(s) {sorted(unknown)}; known: {sorted(defaults)}")
        return cls(**{k: _coerce(k, v, defaults[k]) for k, v in items.items()})


def _coerce(name: str, value: object, default: object) -> object:
    if not isinstance(value, str):
        return value
    text = value.lower()
    if isinstance(default, bool):
        if text not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
            raise ValueError(f"CUDA option {name} takes true or false, not {value!r}")
        return text in ("1", "true", "on", "yes")
    if isinstance(default, int) or default is None:
        if default is None and text == "none":
            return None
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"CUDA option {name} takes an integer, not {value!r}") from None
    return value


@dataclass(slots=True)
class EngineConfig:
    model: str                         # path to a GGUF file
    backend: str = "auto"              # cpu | cuda | auto
    cpu_dtype: str = "float32"         # CPU weights: float32 (reference), bfloat16, int8
    max_model_len: int = 0             # 0: the model's context, capped at 32768
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    kv_cache_mb: int = 1024            # KV cache size when num_kv_blocks is 0
    num_kv_blocks: int = 0
    tokenizer_cache: str | None = None  # where converted tokenizers are kept
    kernel_cache: str | None = None    # where compiled CUDA kernels are kept (None: CuPy's ~/.cupy)
    merge_cache: str | None = None     # where adapters merged into the weights are kept (None: merged each load)
    revision: str = ""                 # weights revision reported in responses
    lora: str | None = None            # a PEFT LoRA adapter folder served on the model (runtime/lora.py)
    lora_mode: str = "merged"          # merged into the weights at load (lora_merge.py), or unmerged (loads faster)
    overlap: bool = True               # queue the next step before reading this one's tokens (CUDA)
    cuda: CudaOptions = field(default_factory=CudaOptions)

    def __post_init__(self):
        checks = [
            (Path(self.model).suffix == ".gguf" or Path(self.model).is_file(), f"model must be a GGUF file: {self.model}"),
            (self.backend in ("cpu", "cuda", "auto"), f"backend must be cpu, cuda or auto, not {self.backend!r}"),
            (self.cpu_dtype in ("float32", "bfloat16", "int8"), "cpu_dtype must be float32, bfloat16 or int8"),
            (self.lora_mode in ("merged", "unmerged"),
             f"lora_mode must be merged or unmerged, not {self.lora_mode!r}"),
            (self.max_model_len >= 0, "max_model_len must be >= 0"),
            (self.max_num_seqs >= 1, "max_num_seqs must be >= 1"),
            (self.max_num_batched_tokens >= 16, "max_num_batched_tokens must be >= 16"),
            (self.block_size in (8, 16, 32, 64, 128), "block_size must be 8, 16, 32, 64 or 128"),
            (self.kv_cache_mb > 0 or self.num_kv_blocks > 0, "the KV cache needs a size"),
            (self.num_kv_blocks >= 0, "num_kv_blocks must be >= 0"),
            (isinstance(self.cuda, CudaOptions), "cuda must be a CudaOptions"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
