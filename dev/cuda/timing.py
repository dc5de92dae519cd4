"""Kernel timings for check.py on a GPU: each memory-bound kernel in the shapes of a Qwen3
1.7B Q4_K_M decode step, replayed from a CUDA graph (as the engine runs them) over enough
copies of its weights to miss the 50 MB L2, against the measured copy bandwidth.

Time is the median over replays of (graph time / launches in it), so it includes the
per-kernel launch gap a decode step pays; GB/s counts bytes the kernel must move.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from gguf import GGMLQuantizationType as Q

from dev.synthetic import random_kquant
from runtime.backends import AttentionParams, ForwardBatch
from runtime.backends.cuda import attention as attn_mod
from runtime.backends.cuda.batch import pack, views
from runtime.backends.cuda.device import CaptureError
from runtime.backends.cuda.graphs import Arena
from runtime.backends.cuda.linear import Normed
from runtime.gguf import GGUFTensor

L2_BYTES = 50 << 20


def events_ms(dev, fn, reps: int = 7) -> tuple[float, float, float]:
    """(median, min, max) milliseconds of fn() on the stream, after one warm-up call."""
    cp = dev.xp
    fn()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(dev.stream)
        fn()
        b.record(dev.stream)
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(times)), min(times), max(times)


def copy_bandwidth(dev) -> float:
    """Device-to-device copy, bytes read + written per second."""
    cp = dev.xp
    src, dst = cp.ones(1 << 30, np.uint8), cp.empty(1 << 30, np.uint8)
    ms, _, _ = events_ms(dev, lambda: cp.copyto(dst, src), reps=10)
    return 2 * src.nbytes / (ms * 1e-3)


def graph_us(ops, launch, copies: int, per_copy: int = 4) -> float:
    """Microseconds per launch of launch(i) replayed from one graph cycling through copies
    (buffers recorded by an eager pass, as graphs.py does, so the capture allocates nothing)."""
    n, dev = copies * per_copy, ops.dev
    arena = Arena(dev.xp)
    with ops.arena(arena):
        for i in range(n):
            launch(i % copies)
    arena.replay()
    with ops.arena(arena):
        _, graph = dev.capture(lambda: [launch(i % copies) for i in range(n)])
    ms, _, _ = events_ms(dev, graph.replay)
    return ms * 1e3 / n


def cublas_capture_error(ops) -> str | None:
    """None if a cuBLAS GEMM can be captured into a CUDA graph here, else the error."""
    xp = ops.dev.xp
    x, w, y = xp.ones((16, 256), np.float16), xp.ones((256, 256), np.float16), xp.empty((16, 256), np.float32)
    try:
        _, graph = ops.dev.capture(lambda: ops.dev.gemm(x, w, y))
        graph.replay()
        ops.dev.synchronize()
    except CaptureError as e:
        return f"{type(e.__cause__).__name__}: {e}"
    return None if float(y[0, 0]) == 256.0 else "wrong result"


def weight(qtype: Q, rows: int, cols: int, rng) -> GGUFTensor:
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        data = random_kquant(rows, cols, qtype, rng, 0.5)
    else:
        assert qtype == Q.Q8_0
        blocks = rng.integers(-127, 128, (rows * cols // 32, 34), dtype=np.int8).view(np.uint8)
        blocks[:, :2] = np.full((len(blocks), 1), 0.01, np.float16).view(np.uint8)
        data = blocks.reshape(rows, -1)
    return GGUFTensor("w", qtype, (rows, cols), data)


def report(ops) -> list[dict]:
    dev, xp, rng = ops.dev, ops.dev.xp, np.random.default_rng(0)
    bw = copy_bandwidth(dev)
    rows = []

    def add(name, us, nbytes):
        rows.append({"kernel": name, "us": us, "GB/s": nbytes / us / 1e3, "of_copy": nbytes / us / 1e3 / (bw / 1e9)})

    keep = ops.matvec_max_tokens, ops.matmul_max_tokens
    H, F, V = 2048, 6144, 151936
    shapes = [("qkv (norm fused)", Q.Q4_K, 4096, H, None, True), ("o_proj", Q.Q4_K, H, H, None, False),
              ("gate_up+silu (norm fused)", Q.Q4_K, 2 * F, H, "silu_mul", True), ("down", Q.Q6_K, H, F, None, False),
              ("down", Q.Q4_K, H, F, None, False), ("lm_head", Q.Q6_K, V, H, None, True),
              ("gate_up+silu", Q.Q8_0, 2 * F, H, "silu_mul", False)]
    for name, qtype, n, k, act, normed in shapes:
        t = weight(qtype, n, k, rng)
        w0 = ops.linear_weight([t])
        copies = max(1, min(16, -(-2 * L2_BYTES // w0.nbytes)))
        ws = [w0] + [ops.linear_weight([GGUFTensor(f"w{i}", qtype, t.shape, t.data)]) for i in range(1, copies)]
        for T in (1, 2, 4, 8, 16, 64):
            x = xp.asarray(rng.standard_normal((T, k)).astype(np.float32))
            r, nw = xp.asarray(rng.standard_normal((T, k)).astype(np.float32)), xp.ones(k, np.float32)
            inp = Normed(x, r, nw, 1e-6, xp.empty((T, k), np.float32)) if normed else x
            for path, mv, mm in (("matvec", 64, 0), ("matmul", 0, 64), ("dequant+cublas-f16", 0, 0)):
                if path == "matvec" and T > 16 and name == "lm_head":
                    continue                       # ~24 ms a launch: known to lose
                if path != "matvec" and T == 1:
                    continue
                ops.matvec_max_tokens, ops.matmul_max_tokens = mv, mm
                try:
                    us = graph_us(ops, lambda i: ops.linear(inp, ws[i], act=act), copies)
                except CaptureError as e:       # cuBLAS refused the capture: time it eagerly
                    ms, _, _ = events_ms(dev, lambda: ops.linear(inp, ws[0], act=act))
                    us, path = ms * 1e3, f"{path} (eager: {str(e)[:40]})"
                add(f"{path} T={T} {name} {qtype.name} [{n}x{k}]", us, w0.nbytes + 4 * T * (k + n))
        ops.matvec_max_tokens, ops.matmul_max_tokens = keep
        ops._loaded.clear()

    D, Hq, Hkv, bs = 128, 16, 8, 16
    cos, sin = np.ones((8192, D // 2), np.float32), np.zeros((8192, D // 2), np.float32)
    rope = ops.rope_cache(cos, sin)
    p = AttentionParams(Hq, Hkv, D, D ** -0.5, False, 1e-6, xp.ones(D, np.float32), xp.ones(D, np.float32))
    for B, L in ((1, 384), (1, 4096), (64, 384)):
        nblk = -(-L // bs)
        kv = xp.asarray(rng.standard_normal((1, 2, (B * nblk + 1) * bs, Hkv, D)).astype(np.float16))
        tables = np.arange(B * nblk, dtype=np.int32).reshape(B, nblk)
        pos = np.full(B, L - 1, np.int32)
        fb = ForwardBatch(np.zeros(B, np.int32), pos, (tables[:, -1] * bs + (L - 1) % bs).astype(np.int32),
                          np.arange(B + 1, dtype=np.int32), np.full(B, L, np.int32), tables,
                          np.arange(B, dtype=np.int32), bs)
        host, where, nr = pack(fb, 1)
        cfb = views(fb, dev.upload(host), where, nr, True)
        qkv = xp.asarray(rng.standard_normal((B, (Hq + 2 * Hkv) * D)).astype(np.float32))
        chosen = attn_mod.splits(ops, B, Hkv)
        for S in sorted({chosen, 2, 4, 8, 16, 32} if B == 1 else {chosen, 1, 2, 4}):
            for tc in (False, True):            # attention_decode.cu, then attention_decode_tc.cu
                keep = attn_mod.splits, ops.options
                attn_mod.splits = lambda ops, n, h: S
                ops.options = replace(keep[1], attention_tc=tc, decode_tc_max_seqs=B)
                try:
                    name = attn_mod.decode_kernel(ops.options, ops.kv_ctype, D, B)
                    us = graph_us(ops, lambda i: ops.attention(qkv, kv, 0, cfb, rope, p), 1, 16)
                finally:
                    attn_mod.splits, ops.options = keep
                add(f"{name} B={B} L={L} S={S}{' (chosen)' if S == chosen else ''} (Hq 16, Hkv 8, D 128, f16)",
                    us, 2 * B * L * Hkv * D * 2)

    for L in (128, 2048):           # one sequence's prompt: rope_kv + the causal kernel, both kernels
        nblk = -(-L // bs)
        kv = xp.asarray(rng.standard_normal((1, 2, (nblk + 1) * bs, Hkv, D)).astype(np.float16))
        tables = np.arange(nblk, dtype=np.int32).reshape(1, nblk)
        fb = ForwardBatch(np.zeros(L, np.int32), np.arange(L, dtype=np.int32), np.arange(L, dtype=np.int32),
                          np.array([0, L], np.int32), np.array([L], np.int32), tables, np.array([L - 1], np.int32), bs)
        qkv = xp.asarray(rng.standard_normal((L, (Hq + 2 * Hkv) * D)).astype(np.float32))
        flops = 4 * Hq * D * L * (L + 1) / 2
        keep_options, keep_tiles = ops.options, ops.tile_queries
        for tc in (False, True):
            ops.options = replace(keep_options, attention_tc=tc)
            ops.tile_queries = attn_mod.tile_queries(ops.options, ops.kv_ctype, D, Hq // Hkv)
            host, where, nr = pack(fb, ops.tile_queries)
            cfb = views(fb, dev.upload(host), where, nr, False)
            try:
                us = graph_us(ops, lambda i: ops.attention(qkv, kv, 0, cfb, rope, p), 1, 4)
            finally:
                ops.options, ops.tile_queries = keep_options, keep_tiles
            add(f"rope_kv + {attn_mod.prefill_kernel(ops.options, ops.kv_ctype, D) if tc else 'attention_prefill'} T={L} "
                f"({flops / us / 1e6:.0f} TFLOP/s; Hq 16, Hkv 8, D 128, f16)", us, 2 * L * Hkv * D * 2 + 8 * L * Hq * D)

    for R in (1, 64):
        logits = xp.asarray(rng.standard_normal((R, V)).astype(np.float32))
        us = graph_us(ops, lambda i: ops.sampler.stats(logits), 1, 16)
        add(f"sample_stats rows={R} V={V}", us, 4 * R * V)

    err = cublas_capture_error(ops)
    print(f"\ncuBLAS inside a CUDA graph capture: {'works' if err is None else err}")
    print(f"device copy bandwidth {bw / 1e9:.0f} GB/s (read + write)")
    print(f"{'kernel':72s} {'us':>8s} {'GB/s':>7s} {'of copy':>8s}")
    for r in rows:
        print(f"{r['kernel']:72s} {r['us']:8.2f} {r['GB/s']:7.0f} {100 * r['of_copy']:7.0f}%")
    return rows
