"""llguidance constraints against a real tokenizer: whatever tokens a model picks among the
allowed ones, the text is a valid call / a document of the schema."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from runtime import catalog
from runtime.server import grammar, grammar_tokens
from runtime.server.toolcalls import parse
from runtime.server.tool_schemas import ToolSet
from runtime.tokenizer import Tokenizer

WEATHER = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                            "metric": {"type": "boolean"}}, "required": ["city", "days"]}
CLOCK = {"type": "object", "properties": {}}
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def factory(tiny_gguf, tokenizer_cache):
    tok = Tokenizer(tiny_gguf("qwen2"), tokenizer_cache)
    eos = {tok.hf.convert_tokens_to_ids("<|im_end|>")}
    return tok, grammar.GrammarFactory(tok, len(tok), eos)


def allowed_ids(mask: np.ndarray, vocab: int) -> np.ndarray:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab]
    return np.nonzero(bits)[0]


def walk(tok, constraint, rng, limit=400) -> str:
    """Sample uniformly among the allowed tokens until the grammar ends: a worst-case model."""
    ids = []
    for _ in range(limit):
        if constraint.is_terminated():
            break
        choices = allowed_ids(constraint.allowed(), len(tok))
        assert len(choices), "the grammar left no token to pick"
        token = int(rng.choice(choices))
        constraint.advance(token)
        ids.append(token)
    assert constraint.is_terminated(), "the constrained output did not end"
    return tok.decode(ids)


def test_forced_calls_always_parse_and_validate(factory):
    tok, f = factory
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                                  {"type": "function", "function": {"name": "clock", "parameters": CLOCK}}])
    source = grammar.tool_calls_grammar(tools.schemas, parallel=True)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(25):
        text = walk(tok, f.constraint(source), rng)
        result = parse(text, tools.names, tools.validate)
        assert result.content is None, text
        assert all("repeated identical call" in e for e in result.errors)
        assert 1 <= len(result.calls) <= grammar.MAX_PARALLEL_CALLS
        seen |= {c.name for c in result.calls}
        for c in result.calls:
            if c.name == "clock":
                assert json.loads(c.arguments) == {}      # no invented parameters
    assert seen == {"get_weather", "clock"}


def test_named_call_without_parallel_is_exactly_one_call(factory):
    tok, f = factory
    source = grammar.tool_calls_grammar({"get_weather": WEATHER}, parallel=False)
    rng = np.random.default_rng(1)
    forms = set()
    for _ in range(20):
        text = walk(tok, f.constraint(source), rng)
        forms.add(text[:1])
        result = parse(text, {"get_weather"}, lambda name, args: [])
        assert result.content is None and len(result.calls) == 1, text
        assert result.calls[0].name == "get_weather"
        jsonschema.validate(json.loads(result.calls[0].arguments), WEATHER)
    assert forms == {"{", "<", "`"}          # bare, in the template's tags, in a JSON fence


def test_response_schema_documents_validate(factory):
    tok, f = factory
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                        "maxItems": 3}},
              "required": ["ok", "tags"], "additionalProperties": False}
    rng = np.random.default_rng(2)
    for _ in range(10):
        jsonschema.validate(json.loads(walk(tok, f.constraint(grammar.json_schema_grammar(schema)), rng)), schema)


def test_a_factory_without_slices_allows_exactly_the_same_tokens(factory):
    """The CPU's factory builds no token slices (a start-up cost, GrammarFactory): along random
    walks of a call, a schema with free strings and a regex, every mask equals the sliced one's."""
    tok, sliced = factory
    plain = grammar.GrammarFactory(tok, len(tok), set(sliced.eos_ids), slices=False)
    schema = {"type": "object", "properties": {"note": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["note", "n"]}
    sources = [grammar.call_or_text_grammar({"get_weather": WEATHER, "clock": CLOCK}, parallel=True),
               grammar.json_schema_grammar(schema), grammar.regex_grammar(r"[a-z ]{1,40}\.")]
    rng = np.random.default_rng(7)
    steps = 0
    for source in sources * 3:
        a, b = sliced.constraint(source), plain.constraint(source)
        while not a.is_terminated() and steps < 3000:
            allowed = a.allowed()
            assert np.array_equal(b.allowed(), allowed)
            token = int(rng.choice(allowed_ids(allowed, len(tok))))
            a.advance(token)
            b.advance(token)
            steps += 1
        assert b.is_terminated() == a.is_terminated()
    assert steps > 100


def test_first_token_must_open_the_object(factory):
    tok, f = factory
    c = f.constraint(grammar.json_schema_grammar({"type": "object"}))
    texts = {tok.token_text(int(i)) for i in allowed_ids(c.allowed(), len(tok))}
    assert texts and all(t.startswith("{") for t in texts)


def test_regex_and_lark(factory):
    tok, f = factory
    rng = np.random.default_rng(3)
    assert walk(tok, f.constraint(grammar.regex_grammar(r"(yes|no)")), rng) in ("yes", "no")
    lark = 'start: "The answer is " NUM "."\nNUM: /[0-9]{1,2}/'
    text = walk(tok, f.constraint(grammar.lark_grammar(lark)), rng)
    assert text.startswith("The answer is ") and text.endswith(".")


@pytest.mark.parametrize("source", [
    grammar.json_schema_grammar({"$ref": "#/definitions/missing"}),
    grammar.json_schema_grammar({"type": "banana"}),
    grammar.regex_grammar("(unclosed"),
    grammar.lark_grammar("start: undefined_rule"),
])
def test_bad_grammars_are_errors_not_crashes(factory, source):
    _, f = factory
    with pytest.raises(grammar.GrammarError):
        f.constraint(source)


def test_tool_grammars_skip_what_they_cannot_enforce(factory):
    tok, f = factory
    odd = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3,
                                                  "not": {"const": 2}}}, "required": ["n"]}
    with pytest.raises(grammar.GrammarError):
        f.constraint(grammar.json_schema_grammar(odd))           # a response format says so (400)
    text = walk(tok, f.constraint(grammar.tool_calls_grammar({"pick": odd}, parallel=False)), np.random.default_rng(4))
    assert json.loads(text)["arguments"]["n"] in (1, 2, 3)       # the rest is left to validation


def test_strict_auto_is_valid_calls_or_text_that_does_not_open_like_a_call(factory):
    tok, f = factory
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                                  {"type": "function", "function": {"name": "clock", "parameters": CLOCK}}])
    source = grammar.call_or_text_grammar(tools.schemas, parallel=True)
    eos, brace = f.eos_ids[0], tok.hf.convert_tokens_to_ids("{")
    rng = np.random.default_rng(3)
    kinds = set()
    for _ in range(40):
        constraint, ids = f.constraint(source), []
        while not constraint.is_terminated() and len(ids) < 400:
            choices = allowed_ids(constraint.allowed(), len(tok))
            # a worst-case model that also stops whenever it may, now and then, so text ends
            token = eos if eos in choices and rng.random() < 0.1 else int(rng.choice(choices))
            if not ids and rng.random() < 0.5:      # and opens a call half of the time
                assert brace in choices
                token = brace
            constraint.advance(token)
            ids.append(token)
        text = tok.decode([i for i in ids if i != eos])
        result = parse(text, tools.names, tools.validate)
        assert all("repeated identical call" in e for e in result.errors), (text, result.errors)
        if result.calls:
            kinds.add("calls")
            assert result.content is None, text
        else:
            kinds.add("text")
            assert text and text[0] not in " \n\t{[<`", text
    assert kinds == {"calls", "text"}


def same_masks(tok, ours: grammar.GrammarFactory, ref, source: str, seed: int) -> None:
    """Both factories allow the same tokens at every step of a random walk through `source`."""
    mine = ours.constraint(source)
    theirs = grammar.GrammarConstraint(grammar.LLMatcher(ref, source, log_level=0), len(tok), ours.eos_ids)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        if mine.is_terminated():
            break
        allowed = mine.allowed()
        assert np.array_equal(allowed, theirs.allowed())
        token = int(rng.choice(allowed_ids(allowed, len(tok))))
        mine.advance(token)
        theirs.advance(token)
    assert theirs.is_terminated() == mine.is_terminated()


def test_the_grammar_tokenizer_equals_llguidance_on_transformers_first_and_from_its_table(tiny_gguf, tmp_path,
                                                                                          monkeypatch):
    """The first build reads our cached `tokenizers` JSON, later ones the token table kept
    beside it; llguidance's own path reads the transformers tokenizer: all three must
    tokenize alike and allow the same tokens at every step of a grammar. A damaged table
    is built again from the JSON."""
    import llguidance.hf
    tok = Tokenizer(tiny_gguf("qwen2"), tmp_path / "cache")
    eos = {tok.encode("<|im_end|>")[0]}
    ref = llguidance.hf.from_tokenizer(tok.hf, n_vocab=len(tok), eos_token=sorted(eos))
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    table = tok.cached / grammar_tokens.TABLE
    tags = set()
    for build in ("json", "table", "damaged"):
        if build == "table":              # from the table alone: reading the JSON again is refused
            real = grammar_tokens.LLTokenizer
            monkeypatch.setattr(grammar_tokens, "LLTokenizer", lambda source, **kw: real(
                source, **kw) if not isinstance(source, str) else pytest.fail("the JSON was read again"))
        if build == "damaged":
            monkeypatch.undo()
            table.write_bytes(table.read_bytes()[:-40])
        built = grammar.GrammarFactory(tok, len(tok), eos)
        assert table.exists()
        tags.add(built.call_tags)
        for text in ("Hello world", '{"city": "Paris", "days": 3}', "<tool_call>\n{}\n</tool_call>", "ünï 🦊"):
            assert built.tokenizer.tokenize_str(text) == ref.tokenize_str(text), build
        source = grammar.call_or_text_grammar(tools.schemas, parallel=True, tags=built.call_tags)
        for seed in range(3):
            same_masks(tok, built, ref, source, seed)
    assert len(tags) == 1
    assert grammar_tokens.load_table(table, "another json", len(tok)) is None
    assert grammar_tokens.load_table(table, *_source_and_vocab(tok)) is not None     # rewritten whole


def _source_and_vocab(tok) -> tuple[str, int]:
    import hashlib
    return hashlib.sha256(tok.backend_json().encode()).hexdigest(), len(tok)


def test_serving_with_grammars_needs_no_transformers(factory, tiny_gguf, tokenizer_cache, tmp_path):
    """The server's first load (the engine, then the grammar tokenizer beside it) from a warm
    tokenizer cache never imports transformers (seconds of a start)."""
    code = f"""
import json, sys
from runtime.config import EngineConfig
from runtime.server import loading
from runtime.server.config import ServerConfig
from runtime.server.revisions import RevisionRegistry
from runtime.server.state import ServerState
cfg = ServerConfig(engine=EngineConfig(model={tiny_gguf("qwen2")!r}, backend="cpu", kv_cache_mb=8,
                                       tokenizer_cache={tokenizer_cache!r}), model_id="m", home={str(tmp_path)!r})
state = ServerState(cfg, RevisionRegistry(cfg.revisions_dir, cfg.model_id))
engine = loading.load(state, cfg.engine.model, "r1")
factory = state.grammar_factory(engine)
print(json.dumps({{"tags": factory.call_tags, "transformers": "transformers" in sys.modules}}))"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out == {"tags": list(factory[1].call_tags), "transformers": False}


def _admits(tok, constraint, text: str) -> bool:
    """Whether the grammar lets a model write `text` token by token (as the tokenizer splits it)."""
    for token in tok.encode(text):
        if token not in allowed_ids(constraint.allowed(), len(tok)):
            return False
        constraint.advance(token)
    return True


@pytest.mark.parametrize("source", ["strict_auto", "answer_regex"])
def test_text_cannot_hide_a_call_or_a_result_behind_a_character(factory, source):
    # the 0.5B, forced to answer, wrote `>{"name": "sql_exec", ...}`: text must hold no JSON object
    from agents.prompts import ANSWER_REGEX
    tok, f = factory
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    make = (lambda: f.constraint(grammar.call_or_text_grammar(tools.schemas, parallel=True))) if source == "strict_auto" \
        else (lambda: f.constraint(grammar.regex_grammar(ANSWER_REGEX)))
    for hidden in ['>{"name": "get_weather", "arguments": {"city": "Oslo"}}', 'Result: { "ok": true}',
                   'Done.\n[{"rows": [1]}]', '"<tool_call>\n{\'name\': \'get_weather\', \'arguments\': {}}',
                   'I will check: <tool_call>', "Here: {'city': 'Oslo'}", 'ok <<tool_call>', 'done </tool_call>']:
        assert not _admits(tok, make(), hidden), hidden
    for plain in ["It is 12 degrees in Oslo.", "Use {city} in the template, then call it again.",
                  '"Dune" is on the list; 3 < 5 and 2 <= 4.', "Latency stays <100 ms."]:
        assert _admits(tok, make(), plain), plain



def test_calls_opened_in_text_may_follow_each_other_where_the_tokenizer_has_tag_tokens(tiny_gguf, tokenizer_cache):
    # a tuned Qwen2.5-Coder opens its calls with the tag spelled as text (the tag token is
    # untrained); llguidance closes with the tag token, and a quoted close admitted no second call
    tok = Tokenizer(tiny_gguf("qwen2", tied=True, call_tags="trained"), tokenizer_cache)
    f = grammar.GrammarFactory(tok, len(tok), {tok.encode("<|im_end|>")[0]})
    assert f.call_tags == grammar.TOKEN_TAGS
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "clock", "parameters": CLOCK}},
                                  {"type": "function", "function": {"name": "weather", "parameters": WEATHER}}])
    first, second = ('\n{"name": "clock", "arguments": {}}\n',
                     '\n{"name": "weather", "arguments": {"city": "Oslo", "days": 2}}\n')
    ids = (tok.encode("<") + tok.encode("tool_call>" + first) + tok.encode("</tool_call>\n")
           + tok.encode("<") + tok.encode("tool_call>" + second) + tok.encode("</tool_call><|im_end|>"))
    for make in (grammar.call_or_text_grammar, grammar.tool_calls_grammar):
        constraint = f.constraint(make(tools.schemas, True, f.call_tags))
        for token in ids:
            assert token in allowed_ids(constraint.allowed(), len(tok)), (make.__name__, tok.token_text(token))
            constraint.advance(token)
        assert constraint.is_terminated()
    assert len(parse(tok.decode(ids), tools.names, tools.validate).calls) == 2


@pytest.mark.slow
def test_a_call_may_spell_its_tags_as_text_where_the_tokenizer_has_tag_tokens(tokenizer_cache):
    # a model tuned where the tokenizer split "<tool_call>" into text writes "<" first; the
    # grammar must take that form as well as the tag tokens, or the model is left to choose
    # among tokens it hardly wanted (the tuned 0.5B then answered every turn in text)
    path = catalog.installed_path(catalog.DEFAULT_MODEL, Path(os.environ.get("SAMEVM_HOME", ".samevm")).resolve())
    if path is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    tok = Tokenizer(path, tokenizer_cache)
    f = grammar.GrammarFactory(tok, len(tok), {tok.encode("<|im_end|>")[0]})
    assert f.call_tags == grammar.TOKEN_TAGS
    tools = ToolSet.from_request([{"type": "function", "function": {"name": "clock", "parameters": CLOCK}}])
    body = '\n{"name": "clock", "arguments": {}}\n'
    # opened in text; llguidance closes a quoted tag with the tag token where the tokenizer has one
    as_text = tok.encode("<tool") + tok.encode("_call>" + body) + tok.encode("</tool_call>")
    as_tokens = tok.encode("<tool_call>" + body + "</tool_call>")
    assert as_tokens[0] not in as_text
    for make in (grammar.call_or_text_grammar, grammar.tool_calls_grammar):
        for ids in (as_text, as_tokens):
            constraint = f.constraint(make(tools.schemas, False, f.call_tags))
            for token in ids:
                assert token in allowed_ids(constraint.allowed(), len(tok)), (make.__name__, tok.decode(ids))
                constraint.advance(token)
    assert parse(tok.decode(as_text), tools.names, tools.validate).calls
