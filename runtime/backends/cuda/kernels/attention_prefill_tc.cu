// attention_prefill_tc: attention_prefill.cu on the tensor cores, for an f16 KV cache and
// head sizes of 32 to 128 (attention.py picks it). The same inputs, tiles and result:
//
//   out[t, h] = softmax_p(q[t, h] . K[p] * scale) V     over p <= pos(t), same sequence
// q [T, Hq, D] f32 (normed and rotated, rope_kv.cu), out [T, Hq * D] f32, caches [slots, Hkv, D]
// f16. Grid (tiles, Hkv): tile = {sequence, first query row, queries, first query position}
// (batch.py, up to 64 / G queries); its 64 rows are (query, head of the KV group) pairs, 16 a
// warp. FlashAttention-2 (Dao 2023, algorithm 1) with mma.sync m16n8k16 (mma.cuh): the warp's
// Q rows stay in registers as f16 A fragments (pre-scaled by scale * log2 e, so the softmax
// is exp2), keys stream through shared memory KT at a time, double-buffered with cp.async;
// S = Q K^T and O += P V (flash.cuh) accumulate in f32, P rounded to f16 for its product (the online
// softmax's max, sum and rescaling in f32).
// Why: the f32 kernel reads a shared-memory operand for every FMA and ran at ~15 TFLOP/s;
// on the H100 it was 86% of a 2048-token prefill of a 0.6B model (46.8 of 54.3 ms).
// Reference: cpu.py CPUOps.attention (dev/cuda/check.py check_attention, f16 cache). Compile: nvcc
// -arch=sm_90 -cubin -I. -DHEAD_DIM=128 -DKV_T=__half attention_prefill_tc.cu.
#include "flash.cuh"

#define AT_THREADS 128
#define AT_ROWS 64             // (query, head) rows a tile: 16 a warp (batch.py's tiles)
constexpr int KT = 32;         // keys a step
constexpr int NK = HEAD_DIM / 16;   // k-steps of Q K^T
constexpr int ND = HEAD_DIM / 8;    // n-tiles (8 dims) of O
constexpr int LDH = HEAD_DIM + 8;   // shared row stride in halves: ldmatrix rows hit distinct banks
static_assert(HEAD_DIM % 32 == 0 && HEAD_DIM <= 128, "attention_prefill_tc: head sizes 32, 64, 96, 128");

extern "C" __global__ void __launch_bounds__(AT_THREADS) attention_prefill_tc(
    const float* q, int Hq, int Hkv, const int* tiles, const int* tables, const int* table_stride,
    int block_size, float scale, const __half* k_cache, const __half* v_cache, float* out) {
  pdl_wait();
  pdl_launch();
  constexpr int D = HEAD_DIM, CPR = D / 8;   // 16-byte chunks a cache row
  __shared__ __align__(16) __half ks[2][KT][LDH];
  __shared__ __align__(16) __half vs[2][KT][LDH];
  const int g = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qr = lane >> 2, qc = 2 * (lane & 3);   // fragment row (and row + 8), column pair
  const int G = Hq / Hkv;
  // The longest tiles (a sequence's last) first: they are made in query order.
  const int* tile = tiles + 4 * (gridDim.x - 1 - blockIdx.x);
  const int seq = tile[0], t0 = tile[1], nq = tile[2], pos0 = tile[3];
  const int kend = pos0 + nq;
  const int* table = tables + (i64)seq * table_stride[0];

  // This lane's two rows: warp * 16 + qr and + 8. A row past the tile's queries computes
  // with the first query's position (finite, every key masked but <= pos0) and stores nothing.
  int qpos[2];
  bool valid[2];
  i64 qrow[2];
  u32 qa[NK][4];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = warp * 16 + qr + 8 * h, qi = r / G, j = r % G;
    valid[h] = qi < nq && r < (AT_ROWS / G) * G;
    qpos[h] = pos0 + (valid[h] ? qi : 0);
    qrow[h] = ((i64)(t0 + (valid[h] ? qi : 0)) * Hq + g * G + j) * D;
  }
  const float qscale = scale * 1.4426950408889634f;
#pragma unroll
  for (int kk = 0; kk < NK; kk++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float2 lo = *reinterpret_cast<const float2*>(q + qrow[h] + 16 * kk + qc);
      const float2 hi = *reinterpret_cast<const float2*>(q + qrow[h] + 16 * kk + qc + 8);
      qa[kk][h] = pack_half2(lo.x * qscale, lo.y * qscale);
      qa[kk][h + 2] = pack_half2(hi.x * qscale, hi.y * qscale);
    }

  // Keys [k0, k0 + KT) into buffer `bf`: cp.async from their cache slots, zeros past kend
  // (a zero V row times a zero weight: no NaN from stale memory).
  auto load = [&](int k0, int bf) {
    for (int e = tid; e < KT * CPR; e += AT_THREADS) {
      const int kk = e / CPR, c = (e % CPR) * 8, p = k0 + kk;
      if (p < kend) {
        const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
        const i64 off = (slot * Hkv + g) * D + c;
        cp_async16(&ks[bf][kk][c], k_cache + off);
        cp_async16(&vs[bf][kk][c], v_cache + off);
      } else {
        *reinterpret_cast<uint4*>(&ks[bf][kk][c]) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(&vs[bf][kk][c]) = make_uint4(0, 0, 0, 0);
      }
    }
    cp_async_commit();
  };

  float o[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};   // l: this lane's columns only
  const int steps = (kend + KT - 1) / KT;
  load(0, 0);
  for (int it = 0; it < steps; it++) {
    const int bf = it & 1, k0 = it * KT;
    if (it + 1 < steps) load(k0 + KT, bf ^ 1);
    else cp_async_commit();                  // an empty group keeps the wait count uniform
    cp_async_wait<1>();
    __syncthreads();

    // S = Q K^T for 16 rows x KT keys: n-tile n holds keys k0 + 8n + qc, + 1 of rows qr, qr + 8.
    float s[KT / 8][4];
    flash_scores<KT / 8, NK>(s, qa, &ks[bf][0][0], LDH);
#pragma unroll
    for (int n = 0; n < KT / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (k0 + 8 * n + qc + (e & 1) > qpos[e >> 1]) s[n][e] = NEG_INF;   // causal (and past kend)
    u32 pa[KT / 16][4];
    flash_softmax<KT / 8, ND>(s, m, l, o, pa);
    flash_pv<KT / 16, ND>(o, pa, &vs[bf][0][0], LDH);
    __syncthreads();                   // the buffer is refilled two steps on
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    l[h] += __shfl_xor_sync(FULL_MASK, l[h], 1);
    l[h] += __shfl_xor_sync(FULL_MASK, l[h], 2);
    if (!valid[h]) continue;
    const float inv = 1.0f / l[h];
#pragma unroll
    for (int n = 0; n < ND; n++)
      *reinterpret_cast<float2*>(out + qrow[h] + 8 * n + qc) = make_float2(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
  }
}
