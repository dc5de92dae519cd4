"""Constrained decoding with llguidance: grammars for tool calls and response formats, and
the per-request TokenConstraint the engine's sampler applies.

Why llguidance (measured on the default model's 151,936-token vocabulary, this machine):
it compiles any request's schema in milliseconds (xgrammar took 11 s on a schema of 20
strings with maxLength 5000, a stall a client could cause at will), reports a bad schema as
an error instead of raising, needs no other package (xgrammar pulls in triton), fills the
engine's int32 bitmask layout directly from numpy, and embeds JSON schemas in Lark
grammars, which is how several calls in a row are written. Its masks cost 30-50 us a token
(p99 about 1 ms), against 100+ ms for a CPU decode step.

JSON is generated compact, with ", " and ": " as separators and no free whitespace: small
models otherwise drift into endless whitespace inside a constrained object.
"""
from __future__ import annotations

import copy
import json

import numpy as np
from llguidance import LLMatcher
from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

from runtime.server.grammar_tokens import grammar_tokenizer

JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
MAX_PARALLEL_CALLS = 8


class GrammarError(ValueError):
    """A schema or grammar that cannot be compiled, with llguidance's reason."""


def call_schema(name: str, parameters: dict) -> dict:
    """The JSON of one call to `name`. Arguments get additionalProperties: false unless the
    schema says otherwise, so a constrained model cannot invent parameters."""
    args = copy.deepcopy(parameters)
    if args.get("type", "object") == "object":
        args.setdefault("additionalProperties", False)
    return {"type": "object", "properties": {"name": {"const": name}, "arguments": args},
            "required": ["name", "arguments"], "additionalProperties": False}


def _json_rule(schema: dict, lenient: bool = False) -> str:
    return json.dumps({**schema, "x-guidance": {**JSON_STYLE, "lenient": lenient}})


# Text that does not open like a call: not a JSON object or list, a tag or a code fence
# (the parser would read those as an attempted call), nor with white space; and that holds no
# JSON object anywhere (no `{` before a `"`): under strict tools the 0.5B answered
# `>{"name": "sql_exec", ...}`, a call behind one character, which the text branch let through.
# Nor a tag anywhere (`<` before a letter, `/`, `|`, `!` or `?`) or a Python dict (`{'`): forced
# to answer, a tuned 0.5B wrote `"<tool_call>\n{'name': 'memory_search', ...}` as its reply.
# A `{` before anything else stays (`use {x}`), and so does `x < 5`. agents/prompts.py holds the
# same pattern.
TEXT_PATTERN = r'''[^\s{\[<`]([^{<]|\{\s*[^\s"'{<]|<[^A-Za-z\/|!?{<])*(\{\s*|<)?'''
TEXT = f"/{TEXT_PATTERN}/"


# How a grammar writes the call tags: as the tokenizer's own <tool_call> tokens where it has
# them (llguidance admits a special token only where the grammar names it as one). A call may
# also open with the tag spelled as text: Qwen2.5-Coder leaves the tag tokens untrained, so a
# tuned model writes "<" first (training/steps.py spells it so), and a grammar without the text
# form left it to choose among what it hardly wanted (a bare "{", or a text reply). It closes
# with the token: llguidance matches a quoted closing tag with the tag token anyway, and after
# a quoted close it admitted no further call, so a reply opened in text held one call only.
TEXT_TAGS = ('"<tool_call>"', '"</tool_call>"')
TOKEN_TAGS = ("<tool_call>", "</tool_call>")


def _calls_rules(tools: dict[str, dict], parallel: bool, tags: tuple[str, str]) -> str:
    """A call's JSON bare, in the Hermes/Qwen tags chat templates teach, or in a JSON fence
    (what small models write unasked): the model keeps the form it was trained on, and the
    parser (toolcalls.py) reads all three."""
    one = {"anyOf": [call_schema(n, s) for n, s in tools.items()]} if len(tools) > 1 else \
        call_schema(*next(iter(tools.items())))
    more = f' ("\\n" call){{0,{MAX_PARALLEL_CALLS - 1}}}' if parallel else ""
    return (f"calls: call{more}\n"
            f'call: body | open "\\n" body "\\n" {tags[1]} | "```json\\n" body "\\n```"\n'
            f"open: {' | '.join(dict.fromkeys([tags[0], TEXT_TAGS[0]]))}\n"
            f"body: %json {_json_rule(one, lenient=True)}")


def tool_calls_grammar(tools: dict[str, dict], parallel: bool, tags: tuple[str, str] = TEXT_TAGS) -> str:
    """Lark: one call (or up to MAX_PARALLEL_CALLS, one a line) to one of `tools`
    ({name: parameters schema}), as bare JSON objects {"name": ..., "arguments": {...}}.
    Lenient: keywords llguidance cannot enforce (tool schemas come from anywhere) are left
    to the validation every parsed call gets anyway."""
    return LLMatcher.grammar_from_lark(f"start: calls\n{_calls_rules(tools, parallel, tags)}")


def call_or_text_grammar(tools: dict[str, dict], parallel: bool, tags: tuple[str, str] = TEXT_TAGS) -> str:
    """Lark: the calls of tool_calls_grammar, or a plain-text reply (TEXT). For tool_choice
    auto with strict tools: the model still decides whether to call, but a call it starts is
    a valid one, and a reply can neither be a malformed call nor paste a tool result."""
    return LLMatcher.grammar_from_lark(f"start: calls | text\ntext: {TEXT}\n{_calls_rules(tools, parallel, tags)}")


def json_schema_grammar(schema: dict) -> str:
    return LLMatcher.grammar_from_lark(f"start: %json {_json_rule(schema)}")


def regex_grammar(regex: str) -> str:
    return LLMatcher.grammar_from_regex(regex)


def lark_grammar(lark: str) -> str:
    return LLMatcher.grammar_from_lark(lark)


class GrammarFactory:
    """Compiles grammars against one tokenizer (runtime.tokenizer.Tokenizer: llguidance reads
    its `tokenizers` JSON, what llguidance.hf extracts from transformers, so serving needs no
    transformers; see grammar_tokens). Built once per tokenizer, at model load.

    `slices`: whether llguidance precomputes its token slices (which tokens fit a JSON string
    body, 1-10 or 1-30 characters of it, whitespace): on the default model's vocabulary they
    cost 0.15 s of a build from the cached table (0.35 s) or from the JSON (0.75 s, a first
    start) and save about 0.1 ms of a masked token (1.4 -> 0.1 ms at worst), measured on
    tool-call and JSON-schema answers: worth it where a decode step takes a few ms, not beside
    a 30 ms CPU step. The masks are the same either way."""

    def __init__(self, tokenizer, vocab: int, eos_ids: set[int], slices: bool = True):
        self.vocab = vocab
        self.tokenizer = grammar_tokenizer(tokenizer, vocab, sorted(eos_ids), None if slices else [])
        self.eos_ids = sorted(eos_ids)
        self.call_tags = TOKEN_TAGS if self._special(TOKEN_TAGS) else TEXT_TAGS

    def _special(self, tokens: tuple[str, ...]) -> bool:
        """Whether llguidance knows each of `tokens` as a special token of this tokenizer."""
        try:
            matcher = LLMatcher(self.tokenizer, LLMatcher.grammar_from_lark("start: " + " ".join(tokens)), log_level=0)
        except ValueError:
            return False
        return not matcher.is_error()

    def constraint(self, grammar: str) -> GrammarConstraint:
        """A fresh matcher for `grammar`; GrammarError if it does not compile."""
        try:
            matcher = LLMatcher(self.tokenizer, grammar, log_level=0)
        except ValueError as e:          # llguidance raises for grammars it cannot even read
            raise GrammarError(str(e)) from e
        if matcher.is_error():
            raise GrammarError(matcher.get_error())
        return GrammarConstraint(matcher, self.vocab, self.eos_ids)


class GrammarConstraint:
    """TokenConstraint over an LLMatcher. Advanced on the engine thread only."""

    def __init__(self, matcher: LLMatcher, vocab: int, eos_ids: list[int]):
        self.matcher = matcher
        self.mask = allocate_token_bitmask(1, vocab)
        self.eos_ids = eos_ids

    def allowed(self) -> np.ndarray:
        if self.matcher.is_error():
            return self._only_eos()      # a dead end ends the generation instead of sampling junk
        fill_next_token_bitmask(self.matcher, self.mask)
        return self.mask[0]

    def advance(self, token_id: int) -> None:
        self.matcher.consume_token(token_id)

    def is_terminated(self) -> bool:
        return self.matcher.is_stopped() or self.matcher.is_error()

    def _only_eos(self) -> np.ndarray:
        mask = np.zeros_like(self.mask[0])
        for t in self.eos_ids:
            mask[t // 32] |= np.int32(np.uint32(1 << (t % 32)).view(np.int32))
        return mask
