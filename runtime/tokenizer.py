"""Tokenizer and chat template taken from the GGUF itself, through transformers' GGUF
converters. Converting a 150k-token vocabulary takes ~20 s, so the converted tokenizer is
saved under `cache_dir`, keyed by a hash of the GGUF's tokenizer metadata."""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from runtime.gguf import Metadata, read_gguf

log = logging.getLogger(__name__)


def tokenizer_fingerprint(metadata: Metadata) -> str:
    """A hash of every tokenizer.* key and its value as stored in the file."""
    h = hashlib.sha256()
    for key in sorted(k for k in metadata.keys() if k.startswith("tokenizer.")):
        h.update(key.encode())
        h.update(metadata.raw(key))
    return h.hexdigest()[:24]


class Tokenizer:
    def __init__(self, gguf_path: str | Path, cache_dir: str | Path | None = None,
                 metadata: Metadata | None = None):
        """`metadata`: the file's already parsed key/values (load_gguf's), else the file is
        parsed here."""
        gguf_path = Path(gguf_path)
        metadata = metadata or read_gguf(gguf_path).metadata
        self.fingerprint = tokenizer_fingerprint(metadata)
        cached = Path(cache_dir) / self.fingerprint if cache_dir else None
        if cached and (cached / "tokenizer_config.json").exists():
            self.hf: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(cached)
        else:
            log.info("converting the tokenizer of %s (once)", gguf_path.name)
            self.hf = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
            if cached:
                self.hf.save_pretrained(cached)
        template = metadata.get("tokenizer.chat_template")
        if template is not None and not self.hf.chat_template:
            self.hf.chat_template = template

    @property
    def has_chat_template(self) -> bool:
        return bool(self.hf.chat_template)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Token ids of `text`; add_special adds the model's BOS where it wants one (raw prompts)."""
        return self.hf.encode(text, add_special_tokens=add_special)

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return self.hf.decode(ids, skip_special_tokens=skip_special)

    def token_text(self, token_id: int) -> str:
        return self.hf.decode([token_id], skip_special_tokens=False)

    def render_chat(self, messages: list[dict], tools: list[dict] | None = None,
                    add_generation_prompt: bool = True, **template_kwargs) -> str:
        """The prompt text for `messages` (and `tools`) through the model's own template."""
        if not self.has_chat_template:
            raise ValueError("this model has no chat template; use the completions API")
        return self.hf.apply_chat_template(messages, tools=tools, tokenize=False,
                                           add_generation_prompt=add_generation_prompt, **template_kwargs)

    def __len__(self) -> int:
        return len(self.hf)
