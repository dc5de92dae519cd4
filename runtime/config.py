"""The engine's one configuration object, validated once where it is built."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
    revision: str = ""                 # weights revision reported in responses
    overlap: bool = True               # queue the next step before reading this one's tokens (CUDA)

    def __post_init__(self):
        checks = [
            (Path(self.model).suffix == ".gguf" or Path(self.model).is_file(), f"model must be a GGUF file: {self.model}"),
            (self.backend in ("cpu", "cuda", "auto"), f"backend must be cpu, cuda or auto, not {self.backend!r}"),
            (self.cpu_dtype in ("float32", "bfloat16", "int8"), "cpu_dtype must be float32, bfloat16 or int8"),
            (self.max_model_len >= 0, "max_model_len must be >= 0"),
            (self.max_num_seqs >= 1, "max_num_seqs must be >= 1"),
            (self.max_num_batched_tokens >= 16, "max_num_batched_tokens must be >= 16"),
            (self.block_size in (8, 16, 32, 64, 128), "block_size must be 8, 16, 32, 64 or 128"),
            (self.kv_cache_mb > 0 or self.num_kv_blocks > 0, "the KV cache needs a size"),
            (self.num_kv_blocks >= 0, "num_kv_blocks must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
