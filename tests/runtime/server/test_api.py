"""The OpenAI-compatible API through the official `openai` client against a real server on a
tiny random model: chat, streaming, completions, logprobs, models, health, metrics,
tokenize, and OpenAI-style refusals of bad input."""
from __future__ import annotations

import json
import re
import uuid

import openai
import pytest

from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams

QUESTION = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def reference(server_model, tokenizer_cache):
    """The same model in-process, its weights held as `samevm serve` holds them by default
    (Settings.cpu_dtype): what the server must reproduce (greedy)."""
    from samevm.settings import Settings
    return LLMEngine.from_gguf(EngineConfig(model=server_model, backend="cpu", cpu_dtype=Settings().cpu_dtype,
                                            tokenizer_cache=tokenizer_cache, kv_cache_mb=16))


def test_chat_matches_the_engine_and_says_what_served_it(server, reference):
    raw = server.client().chat.completions.with_raw_response.create(
        model=server.model_id, messages=QUESTION, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    r = raw.parse()
    ids = reference.tokenizer.encode(reference.tokenizer.render_chat(QUESTION))
    want = reference.generate([ids], SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))[0]
    assert r.choices[0].message.content == want.text
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (len(ids), 12, len(ids) + 12)
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    model = server.get("/v1/models").json()["data"][0]
    assert r.system_fingerprint == model["revision"] == raw.headers["x-samevm-revision"]
    assert raw.headers["x-samevm-backend"] == "cpu"
    awareness = r.model_extra["samevm"]["awareness"]
    assert awareness["tokens"] == 12 and awareness["mean_logprob"] < 0 and awareness["perplexity"] > 1


def test_streaming_equals_non_streaming(server):
    c = server.client()
    kw = dict(model=server.model_id, messages=QUESTION, max_tokens=20, temperature=0, seed=3)
    whole = c.chat.completions.create(**kw)
    chunks = list(c.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(chunks) > 5
    assert text == whole.choices[0].message.content
    assert finish == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert {ch.system_fingerprint for ch in chunks} == {whole.system_fingerprint}


def test_seeded_sampling_is_reproducible(server):
    c = server.client()
    kw = dict(model=server.model_id, messages=QUESTION, max_tokens=16, temperature=1.0)
    a = c.chat.completions.create(**kw, seed=11).choices[0].message.content
    assert a == c.chat.completions.create(**kw, seed=11).choices[0].message.content
    assert a != c.chat.completions.create(**kw, seed=12).choices[0].message.content


def test_chat_logprobs(server):
    r = server.client().chat.completions.create(model=server.model_id, messages=QUESTION, max_tokens=8,
                                                temperature=0, logprobs=True, top_logprobs=3)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens == 8
    for e in entries:
        assert len(e.top_logprobs) == 3
        assert [t.logprob for t in e.top_logprobs] == sorted((t.logprob for t in e.top_logprobs), reverse=True)
        assert e.token == e.top_logprobs[0].token and e.logprob == pytest.approx(e.top_logprobs[0].logprob)
        assert e.logprob <= 0


def test_text_completions_and_their_logprobs(server):
    c = server.client()
    ids = server.post("/tokenize", json={"prompt": "The quick brown fox"}).json()["tokens"]
    by_text = c.completions.create(model=server.model_id, prompt="The quick brown fox", max_tokens=10,
                                   temperature=0, logprobs=2, extra_body={"ignore_eos": True})
    by_ids = c.completions.create(model=server.model_id, prompt=ids, max_tokens=10, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert by_text.choices[0].text == by_ids.choices[0].text
    assert by_text.usage.prompt_tokens == len(ids) and by_text.usage.completion_tokens == 10
    lp = by_text.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 10
    assert all(len(t) <= 2 for t in lp.top_logprobs) and lp.text_offset[0] == 0
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model=server.model_id, prompt=ids, max_tokens=10, temperature=0, stream=True,
        extra_body={"ignore_eos": True}) if ch.choices)
    assert streamed == by_ids.choices[0].text


def test_models_health_metrics(server):
    models = server.client().models.list().data
    assert [m.id for m in models] == [server.model_id]
    card = models[0].model_extra
    assert card["context_length"] == 1024 and card["backend"] == "cpu" and card["revision"]
    health = server.get("/health").json()
    assert health["status"] == "ok" and health["adapter"] is None and health["revision"]
    server.client().chat.completions.create(model=server.model_id, messages=QUESTION, max_tokens=3)
    text = server.get("/metrics").text
    for name in ("samevm_requests_total", "samevm_time_to_first_token_seconds_count",
                 "samevm_inter_token_latency_seconds_count", "samevm_kv_blocks_total",
                 "samevm_prefix_cache_hit_rate", "samevm_running_sequences", "samevm_generation_tokens_total"):
        assert name in text
    assert server.metric("samevm_time_to_first_token_seconds_count") >= 1
    assert server.metric("samevm_kv_blocks_total") > 0


def test_tokenize_detokenize_and_multi_turn_rendering(server):
    ids = server.post("/tokenize", json={"prompt": "hello world"}).json()["tokens"]
    assert server.post("/detokenize", json={"tokens": ids}).json()["prompt"] == "hello world"
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
        {"role": "tool", "content": "no id on this one"},
        {"role": "user", "content": [{"type": "text", "text": "And "}, {"type": "text", "text": "tomorrow?"}]},
    ]
    out = server.post("/tokenize", json={"messages": messages, "tools": tools}).json()
    text = server.post("/detokenize", json={"tokens": out["tokens"]}).json()["prompt"]
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in text     # an object, not a string
    assert "<tool_response>\nsunny, 21 C\n</tool_response>" in text
    assert "no id on this one" in text and "And tomorrow?" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert any('"name": "get_weather"' in block for block in re.findall(r"<tools>(.*?)</tools>", text, re.S))


def error_of(call) -> tuple[int, dict]:
    with pytest.raises(openai.APIStatusError) as info:
        call()
    return info.value.status_code, info.value.body


@pytest.mark.parametrize("kwargs, status, param", [
    ({"model": "gpt-4o"}, 404, "model"),
    ({"max_tokens": 0}, 400, "max_tokens"),
    ({"max_tokens": -5}, 400, "max_tokens"),
    ({"max_tokens": 10**9}, 400, "max_tokens"),
    ({"extra_body": {"frobnicate": True}}, 400, "frobnicate"),
    ({"n": 2}, 400, "n"),
    ({"temperature": 7}, 400, "temperature"),
    ({"tool_choice": "required"}, 400, "tool_choice"),
    ({"logit_bias": {"5": 10}}, 400, "logit_bias"),
    ({"messages": []}, 400, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, None),
    ({"messages": [{"role": "user", "content": "hi " * 2000}]}, 400, "messages"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, 400, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": 3}}}]},
     400, "tools[0].function.parameters"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nope"}}}},
     400, "response_format"),
    ({"extra_body": {"structured_outputs": {"regex": "(unclosed"}}}, 400, "structured_outputs"),
])
def test_bad_requests_get_openai_errors(server, kwargs, status, param):
    args = {"model": server.model_id, "messages": QUESTION, "max_tokens": 4, **kwargs}
    code, body = error_of(lambda: server.client().chat.completions.create(**args))
    assert code == status
    assert set(body) == {"message", "type", "param", "code"} and body["message"]
    if param:
        assert body["param"] == param


def test_bad_json_and_wrong_types_are_400_not_500(server):
    for content in (b"{not json", b"[1, 2]", b'{"model": 5, "messages": "x"}', b""):
        r = server.post("/v1/chat/completions", content=content, headers={"content-type": "application/json"})
        assert r.status_code == 400, content
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    lone_surrogate = json.dumps({"model": server.model_id, "messages": [{"role": "user", "content": "\ud800 x"}]})
    r = server.post("/v1/chat/completions", content=lone_surrogate, headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = server.post("/detokenize", json={"tokens": [10**9]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens"
    assert server.get("/v1/nothing-here").status_code == 404


def test_stop_strings(server):
    c = server.client()
    kw = dict(model=server.model_id, messages=QUESTION, temperature=0, extra_body={"ignore_eos": True})
    full = c.chat.completions.create(**kw, max_tokens=30).choices[0].message.content
    stop = full[10:13]
    cut = c.chat.completions.create(**kw, max_tokens=30, stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == full[:full.index(stop)]
    assert json.dumps(cut.choices[0].message.content)      # still plain JSON-able text


def test_routes_answer_without_the_v1_prefix(server):
    body = {"model": server.model_id, "messages": QUESTION, "max_tokens": 3, "temperature": 0}
    with_v1 = server.post("/v1/chat/completions", json=body).json()
    bare = server.post("/chat/completions", json=body).json()
    assert bare["choices"][0]["message"] == with_v1["choices"][0]["message"]
    assert server.get("/models").json()["data"][0]["id"] == server.model_id
    r = server.post("/completions", json={"model": server.model_id, "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 200


def test_sampling_knobs_reach_the_sampler(server):
    c = server.client()
    kw = dict(model=server.model_id, messages=QUESTION, max_tokens=40, temperature=0)
    plain = c.chat.completions.create(**kw).choices[0].message.content
    penalised = c.chat.completions.create(**kw, frequency_penalty=2.0).choices[0].message.content
    repeated = c.chat.completions.create(**kw, extra_body={"repetition_penalty": 3.0}).choices[0].message.content
    assert penalised != plain and repeated != plain
    sampled = dict(model=server.model_id, messages=QUESTION, max_tokens=16, temperature=1.5, seed=5)
    free = c.chat.completions.create(**sampled).choices[0].message.content
    top1 = c.chat.completions.create(**sampled, extra_body={"top_k": 1}).choices[0].message.content
    assert top1 == c.chat.completions.create(**kw | {"max_tokens": 16}).choices[0].message.content   # top_k 1 = greedy
    assert free != top1
    r = c.chat.completions.create(**kw | {"max_tokens": None}, max_completion_tokens=5)
    assert r.usage.completion_tokens <= 5


def test_streamed_logprobs_cover_every_token(server):
    chunks = list(server.client().chat.completions.create(
        model=server.model_id, messages=QUESTION, max_tokens=9, temperature=0, logprobs=True, top_logprobs=2,
        stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    entries = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert len(entries) == chunks[-1].usage.completion_tokens == 9
    assert all(len(e.top_logprobs) == 2 for e in entries)


def test_completion_prompt_over_the_context(server):
    r = server.post("/v1/completions", json={"model": server.model_id, "prompt": "hello " * 3000})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "context_length_exceeded" and r.json()["error"]["param"] == "prompt"


def test_usage_reports_prompt_tokens_served_from_the_prefix_cache(server):
    messages = [{"role": "user", "content": f"{uuid.uuid4().hex} tell me about the lazy dog and the fox"}]
    kw = dict(model=server.model_id, messages=messages, max_tokens=2, temperature=0)
    first = server.client().chat.completions.create(**kw).usage
    second = server.client().chat.completions.create(**kw).usage
    assert first.prompt_tokens == second.prompt_tokens > 32
    assert first.prompt_tokens_details.cached_tokens == 0
    assert second.prompt_tokens_details.cached_tokens >= 16          # whole 16-token blocks
