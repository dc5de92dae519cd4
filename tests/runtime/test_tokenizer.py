"""The tokenizer's own path (the `tokenizers` snapshot + jinja2) against transformers loading
the same GGUF: encode, decode, token_text and render_chat give the same results, and a load
from the cache imports neither transformers nor torch."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from gguf import GGUFWriter
from transformers import AutoTokenizer

from runtime import catalog
from runtime.gguf import read_gguf
from dev.synthetic import CHATML_TEMPLATE, SPECIALS, bpe_vocab
from runtime.tokenizer import Tokenizer, tokenizer_fingerprint

# Uses what templates use beyond ChatML: bos/eos variables, namespace, loop controls, dict(),
# tojson options, strftime_now, raise_exception and the {% generation %} tag.
FEATURE_TEMPLATE = """{{ bos_token }}{% set ns = namespace(n=0, last_user=-1) %}
{%- for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{%- if messages[0].role == 'bad' %}{{ raise_exception('role bad is not allowed: ' ~ messages|length) }}{% endif %}
{%- if tools %}[tools]{% for t in tools %}{{ t | tojson(indent=2) }}{% if loop.index >= 2 %}{% break %}{% endif %}{% endfor %}{% endif %}
{%- for m in messages %}{% set ns.n = ns.n + 1 %}<{{ m.role }}{{ '*' if loop.index0 == ns.last_user else '' }}>
{%- if m.reasoning_content %}(think {{ m.reasoning_content }}){% endif %}
{%- if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}
{%- for tc in m.tool_calls or [] %}{{ dict(name=tc.function.name, args=tc.function.arguments) | tojson }}{% endfor %}
{{ eos_token }}
{% endfor %}{{ ns.n }}{{ strftime_now('%Y') }}{% if add_generation_prompt %}<assistant>{% endif %}
{%- if extra is defined %}{{ extra | tojson }}{% endif %}
    {% if add_generation_prompt %}[indented block tag]{% endif %}
"""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, «quoted»",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "sql", "parameters": {"type": "object", "properties": {}}}},
         {"type": "function", "function": {"name": "never_listed", "parameters": {}}}]
CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello world ünïcødé 🦊"}],
    [{"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
     {"role": "tool", "tool_call_id": "c1", "content": '{"sunny": true}'},
     {"role": "assistant", "content": "It is sunny.", "reasoning_content": "the tool said so"},
     {"role": "user", "content": "And SQL?"},
     {"role": "assistant", "content": "", "tool_calls": [
         {"id": "c2", "type": "function", "function": {"name": "sql", "arguments": '{"q": "SELECT 1"}'}}]}],
]
TEXTS = ["", "Hello world, hello there!", "  leading and   runs of spaces\n\n\ttabs",
         "<|im_start|>user\nhi<|im_end|><|endoftext|>", "ünïcødé 🦊 日本語 \u00a0nbsp", "SELECT * FROM notes;" * 20]


def without_none(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def write_tokenizer_gguf(path: Path, template: str, add_bos: bool, num_merges: int = 200) -> Path:
    """A GGUF with the synthetic models' byte-level BPE tokenizer and no tensors."""
    tokens, merges = bpe_vocab(num_merges)
    tokens += SPECIALS
    w = GGUFWriter(str(path), "qwen2")
    for add, value in ((w.add_block_count, 1), (w.add_context_length, 64), (w.add_embedding_length, 8),
                       (w.add_feed_forward_length, 8), (w.add_head_count, 1), (w.add_head_count_kv, 1)):
        add(value)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - len(SPECIALS)) + [3] * len(SPECIALS))
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(add_bos)
    w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module", params=[(CHATML_TEMPLATE, False), (FEATURE_TEMPLATE, True)], ids=["chatml", "features"])
def pair(request, tmp_path_factory):
    """(ours, transformers' tokenizer of the same file, gguf path, cache dir)."""
    root = tmp_path_factory.mktemp("tok")
    path = write_tokenizer_gguf(root / "tok.gguf", *request.param)
    cache = root / "cache"
    ours = Tokenizer(path, cache)
    ref = AutoTokenizer.from_pretrained(root, gguf_file=path.name)
    if not ref.chat_template:
        ref.chat_template = request.param[0]
    return ours, ref, path, cache


def test_the_snapshot_is_used_and_reloads_identically(pair):
    ours, ref, path, cache = pair
    assert ours.backend is not None
    again = Tokenizer(path, cache)
    assert again._hf is None
    assert again.backend.to_str() == ours.backend.to_str() and again.chat == ours.chat
    assert len(again) == len(ref) and again.eos_token_id == ref.eos_token_id


def test_the_first_conversion_skips_the_slow_whole_file_parse(tmp_path, monkeypatch):
    """transformers parses the whole GGUF with gguf-py's reader for a model config unless told
    the tokenizer type (10-30 s of a first start on a 150k vocabulary): ours never needs it."""
    import gguf

    def refuse(*args, **kwargs):
        raise AssertionError("gguf.GGUFReader parsed the whole file")

    monkeypatch.setattr(gguf, "GGUFReader", refuse)
    path = write_tokenizer_gguf(tmp_path / "tok.gguf", CHATML_TEMPLATE, False)
    ours = Tokenizer(path, tmp_path / "cache")
    assert ours.backend is not None and ours.encode("hello world")


@pytest.mark.parametrize("add_special", [False, True])
def test_encode_equals_transformers(pair, add_special):
    ours, ref, path, cache = pair
    for text in TEXTS:
        assert ours.encode(text, add_special) == ref.encode(text, add_special_tokens=add_special), text
    fresh = Tokenizer(path, cache)
    assert [fresh.encode(t, add_special) for t in TEXTS] == [ours.encode(t, add_special) for t in TEXTS]


def test_bos_only_where_the_file_asks_for_it(pair):
    ours, ref, _, _ = pair
    wants_bos = ref.add_bos_token
    assert (ours.encode("hi", add_special=True)[:1] == [ref.bos_token_id]) == wants_bos
    assert ours.encode("hi") == ref.encode("hi", add_special_tokens=False)


def test_decode_and_token_text_equal_transformers(pair):
    ours, ref, _, _ = pair
    every = list(range(len(ref)))
    assert [ours.token_text(i) for i in every] == [ref.decode([i], skip_special_tokens=False) for i in every]
    for text in TEXTS:
        ids = ref.encode(text, add_special_tokens=True) + [ref.eos_token_id]
        for skip in (True, False):
            assert ours.decode(ids, skip) == ref.decode(ids, skip_special_tokens=skip)
    assert ours.decode(ref.encode("<|im_start|>a<|im_end|>")) == "a"
    split = ref.encode("🦊", add_special_tokens=False)
    assert len(split) > 1 and ours.decode(split[:1]) == ref.decode(split[:1], skip_special_tokens=True)


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no_tools", "tools"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_render_chat_equals_apply_chat_template(pair, tools, add_generation_prompt):
    ours, ref, _, _ = pair
    for messages in CONVERSATIONS:
        # None-valued keys are dropped (as transformers >= 5.2x does; 5.17 renders "None"):
        # the reference gets them dropped already, so any version is an independent check
        want = ref.apply_chat_template(without_none(messages), tools=tools, tokenize=False,
                                       add_generation_prompt=add_generation_prompt)
        assert ours.render_chat(messages, tools, add_generation_prompt=add_generation_prompt) == want
    extra = {"extra": {"ünï": [1, 2.5, None, True]}}
    assert (ours.render_chat(CONVERSATIONS[0], **extra)
            == ref.apply_chat_template(CONVERSATIONS[0], tokenize=False, add_generation_prompt=True, **extra))


def test_template_errors_are_the_same(pair):
    ours, ref, _, _ = pair
    bad = [{"role": "bad", "content": "x"}]
    try:
        want = ref.apply_chat_template(bad, tokenize=False)
    except jinja2.TemplateError as e:
        with pytest.raises(type(e), match=str(e)):
            ours.render_chat(bad, add_generation_prompt=False)
    else:
        assert ours.render_chat(bad, add_generation_prompt=False) == want


def test_cached_load_imports_neither_transformers_nor_torch(pair):
    _, ref, path, cache = pair
    code = f"""
import json, sys
from runtime.tokenizer import Tokenizer
t = Tokenizer({str(path)!r}, {str(cache)!r})
out = {{"ids": t.encode("Hello world <|im_end|>", True), "text": t.render_chat([{{"role": "user", "content": "hi"}}]),
       "heavy": sorted(m for m in ("torch", "transformers") if m in sys.modules)}}
print(json.dumps(out))"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["heavy"] == []
    assert out["ids"] == ref.encode("Hello world <|im_end|>", add_special_tokens=True)
    assert out["text"] == ref.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                  add_generation_prompt=True)


def test_real_qwen_template_when_installed(tmp_path):
    """The installed default model's own template (Qwen2.5's tool format) through both paths."""
    home = Path(os.environ.get("SAMEVM_HOME", ".samevm"))
    path = catalog.installed_path(catalog.DEFAULT_MODEL, home)
    if path is None:
        pytest.skip("the default model is not installed")
    metadata = read_gguf(path).metadata
    converted = home / "cache" / "tokenizers" / tokenizer_fingerprint(metadata)
    if not (converted / "tokenizer_config.json").exists():
        pytest.skip("its tokenizer was never converted (about 20 s)")
    shutil.copytree(converted, tmp_path / converted.name,
                    ignore=shutil.ignore_patterns("backend.json", "chat.json"))
    ours = Tokenizer(path, tmp_path, metadata=metadata)
    ours = Tokenizer(path, tmp_path, metadata=metadata)         # now from the snapshot
    ref = AutoTokenizer.from_pretrained(converted)
    assert ours._hf is None and len(ours) == len(ref)
    for messages in CONVERSATIONS:
        for tools in (None, TOOLS):
            want = ref.apply_chat_template(without_none(messages), tools=tools, tokenize=False,
                                           add_generation_prompt=True)
            got = ours.render_chat(messages, tools)
            assert got == want
            assert ours.encode(got) == ref.encode(want, add_special_tokens=False)
            assert ours.decode(ours.encode(got)) == ref.decode(ref.encode(want), skip_special_tokens=True)


def damage_truncated(entry: Path) -> None:
    text = (entry / "backend.json").read_text()
    (entry / "backend.json").write_text(text[: len(text) // 2])


def damage_vocabulary(entry: Path) -> None:
    """Still valid JSON a `tokenizers` model loads, but no longer what the GGUF holds."""
    backend = json.loads((entry / "backend.json").read_text())
    vocab = backend["model"]["vocab"]
    by_id = {i: t for t, i in vocab.items()}
    a, b = (by_id[i] for i in Tokenizer(entry.parent.parent / "tok.gguf").encode("hello world")[:2])
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (entry / "backend.json").write_text(json.dumps(backend))


def damage_chat(entry: Path) -> None:
    (entry / "chat.json").write_text('{"template": ')


@pytest.mark.parametrize("damage", [damage_truncated, damage_vocabulary, damage_chat])
def test_a_damaged_cache_entry_is_converted_again_not_trusted(tmp_path, damage):
    path = write_tokenizer_gguf(tmp_path / "tok.gguf", CHATML_TEMPLATE, False)
    fresh = Tokenizer(path)                       # no cache: converted from the GGUF
    cache = tmp_path / "cache"
    entry = Tokenizer(path, cache).cached
    damage(entry)
    again = Tokenizer(path, cache)
    messages = CONVERSATIONS[1]
    assert [again.encode(t, True) for t in TEXTS] == [fresh.encode(t, True) for t in TEXTS]
    assert again.encode("hello world") == fresh.encode("hello world")
    assert again.render_chat(messages, TOOLS) == fresh.render_chat(messages, TOOLS)
    later = Tokenizer(path, cache)                # the entry was written whole again
    assert later._hf is None and later.backend_json() == fresh.backend_json()
    assert later.encode("hello world") == fresh.encode("hello world")


def test_the_cache_round_trips_exactly(tmp_path):
    """A load from the cache equals a fresh conversion: the same tokenizer JSON, ids, text and
    chat rendering (and nothing of transformers loaded for it)."""
    path = write_tokenizer_gguf(tmp_path / "tok.gguf", FEATURE_TEMPLATE, True)
    fresh = Tokenizer(path)
    Tokenizer(path, tmp_path / "cache")
    cached = Tokenizer(path, tmp_path / "cache")
    assert cached._hf is None
    assert cached.backend_json() == fresh.backend_json() and cached.chat == fresh.chat
    for text in TEXTS:
        ids = fresh.encode(text, True)
        assert cached.encode(text, True) == ids and cached.decode(ids, False) == fresh.decode(ids, False)
    for messages in CONVERSATIONS:
        assert cached.render_chat(messages, TOOLS) == fresh.render_chat(messages, TOOLS)


def test_the_json_digest_names_the_same_bytes_fresh_and_from_the_cache(tmp_path):
    """backend_sha256 (what the grammar's token table is kept under) is the sha256 of
    backend_json() as UTF-8 whether the tokenizer was converted or read from the cache."""
    path = write_tokenizer_gguf(tmp_path / "tok.gguf", FEATURE_TEMPLATE, True)
    fresh = Tokenizer(path)
    written = Tokenizer(path, tmp_path / "cache")
    cached = Tokenizer(path, tmp_path / "cache")
    want = hashlib.sha256(fresh.backend_json().encode()).hexdigest()
    assert fresh.backend_sha256() == written.backend_sha256() == cached.backend_sha256() == want
    assert (cached.cached / "backend.json").read_bytes() == fresh.backend_json().encode()


def test_a_gguf_rewritten_with_another_vocabulary_is_not_served_from_the_old_entry(tmp_path):
    """The cache is keyed by the file's tokenizer itself, not by its path, size or time: the same
    path rewritten with fewer merges (its tokens at other ids) loads as a fresh conversion of
    the new file does, never as the entry the old one left."""
    path, cache = tmp_path / "tok.gguf", tmp_path / "cache"
    write_tokenizer_gguf(path, CHATML_TEMPLATE, False)
    old = [Tokenizer(path, cache).encode(t) for t in TEXTS]
    stat = path.stat()
    write_tokenizer_gguf(path, CHATML_TEMPLATE, False, num_merges=120)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))      # even with the old file's times
    fresh = Tokenizer(path)
    reloaded = Tokenizer(path, cache)
    assert [reloaded.encode(t) for t in TEXTS] == [fresh.encode(t) for t in TEXTS] != old
    assert reloaded.backend_json() == fresh.backend_json() and len(reloaded) == len(fresh)
    assert Tokenizer(path, cache)._hf is None               # the new file has its own entry, whole


def test_the_snapshot_keeps_merges_in_the_faster_string_form_where_that_is_exact(pair):
    """The cached merges are "a b" strings (tokenizers reads them faster) and the tokenizer from
    them encodes as transformers does (test_encode_equals_transformers); a merge of a token
    holding a space keeps the pair form, which alone can say where it splits."""
    from runtime.tokenizer import compact_merges
    _, _, _, cache = pair
    (entry,) = [d for d in cache.iterdir() if d.is_dir()]
    merges = json.loads((entry / "backend.json").read_text())["model"]["merges"]
    assert merges and all(isinstance(m, str) and len(m.split(" ")) == 2 for m in merges)
    spaced = {"model": {"type": "BPE", "merges": [["a", "b"], ["a b", "c"]]}}
    assert json.loads(compact_merges(spaced)) == spaced
