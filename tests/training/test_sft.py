"""LoRA SFT on agent steps (training/steps.py, training/sft.py, training/adapter.py) and ORPO
going on from its adapter, on a tiny random model with the hand-written steps of agent_steps.py.

The rendering is checked token by token against transformers' own apply_chat_template with
the GGUF's tokenizer (an independent renderer of the same template); the trained adapter is
checked by loading it with PEFT into a fresh copy of the base."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from peft import PeftModel

from runtime.tokenizer import Tokenizer
from tests.training import agent_steps
from training import steps
from training.adapter import CONFIG, adapter_label, save_adapter
from training.hf_model import load_model, load_tokenizer
from training.orpo import train_orpo
from training.params import OrpoParams, SftParams
from training.sft import IGNORE, TrainingDiverged, collate, train_sft

FAST = SftParams(max_steps=30, learning_rate=3e-3, batch_size=4, warmup_steps=0, eval_every=10, device="cpu")


@pytest.fixture(scope="module")
def base(tiny_gguf):
    return tiny_gguf("qwen2")


@pytest.fixture(scope="module")
def tok(base, tokenizer_cache):
    return Tokenizer(base, tokenizer_cache)


@pytest.fixture(scope="module")
def examples(tok):
    built, counts = steps.build(tok, agent_steps.steps(), max_length=4096)
    assert counts["dropped_too_long"] == 0 and len(built) == len(agent_steps.steps())
    return built


def hf_render(hf, record: dict, reply: dict | None = None) -> list[int]:
    """transformers' rendering of the record: arguments as objects (what chat templates expect),
    each tool's fields in the order the server's protocol model lists them (agent_steps.TOOLS
    sends `strict` before `parameters`: the prompt must be the server's, not the record's)."""
    def plain(m):
        if not m.get("tool_calls"):
            return m
        calls = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                 for c in m["tool_calls"]]
        return {**m, "tool_calls": calls}
    messages = [plain(m) for m in record["messages"] + ([reply] if reply else [])]
    order = ("name", "description", "parameters", "strict")
    tools = [{"type": "function", "function": {k: t["function"][k] for k in order}} for t in record["tools"]]
    text = hf.apply_chat_template(messages, tools=tools, tokenize=False,
                                  add_generation_prompt=reply is None)
    return hf(text, add_special_tokens=False)["input_ids"]


def test_labels_cover_exactly_the_reply_as_the_template_renders_it(base, tok, examples, tokenizer_cache):
    hf = load_tokenizer(base, tokenizer_cache)
    records = agent_steps.steps()
    batch = collate(examples[:6])
    for i, record in enumerate(records[:6]):
        prompt = hf_render(hf, record)
        full = hf_render(hf, record, record["chosen"])
        end = full.index(hf.convert_tokens_to_ids("<|im_end|>"), len(prompt)) + 1
        n = len(examples[i].prompt_ids) + len(examples[i].completion_ids)
        assert batch["input_ids"][i, :n].tolist() == full[:end]
        assert batch["labels"][i, :len(prompt)].eq(IGNORE).all()           # the whole context is masked
        assert batch["labels"][i, len(prompt):end].tolist() == full[len(prompt):end]
        assert batch["labels"][i, end:].eq(IGNORE).all() and batch["attention_mask"][i, end:].eq(0).all()
    call = records[0]["chosen"]["tool_calls"][0]["function"]
    want = (f'<tool_call>\n{{"name": "sql_exec", "arguments": {json.dumps(json.loads(call["arguments"]))}}}'
            f'\n</tool_call><|im_end|>')
    assert tok.decode(examples[0].completion_ids, skip_special=False) == want
    assert tok.decode(examples[1].completion_ids, skip_special=False) == "Saved Dune (1965) in books.<|im_end|>"


def test_steps_over_max_length_are_dropped_and_counted(tok):
    records = agent_steps.steps()
    lengths = sorted(len(steps.to_example(tok, r)) for r in records)
    kept, counts = steps.build(tok, records, max_length=lengths[len(lengths) // 2])
    assert counts["dropped_too_long"] == sum(n > lengths[len(lengths) // 2] for n in lengths) > 0
    assert len(kept) + counts["dropped_too_long"] == len(records)


@pytest.fixture(scope="module")
def sft(base, examples):
    return train_sft(load_model(base), examples[3:], FAST, held_out=examples[:3])


def test_sft_loss_falls_on_trained_and_held_out_steps(sft):
    losses = [e["loss"] for e in sft.history]
    assert len(losses) == FAST.max_steps
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses
    assert sft.metrics["eval_loss_after"] < sft.metrics["eval_loss_before"] - 0.5, sft.metrics


def test_an_adapter_that_diverged_is_not_written(sft, base, tmp_path):
    # ORPO from the shipped adapter once ended with NaN weights and tune reported them as trained
    lora_b = next(p for n, p in sft.model.named_parameters() if "lora_B" in n)
    kept = lora_b.detach().clone()
    try:
        with torch.no_grad():
            lora_b[0, 0] = float("nan")
        with pytest.raises(TrainingDiverged, match="not finite"):
            save_adapter(sft.model, tmp_path / "diverged", base)
        assert not (tmp_path / "diverged").exists()
    finally:
        with torch.no_grad():
            lora_b.copy_(kept)


def test_the_adapter_loads_with_peft_and_carries_the_training(sft, base, examples, tmp_path):
    out = save_adapter(sft.model, tmp_path / "tool-adapter", base)
    config = json.loads((out / CONFIG).read_text())
    assert config["r"] == 16 and config["peft_type"] == "LORA"
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                             "down_proj"}
    assert adapter_label(out).startswith("tool-adapter@sha256:")

    ids = torch.tensor([examples[0].prompt_ids + examples[0].completion_ids])
    with torch.no_grad():
        plain = load_model(base)(ids).logits
        loaded = PeftModel.from_pretrained(load_model(base), out)(ids).logits
        trained = sft.model.to("cpu")(ids).logits
    assert (loaded - plain).abs().max() > 0.1                       # the adapter changes the model
    torch.testing.assert_close(loaded, trained, atol=1e-4, rtol=1e-4)   # and is the one trained


def test_orpo_goes_on_from_the_sft_adapter_and_returns_it_unmerged(sft, tok, base, tokenizer_cache):
    pairs, dropped = steps.preference_pairs(tok, agent_steps.steps(), max_length=4096)
    assert len(pairs) == sum(1 for r in agent_steps.steps() if r.get("rejected")) and dropped == 8
    assert pairs[0].prompt == steps.render(tok, agent_steps.steps()[0]) and pairs[0].chosen.endswith("<|im_end|>")
    lora_b = {k: v.clone() for k, v in sft.model.state_dict().items() if "lora_B" in k}
    assert all(v.abs().max() > 0 for v in lora_b.values())          # SFT trained them away from zero

    params = OrpoParams(max_steps=2, warmup_steps=0, batch_size=4, learning_rate=1e-4, max_length=2048, device="cpu")
    result = train_orpo(sft.model, load_tokenizer(base, tokenizer_cache), pairs, params, merge=False)
    assert isinstance(result.model, PeftModel) and list(result.model.peft_config) == ["default"]
    after = {k: v for k, v in result.model.state_dict().items() if "lora_B" in k}
    assert after.keys() == lora_b.keys()
    moved = max((after[k] - lora_b[k]).abs().max().item() for k in after)
    size = max(v.abs().max().item() for v in lora_b.values())
    assert 0 < moved < 0.2 * size          # the SFT adapter went on training; a fresh one would start at zero


@pytest.mark.gpu
def test_sft_then_orpo_train_on_cuda(base, tok, examples, tokenizer_cache):
    cuda = FAST.model_copy(update={"device": "cuda"})
    result = train_sft(load_model(base), examples, cuda)
    losses = [e["loss"] for e in result.history]
    assert result.metrics["device"] == "cuda" and sum(losses[-5:]) < 0.7 * sum(losses[:5]), losses
    pairs, _ = steps.preference_pairs(tok, agent_steps.steps(), max_length=4096)
    params = OrpoParams(max_steps=2, warmup_steps=0, batch_size=1, gradient_accumulation_steps=4,
                        learning_rate=1e-4, max_length=2048, device="cuda")
    orpo = train_orpo(result.model, load_tokenizer(base, tokenizer_cache), pairs, params, merge=False)
    assert orpo.metrics["device"] == "cuda" and isinstance(orpo.model, PeftModel)


def test_a_non_finite_step_is_dropped_not_applied(base, examples, monkeypatch):
    # The first real run's loss turned NaN at one step near 200 and every adapter weight with it.
    import training.sft as sft
    real, calls = sft._loss, []

    def loss(model, batch, device):
        calls.append(1)
        value = real(model, batch, device)
        return value * float("nan") if len(calls) == 3 else value

    monkeypatch.setattr(sft, "_loss", loss)
    result = train_sft(load_model(base), examples, FAST.model_copy(update={"max_steps": 6}))
    assert result.metrics["skipped_steps"] == [3]
    lora = [p for n, p in result.model.named_parameters() if "lora_" in n]
    assert lora and all(torch.isfinite(p).all() for p in lora)
    assert result.history[-1]["loss"] < result.history[0]["loss"]


def test_training_that_keeps_diverging_stops_with_a_reason(base, examples, monkeypatch):
    import training.sft as sft
    real = sft._loss
    monkeypatch.setattr(sft, "_loss", lambda m, b, d: real(m, b, d) * float("inf"))
    with pytest.raises(sft.TrainingDiverged, match="non-finite"):
        train_sft(load_model(base), examples, FAST.model_copy(update={"max_steps": 10}))


def test_the_loss_is_transformers_own_on_the_completion_tokens(base, examples):
    # _loss applies the head to the completion positions only; its value must be the mean
    # NLL that transformers computes from the same labels over the whole sequence.
    import training.sft as sft
    model = load_model(base).eval()
    batch = collate(examples[:3])
    rows = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: rows.append(args[0].shape[:-1]))
    with torch.no_grad():
        ours = sft._loss(model, batch, "cpu")
        hook.remove()
        theirs = model(**batch).loss
    assert rows == [torch.Size([sum(len(e.completion_ids) for e in examples[:3])])]    # the head saw the replies only
    assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6), (ours, theirs)


def test_batches_cover_every_step_once_a_pass_with_little_padding():
    import random as rnd

    import training.sft as sft
    from training.steps import Example
    rng = rnd.Random(0)
    examples = [Example(str(i), [1] * rng.randint(50, 4000), [2] * 20) for i in range(400)]
    batches = sft._batches(examples, 4, rnd.Random(1))
    one_pass = [next(batches) for _ in range(100)]
    assert sorted(map(id, (e for b in one_pass for e in b))) == sorted(map(id, examples))

    def padding(bs):
        return sum(max(map(len, b)) * len(b) - sum(map(len, b)) for b in bs)
    shuffled = examples[:]
    rnd.Random(2).shuffle(shuffled)
    plain = [shuffled[i:i + 4] for i in range(0, 400, 4)]
    assert padding(one_pass) < padding(plain) / 5


@pytest.mark.parametrize("tags", ["trained", "untrained"])
def test_call_tags_the_base_cannot_emit_are_spelled_as_text_the_servers_grammar_takes(tiny_gguf, tokenizer_cache, tags):
    """A tag token whose output row is the padding's cannot be learnt (its logit is the padding's):
    replies open a call with the tag spelled as text, prompts keep the template's tokens, and
    the server's call grammar accepts the spelled reply token by token."""
    from runtime.server import grammar

    base = tiny_gguf("qwen2", tied=True, call_tags=tags)
    tok = Tokenizer(base, tokenizer_cache)
    stops = steps.stop_ids(tok, base)
    opening, closing = tok.encode("<tool_call>")[0], tok.encode("</tool_call>")[0]
    spell = steps.spellings(tok, base)
    record = next(r for r in agent_steps.steps() if r["kind"] == "call")
    plain, spelled = steps.to_example(tok, record, stops), steps.to_example(tok, record, stops, spell)
    assert {opening, closing} <= set(plain.completion_ids) and spelled.prompt_ids == plain.prompt_ids
    assert tok.decode(spelled.completion_ids, skip_special=False) == tok.decode(plain.completion_ids, skip_special=False)
    if tags == "trained":
        assert not spell and spelled == plain
        return
    assert spell == {opening} and opening not in spelled.completion_ids and closing in spelled.completion_ids
    factory = grammar.GrammarFactory(tok, len(tok), set(stops))
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in record["tools"]}
    constraint = factory.constraint(grammar.call_or_text_grammar(tools, True, factory.call_tags))
    for t in spelled.completion_ids:
        assert constraint.allowed()[t // 32] & np.int32(np.uint32(1 << (t % 32)).view(np.int32)), tok.token_text(t)
        constraint.advance(t)
    assert constraint.is_terminated()


def test_orpo_spells_the_opening_tag_as_sft_does(tiny_gguf, tokenizer_cache):
    # TRL tokenizes ORPO's pairs from text, which would turn the spelled tag back into the token
    from training.orpo import OrpoTrainer

    base = tiny_gguf("qwen2", tied=True, call_tags="untrained")
    tok = Tokenizer(base, tokenizer_cache)
    stops, spell = steps.stop_ids(tok, base), steps.spellings(tok, base)
    record = next(r for r in agent_steps.steps() if r["kind"] == "call" and r.get("rejected"))
    sft_ids = steps.to_example(tok, record, stops, spell).completion_ids
    pair = steps.preference_pairs(tok, [record], max_length=4096)[0][0]
    trainer = OrpoTrainer.__new__(OrpoTrainer)        # the tokenizing method alone, without a model
    trainer.processing_class, trainer.spell = load_tokenizer(base, tokenizer_cache), spell
    answer = trainer.build_tokenized_answer(pair.prompt, pair.chosen)
    assert not spell & set(answer["input_ids"]) and len(answer["attention_mask"]) == len(answer["input_ids"])
    assert list(answer["input_ids"]) == sft_ids
