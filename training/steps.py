"""Agent steps as token-level training examples, rendered exactly as the runtime serves them.

A step record (one line of the trajectory generator's JSONL) holds the messages and tools the
agent loop sent, and the assistant message it should answer with (`chosen`; for preference
pairs also `rejected`). The prompt is what the runtime's chat route feeds the engine for that
request: the request parsed by the server's own model, its messages cleaned up and its tools
listed by runtime/server/chat_prompt.py, through the GGUF's chat template, encoded without
special tokens. The completion is the reply as the template renders it, taken as the suffix
of rendering messages + reply after checking the prompt is a token prefix of it, and cut
after the end-of-turn token (the runtime stops there; what follows it is never generated).

    prompt_ids:     [P]  context, never trained on (earlier assistant turns included)
    completion_ids: [C]  the reply, ending with the end-of-turn token
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime.server.chat_prompt import listed_tools, template_messages, tool_setup
from runtime.server.grammar import TOKEN_TAGS
from runtime.server.protocol import ChatCompletionRequest


class StepError(ValueError):
    """A step record the runtime would not render the same way as prompt + reply."""


@dataclass(frozen=True, slots=True)
class Example:
    id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    rejected_ids: list[int] | None = None

    def __len__(self) -> int:
        return len(self.prompt_ids) + max(len(self.completion_ids), len(self.rejected_ids or ()))


def _request(record: dict, reply: dict | None = None) -> ChatCompletionRequest:
    messages = record["messages"] + ([reply] if reply else [])
    return ChatCompletionRequest(model="train", messages=messages, tools=record.get("tools") or None,
                                 tool_choice=record.get("tool_choice", "auto") if record.get("tools") else None)


def render(tokenizer, record: dict, reply: dict | None = None) -> str:
    """The text of the served prompt, or with `reply` the conversation it completes (no
    generation prompt): tokenizer is runtime.tokenizer.Tokenizer, the engine's own."""
    req = _request(record, reply)
    toolset, _, _ = tool_setup(req)
    return tokenizer.render_chat(template_messages(req.messages), listed_tools(req, toolset),
                                 add_generation_prompt=reply is None)


def stop_ids(tokenizer, gguf_path: str | Path | None = None) -> frozenset[int]:
    """The tokens the engine stops at (runtime/engine/llm_engine.py): the GGUF's end-of-sequence
    and end-of-turn ids and the tokenizer's eos. Qwen's GGUF names <|im_end|> while its
    tokenizer's eos is <|endoftext|>; a reply ends at the first of them."""
    ids = {tokenizer.eos_token_id} - {None}
    if gguf_path is not None:
        from runtime.gguf import load_gguf
        ids |= set(load_gguf(gguf_path).spec.eos_ids)      # the ids the engine itself stops at
    return frozenset(ids)


def spellings(tokenizer, gguf_path: str | Path) -> frozenset[int]:
    """The call-opening tag token where the base model cannot emit it: replies spell it as text.

    Qwen2.5-Coder's GGUFs leave <tool_call> and </tool_call> untrained: their output rows equal
    the vocabulary's padding rows within quantisation noise, so their logit is the padding's and
    a LoRA cannot lift it (adapter v4, trained on the tag token, kept an NLL of 8.2 there and put
    <|im_start|> or padding in its place). Spelled as text the opening is made of tokens the model
    knows, and the server's grammar takes it. The closing tag stays a token: after a call's JSON
    the grammar admits only that token (llguidance closes a quoted tag with the tag token where
    the tokenizer has one), so the model never has to choose it. A row counts as untrained when
    it lies within 5% of the last row's norm from the last row (padding, or a reserved token, in
    the vocabularies we serve); trained special tokens lie 30% or more away."""
    from runtime.gguf import load_gguf
    opening = [i for i, t in _backend(tokenizer).get_added_tokens_decoder().items() if t.content == TOKEN_TAGS[0]]
    if not opening:
        return frozenset()
    model = load_gguf(gguf_path)
    head = model.tensor("output.weight" if model.has("output.weight") else "token_embd.weight")
    last = head.shape[0] - 1
    opening = [i for i in opening if i < last]
    *rows, blank = head.dequantize(opening + [last])
    return frozenset(i for i, row in zip(opening, rows) if np.linalg.norm(row - blank) < 0.05 * np.linalg.norm(blank))


def _backend(tokenizer):
    """The `tokenizers` object under a transformers tokenizer or runtime.tokenizer.Tokenizer."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return tokenizer.backend_tokenizer
    return tokenizer.backend or tokenizer.hf.backend_tokenizer


def spelled(tokenizer, ids: list[int], spell: frozenset[int]) -> list[int]:
    """`ids` with the tokens of `spell` written as text: each stretch between the other added
    tokens is encoded again as plain text, so the tag's letters merge with what follows as
    byte-pair encoding merges them ('>' and a newline make one token; llguidance refuses the
    '>' alone where it would complete the tag token's text)."""
    backend = _backend(tokenizer)
    kept = set(backend.get_added_tokens_decoder()) - spell
    out, run = [], []
    for t in ids + [None]:
        if t is not None and t not in kept:
            run.append(t)
            continue
        if run:
            text = backend.decode(run, skip_special_tokens=False)
            if backend.normalizer is not None:
                text = backend.normalizer.normalize_str(text)
            out += [tok.id for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text) for tok in backend.model.tokenize(piece)]
            run = []
        if t is not None:
            out.append(t)
    return out


def _completion(tokenizer, record: dict, prompt_ids: list[int], reply: dict, stops: frozenset[int],
                spell: frozenset[int]) -> list[int]:
    full = tokenizer.encode(render(tokenizer, record, reply))
    if full[:len(prompt_ids)] != prompt_ids:
        raise StepError(f"step {record.get('id')}: the prompt is not a token prefix of prompt + reply")
    completion = full[len(prompt_ids):]
    ends = [i for i, t in enumerate(completion) if t in stops]
    if not ends:
        raise StepError(f"step {record.get('id')}: the rendered reply has no end-of-turn token")
    completion = completion[:ends[0] + 1]
    return spelled(tokenizer, completion, spell) if spell & set(completion) else completion


def to_example(tokenizer, record: dict, stops: frozenset[int] | None = None,
               spell: frozenset[int] = frozenset()) -> Example:
    """`spell`: tokens the reply writes as text (spellings()); the prompt keeps them, as the
    server renders earlier calls with the template's own tokens."""
    stops = stops or stop_ids(tokenizer)
    prompt = tokenizer.encode(render(tokenizer, record))
    rejected = record.get("rejected")
    return Example(str(record.get("id")), prompt, _completion(tokenizer, record, prompt, record["chosen"], stops, spell),
                   _completion(tokenizer, record, prompt, rejected, stops, spell) if rejected else None)


def load_records(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def build(tokenizer, records: list[dict], max_length: int, stops: frozenset[int] | None = None,
          spell: frozenset[int] = frozenset()) -> tuple[list[Example], dict]:
    """(examples, counts): steps longer than `max_length` tokens are dropped and counted."""
    examples, too_long = [], 0
    for record in records:
        ex = to_example(tokenizer, record, stops, spell)
        if len(ex) > max_length:
            too_long += 1
        else:
            examples.append(ex)
    return examples, {"records": len(records), "examples": len(examples), "dropped_too_long": too_long,
                      "max_length": max_length}


def preference_pairs(tokenizer, records: list[dict], max_length: int,
                     stops: frozenset[int] | None = None) -> tuple[list, int]:
    """(pairs as text for TRL's ORPO trainer, steps dropped): the served prompt text and each
    reply's completion text (decoded from its tokens, end-of-turn token included). Steps
    without a rejected reply, over `max_length` or whose replies render the same are dropped."""
    from training.dataset import PreferencePair

    pairs, dropped = [], 0
    for record in records:
        if not record.get("rejected"):
            dropped += 1
            continue
        ex = to_example(tokenizer, record, stops)
        if len(ex) > max_length or ex.completion_ids == ex.rejected_ids:
            dropped += 1
            continue
        text = lambda ids: tokenizer.decode(ids, skip_special=False)   # noqa: E731
        pairs.append(PreferencePair(f"step {ex.id}", render(tokenizer, record), text(ex.completion_ids),
                                    text(ex.rejected_ids)))
    return pairs, dropped
