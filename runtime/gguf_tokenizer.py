"""The `tokenizers` JSON of a GGUF's byte-level BPE vocabulary, built from its metadata alone.

transformers' GGUF conversion (AutoTokenizer(gguf_file=...)) is what runtime.tokenizer
snapshots, but on a first start it cost 4-5 s of the default model's 6 s: importing
transformers and torch (~3 s), reading the vocabulary again with its own reader (~1.5 s) and
building the tokenizer through its classes. For the byte-level BPE files samevm's catalog
models carry (`tokenizer.ggml.model` "gpt2" with the Qwen2, Llama-3 or GPT-2 splitting) this
module writes the JSON that conversion ends with, field for field and in the same order, so
the snapshot it feeds (and its digest) is the same whichever way it was made. It replays the
conversion's steps (transformers 5.x, integrations/gguf/gguf_tokenizer_mapping.py and the
tokenizer classes it hands the vocabulary to), which is what the parity tests compare against:

  vocab      the file's tokens, a token spelled outside the byte alphabet re-spelled byte by
             byte; a token listed twice keeps its last id
  added      "<|endoftext|>" (GPT2Tokenizer's default unk/bos/eos), then the CONTROL tokens
             spelled in the byte alphabet (special), the USER_DEFINED ones present in the
             vocabulary (not special), then the file's bos/eos/unk/pad not added yet (special)
  splitting  the regex transformers maps the file's `tokenizer.ggml.pre` to, else GPT-2's
  post       BOS/EOS where the file's add_bos_token/add_eos_token ask for them

Anything outside that (another tokenizer model, a pre-tokenizer not listed here, an added
token that would need an id a duplicate token leaves ambiguous) returns None: the caller
then converts through transformers, which stays the reference.
"""
from __future__ import annotations

import json
from functools import lru_cache

from runtime.gguf import Metadata, StringArray

CONTROL, USER_DEFINED = 3, 4          # llama.cpp's token types
ARCHITECTURES = ("qwen2", "qwen3", "llama")   # the tokenizer classes whose GGUF path this replays

_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# `tokenizer.ggml.pre` -> the split regex transformers' conversion puts before ByteLevel;
# None: transformers maps the name to nothing and keeps GPT-2's own ByteLevel splitting.
SPLITS = {
    "qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT,
    "llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT, "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "gpt-2": None, "smollm": None,
}
ENDOFTEXT = "<|endoftext|>"


@lru_cache(maxsize=1)
def byte_alphabet() -> list[str]:
    """GPT-2's reversible byte -> printable character map, indexed by byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    shifted = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(shifted)) for b in range(256)]


def _vocabulary(tokens: list[str]) -> tuple[dict[str, int], bool]:
    """token -> id as byte_level_tokenizer builds it, and whether a spelling repeats (the last
    id wins; the dict then goes in id order, as `tokenizers` writes it)."""
    letters = byte_alphabet()
    alphabet = frozenset(letters)
    vocab = {t if alphabet.issuperset(t) else "".join(letters[b] for b in t.encode()): i
             for i, t in enumerate(tokens)}
    if len(vocab) == len(tokens):
        return vocab, False
    return dict(sorted(vocab.items(), key=lambda kv: kv[1])), True


def _added_tokens(tokens: list[str], types: list[int], vocab: dict[str, int], named: list[str],
                  duplicates: bool) -> dict[str, dict] | None:
    """content -> added-token entry, in the order transformers adds them; None where one needs a
    new id that a vocabulary with repeated spellings makes ambiguous."""
    alphabet = frozenset(byte_alphabet())
    added: dict[str, dict] = {}

    def add(content: str, special: bool) -> bool:
        if content in added:
            return True
        token_id = vocab.get(content)
        if token_id is None:
            if duplicates:          # `tokenizers` counts the next id from a vocabulary with holes
                return False
            token_id = max([len(vocab) - 1, *(a["id"] for a in added.values())]) + 1
        added[content] = {"id": token_id, "content": content, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": special}
        return True

    steps = [(ENDOFTEXT, True), *((t, True) for t, k in zip(tokens, types) if k == CONTROL and alphabet.issuperset(t))]
    ok = all(add(content, special) for content, special in steps)
    user_defined = [t for t, k in zip(tokens, types) if k == USER_DEFINED and (t in vocab or t in added)]
    ok = ok and all(add(t, False) for t in user_defined) and all(add(t, True) for t in named)
    return added if ok else None


def _pre_tokenizer(pre: str) -> dict:
    split = SPLITS[pre]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": split is None}
    if split is None:
        return byte_level
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}, byte_level]}


def _post_processor(bos: tuple[str, int] | None, eos: tuple[str, int] | None) -> dict:
    """transformers' update_post_processor: `[bos] $A [eos]`, pairs `[bos] $A [eos] [bos] $B [eos]`."""
    def seq(part: str, type_id: int) -> list[dict]:
        out = [{"SpecialToken": {"id": bos[0], "type_id": type_id}}] if bos else []
        out.append({"Sequence": {"id": part, "type_id": type_id}})
        return out + ([{"SpecialToken": {"id": eos[0], "type_id": type_id}}] if eos else [])
    specials = {tok: {"id": tok, "ids": [i], "tokens": [tok]} for tok, i in filter(None, (bos, eos))}
    return {"type": "TemplateProcessing", "single": seq("A", 0), "pair": seq("A", 0) + seq("B", 1),
            "special_tokens": specials}


def build(metadata: Metadata) -> tuple[str, dict] | None:
    """(backend JSON, chat settings) as runtime.tokenizer.snapshot() gives them for
    transformers' conversion of this file, or None where this module does not replay it."""
    if (metadata.get("tokenizer.ggml.model") != "gpt2" or metadata.get("general.architecture") not in ARCHITECTURES
            or metadata.get("tokenizer.ggml.pre") not in SPLITS
            or not isinstance(metadata.get("tokenizer.ggml.tokens"), StringArray)
            or not isinstance(metadata.get("tokenizer.ggml.merges"), StringArray)):
        return None
    tokens = metadata.strings("tokenizer.ggml.tokens")
    merges = metadata.strings("tokenizer.ggml.merges")
    if any(m.count(" ") != 1 for m in merges):       # transformers splits on the space: pairs only
        return None
    types = metadata.get("tokenizer.ggml.token_type")
    vocab, duplicates = _vocabulary(tokens)

    def token_at(key: str) -> str | None:
        i = metadata.get(f"tokenizer.ggml.{key}")
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

    named = {"bos_token": token_at("bos_token_id"), "eos_token": token_at("eos_token_id"),
             "unk_token": token_at("unknown_token_id"), "pad_token": token_at("padding_token_id")}
    named = {k: v for k, v in named.items() if v is not None}
    added = _added_tokens(tokens, [] if types is None else types.tolist(), vocab, list(named.values()), duplicates)
    if added is None:
        return None

    def wanted(name: str, flag: str) -> tuple[str, int] | None:
        token = named.get(name)
        if token is None or not metadata.get(f"tokenizer.ggml.{flag}"):
            return None
        return token, added[token]["id"]          # every named token is an added one

    data = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": sorted(added.values(), key=lambda a: a["id"]),
        "normalizer": None, "pre_tokenizer": _pre_tokenizer(metadata.get("tokenizer.ggml.pre")),
        "post_processor": _post_processor(wanted("bos_token", "add_bos_token"), wanted("eos_token", "add_eos_token")),
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    eos = named.get("eos_token")
    chat = {"template": metadata.get("tokenizer.chat_template"), "special_tokens": named,
            "eos_token_id": None if eos is None else added[eos]["id"]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")), chat
