"""The model: one decoder (decoder.py) for every supported architecture family (its ARCHS);
`build_model` picks by the GGUF's architecture."""
from runtime.backends import Ops
from runtime.gguf import GGUFModel, ModelLoadError
from runtime.lora import Adapter
from runtime.models.decoder import ARCHS, DecoderLM


def build_model(model: GGUFModel, ops: Ops, max_positions: int, adapter: Adapter | None = None) -> DecoderLM:
    arch = ARCHS.get(model.spec.arch)
    if arch is None:
        raise ModelLoadError(f"no model file for architecture {model.spec.arch!r}")
    return DecoderLM(model, arch, ops, max_positions, adapter)
