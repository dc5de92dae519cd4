"""A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors, as peft's
save_pretrained writes it) read for a GGUF base, served merged into the weights at load
(lora_merge.py, the default: W' = W + B A) or unmerged: y = W x + B (A x), the backends adding
the low-rank product to each projection's output. Either way the base's file is never
touched. Here the adapter is checked against the base's ModelSpec and brought into the
runtime's layout:
- PEFT names (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight) map onto the
  decoder's fused linears: q/k/v -> qkv, o -> o_proj, gate/up -> gate_up, down -> down;
- the scale alpha / r (alpha / sqrt(r) with use_rslora) is folded into B;
- llama: transformers un-permutes the GGUF's Q/K rows when it reads the file (the model the
  adapter was trained on), so B's q and k rows are permuted back to the GGUF's
  interleaved-RoPE order, as training/export.py does for whole weights.
Anything else (DoRA, LoRA biases, embedding or lm_head adapters, unknown modules, shapes made
for another base) raises AdapterError naming the problem.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime.file_digest import file_digest
from runtime.gguf import ModelLoadError

CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"
KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(?:self_attn|mlp)\."
                 r"(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_([AB])\.weight$")
# the decoder's fused linears and the PEFT modules whose outputs they stack, in row order
FUSED = {"qkv": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",),
         "gate_up": ("gate_proj", "up_proj"), "down": ("down_proj",)}
# config options whose non-default value changes the computation in a way served here never is
REFUSED = {"use_dora": "DoRA", "fan_in_fan_out": "fan_in_fan_out (Conv1D layers)", "lora_bias": "LoRA biases",
           "layer_replication": "layer replication", "alpha_pattern": "per-module alpha (alpha_pattern)",
           "modules_to_save": "fully trained modules (modules_to_save)",
           "trainable_token_indices": "trained token embeddings"}


class AdapterError(ModelLoadError):
    """An adapter that cannot be served on this base, with the reason."""


@dataclass(frozen=True, slots=True)
class Factors:
    a: np.ndarray       # [r, in] f32
    b: np.ndarray       # [out, r] f32, the scale folded in, rows in the GGUF's order


@dataclass(frozen=True, slots=True)
class FusedLoRA:
    """The factors of one fused linear: u = x A^T [T, P r], then output rows of part p read
    u's columns p r .. (p+1) r: y[:, n] += u[:, p(n) r:(p(n)+1) r] . b[n]. A part the adapter
    does not train has zero rows (r: the largest rank of the parts)."""
    a: np.ndarray       # [P r, in] f32
    b: np.ndarray       # [out, r] f32
    ends: tuple[int, ...]   # the row just past each part

    def block_b(self) -> np.ndarray:
        """b as a dense [out, P r] block-diagonal matrix: y += u @ block_b().T."""
        r = self.b.shape[1]
        dense = np.zeros((self.b.shape[0], r * len(self.ends)), np.float32)
        start = 0
        for p, end in enumerate(self.ends):
            dense[start:end, p * r:(p + 1) * r] = self.b[start:end]
            start = end
        return dense


@dataclass(slots=True)
class Adapter:
    path: Path
    sha256: str                 # of adapter_model.safetensors
    rank: int
    alpha: float
    layers: list[dict[str, Factors]]    # per layer: PEFT module name -> its factors
    rows: dict[str, int]                # PEFT module name -> its output rows in the base

    @property
    def name(self) -> str:
        return self.path.name

    def describe(self) -> dict:
        modules = sorted({m for layer in self.layers for m in layer})
        return {"name": self.name, "sha256": self.sha256, "rank": self.rank, "alpha": self.alpha,
                "modules": modules}

    def fused(self, layer: int, linear: str) -> FusedLoRA | None:
        """The factors for one of the decoder's linears (FUSED), or None if none of its parts is adapted."""
        parts = [self.layers[layer].get(m) for m in FUSED[linear]]
        if all(p is None for p in parts):
            return None
        r = max(p.a.shape[0] for p in parts if p is not None)
        cols = next(p.a.shape[1] for p in parts if p is not None)
        rows = [self.rows[m] for m in FUSED[linear]]
        a = np.zeros((r * len(parts), cols), np.float32)
        b = np.zeros((sum(rows), r), np.float32)
        start = 0
        for p, (f, n) in enumerate(zip(parts, rows)):
            if f is not None:
                k = f.a.shape[0]
                a[p * r:p * r + k] = f.a
                b[start:start + n, :k] = f.b
            start += n
        return FusedLoRA(a, b, tuple(np.cumsum(rows).tolist()))


def shapes(spec) -> dict[str, tuple[int, int]]:
    """(out, in) of each PEFT module in a base of this ModelSpec."""
    h, d = spec.hidden, spec.head_dim
    return {"q_proj": (spec.n_heads * d, h), "k_proj": (spec.n_kv_heads * d, h), "v_proj": (spec.n_kv_heads * d, h),
            "o_proj": (h, spec.n_heads * d), "gate_proj": (spec.ffn, h), "up_proj": (spec.ffn, h),
            "down_proj": (h, spec.ffn)}


def interleaved_rows(rows: int, heads: int) -> np.ndarray:
    """Row order of llama.cpp's Q/K permutation: per head, the halves [r.., s..] become pairs
    [r0, s0, r1, s1, ...]; w_gguf = w_hf[order]."""
    return np.arange(rows).reshape(heads, 2, rows // heads // 2).transpose(0, 2, 1).reshape(-1)


def revision_suffix(folder: str | Path, sha256: str) -> str:
    """What a revision's name gains from its adapter: "+<folder name>.<sha256 prefix>"."""
    return "+" + re.sub(r"[^A-Za-z0-9._-]", "_", Path(folder).name)[:64] + "." + sha256[:12]


def weights_sha256(folder: str | Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of the adapter's safetensors: what names it in revisions and receipts (`cache_dir`:
    where file_digest keeps it for later starts)."""
    try:
        return file_digest(Path(folder) / WEIGHTS_FILE, "sha256", cache_dir)
    except OSError as e:
        raise AdapterError(f"{Path(folder).name}: cannot read {WEIGHTS_FILE}: {e}") from e


def read_config(folder: Path) -> dict:
    try:
        config = json.loads((folder / CONFIG_FILE).read_text())
    except FileNotFoundError:
        raise AdapterError(f"{folder.name}: no {CONFIG_FILE} (not a PEFT adapter folder)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AdapterError(f"{folder.name}/{CONFIG_FILE} is not valid JSON: {e}") from e
    if not isinstance(config, dict):
        raise AdapterError(f"{folder.name}/{CONFIG_FILE} is not a JSON object")
    if config.get("peft_type") != "LORA":
        raise AdapterError(f"{folder.name}: peft_type {config.get('peft_type')!r} is not LORA")
    for key, what in REFUSED.items():
        if config.get(key):
            raise AdapterError(f"{folder.name}: {what} is not supported ({key} = {config[key]!r})")
    if config.get("bias", "none") != "none":
        raise AdapterError(f"{folder.name}: trained biases are not supported (bias = {config['bias']!r}, "
                           "only 'none')")
    if not isinstance(config.get("lora_alpha"), (int, float)) or config["lora_alpha"] <= 0:
        raise AdapterError(f"{folder.name}: lora_alpha must be a positive number")
    return config


# safetensors dtypes as little-endian numpy types; BF16 is read as the top half of a float32
NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """Each tensor of the file as float32, as torch's .float() gives it, without importing torch
    (1-3 s of a start on two cores): numpy has no bfloat16, and a bfloat16 is a float32's top 16 bits."""
    from safetensors import SafetensorError, deserialize
    try:
        items = deserialize(path.read_bytes())
    except FileNotFoundError:
        raise AdapterError(f"{path.parent.name}: no {WEIGHTS_FILE}") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise AdapterError(f"{path.parent.name}/{WEIGHTS_FILE} cannot be read (truncated or corrupt?): {e}") from e
    tensors = {}
    for name, t in items:
        if t["dtype"] not in NUMPY_DTYPES:
            raise AdapterError(f"{path.parent.name}/{WEIGHTS_FILE}: {name} has dtype {t['dtype']}, not one of "
                               + ", ".join(NUMPY_DTYPES))
        raw = np.frombuffer(t["data"], NUMPY_DTYPES[t["dtype"]]).reshape(t["shape"])
        tensors[name] = ((raw.astype(np.uint32) << 16).view(np.float32) if t["dtype"] == "BF16"
                         else raw.astype(np.float32))
    return tensors


def load_adapter(folder: str | Path, spec) -> Adapter:
    """The adapter in `folder`, checked against and laid out for a base of this ModelSpec."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AdapterError(f"adapter {folder} is not a folder (want one holding {CONFIG_FILE} and {WEIGHTS_FILE})")
    config = read_config(folder)
    weights = folder / WEIGHTS_FILE
    tensors = read_tensors(weights)
    sha = weights_sha256(folder)
    found: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        m = KEY.match(key)
        if m is None and ("embed" in key or "lm_head" in key):
            raise AdapterError(f"{folder.name}: LoRA on the embedding or the lm_head is not supported ({key!r})")
        if m is None:
            raise AdapterError(f"{folder.name}: cannot map {key!r} onto the runtime's projections "
                               "(supported: LoRA on q/k/v/o/gate/up/down_proj of the decoder layers)")
        layer, module, which = int(m.group(1)), m.group(2), m.group(3)
        if layer >= spec.n_layers:
            raise AdapterError(f"{folder.name}: has layer {layer}, the base has {spec.n_layers} layers "
                               "(made for another base)")
        found.setdefault((layer, module), {})[which] = value
    if not found:
        raise AdapterError(f"{folder.name}: {WEIGHTS_FILE} holds no LoRA weights")
    out_in = shapes(spec)
    alpha, rslora = float(config["lora_alpha"]), bool(config.get("use_rslora"))
    layers: list[dict[str, Factors]] = [{} for _ in range(spec.n_layers)]
    ranks = set()
    for (layer, module), ab in sorted(found.items()):
        where = f"{folder.name}: layer {layer} {module}"
        if set(ab) != {"A", "B"}:
            raise AdapterError(f"{where} has lora_{'B' if 'A' in ab else 'A'} missing")
        a, b = ab["A"], ab["B"]
        n_out, n_in = out_in[module]
        r = a.shape[0]
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != n_in or b.shape != (n_out, r) or r == 0:
            raise AdapterError(f"{where}: lora_A {list(a.shape)} and lora_B {list(b.shape)} do not fit this "
                               f"base, which needs [r, {n_in}] and [{n_out}, r] (made for another base?)")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise AdapterError(f"{where}: weights are not finite")
        scale = alpha / math.sqrt(r) if rslora else alpha / r
        b = b * np.float32(scale)
        if spec.rope_interleaved and module in ("q_proj", "k_proj"):
            b = b[interleaved_rows(n_out, spec.n_heads if module == "q_proj" else spec.n_kv_heads)]
        layers[layer][module] = Factors(np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32))
        ranks.add(r)
    return Adapter(folder.resolve(), sha, max(ranks), alpha, layers, {m: s[0] for m, s in out_in.items()})
