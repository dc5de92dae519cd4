"""Random-weight GGUF models of any supported architecture, shape and tensor type.

Tests, kernel checks and benchmarks build their models here at run time (no hub
downloads). The file carries a real byte-level BPE tokenizer (merges learned from a small
corpus) and a ChatML template with tool support, so transformers can load the same file
as the independent reference. K-quant tensors are random-but-valid blocks: random bytes
with finite, small f16 scales, since gguf cannot quantize to K-quants itself.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, TokenType, quants
from gguf import MODEL_TENSOR as T

from runtime.models.decoder import tensor_name

CORPUS = """What is 2+2? The answer is 4. Hello world, hello there! The quick brown fox jumps over
the lazy dog. {"name": "get_weather", "arguments": {"city": "Paris"}} <tool_call> </tool_call>
SELECT * FROM notes WHERE id = 1; def main(): return 0. The weather in Paris is sunny today.
Store the facts in the database and search the documents for the answer, then remember it."""

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHATML_TEMPLATE = """{%- if tools %}<|im_start|>system
{{ messages[0]['content'] if messages[0]['role'] == 'system' else 'You are a helpful assistant.' }}

# Tools

You may call one or more functions. Function signatures are within <tools></tools>:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

Return each call as <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m['role'] == 'tool' %}<|im_start|>user
<tool_response>
{{ m['content'] }}
</tool_response><|im_end|>
{% elif m['role'] == 'assistant' and m.get('tool_calls') %}<|im_start|>assistant
{{ m['content'] or '' }}{% for tc in m['tool_calls'] %}<tool_call>
{"name": "{{ tc['function']['name'] }}", "arguments": {{ tc['function']['arguments'] if tc['function']['arguments'] is string else tc['function']['arguments'] | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif m['role'] != 'system' %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def _byte_chars() -> list[str]:
    """GPT-2's reversible byte -> printable unicode map, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def bpe_vocab(num_merges: int) -> tuple[list[str], list[str]]:
    """Byte-level BPE learned on CORPUS: (tokens, merges)."""
    chars = _byte_chars()
    words = Counter("".join(chars[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\w\s]+|\s+", CORPUS))
    split = {w: list(w) for w in words}
    tokens, merges = list(chars), []
    while len(merges) < num_merges:
        pairs = Counter()
        for w, n in words.items():
            parts = split[w]
            for a, b in zip(parts, parts[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = pairs.most_common(1)[0]
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        for w, parts in split.items():
            i, out = 0, []
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            split[w] = out
    return tokens, merges


def random_kquant(rows: int, cols: int, qtype: Q, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Random valid K-quant blocks [rows, bytes]: random payload, small finite f16 scales."""
    block, nbytes = {Q.Q4_K: (256, 144), Q.Q5_K: (256, 176), Q.Q6_K: (256, 210)}[qtype]
    assert cols % block == 0, f"{qtype.name} needs rows of a multiple of {block} values"
    n = rows * cols // block
    raw = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    if qtype == Q.Q6_K:
        d = (rng.uniform(0.5, 1.5, n) * scale / (64 * 32)).astype(np.float16)
        raw[:, 208:210] = d.view(np.uint8).reshape(n, 2)
    else:
        levels = 15 if qtype == Q.Q4_K else 31
        d = (rng.uniform(0.5, 1.5, n) * 2 * scale / (63 * levels)).astype(np.float16)
        dmin = (rng.uniform(0.5, 1.5, n) * scale / 63).astype(np.float16)
        raw[:, 0:2] = d.view(np.uint8).reshape(n, 2)
        raw[:, 2:4] = dmin.view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, -1)


def encode_tensor(values: np.ndarray, qtype: Q, rng: np.random.Generator, scale: float) -> np.ndarray:
    if qtype == Q.F32:
        return values.astype(np.float32)
    if qtype == Q.F16:
        return values.astype(np.float16)
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        return random_kquant(values.shape[0], values.shape[1], qtype, rng, scale)
    return quants.quantize(values.astype(np.float32), qtype)


@dataclass(frozen=True, slots=True)
class Shape:
    hidden: int = 64
    ffn: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    context: int = 1024
    rope_base: float = 10000.0
    num_merges: int = 200          # vocab = 256 + merges + 3 specials
    vocab: int = 0                 # > 0: pad the vocabulary with unused tokens to this size


TINY_QWEN3 = Shape(hidden=128, ffn=256, heads=4, kv_heads=2, head_dim=128)  # transformers fixes qwen3 head_dim at 128
QWEN3_0_6B = Shape(hidden=1024, ffn=3072, layers=28, heads=16, kv_heads=8, head_dim=128,
                   context=40960, rope_base=1e6, vocab=151936)
QWEN3_1_7B = Shape(hidden=2048, ffn=6144, layers=28, heads=16, kv_heads=8, head_dim=128,
                   context=40960, rope_base=1e6, vocab=151936)


def write_random_gguf(path: str | Path, arch: str = "qwen3", shape: Shape = Shape(), qtype: Q = Q.F32,
                      embed_qtype: Q | None = None, tied: bool = False, seed: int = 0,
                      scale: float = 0.3, favour: str | None = None, call_tags: str | None = None) -> Path:
    """Write a random model; matrices in `qtype`, the embedding table in `embed_qtype`.
    `favour` names a token the model then emits almost always (a worst case for constraints):
    every embedding shares one direction, which the token's output row reads. `call_tags`:
    "trained" or "untrained" adds <tool_call> and </tool_call> as tokens of their own, the
    latter with the last token's output row (as Qwen2.5-Coder's GGUFs leave them)."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    tokens, merges = bpe_vocab(shape.num_merges)
    tags = ["<tool_call>", "</tool_call>"] if call_tags else []
    tokens += SPECIALS + tags
    types = [TokenType.NORMAL] * (len(tokens) - len(SPECIALS + tags)) + [TokenType.CONTROL] * len(SPECIALS) \
        + [TokenType.USER_DEFINED] * len(tags)          # as Qwen's GGUFs type them: kept in decoded text
    if tags and not shape.vocab:
        tokens, types = tokens + ["<|unused_0|>"], types + [TokenType.UNUSED]
    if shape.vocab:
        assert shape.vocab >= len(tokens)
        pad = shape.vocab - len(tokens)
        tokens += [f"<|unused_{i}|>" for i in range(pad)]
        types += [TokenType.UNUSED] * pad
    vocab = len(tokens)
    eos = tokens.index("<|im_end|>")

    w = GGUFWriter(str(path), arch)
    w.add_name(f"random-{arch}")
    w.add_block_count(shape.layers)
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.hidden)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(eos)
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)

    def add(name: str, values: np.ndarray, qt: Q) -> None:
        data = encode_tensor(values, qt, rng, scale) if values.ndim == 2 else values.astype(np.float32)
        w.add_tensor(name, data, raw_dtype=qt if values.ndim == 2 and qt not in (Q.F32, Q.F16) else None)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols) * 4).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    h, d = shape.hidden, shape.head_dim
    embed = rng.standard_normal((vocab, h)).astype(np.float32)
    if favour is not None:
        assert not tied, "a favoured token needs an output matrix of its own"
        shared = rng.standard_normal(h).astype(np.float32)
        shared /= np.linalg.norm(shared)
        embed += 3 * np.sqrt(h) * shared
    if call_tags == "untrained":
        assert tied, "the tag rows are the embedding's (the head's, tied)"
        for tag in tags:
            embed[tokens.index(tag)] = embed[-1]        # a padding row: no text ever trained it
    add(tensor_name(T.TOKEN_EMBD), embed, embed_qtype or qtype)
    add(tensor_name(T.OUTPUT_NORM), norm(h), Q.F32)
    if not tied:
        output = matrix(vocab, h)          # drawn here, as always: a seed keeps giving the same model
        if favour is not None:
            output[tokens.index(favour)] = 10 * shared
        add(tensor_name(T.OUTPUT), output, qtype)
    for i in range(shape.layers):
        add(tensor_name(T.ATTN_NORM, i), norm(h), Q.F32)
        add(tensor_name(T.ATTN_Q, i), matrix(shape.heads * d, h), qtype)
        add(tensor_name(T.ATTN_K, i), matrix(shape.kv_heads * d, h), qtype)
        add(tensor_name(T.ATTN_V, i), matrix(shape.kv_heads * d, h), qtype)
        if arch == "qwen2":
            for kind, n in ((T.ATTN_Q, shape.heads * d), (T.ATTN_K, shape.kv_heads * d), (T.ATTN_V, shape.kv_heads * d)):
                add(tensor_name(kind, i, "bias"), 0.1 * rng.standard_normal(n), Q.F32)
        if arch == "qwen3":
            add(tensor_name(T.ATTN_Q_NORM, i), norm(d), Q.F32)
            add(tensor_name(T.ATTN_K_NORM, i), norm(d), Q.F32)
        add(tensor_name(T.ATTN_OUT, i), matrix(h, shape.heads * d), qtype)
        add(tensor_name(T.FFN_NORM, i), norm(h), Q.F32)
        add(tensor_name(T.FFN_GATE, i), matrix(shape.ffn, h), qtype)
        add(tensor_name(T.FFN_UP, i), matrix(shape.ffn, h), qtype)
        add(tensor_name(T.FFN_DOWN, i), matrix(h, shape.ffn), qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
