// Per-head RMSNorm (Qwen3's q/k norm) and rotary embedding of one head vector, by one warp.
//
//   h = x * rsqrt(mean(x^2) + eps) * norm_w          (skipped when norm_w is null)
//   NeoX:        out[i] = h[i] cos_i - h[i + D/2] sin_i,  out[i + D/2] = h[i + D/2] cos_i + h[i] sin_i
//   interleaved: out[2i] = h[2i] cos_i - h[2i+1] sin_i,   out[2i+1] = h[2i+1] cos_i + h[2i] sin_i
// Reference: cpu.py CPUOps.attention (rms_norm, _rotate). cos/sin rows are [D/2] floats for
// the token's position. The whole warp must call it (it shuffles); store(e, value) gets
// every element once.
#pragma once
#include "common.cuh"

template <int D, class Store>
__device__ __forceinline__ void norm_rope_head(const float* src, float* tmp, const float* norm_w,
                                               float eps, const float* cosr, const float* sinr,
                                               bool interleaved, Store store) {
  const int lane = threadIdx.x & 31;
  float ss = 0.0f;
  for (int e = lane; e < D; e += 32) {
    const float v = src[e];
    tmp[e] = v;
    ss += v * v;
  }
  if (norm_w != nullptr) {
    const float scale = rsqrtf(warp_sum(ss) / D + eps);
    for (int e = lane; e < D; e += 32) tmp[e] = tmp[e] * scale * norm_w[e];
  }
  __syncwarp();
  for (int e = lane; e < D; e += 32) {
    float out;
    if (interleaved) {
      const int i = e >> 1;
      out = (e & 1) ? tmp[e] * cosr[i] + tmp[e - 1] * sinr[i] : tmp[e] * cosr[i] - tmp[e + 1] * sinr[i];
    } else {
      const int half = D / 2, i = e < half ? e : e - half;
      out = e < half ? tmp[e] * cosr[i] - tmp[e + half] * sinr[i] : tmp[e] * cosr[i] + tmp[e - half] * sinr[i];
    }
    store(e, out);
  }
  __syncwarp();
}

// The q/k norm weights (either may be null) and a position's cos/sin rows into L1, by one warp:
// a decode kernel reads them after pdl_wait().
template <int D>
__device__ __forceinline__ void prefetch_norm_rope(const float* q_norm, const float* k_norm, const float* cosr,
                                                   const float* sinr) {
  const int lane = threadIdx.x & 31;
  if (q_norm != nullptr) prefetch_lines<true>(q_norm, D * 4, lane, 32);
  if (k_norm != nullptr) prefetch_lines<true>(k_norm, D * 4, lane, 32);
  prefetch_lines<true>(cosr, D * 2, lane, 32);
  prefetch_lines<true>(sinr, D * 2, lane, 32);
}

// Eight consecutive cache elements as floats (one 16-byte load for 2-byte types).
__device__ __forceinline__ void load8(const __half* p, float* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    out[2 * i] = f16_to_f32((u16)(w[i] & 0xFFFF));
    out[2 * i + 1] = f16_to_f32((u16)(w[i] >> 16));
  }
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ void load8(const float* p, float* out) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
  out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
}

// Four consecutive cache elements as floats (one 8-byte load for 2-byte types).
__device__ __forceinline__ void load4(const __half* p, float* out) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  out[0] = f16_to_f32((u16)(v.x & 0xFFFF)); out[1] = f16_to_f32((u16)(v.x >> 16));
  out[2] = f16_to_f32((u16)(v.y & 0xFFFF)); out[3] = f16_to_f32((u16)(v.y >> 16));
}
__device__ __forceinline__ void load4(const __nv_bfloat16* p, float* out) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  out[0] = __uint_as_float(v.x << 16); out[1] = __uint_as_float(v.x & 0xFFFF0000u);
  out[2] = __uint_as_float(v.y << 16); out[3] = __uint_as_float(v.y & 0xFFFF0000u);
}
__device__ __forceinline__ void load4(const float* p, float* out) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
}
template <int N, class T> __device__ __forceinline__ void load_dims(const T* p, float* out) {
  static_assert(N % 4 == 0, "4 or 8 elements a load");
#pragma unroll
  for (int i = 0; i < N; i += 8 > N ? 4 : 8) {
    if (N - i >= 8) load8(p + i, out + i);
    else load4(p + i, out + i);
  }
}

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef KV_T
#define KV_T __half
#endif
