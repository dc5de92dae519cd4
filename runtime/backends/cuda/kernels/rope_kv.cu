// rope_kv: q/k norm + RoPE for every token of a step, and the write of K/V into the cache.
//
//   q_out[t, h]             = rope(norm(qkv[t, q_h]), pos[t])           h < Hq
//   k_cache[slot[t], h]     = rope(norm(qkv[t, k_h]), pos[t])           h < Hkv
//   v_cache[slot[t], h]     = qkv[t, v_h]
// qkv [T, (Hq + 2 Hkv) D] f32 (bias already added); caches [slots, Hkv, D] of KV_T.
// Used by prefill and mixed steps; the decode kernel (attention_decode.cu) does the same
// for its one token itself. Reference: cpu.py CPUOps.attention. Compile: nvcc -arch=sm_90
// -cubin -I. -DHEAD_DIM=128 -DKV_T=__half rope_kv.cu. Grid: one block per token, a warp a head.
#include "rope.cuh"

extern "C" __global__ void __launch_bounds__(128) rope_kv(
    const float* qkv, int Hq, int Hkv, const int* pos, const int* slots, const float* cos_t,
    const float* sin_t, const float* q_norm, const float* k_norm, float eps, int interleaved,
    float* q_out, KV_T* k_cache, KV_T* v_cache) {
  pdl_wait();
  pdl_launch();
  constexpr int D = HEAD_DIM;
  __shared__ float tmp[4][D];
  const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* row = qkv + (i64)t * (Hq + 2 * Hkv) * D;
  const float* cr = cos_t + (i64)pos[t] * (D / 2);
  const float* sr = sin_t + (i64)pos[t] * (D / 2);
  const i64 slot = slots[t];
  for (int h = warp; h < Hq + 2 * Hkv; h += 4) {
    if (h < Hq) {
      float* dst = q_out + ((i64)t * Hq + h) * D;
      norm_rope_head<D>(row + h * D, tmp[warp], q_norm, eps, cr, sr, interleaved,
                        [&](int e, float v) { dst[e] = v; });
    } else if (h < Hq + Hkv) {
      KV_T* dst = k_cache + (slot * Hkv + (h - Hq)) * D;
      norm_rope_head<D>(row + h * D, tmp[warp], k_norm, eps, cr, sr, interleaved,
                        [&](int e, float v) { dst[e] = from_f32<KV_T>(v); });
    } else {
      KV_T* dst = v_cache + (slot * Hkv + (h - Hq - Hkv)) * D;
      for (int e = lane; e < D; e += 32) dst[e] = from_f32<KV_T>(row[h * D + e]);
    }
  }
}
