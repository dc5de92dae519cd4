"""llguidance's tokenizer for one of ours, its token table kept in our tokenizer cache.

Read from a `tokenizers` JSON, llguidance builds its tokenizer in about 2.5 s for a 150k
vocabulary, holding the GIL (measured on 2 busy cores), much of it taking the JSON apart;
given the table it extracts (each token's bytes, which tokens are special) and a tokenize
function, it builds the same tokenizer in about 1.2-1.7 s. The first build reads the JSON and
keeps the table in <tokenizer cache entry>/grammar_tokens.npz, keyed by the JSON's digest and
checked by its own; a table that does not match is built again from the JSON, never trusted.
"""
from __future__ import annotations

import hashlib
import io
import logging
import zipfile
from pathlib import Path

import numpy as np
from llguidance import LLTokenizer, TokenizerWrapper

log = logging.getLogger(__name__)
TABLE = "grammar_tokens.npz"


class _Vocabulary:
    """What llguidance's TokenizerWrapper reads from a tokenizer."""

    def __init__(self, tokens: list[bytes], specials: list[int], eos: int, encode):
        self.tokens, self.special_token_ids, self.eos_token_id, self.bos_token_id = tokens, specials, eos, None
        self._encode = encode

    def __call__(self, text):
        if not isinstance(text, str):     # the wrapper probes with bytes, then passes str
            raise TypeError("text, not bytes")
        return self._encode(text)


def _check(lengths: np.ndarray, blob: np.ndarray, specials: np.ndarray, source: str) -> str:
    return hashlib.sha256(lengths.tobytes() + blob.tobytes() + specials.tobytes() + source.encode()).hexdigest()


def save_table(path: Path, source: str, tok: LLTokenizer, vocab: int) -> None:
    tokens = [tok.decode_bytes([i]) for i in range(vocab)]
    lengths = np.array([len(t) for t in tokens], np.int64)
    blob = np.frombuffer(b"".join(tokens), np.uint8)
    specials = np.array([i for i in range(vocab) if tok.is_special_token(i)], np.int64)
    buf = io.BytesIO()
    np.savez(buf, lengths=lengths, blob=blob, specials=specials, source=np.array(source),
             check=np.array(_check(lengths, blob, specials, source)))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)


def load_table(path: Path, source: str, vocab: int) -> tuple[list[bytes], list[int]] | None:
    """(token bytes, special ids) kept for the JSON of digest `source`, or None."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            lengths, blob, specials = z["lengths"], z["blob"], z["specials"]
            if str(z["source"]) != source:
                return None           # another tokenizer JSON (the entry was converted again)
            if str(z["check"]) != _check(lengths, blob, specials, source) or len(lengths) != vocab:
                raise ValueError("its content does not match its digest")
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        log.warning("grammar token table %s is damaged (%s); building it again", path, e)
        return None
    data, ends = blob.tobytes(), np.cumsum(lengths).tolist()
    return [data[a:b] for a, b in zip([0] + ends[:-1], ends)], specials.tolist()


def grammar_tokenizer(tokenizer, vocab: int, eos_ids: list[int], slices: list[str] | None = None) -> LLTokenizer:
    """llguidance's tokenizer for `tokenizer` (runtime.tokenizer.Tokenizer); `slices` as
    LLTokenizer takes them (None: its general ones, []: none)."""
    source = tokenizer.backend_sha256()
    path = tokenizer.cached / TABLE if tokenizer.cached else None
    table = load_table(path, source, vocab) if path else None
    if table is None:
        tok = LLTokenizer(tokenizer.backend_json(), n_vocab=vocab, eos_token=eos_ids, slices=slices)
        if path:
            save_table(path, source, tok, vocab)
        return tok
    return LLTokenizer(TokenizerWrapper(_Vocabulary(*table, eos_ids[0], tokenizer.encode)),
                       n_vocab=vocab, eos_token=eos_ids, slices=slices)
