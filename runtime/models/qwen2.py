"""qwen2 (Qwen2, Qwen2.5, Qwen2.5-Coder): bias on q, k and v; NeoX RoPE."""
from runtime.models.decoder import Arch

QWEN2 = Arch("qwen2", qkv_bias=True)
