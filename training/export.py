"""Write a trained HF model back to a GGUF the runtime serves, as F16 or Q8_0.

The base GGUF is the template: every metadata key (tokenizer, chat template, RoPE, special
tokens) is copied unchanged, so the runtime's reload check sees the same architecture and
tokenizer, and exactly the base's tensor names are written. HF names map to GGUF names
through gguf's own TensorNameMap, not a table kept here. Matrices go to F16 or Q8_0 (rows
whose length is not a multiple of Q8_0's 32-value block stay F16); norms and biases stay F32
as llama.cpp keeps them. llama's Q/K rows are permuted back to llama.cpp's interleaved-RoPE
order, undoing the permutation transformers applied on load. The file is written beside the
target and renamed into place only after it reads back, so a failed export leaves nothing.
"""
from __future__ import annotations

import logging
from pathlib import Path

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType

from runtime.gguf import ModelLoadError, load_gguf

log = logging.getLogger(__name__)

FILE_TYPES = {"f16": LlamaFileType.MOSTLY_F16, "q8_0": LlamaFileType.MOSTLY_Q8_0}
ARCHS = {name: arch for arch, name in gguf.MODEL_ARCH_NAMES.items()}
Q8_BLOCK = gguf.GGML_QUANT_SIZES[Q.Q8_0][0]


class ExportError(RuntimeError):
    """The trained model does not map onto the base GGUF's tensors."""


def interleave_rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's permute(): per head, rows [r0..r(d/2-1), s0..s(d/2-1)] -> [r0, s0, r1, s1, ...],
    so each RoPE rotation pair is adjacent. w: [n_heads * head_dim, in]."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _copy_metadata(reader: GGUFReader, writer: GGUFWriter, file_type: LlamaFileType) -> None:
    """As gguf's own gguf_new_metadata script does: every field but the virtual GGUF.* ones
    and the architecture, which GGUFWriter writes itself."""
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name in (gguf.Keys.General.FILE_TYPE, gguf.Keys.General.QUANTIZATION_VERSION):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    writer.add_file_type(int(file_type))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def gguf_tensors(state: dict[str, torch.Tensor], arch: str, n_layers: int) -> dict[str, np.ndarray]:
    """HF state dict -> {gguf name: float32 array}, through gguf's TensorNameMap."""
    names = gguf.get_tensor_name_map(ARCHS[arch], n_layers)
    out: dict[str, np.ndarray] = {}
    for hf_name, t in state.items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ExportError(f"no GGUF name for {hf_name!r} in gguf's {arch} tensor map")
        out[name] = t.detach().to(torch.float32).cpu().numpy()
    return out


def encode(values: np.ndarray, qtype: Q) -> tuple[np.ndarray, Q | None]:
    """(data, raw_dtype for GGUFWriter): F32 vectors, F16 or Q8_0 matrices."""
    if values.ndim == 1:
        return values.astype(np.float32), None
    if qtype == Q.Q8_0 and values.shape[-1] % Q8_BLOCK == 0:
        return gguf.quants.quantize(values, Q.Q8_0), Q.Q8_0
    return values.astype(np.float16), None


def export_gguf(model, base_gguf: str | Path, target: str | Path, export_type: str = "q8_0") -> Path:
    """Write `model` (a dense HF causal LM, LoRA already merged) as a GGUF shaped like `base_gguf`."""
    if export_type not in FILE_TYPES:
        raise ValueError(f"export_type must be one of {', '.join(FILE_TYPES)}, not {export_type!r}")
    base_path, target = Path(base_gguf), Path(target)
    base = load_gguf(base_path)
    spec = base.spec
    tensors = gguf_tensors(model.state_dict(), spec.arch, spec.n_layers)
    expected = set(base.tensors)
    if spec.tied_embeddings:
        tensors.pop("output.weight", None)       # tied: the head is the embedding, not stored
    missing, extra = expected - set(tensors), set(tensors) - expected
    if missing or extra:
        raise ExportError(f"the trained model does not match {base_path.name}: "
                          f"missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]}")
    if spec.rope_interleaved:
        for i in range(spec.n_layers):
            for kind, heads in (("attn_q", spec.n_heads), ("attn_k", spec.n_kv_heads)):
                key = f"blk.{i}.{kind}.weight"
                tensors[key] = interleave_rope_rows(tensors[key], heads)

    qtype = Q.Q8_0 if export_type == "q8_0" else Q.F16
    partial = target.with_name(target.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(base_path, "r")
    writer = GGUFWriter(str(partial), spec.arch)
    _copy_metadata(reader, writer, FILE_TYPES[export_type])
    for t in reader.tensors:                      # the base's tensor order
        data, raw = encode(tensors[t.name], qtype)
        writer.add_tensor(t.name, data, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    try:
        load_gguf(partial)                        # reads back: header, metadata, every tensor
    except ModelLoadError:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    log.info("exported %s (%s, %.1f MB)", target.name, export_type, target.stat().st_size / 2**20)
    return target
