"""The trainable Hugging Face form of a served GGUF, and its tokenizer.

transformers reads the GGUF itself (`gguf_file=`, which needs accelerate). With
GgufConfig(dequantize=True) every tensor, K-quants included, comes back as a dense float
weight with no GgufHfQuantizer attached; should a quantizer still be attached, it is
dropped here, because save_pretrained and PEFT's merge refuse a "quantized" model.
For llama, transformers un-permutes the Q/K rows llama.cpp stored for interleaved RoPE;
training/export.py permutes them back.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, GgufConfig, PreTrainedModel

from runtime.gguf import ModelLoadError, load_gguf
from runtime.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def drop_gguf_quantizer(model: PreTrainedModel) -> PreTrainedModel:
    """Make a GGUF-loaded model an ordinary dense one (save_pretrained, merge, export)."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def load_tokenizer(gguf_path: str | Path, cache_dir: str | Path | None = None):
    """The GGUF's tokenizer with its chat template and a pad token (TRL pads batches): the
    runtime's own, from its cache of converted tokenizers when one is given (converting a
    150k-token vocabulary takes tens of seconds)."""
    tok = Tokenizer(gguf_path, cache_dir).hf
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def pick_device(wanted: str) -> str:
    """"auto" -> cuda when a GPU answers, else cpu; "cuda" without one is refused."""
    if wanted == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but no CUDA GPU is available")
    return "cuda" if wanted == "auto" and torch.cuda.is_available() else ("cpu" if wanted == "auto" else wanted)


def load_model(gguf_path: str | Path, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """Dense HF model of `gguf_path`; ModelLoadError when the file is not a model we serve."""
    path = Path(gguf_path)
    spec = load_gguf(path).spec                     # refuses architectures the runtime cannot serve
    log.info("loading %s (%s) for training", path.name, spec.arch)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=dtype,
            quantization_config=GgufConfig(dequantize=True))
    except (ValueError, OSError, KeyError) as e:
        raise ModelLoadError(f"transformers cannot load {path.name}: {e}") from e
    model = drop_gguf_quantizer(model)
    if spec.tied_embeddings and not model.config.tie_word_embeddings:
        # a file without output.weight must tie the head to the embedding, or it is untrained
        raise ModelLoadError(f"{path.name}: has no output.weight but transformers did not tie the head")
    return model
