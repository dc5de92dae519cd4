"""The CPU block kernels against the reference: gguf's own dequantize, then a float matmul.

Every block type, on every instruction set this CPU can run (AVX512-VNNI, AVX2, portable C),
with row lengths that end in a half 64-value chunk; then the CPU backend's int8 mode through
the engine (cpu_blocks.BlockOps, against the torch reference), and its fallback when the
extension is missing.
"""
from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q
from gguf import quants

from runtime.backends import cpu_kernels, create_backend
from runtime.backends.cpu import CPUOps, Int8Weight
from runtime.backends.cpu_blocks import BlockOps
from runtime.backends.cpu_kernels import BLOCK_TYPES, BlockWeight
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.gguf import GGUFTensor
from dev.synthetic import random_kquant

KQUANTS = (Q.Q4_K, Q.Q5_K, Q.Q6_K)
kernels = cpu_kernels.load()
pytestmark = pytest.mark.skipif(kernels is None, reason="CPU block kernels not built (pip install -e .)")


@pytest.fixture(params=[2, 1, 0], ids=["avx512-vnni", "avx2", "portable"])
def level(request):
    got = kernels.use_level(request.param)
    if got != request.param:
        pytest.skip(f"this CPU has no {request.param} path")
    yield got
    kernels.use_level(2)


def random_blocks(qtype: Q, rows: int, cols: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Raw blocks [rows, bytes] and their reference float32 values [rows, cols]."""
    if qtype in KQUANTS:
        raw = random_kquant(rows, cols, qtype, rng, 0.05)
    else:
        raw = quants.quantize(rng.standard_normal((rows, cols)).astype(np.float32) * 0.05, qtype)
    return raw, quants.dequantize(raw, qtype).reshape(rows, cols).astype(np.float32)


def as_weight(parts) -> BlockWeight:
    return kernels.weight([SimpleNamespace(qtype=q, data=raw, shape=(raw.shape[0], cols)) for q, raw, cols in parts])


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
def test_blocks_match_the_reference(qtype, level):
    rng = np.random.default_rng(int(qtype))
    cols = 768 if qtype in KQUANTS else 864            # 864 = 13.5 chunks of 64
    raw, ref = random_blocks(qtype, 70, cols, rng)      # 70 rows: a partial tile
    np.testing.assert_allclose(kernels.dequantize(qtype, raw, cols), ref, rtol=1e-6, atol=1e-7)
    x = rng.standard_normal((11, cols)).astype(np.float32)     # a group of 8, then singles
    w = as_weight([(qtype, raw, cols)])
    y, expect = w.matmul(x), x @ ref.T
    err = np.abs(y - expect).max() / np.abs(expect).max()
    assert err < 0.02, f"{qtype.name}: relative error {err:.4f}"       # activations rounded to int8
    # a token's result does not depend on the tokens beside it
    one_by_one = np.concatenate([w.matmul(x[i:i + 1]) for i in range(len(x))])
    np.testing.assert_array_equal(y, one_by_one)


@pytest.mark.parametrize("tokens", [2, 3, 5, 9])
@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
def test_decode_batches_compute_every_row_against_the_reference(qtype, tokens, level):
    """A decode step of several sequences reads each weight block once for all of them (kern.inc
    rowsn / dotn, GROUP tokens at a time; 9 = a group of 8 and one): every sequence's row of the
    product against the float reference on its own, and equal to that sequence computed alone."""
    rng = np.random.default_rng(int(qtype) * 10 + tokens)
    cols = 768 if qtype in KQUANTS else 864
    raw, ref = random_blocks(qtype, 150, cols, rng)      # 150 rows: several tiles, the last partial
    x = rng.standard_normal((tokens, cols)).astype(np.float32) * rng.uniform(0.1, 10, (tokens, 1)).astype(np.float32)
    w = as_weight([(qtype, raw, cols)])
    y, expect = w.matmul(x), x @ ref.T
    for t in range(tokens):
        err = np.abs(y[t] - expect[t]).max() / np.abs(expect[t]).max()
        assert err < 0.02, f"{qtype.name}: sequence {t} of {tokens}: relative error {err:.4f}"
        np.testing.assert_array_equal(y[t], w.matmul(x[t:t + 1])[0])


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
def test_prefill_sized_batches_match_the_reference(qtype, level):
    """From 16 tokens on, AVX512 runs the row-interleaved kernel: 37 tokens (a partial group of
    8) against 70 rows (a partial group of 16); a token's result is the same in any such batch."""
    rng = np.random.default_rng(int(qtype) + 100)
    cols = 768 if qtype in KQUANTS else 864
    raw, ref = random_blocks(qtype, 70, cols, rng)
    x = rng.standard_normal((37, cols)).astype(np.float32)
    w = as_weight([(qtype, raw, cols)])
    y, expect = w.matmul(x), x @ ref.T
    err = np.abs(y - expect).max() / np.abs(expect).max()
    assert err < 0.02, f"{qtype.name}: relative error {err:.4f}"
    np.testing.assert_array_equal(w.matmul(x[3:22]), y[3:22])


@pytest.mark.parametrize("sign", [1, -1])
def test_prefill_of_the_largest_bytes_does_not_saturate(sign, level):
    """AVX2's prefill adds two vpmaddubsw pairs in int16: Q6_K's largest bytes (63) against
    activations that all quantize to +-127 reach 4 * 63 * 127 = 32004, one step from saturating."""
    rng = np.random.default_rng(7)
    raw = random_kquant(64, 768, Q.Q6_K, rng, 0.05)
    raw[:, :192] = 0xFF                                  # ql and qh: every value 63
    ref = quants.dequantize(raw, Q.Q6_K).reshape(64, 768).astype(np.float32)
    x = np.full((20, 768), sign, np.float32)
    y, expect = as_weight([(Q.Q6_K, raw, 768)]).matmul(x), x @ ref.T
    np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-4 * np.abs(expect).max())


def test_prefill_is_the_same_on_avx2_as_on_avx512():
    """The interleaved prefill kernels sum each 16 values exactly and apply the same float
    operations, so AVX2 gives AVX512's bits (every type AVX2 interleaves: all but Q8_0)."""
    if kernels.use_level(2) != 2:
        pytest.skip("this CPU has no AVX512-VNNI path")
    try:
        for qtype in set(BLOCK_TYPES) - {Q.Q8_0}:
            rng = np.random.default_rng(int(qtype) + 200)
            cols = 768 if qtype in KQUANTS else 864
            w = as_weight([(qtype, random_blocks(qtype, 70, cols, rng)[0], cols)])
            x = rng.standard_normal((37, cols)).astype(np.float32)
            y512 = w.matmul(x)
            kernels.use_level(1)
            np.testing.assert_array_equal(w.matmul(x), y512, err_msg=qtype.name)
            kernels.use_level(2)
    finally:
        kernels.use_level(2)


def test_two_threads_calling_the_kernels_get_their_own_products():
    # the library keeps the last quantized activations in a global: two engines in one process
    # (a reload beside the live one) read each other's, or freed memory, without the lock
    rng = np.random.default_rng(2)
    raw, _ = random_blocks(Q.Q8_0, 96, 512, rng)
    w = as_weight([(Q.Q8_0, raw, 512)])
    xs = [rng.standard_normal((t, 512)).astype(np.float32) for t in (1, 7, 33, 130)]
    expect = [w.matmul(x) for x in xs]
    wrong = []

    def hammer(order):
        for _ in range(60):
            for i in order:
                if not np.array_equal(w.matmul(xs[i]), expect[i]):
                    wrong.append(i)

    threads = [threading.Thread(target=hammer, args=(o,)) for o in ((0, 1, 2, 3), (3, 2, 1, 0), (2, 0, 3, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_a_product_returns_only_once_no_worker_reads_its_weights():
    """The caller may free the weights as soon as matmul returns (a model's mmap closed): here
    they become unreadable then. Two pool threads on one CPU, so a worker is often descheduled
    inside a tile; the library that took such a tile back and returned crashed the process
    within 200 products (10 runs of 10; a segfault in CI). A subprocess, since that is a crash."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    code = """
import ctypes, mmap, os
import numpy as np
from types import SimpleNamespace
from gguf import GGMLQuantizationType as Q
from runtime.backends import cpu_kernels
kernels = cpu_kernels.load(2)
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
rows, cols = 32768, 2048
region = mmap.mmap(-1, rows * cols // 32 * 34)            # zero pages: Q8_0 blocks of zeros
blocks = np.frombuffer(region, np.uint8).reshape(rows, -1)
w = kernels.weight([SimpleNamespace(qtype=Q.Q8_0, data=blocks, shape=(rows, cols))])
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
x = np.ones((1, cols), np.float32)
for _ in range(200):
    assert libc.mprotect(blocks.ctypes.data, blocks.nbytes, mmap.PROT_READ) == 0
    assert not w.matmul(x).any()
    assert libc.mprotect(blocks.ctypes.data, blocks.nbytes, 0) == 0     # PROT_NONE
print(kernels.threads)"""
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True,
                         cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["2"]


def test_parts_of_different_types_fill_their_columns():
    rng = np.random.default_rng(1)
    (a, ra), (b, rb) = random_blocks(Q.Q5_0, 40, 256, rng), random_blocks(Q.Q6_K, 24, 256, rng)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    y = as_weight([(Q.Q5_0, a, 256), (Q.Q6_K, b, 256)]).matmul(x)
    expect = x @ np.concatenate([ra, rb]).T
    assert y.shape == (3, 64)
    assert np.abs(y - expect).max() / np.abs(expect).max() < 0.02


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.Q4_K])
def test_int8_mode_runs_on_the_blocks_and_tracks_the_reference(tiny_gguf, tokenizer_cache, qtype):
    from dev.synthetic import Shape
    shape = Shape(hidden=256, ffn=512, heads=2, kv_heads=1, head_dim=128)
    path = tiny_gguf("qwen2", qtype, shape)
    make = lambda d: LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", cpu_dtype=d, kv_cache_mb=16,  # noqa: E731
                                            tokenizer_cache=tokenizer_cache))
    ref, fast = make("float32"), make("int8")
    assert isinstance(fast.ops, BlockOps) and isinstance(fast.model.layers[0].gate_up, BlockWeight)
    ids = ref.tokenizer.encode("hello world, the quick brown fox jumps over the lazy dog")
    a, b = ref.prompt_logits(ids), fast.prompt_logits(ids)
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.999
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.75      # random weights: many near ties


def test_decode_steps_run_each_layer_in_one_call_and_match_the_op_by_op_path(tiny_gguf, tokenizer_cache, monkeypatch):
    """Decode with the kernels goes through layer.c (one call a layer, two sequences at once);
    its tokens and logprobs equal those of the same kernels called op by op from forward()."""
    from runtime.sampling import SamplingParams
    path = tiny_gguf("qwen2", Q.Q8_0)
    engine = LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", cpu_dtype="int8", kv_cache_mb=16,
                                              tokenizer_cache=tokenizer_cache))
    prompts = [engine.tokenizer.encode("the quick brown fox"), engine.tokenizer.encode("jumps over the lazy dog again")]
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, logprobs=0)
    calls = []
    run_layer = engine.ops.kernels.run_layer
    monkeypatch.setattr(engine.ops.kernels, "run_layer", lambda *a: calls.append(1) or run_layer(*a))
    fused = engine.generate(prompts, params)
    assert len(calls) >= 11 * len(engine.model.layers)
    monkeypatch.setattr(engine.ops, "_fused_layers", lambda model, kv: None)
    engine.blocks.hash_to_block.clear()
    plain = engine.generate(prompts, params)
    for a, b in zip(fused, plain):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose([lp for _, lp, _ in a.logprobs], [lp for _, lp, _ in b.logprobs], atol=1e-4)


def test_without_the_extension_int8_falls_back_with_a_log_line(monkeypatch, caplog):
    monkeypatch.setattr(cpu_kernels, "_loaded", None)
    monkeypatch.setattr(cpu_kernels, "library_path", lambda: None)
    with caplog.at_level(logging.WARNING):
        ops = create_backend("cpu", "int8")
    assert isinstance(ops, CPUOps)
    assert "CPU block kernels not built" in caplog.text
    raw, _ = random_blocks(Q.Q8_0, 8, 64, np.random.default_rng(2))
    t = GGUFTensor(name="w", qtype=Q.Q8_0, shape=(8, 64), data=raw)
    assert isinstance(ops.linear_weight([t]), Int8Weight)


def test_the_kernels_can_be_turned_off_for_the_dequantized_path(monkeypatch):
    assert cpu_kernels.library_path() is not None, "the extension is built for these tests"
    monkeypatch.setenv("SAMEVM_CPU_KERNELS", "off")
    assert isinstance(create_backend("cpu", "int8"), CPUOps)
    monkeypatch.setenv("SAMEVM_CPU_KERNELS", "on")
    assert not isinstance(create_backend("cpu", "int8"), CPUOps)


@pytest.mark.slow
def test_default_model_greedy_tokens_equal_the_float32_reference():
    """The fast path on the real default model (Q5_0, Q8_0, Q4_K, Q6_K blocks): 32 greedy tokens
    per prompt equal the float32 reference's."""
    import os
    from pathlib import Path

    from runtime import catalog
    from runtime.sampling import SamplingParams
    from tests.runtime.test_default_model import PROMPTS

    home = Path(os.environ.get("SAMEVM_HOME", ".samevm"))
    path = catalog.installed_path(catalog.DEFAULT_MODEL, home)
    if path is None:
        pytest.skip("the default model is not installed (samevm models fetch)")
    make = lambda d: LLMEngine.from_gguf(EngineConfig(model=str(path), backend="cpu", cpu_dtype=d, kv_cache_mb=256,  # noqa: E731
                                            tokenizer_cache=str(home / "cache" / "tokenizers")))
    ref, fast = make("float32"), make("int8")
    assert isinstance(fast.model.lm_head, BlockWeight)
    params = SamplingParams(max_tokens=32, temperature=0, ignore_eos=True)
    for text in PROMPTS:
        ids = ref.tokenizer.encode(ref.tokenizer.render_chat([{"role": "user", "content": text}]))
        want = ref.generate([ids], params)[0].token_ids
        got = fast.generate([ids], params)[0].token_ids
        assert got == want, text


@pytest.mark.parametrize("head_dim", [16, 72])
@pytest.mark.parametrize("interleaved", [False, True])
def test_decode_attention_matches_the_reference(interleaved, head_dim, level):
    """The C decode attention (RoPE, cache write, GQA softmax; the (sequence, KV head) pairs over
    the kernels' threads) against the reference ops on the same batch: three sequences of
    different lengths in a paged cache, one of 150 positions (past the 16 lanes of the softmax
    and the 64 value rows the AVX512 kernel sums at a time)."""
    from runtime.backends import AttentionParams, ForwardBatch
    from runtime.models.rope import rope_tables

    ops = BlockOps(kernels)
    rng = np.random.default_rng(3)
    hq, hkv, d, block = 6, 2, head_dim, 4
    lens = np.array([5, 150, 1], dtype=np.int32)
    tables = np.zeros((3, 38), np.int32)
    tables[0, :2], tables[1], tables[2, 0] = [3, 7], rng.permutation(np.arange(8, 46)), 6      # scattered blocks
    pos = lens - 1
    slots = np.array([tables[i, p // block] * block + p % block for i, p in enumerate(pos)], dtype=np.int32)
    fb = ops.prepare(ForwardBatch(input_ids=np.zeros(3, np.int32), positions=pos, slot_mapping=slots,
                                  query_starts=np.arange(4, dtype=np.int32), context_lens=lens, block_tables=tables,
                                  logits_indices=np.arange(3, dtype=np.int32), block_size=block))
    assert fb.ctx is not None
    cos, sin = rope_tables(d, 10000.0, None, 256)
    rope = ops.rope_cache(cos, sin)
    p = AttentionParams(n_heads=hq, n_kv_heads=hkv, head_dim=d, scale=d ** -0.5, interleaved=interleaved, norm_eps=1e-6)
    qkv = rng.standard_normal((3, (hq + 2 * hkv) * d)).astype(np.float32)
    kv = rng.standard_normal((1, 2, 46 * block, hkv, d)).astype(np.float32)
    kv_ref = torch.from_numpy(kv.copy())
    fast = ops.attention(qkv, kv, 0, fb, rope, p)
    reference = CPUOps(dtype="float32")
    ref = reference.attention(torch.from_numpy(qkv), kv_ref, 0, reference.prepare(fb.host), reference.rope_cache(cos, sin), p)
    np.testing.assert_allclose(kv, kv_ref.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fast, ref.numpy(), rtol=1e-5, atol=1e-5)


def test_decode_attention_converts_index_arrays_it_is_given():
    """int32 slots and positions are converted to the int64 the C reads, and held through the
    call: converted inline, the slots' copy was freed before it and numpy gave its buffer to the
    positions' copy, so the new keys went to the positions' slots."""
    rng = np.random.default_rng(4)
    hq, hkv, d = 2, 1, 16
    qkv = rng.standard_normal((2, (hq + 2 * hkv) * d)).astype(np.float32)
    cos, sin = rng.standard_normal((2, 64, d // 2)).astype(np.float32)
    slots, positions, ctx, ctx_start = [5, 9], [3, 4], [0, 1, 2, 5, 6, 7, 8, 9], [0, 4, 8]

    def run(dtype):
        k, v = np.zeros((2, 16, hkv, d), np.float32)
        index = [np.array(a, dtype) for a in (slots, positions, ctx, ctx_start)]
        out = kernels.attention_decode(qkv, k, v, *index[:2], cos, sin, False, *index[2:], hq, hkv, d, d ** -0.5)
        return out, k, v

    for want, got in zip(run(np.int64), run(np.int32)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("head_dim", [64, 48])
def test_prefill_attention_matches_the_reference(head_dim, level):
    """The kernels' causal prefill attention (AVX512 for head sizes a multiple of 64, else plain
    C) against the reference's grouped attention: a whole prompt, and the last 13 queries of a
    context of 70 (a cached prefix)."""
    from runtime.backends.cpu import _grouped_attention
    rng = np.random.default_rng(head_dim)
    q, k, v = (torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
               for shape in ((70, 6, head_dim), (70, 2, head_dim), (70, 2, head_dim)))
    scale = head_dim ** -0.5
    for first in (0, 57):
        ref = _grouped_attention(q[first:], k, v, scale)
        got = kernels.attention_prefill(q[first:].numpy(), k.numpy(), v.numpy(), scale)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["merged", "unmerged"])
def test_decode_with_a_lora_adapter_keeps_the_adapter(tiny_gguf, tokenizer_cache, monkeypatch, tmp_path, mode):
    """layer.c knows nothing of adapters: unmerged, decode must take the op-by-op path (which
    adds the adapter's product); merged at load (runtime/lora_merge.py), the adapter is in the
    Q8_0 blocks layer.c reads, so decode stays one call a layer. Either gives what the op-by-op
    path gives."""
    from runtime.sampling import SamplingParams
    from tests.runtime.lora_fixtures import make_adapter
    path = tiny_gguf("qwen2", Q.Q8_0)
    make_adapter(path, tmp_path / "adapter", r=8, alpha=16)
    make = lambda lora: LLMEngine.from_gguf(EngineConfig(  # noqa: E731
        model=path, backend="cpu", cpu_dtype="int8", kv_cache_mb=16, tokenizer_cache=tokenizer_cache, lora=lora,
        lora_mode=mode))
    base, tuned = make(None), make(str(tmp_path / "adapter"))
    prompts = [tuned.tokenizer.encode("the quick brown fox")]
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, logprobs=0)
    calls = []
    run_layer = tuned.ops.kernels.run_layer
    monkeypatch.setattr(tuned.ops.kernels, "run_layer", lambda *a: calls.append(1) or run_layer(*a))
    served = tuned.generate(prompts, params)[0]
    if mode == "merged":        # 11 decode steps, one call a layer each
        assert len(calls) >= 11 * len(tuned.model.layers)
    else:
        assert not calls
    monkeypatch.setattr(tuned.ops, "_fused_layers", lambda model, kv: None)
    tuned.blocks.hash_to_block.clear()
    plain = tuned.generate(prompts, params)[0]
    assert served.token_ids == plain.token_ids
    np.testing.assert_allclose([lp for _, lp, _ in served.logprobs], [lp for _, lp, _ in plain.logprobs], atol=1e-4)
    assert served.token_ids != base.generate(prompts, params)[0].token_ids     # the adapter shows


def test_serving_on_the_blocks_imports_no_torch(tiny_gguf, tokenizer_cache):
    """An int8 engine from a warm tokenizer cache, a prefill, decode steps and sampling (top-p,
    logprobs) run without importing torch: that import was half of a later start."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from runtime.tokenizer import Tokenizer
    path = tiny_gguf("qwen2", Q.Q8_0)
    Tokenizer(path, tokenizer_cache)                    # the first conversion runs on transformers
    code = f"""
import json, sys
from runtime.config import EngineConfig
from runtime.engine.llm_engine import LLMEngine
from runtime.sampling import SamplingParams
engine = LLMEngine.from_gguf(EngineConfig(model={path!r}, backend="cpu", cpu_dtype="int8", kv_cache_mb=16,
                                          tokenizer_cache={tokenizer_cache!r}))
params = SamplingParams(max_tokens=6, temperature=0.8, top_p=0.9, seed=1, logprobs=2, ignore_eos=True)
out = engine.generate([engine.tokenizer.encode("the quick brown fox")], params)[0]
print(json.dumps({{"ops": type(engine.ops).__name__, "tokens": len(out.token_ids), "torch": "torch" in sys.modules}}))"""
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {"ops": "BlockOps", "tokens": 6, "torch": False}


@pytest.mark.parametrize("qtype", [Q.F16, Q.BF16])
def test_int8_mode_multiplies_types_the_kernels_do_not_read_as_the_reference_does(tiny_gguf, tokenizer_cache, qtype):
    """F16 / BF16 weights are dequantized at load and multiplied in float32: the same logits as
    the float32 reference's."""
    path = tiny_gguf("qwen2", qtype, embed_qtype=qtype)
    make = lambda d: LLMEngine.from_gguf(EngineConfig(model=path, backend="cpu", cpu_dtype=d, kv_cache_mb=16,  # noqa: E731
                                                      tokenizer_cache=tokenizer_cache))
    ref, fast = make("float32"), make("int8")
    assert isinstance(fast.ops, BlockOps) and isinstance(fast.model.layers[0].qkv, np.ndarray)
    ids = ref.tokenizer.encode("hello world, the quick brown fox jumps over the lazy dog")
    np.testing.assert_allclose(fast.prompt_logits(ids), ref.prompt_logits(ids), rtol=1e-4, atol=1e-4)
