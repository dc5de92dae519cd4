"""Many streams at once, and clients that hang up: usage stays exact, outputs stay those of
each request alone, and every KV block comes back."""
from __future__ import annotations

import asyncio

import httpx

N = 32


def messages(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Request {i}: tell me about the quick brown fox " * (1 + i % 3)}]


async def one_stream(client, model: str, i: int) -> tuple[str, object, str]:
    stream = await client.chat.completions.create(
        model=model, messages=messages(i), max_tokens=8 + i % 7, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    text, usage, finish = "", None, None
    async for ch in stream:
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
        else:
            usage = ch.usage
    return text, usage, finish


def test_32_parallel_streams_complete_with_exact_usage(server):
    async def all_at_once():
        client = server.async_client()
        return await asyncio.gather(*(one_stream(client, server.model_id, i) for i in range(N)))

    results = asyncio.run(all_at_once())
    c = server.client()
    for i, (text, usage, finish) in enumerate(results):
        prompt = server.post("/tokenize", json={"messages": messages(i)}).json()["count"]
        assert finish == "length"
        assert (usage.prompt_tokens, usage.completion_tokens) == (prompt, 8 + i % 7)
        alone = c.chat.completions.create(model=server.model_id, messages=messages(i), max_tokens=8 + i % 7,
                                          temperature=0, extra_body={"ignore_eos": True})
        assert text == alone.choices[0].message.content, f"request {i} changed in company"
    server.wait_for(lambda: server.metric("samevm_running_sequences") == 0, "the engine to go idle")
    assert server.metric("samevm_kv_blocks_used") == 0
    assert server.metric("samevm_waiting_sequences") == 0


def test_a_client_that_hangs_up_aborts_its_sequence(server):
    aborted = server.metric("samevm_aborted_requests_total")
    body = {"model": server.model_id, "messages": messages(0), "max_tokens": 900, "temperature": 0,
            "stream": True, "ignore_eos": True}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(6):
            next(lines)
        assert server.metric("samevm_running_sequences") == 1
    # 900 tokens would take seconds more: the abort is what empties the engine here
    server.wait_for(lambda: server.metric("samevm_running_sequences") == 0, "the abort")
    assert server.metric("samevm_aborted_requests_total") == aborted + 1
    assert server.metric("samevm_kv_blocks_used") == 0


def test_a_non_streaming_client_that_hangs_up_is_aborted_too(server):
    aborted = server.metric("samevm_aborted_requests_total")
    body = {"model": server.model_id, "messages": messages(1), "max_tokens": 900, "temperature": 0,
            "ignore_eos": True}
    try:
        httpx.post(server.url + "/v1/chat/completions", json=body, timeout=0.25)
    except httpx.ReadTimeout:
        pass                 # 900 tokens take ~1 s on a fast core: the abort must come first
    server.wait_for(lambda: server.metric("samevm_aborted_requests_total") == aborted + 1, "the abort")
    server.wait_for(lambda: server.metric("samevm_running_sequences") == 0, "the engine to go idle")
    assert server.metric("samevm_kv_blocks_used") == 0
