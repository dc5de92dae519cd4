"""llama (SmolLM2, Llama 2/3): no attention bias, no q/k norm; the GGUF stores Q/K rows
permuted for interleaved RoPE (ModelSpec.rope_interleaved)."""
from runtime.models.decoder import Arch

LLAMA = Arch("llama")
