"""runtime.gguf_tokenizer against transformers' GGUF conversion, the reference it replays: for
byte-level BPE files of every shape the catalog's models take (Qwen2 / Llama-3 / GPT-2
splitting, BOS added or not, user-defined and mislabelled control tokens, tokens outside the
byte alphabet, a special token missing from the vocabulary) the JSON is the same string and
the chat settings the same; encode and decode agree on a varied text set; a first start
imports neither transformers nor torch; anything else still goes through transformers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from gguf import GGUFWriter
from transformers import AutoTokenizer
from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

from dev.synthetic import CHATML_TEMPLATE, SPECIALS, bpe_vocab
from runtime import catalog, gguf_tokenizer
from runtime.gguf import read_gguf
from runtime.tokenizer import Tokenizer, compact_merges, snapshot
from tests.runtime.test_tokenizer import CONVERSATIONS, TOOLS, without_none

TEXTS = ["", "Hello world, hello there!", "  leading and   runs of spaces\n\n\ttabs  \n \n", "a\r\nb\rc",
         "<|im_start|>user\nhi<|im_end|><|endoftext|>", "<|im_start|><|im_start|>x<|im_end|>y",
         "<tool_call>{\"name\": \"f\"}</tool_call> <think>hm</think>", "ünïcødé 🦊 日本語 \u00a0nbsp \u200b",
         "x = 1234567 + 3.14159e-10; # 00012", "def main():\n    return [i**2 for i in range(10)]\n",
         "SELECT * FROM notes WHERE id = 1;" * 20, "It's I'M we'LL they'd you're", "ﬁ Å Å é é",
         "a b", "weird <|日本|> token"]


def write(path: Path, arch: str = "qwen2", pre: str = "qwen2", add_bos: bool = False, add_eos: bool | None = None,
          extra: tuple[tuple[str, int], ...] = (), endoftext: bool = True, ids: dict | None = None) -> Path:
    """A tokenizer-only GGUF: the synthetic models' BPE, its specials, then `extra` (token, type)."""
    tokens, merges = bpe_vocab(200)
    specials = SPECIALS if endoftext else ["<|begin_of_text|>", *SPECIALS[1:]]
    tokens = tokens + specials + [t for t, _ in extra]
    types = [1] * (len(tokens) - len(specials) - len(extra)) + [3] * len(specials) + [k for _, k in extra]
    w = GGUFWriter(str(path), arch)
    for add, value in ((w.add_block_count, 1), (w.add_context_length, 64), (w.add_embedding_length, 8),
                       (w.add_feed_forward_length, 8), (w.add_head_count, 1), (w.add_head_count_kv, 1)):
        add(value)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {"bos": specials[0], "eos": "<|im_end|>", **(ids or {})}
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("unk", w.add_unk_token_id),
                     ("pad", w.add_pad_token_id)):
        if ids.get(key) is not None:
            add(tokens.index(ids[key]))
    w.add_add_bos_token(add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    w.add_chat_template(CHATML_TEMPLATE)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def reference(path: Path):
    """transformers' conversion, called as runtime.tokenizer calls it."""
    arch = read_gguf(path).metadata.get("general.architecture")
    kind = {"tokenizer_type": arch} if arch in TOKENIZER_MAPPING_NAMES else {}
    ref = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, **kind)
    ref.chat_template = ref.chat_template or CHATML_TEMPLATE
    return ref


EXTRA = (("<tool_call>", 4), ("</tool_call>", 4), ("<think>", 4), ("</think>", 4),
         ("<|日本|>", 3),          # control, but outside the byte alphabet: llama.cpp mislabelled it
         ("a b", 1), ("<|user def ü|>", 4))   # spelled outside the alphabet: re-spelled, not added
VARIANTS = {
    "qwen2": {},
    "qwen3-user-defined": dict(arch="qwen3", extra=EXTRA),
    "llama3-bos": dict(arch="llama", pre="llama-bpe", add_bos=True, endoftext=False, extra=EXTRA),
    "llama3-bos-eos-unk-pad": dict(arch="llama", pre="llama3", add_bos=True, add_eos=True,
                                   ids={"unk": "<|im_start|>", "pad": "<|im_end|>"}),
    "smollm-gpt2-split": dict(arch="llama", pre="smollm", extra=EXTRA),
    "a-plain-token-as-eos": dict(ids={"eos": "Ġthe", "bos": None}),
    "a-repeated-spelling": dict(extra=(("a", 1), ("<|im_end|>", 3))),     # the last id wins
}


@pytest.fixture(scope="module", params=list(VARIANTS), ids=list(VARIANTS))
def variant(request, tmp_path_factory):
    path = write(tmp_path_factory.mktemp(request.param) / "tok.gguf", **VARIANTS[request.param])
    return path, reference(path)


def test_the_json_and_chat_settings_equal_transformers(variant):
    path, ref = variant
    built = gguf_tokenizer.build(read_gguf(path).metadata)
    assert built is not None, "this shape is one the module replays"
    want_json, want_chat = snapshot(ref)
    assert built[0] == want_json
    assert built[1] == want_chat


def test_encode_decode_and_chat_equal_transformers(variant, tmp_path):
    path, ref = variant
    ours = Tokenizer(path, tmp_path)
    assert ours._hf is None, "built without transformers"
    for text in TEXTS:
        for special in (False, True):
            ids = ours.encode(text, special)
            assert ids == ref.encode(text, add_special_tokens=special), text
            for skip in (False, True):
                assert ours.decode(ids, skip) == ref.decode(ids, skip_special_tokens=skip), text
    every = range(len(ref))
    assert [ours.token_text(i) for i in every] == [ref.decode([i], skip_special_tokens=False) for i in every]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TEXTS[7]}]
    assert ours.render_chat(messages) == ref.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert ours.eos_token_id == ref.eos_token_id and len(ours) == len(ref)


def test_a_first_start_imports_neither_transformers_nor_torch(tmp_path):
    path = write(tmp_path / "tok.gguf", extra=EXTRA)
    code = f"""
import json, sys
from runtime.tokenizer import Tokenizer
t = Tokenizer({str(path)!r}, {str(tmp_path / "cache")!r})
print(json.dumps({{"ids": t.encode("<think>Hello</think> world<|im_end|>"),
                  "heavy": sorted(m for m in ("torch", "transformers") if m in sys.modules)}}))"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["heavy"] == []
    assert out["ids"] == reference(path).encode("<think>Hello</think> world<|im_end|>", add_special_tokens=False)
    assert (tmp_path / "cache").is_dir() and Tokenizer(path, tmp_path / "cache")._hf is None


@pytest.mark.parametrize("shape", [dict(pre="tekken"), dict(pre="no-such-splitting"), dict(arch="qwen2moe"),
                                   dict(endoftext=False, extra=(("a", 1),))],
                         ids=["tekken", "unknown-pre", "other-arch", "a-repeated-spelling-and-a-new-id"])
def test_what_it_does_not_replay_goes_through_transformers(tmp_path, shape):
    path = write(tmp_path / "tok.gguf", **shape)
    assert gguf_tokenizer.build(read_gguf(path).metadata) is None
    ours = Tokenizer(path, tmp_path / "cache")
    ref = reference(path)
    assert [ours.encode(t) for t in TEXTS] == [ref.encode(t, add_special_tokens=False) for t in TEXTS]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(catalog.KNOWN_MODELS))
def test_catalog_models_equal_transformers(tmp_path, name):
    """The real models (Qwen2.5-Coder: 150k tokens): the same JSON, chat settings, ids, text and
    rendered chats as transformers' conversion of the same file."""
    path = catalog.installed_path(name, Path(os.environ.get("SAMEVM_HOME", ".samevm")))
    if path is None:
        pytest.skip(f"{name} is not installed")
    metadata = read_gguf(path).metadata
    built = gguf_tokenizer.build(metadata)
    ref = reference(path)
    want_json, want_chat = snapshot(ref)
    assert built is not None and built[0] == want_json and built[1] == want_chat
    assert want_json == compact_merges(json.loads(want_json))
    ours = Tokenizer(path, tmp_path, metadata=metadata)
    assert ours._hf is None
    chats = []
    for messages in CONVERSATIONS:
        for tools in (None, TOOLS):
            try:
                want = ref.apply_chat_template(without_none(messages), tools=tools, tokenize=False,
                                               add_generation_prompt=True)
            except jinja2.TemplateError as e:     # SmolLM2's template wants content on every message
                with pytest.raises(type(e)):
                    ours.render_chat(messages, tools)
                continue
            chats.append(ours.render_chat(messages, tools))
            assert chats[-1] == want
    for text in [*TEXTS, *chats, "".join(TEXTS)]:
        ids = ours.encode(text)
        assert ids == ref.encode(text, add_special_tokens=False), text
        assert ours.decode(ids, False) == ref.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=True)
    assert ours.eos_token_id == ref.eos_token_id == metadata.get("tokenizer.ggml.eos_token_id")
