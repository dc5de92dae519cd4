"""Tokenizer and chat template taken from the GGUF itself.

The first load builds the tokenizer from the GGUF's vocabulary: directly from its metadata
for the byte-level BPE files runtime.gguf_tokenizer replays (~0.5 s for 150k tokens), else
through transformers' GGUF converters (4-5 s on 2 cores, most of it importing transformers
and torch), which also saves transformers' own files under `cache_dir/<fingerprint>` (what
`.hf` reloads, for training and for tokenizers the snapshot cannot express). Both ways cache
there the same snapshot of the state every call here runs on: the Rust `tokenizers` model
exactly as transformers drives it (`backend.json`, also what the server's grammars read) and
the chat template with the special tokens it sees (`chat.json`, written last, with the digest of `backend.json`: an
entry that does not match it is converted again, never trusted). Encode, decode and
render_chat always run on that snapshot, through `tokenizers` and jinja2 alone (the template
rendered with the globals, filters and message clean-up of transformers'
apply_chat_template), so a load from the cache imports neither transformers nor torch. A
tokenizer the snapshot cannot express (a dict of named templates, clean-up of decoded
spaces) stays on transformers.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import jinja2
import jinja2.ext
import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as RustTokenizer

from runtime import gguf_tokenizer
from runtime.gguf import Metadata, read_gguf

log = logging.getLogger(__name__)
SNAPSHOT = ("backend.json", "chat.json")


def tokenizer_fingerprint(metadata: Metadata) -> str:
    """A hash of every tokenizer.* key and its value as stored in the file."""
    h = hashlib.sha256()
    for key in sorted(k for k in metadata.keys() if k.startswith("tokenizer.")):
        h.update(key.encode())
        h.update(metadata.raw(key))
    return h.hexdigest()[:24]


def snapshot(hf) -> tuple[str, dict] | None:
    """(backend json, chat settings) of a transformers tokenizer, or None if they would not
    reproduce it: decode clean-up, or several named templates."""
    template = hf.chat_template
    cleans_up = hf.clean_up_tokenization_spaces and type(hf.backend_tokenizer.model).__name__ != "BPE"
    if cleans_up or not (template is None or isinstance(template, str)) or hf.split_special_tokens:
        return None
    chat = {"template": template, "special_tokens": dict(hf.special_tokens_map),
            "eos_token_id": hf.eos_token_id}
    return plain_backend_json(hf), chat


def plain_backend_json(hf) -> str:
    """The JSON of a transformers tokenizer's Rust tokenizer, padding and truncation off."""
    data = json.loads(hf.backend_tokenizer.to_str())
    data["padding"] = data["truncation"] = None
    return compact_merges(data)


def compact_merges(data: dict) -> str:
    """`tokenizers` JSON of `data`, its BPE merges as "a b" strings instead of ["a", "b"] pairs
    where no merged token holds a space (both forms are `tokenizers`' own; it reads 150k string
    merges 0.1 s faster, a quarter of a later start's tokenizer load)."""
    merges = (data.get("model") or {}).get("merges")
    if merges and all(isinstance(m, list) and len(m) == 2 and " " not in m[0] + m[1] for m in merges):
        data = {**data, "model": {**data["model"], "merges": [f"{a} {b}" for a, b in merges]}}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


# ---- chat templates, rendered as transformers' apply_chat_template renders them ----------
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (assistant-mask markers) renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


class _Dict:
    """dict() and dict.fromkeys() without the type itself."""
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """namespace() that refuses underscore attributes (no reaching into Python internals)."""
    def __init__(*args, **kwargs):
        self, attrs = args[0], dict(*args[1:], **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template cannot set {name!r} on a namespace")


def _raise(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=8)
def _compiled(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise, strftime_now=lambda fmt: datetime.now().strftime(fmt),
                       dict=_Dict(), namespace=_Namespace)
    return env.from_string(template)


def _plain(value):
    """JSON-typed copy of what the template may see; anything else becomes "<TypeName>"."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    for base in (bool, str, int, float):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.generic):
        return _plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def render(template: str, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool,
           variables: dict) -> str:
    """Messages lose their None-valued keys and get their reasoning under every name
    templates read; tools must be JSON schemas (dicts)."""
    if not messages:
        raise ValueError("cannot render an empty conversation")
    if tools is not None and not all(isinstance(t, Mapping) for t in tools):
        raise TypeError("tools must be JSON schemas (dicts)")
    chat = []
    for message in _plain([{k: v for k, v in m.items() if v is not None} for m in messages]):
        reasoning = next((message[k] for k in REASONING_KEYS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        chat.append(message)
    return _compiled(template).render(messages=chat, tools=_plain(tools), documents=None,
                                      add_generation_prompt=add_generation_prompt, **_plain(variables))


class Tokenizer:
    def __init__(self, gguf_path: str | Path, cache_dir: str | Path | None = None,
                 metadata: Metadata | None = None):
        """`metadata`: the file's already parsed key/values (load_gguf's), else the file is
        parsed here."""
        self.gguf_path = Path(gguf_path)
        metadata = metadata or read_gguf(self.gguf_path).metadata
        self.fingerprint = tokenizer_fingerprint(metadata)
        self.gguf_template = metadata.get("tokenizer.chat_template")
        self.architecture = metadata.get("general.architecture")
        self.cached = Path(cache_dir) / self.fingerprint if cache_dir else None
        self._hf = self._backend_sha256 = None
        if self.cached and self._load_snapshot():
            return
        text, chat = gguf_tokenizer.build(metadata) or snapshot(self.hf) or (None, None)
        backend = text.encode() if text else None
        if backend and self.cached:
            self.cached.mkdir(parents=True, exist_ok=True)
            digest = self._backend_sha256 = hashlib.sha256(backend).hexdigest()
            # chat.json last, each file whole or absent (a rename): its presence means a complete entry
            for name, data in zip(SNAPSHOT, (backend, json.dumps({**chat, "backend_sha256": digest}).encode())):
                tmp = self.cached / f".{name}.tmp"
                tmp.write_bytes(data)
                tmp.replace(self.cached / name)
        self._use(backend, chat)

    def _load_snapshot(self) -> bool:
        """Use the cached snapshot if it is whole; a damaged entry (a partial write, a file
        changed since) is removed, to be converted afresh, never trusted."""
        if not (self.cached / SNAPSHOT[1]).exists():
            return False
        try:
            chat = json.loads((self.cached / "chat.json").read_text())
            if not isinstance(chat, dict):
                raise ValueError("chat.json is not an object")
            backend = (self.cached / "backend.json").read_bytes()
            digest = hashlib.sha256(backend).hexdigest()
            if digest != chat.pop("backend_sha256", None):
                raise ValueError("backend.json does not match the digest chat.json recorded")
            self._use(backend, chat)
            self._backend_sha256 = digest
            return True
        except (OSError, ValueError, UnicodeDecodeError) as e:
            log.warning("tokenizer cache %s is damaged (%s); converting again", self.cached, e)
            shutil.rmtree(self.cached, ignore_errors=True)
            return False

    def _use(self, backend: bytes | None, chat: dict | None) -> None:
        """`backend`: the `tokenizers` JSON, UTF-8. Parsed from bytes: a str of it would be
        decoded here and encoded again to UTF-8 for the parse (tens of ms of a later start)."""
        self.backend = RustTokenizer.from_buffer(backend) if backend else None
        self._json, self.chat = backend, chat

    def backend_json(self) -> str:
        """The `tokenizers` JSON of this tokenizer, padding and truncation off (what llguidance
        reads): the snapshot's, else exported from transformers."""
        if self._json is None:
            self._json = plain_backend_json(self.hf).encode()
        return self._json.decode()

    def backend_sha256(self) -> str:
        """sha256 of backend_json() as UTF-8 (what names the grammar's token table)."""
        if self._backend_sha256 is None:
            self.backend_json()
            self._backend_sha256 = hashlib.sha256(self._json).hexdigest()
        return self._backend_sha256

    @property
    def hf(self):
        """The transformers tokenizer (imports transformers; llguidance builds on it)."""
        if self._hf is None:
            from transformers import AutoTokenizer
            if self.cached and (self.cached / "tokenizer_config.json").exists():
                self._hf = AutoTokenizer.from_pretrained(self.cached)
            else:
                from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES
                log.info("converting the tokenizer of %s (once)", self.gguf_path.name)
                # Naming the tokenizer type picks the class the model config would, without
                # transformers parsing the whole file for that config (gguf-py's reader: 10-30 s
                # of a first start for a 150k vocabulary); the vocabulary is read by its own reader.
                kind = {"tokenizer_type": self.architecture} if self.architecture in TOKENIZER_MAPPING_NAMES else {}
                self._hf = AutoTokenizer.from_pretrained(self.gguf_path.parent, gguf_file=self.gguf_path.name, **kind)
                if self.cached:
                    self._hf.save_pretrained(self.cached)
            if self.gguf_template is not None and not self._hf.chat_template:
                self._hf.chat_template = self.gguf_template
        return self._hf

    @property
    def eos_token_id(self) -> int | None:
        return self.chat["eos_token_id"] if self.backend else self.hf.eos_token_id

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat["template"] if self.backend else self.hf.chat_template)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Token ids of `text`; add_special adds the model's BOS where it wants one (raw prompts)."""
        if self.backend is None:
            return self.hf.encode(text, add_special_tokens=add_special)
        return self.backend.encode(text, add_special_tokens=add_special).ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        if self.backend is None:
            return self.hf.decode(ids, skip_special_tokens=skip_special)
        return self.backend.decode(ids, skip_special_tokens=skip_special)

    def token_text(self, token_id: int) -> str:
        return self.decode([token_id], skip_special=False)

    def render_chat(self, messages: list[dict], tools: list[dict] | None = None,
                    add_generation_prompt: bool = True, **template_kwargs) -> str:
        """The prompt text for `messages` (and `tools`) through the model's own template."""
        if not self.has_chat_template:
            raise ValueError("this model has no chat template; use the completions API")
        if self.backend is None:
            return self.hf.apply_chat_template(messages, tools=tools, tokenize=False,
                                               add_generation_prompt=add_generation_prompt, **template_kwargs)
        return render(self.chat["template"], messages, tools, add_generation_prompt,
                      {**self.chat["special_tokens"], **template_kwargs})

    def __len__(self) -> int:
        return len(self.hf) if self.backend is None else self.backend.get_vocab_size(with_added_tokens=True)
