"""One file per architecture family; `build_model` picks by the GGUF's architecture."""
from runtime.backends import Ops
from runtime.gguf import GGUFModel, ModelLoadError
from runtime.models.decoder import DecoderLM
from runtime.models.llama import LLAMA
from runtime.models.qwen2 import QWEN2
from runtime.models.qwen3 import QWEN3

ARCHS = {a.name: a for a in (LLAMA, QWEN2, QWEN3)}


def build_model(model: GGUFModel, ops: Ops, max_positions: int) -> DecoderLM:
    arch = ARCHS.get(model.spec.arch)
    if arch is None:
        raise ModelLoadError(f"no model file for architecture {model.spec.arch!r}")
    return DecoderLM(model, arch, ops, max_positions)
