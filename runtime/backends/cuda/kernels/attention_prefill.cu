// attention_prefill: causal attention for the query tokens of prefill (and mixed) steps over
// the paged KV cache, which already holds this step's keys (rope_kv.cu ran first), so a
// prompt that continues after cached prefix blocks needs nothing special.
//
//   out[t, h] = softmax_p(q[t, h] . K[p] * scale) V     over p <= pos(t), same sequence
// q [T, Hq, D] f32 (normed and rotated), out [T, Hq * D] f32, caches [slots, Hkv, D] KV_T.
// Grid (tiles, Hkv): tile = {sequence, first query row, queries, first query position}
// (host-made, up to 32 / G queries); its 32 rows are (query, head of the KV group) pairs,
// 4 threads a row each owning D / 4 dims. Keys stream through shared memory KT at a time
// with an online softmax (FlashAttention-2, Dao 2023, algorithm 1, on CUDA cores in f32).
// Reference: cpu.py CPUOps.attention. Compile: nvcc -arch=sm_90 -cubin -I. -DHEAD_DIM=128
// -DKV_T=__half attention_prefill.cu.
#include "rope.cuh"

#define AP_THREADS 128
#define AP_ROWS 32

extern "C" __global__ void __launch_bounds__(AP_THREADS) attention_prefill(
    const float* q, int Hq, int Hkv, const int* tiles, const int* tables, const int* table_stride,
    int block_size, float scale, const KV_T* k_cache, const KV_T* v_cache, float* out) {
  pdl_wait();
  pdl_launch();
  constexpr int D = HEAD_DIM, DT = D / 4, KT = D > 128 ? 16 : 32;
  __shared__ __align__(16) float ks[KT][D];
  __shared__ __align__(16) float vs[KT][D];
  const int g = blockIdx.y, tid = threadIdx.x, sub = tid & 3, r = tid >> 2;
  const int G = Hq / Hkv;
  const int* tile = tiles + 4 * blockIdx.x;
  const int seq = tile[0], t0 = tile[1], nq = tile[2], pos0 = tile[3];
  const int qi = r / G, j = r % G;
  const bool valid = qi < nq && r < (AP_ROWS / G) * G;
  const int qpos = pos0 + (valid ? qi : 0), kend = pos0 + nq;
  const int* table = tables + (i64)seq * table_stride[0];
  const i64 qrow = ((i64)(t0 + (valid ? qi : 0)) * Hq + g * G + j) * D;

  float qv[DT], acc[DT];
#pragma unroll
  for (int i = 0; i < DT; i++) {
    qv[i] = valid ? q[qrow + sub + 4 * i] * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float m = NEG_INF, l = 0.0f;
  for (int k0 = 0; k0 < kend; k0 += KT) {
    for (int e = tid; e < KT * D / 8; e += AP_THREADS) {
      const int kk = e / (D / 8), d = (e % (D / 8)) * 8, p = k0 + kk;
      float kv8[8] = {0, 0, 0, 0, 0, 0, 0, 0}, vv8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (p < kend) {
        const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
        load8(k_cache + (slot * Hkv + g) * D + d, kv8);
        load8(v_cache + (slot * Hkv + g) * D + d, vv8);
      }
#pragma unroll
      for (int i = 0; i < 8; i++) { ks[kk][d + i] = kv8[i]; vs[kk][d + i] = vv8[i]; }
    }
    __syncthreads();
    float sc[KT], mx = NEG_INF;
#pragma unroll
    for (int k = 0; k < KT; k++) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < DT; i++) dot += qv[i] * ks[k][sub + 4 * i];
      dot += __shfl_xor_sync(FULL_MASK, dot, 1);
      dot += __shfl_xor_sync(FULL_MASK, dot, 2);
      sc[k] = (valid && k0 + k <= qpos) ? dot : NEG_INF;
      mx = fmaxf(mx, sc[k]);
    }
    const float m_new = fmaxf(m, mx);
    if (m_new != NEG_INF) {
      const float c = expf(m - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < KT; k++) { sc[k] = expf(sc[k] - m_new); sum += sc[k]; }
      l = l * c + sum;
#pragma unroll
      for (int i = 0; i < DT; i++) {
        float a = acc[i] * c;
#pragma unroll
        for (int k = 0; k < KT; k++) a += sc[k] * vs[k][sub + 4 * i];
        acc[i] = a;
      }
      m = m_new;
    }
    __syncthreads();
  }
  if (valid) {
#pragma unroll
    for (int i = 0; i < DT; i++) out[qrow + sub + 4 * i] = acc[i] / l;
  }
}
