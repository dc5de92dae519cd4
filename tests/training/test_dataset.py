"""Dataset validation: every problem reported at once, each with its line number."""
from __future__ import annotations

import json

import pytest

from training.dataset import (MAX_CHARS, DatasetError, check_lengths, dataset_hash, from_records,
                              load_jsonl, parse_jsonl)

GOOD = {"prompt": "What is 2+2?", "chosen": "4", "rejected": "5"}


def jsonl(*rows) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"


def problems(text: str) -> list[str]:
    with pytest.raises(DatasetError) as e:
        parse_jsonl(text)
    return e.value.problems


def test_plain_and_conversational_pairs_load():
    pairs = parse_jsonl(jsonl(GOOD, {**GOOD, "prompt": "And 3+3?", "chosen": "6"}))
    assert [p.where for p in pairs] == ["line 1", "line 2"] and not pairs[0].conversational
    conv = {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
            "chosen": [{"role": "assistant", "content": "4"}],
            "rejected": [{"role": "assistant", "content": "5"}]}
    (pair,) = parse_jsonl(jsonl(conv))
    assert pair.conversational and pair.row()["chosen"][0]["content"] == "4"


def test_each_problem_is_named_with_its_line():
    text = jsonl(GOOD,
                 "",                                                     # line 2: blank lines still count
                 "{not json",                                            # 3
                 {"prompt": "p", "chosen": "c"},                         # 4
                 {**GOOD, "chosen": "   "},                              # 5
                 GOOD,                                                   # 6: duplicate of 1
                 {**GOOD, "prompt": "x", "rejected": "4"},               # 7: chosen == rejected
                 {**GOOD, "prompt": "y" * MAX_CHARS},                    # 8: over-long
                 [1, 2],                                                 # 9
                 {**GOOD, "prompt": 3})                                  # 10
    found = problems(text)
    expect = {3: "not valid JSON", 4: "missing field(s): rejected", 5: "`chosen` is empty",
              6: "duplicate of line 1", 7: "identical", 8: "over 32000 characters",
              9: "expected a JSON object", 10: "`prompt` must be text"}
    assert len(found) == len(expect), found
    for line, words in expect.items():
        assert any(p.startswith(f"line {line}:") and words in p for p in found), (line, found)
    assert "line 1:" not in "\n".join(found) and "line 2:" not in "\n".join(found)


def test_formats_cannot_be_mixed_and_messages_are_checked():
    conv = {"prompt": [{"role": "user", "content": "hi"}], "chosen": [{"role": "assistant", "content": "a"}],
            "rejected": [{"role": "assistant", "content": "b"}]}
    found = problems(jsonl(conv, GOOD,
                           {**conv, "chosen": [{"role": "user", "content": "a"}]},
                           {**conv, "rejected": [{"role": "assistant"}]},
                           {**conv, "prompt": []}))
    assert found[0] == "line 2: plain text, but the dataset so far is conversational; use one format"
    assert found[1].startswith("line 3:") and "must be an assistant message" in found[1]
    assert found[2].startswith("line 4:") and "`rejected[0]` must be" in found[2]
    assert found[3].startswith("line 5:") and "empty list" in found[3]


def test_inline_records_are_named_by_position_and_empty_is_refused():
    with pytest.raises(DatasetError) as e:
        from_records([GOOD, {"prompt": "p"}])
    assert e.value.problems == ["example 2: missing field(s): chosen, rejected"]
    with pytest.raises(DatasetError, match="empty"):
        from_records([])
    with pytest.raises(DatasetError, match="no such file"):
        load_jsonl("/nonexistent/pairs.jsonl")


def test_hash_ignores_formatting_but_not_content():
    a = parse_jsonl(jsonl(GOOD))
    b = parse_jsonl(json.dumps(GOOD, indent=None, separators=(",", ":")) + "\n\n")
    c = parse_jsonl(jsonl({**GOOD, "chosen": "four"}))
    assert dataset_hash(a) == dataset_hash(b) != dataset_hash(c)


def test_token_lengths_are_checked_with_the_models_tokenizer(tiny_gguf):
    from training.hf_model import load_tokenizer
    tok = load_tokenizer(tiny_gguf("qwen2"))
    pairs = parse_jsonl(jsonl(GOOD, {**GOOD, "prompt": "hello world " * 40}))
    check_lengths(pairs[:1], tok, 64)
    with pytest.raises(DatasetError) as e:
        check_lengths(pairs, tok, 64)
    assert len(e.value.problems) == 2 and all(p.startswith("line 2: prompt + ") for p in e.value.problems)
    assert "max_length is 64" in e.value.problems[0]
