"""qwen3: no attention bias; per-head RMSNorm of q and k before RoPE; NeoX RoPE."""
from runtime.models.decoder import Arch

QWEN3 = Arch("qwen3", qk_norm=True)
