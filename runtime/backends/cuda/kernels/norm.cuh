// The residual add + RMSNorm prologue of the norm-fused matvec kernels (matvec.cu,
// matvec_tc.cu): each block norms the token rows it multiplies into shared memory.
// Reference: dev/cuda/check.py ref_rms_norm (cpu.py CPUOps.rms_norm).
#pragma once
#include "common.cuh"

// xs[0..K) = rmsnorm(a + b) * w for one token, and sum_out = a + b where given. Loads are
// float4, four per thread issued before any is used, so the prologue costs one or two memory
// round trips instead of one per column a thread owns. Ends with a barrier (xs ready).
__device__ __forceinline__ void norm_prologue(const float* a, const float* b, const float* w, float eps, int K,
                                              float* sum_out, float* xs, float* red) {
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* x4 = reinterpret_cast<float4*>(xs);
  const int n4 = K / 4, step = 4 * blockDim.x;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float ss = 0.0f;
  for (int k0 = threadIdx.x; k0 < n4; k0 += step) {
    float4 va[4], vb[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      va[u] = k < n4 ? a4[k] : zero;
      vb[u] = b != nullptr && k < n4 ? b4[k] : zero;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      const float4 v = make_float4(va[u].x + vb[u].x, va[u].y + vb[u].y, va[u].z + vb[u].z, va[u].w + vb[u].w);
      if (k < n4) x4[k] = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  }
  const float scale = rsqrtf(block_sum(ss, red) / K + eps);
  for (int k0 = threadIdx.x; k0 < n4; k0 += step) {
    float4 vw[4];
#pragma unroll
    for (int u = 0; u < 4; u++) vw[u] = k0 + u * blockDim.x < n4 ? w4[k0 + u * blockDim.x] : zero;
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      if (k >= n4) break;
      const float4 v = x4[k];
      if (sum_out != nullptr) reinterpret_cast<float4*>(sum_out)[k] = v;
      x4[k] = make_float4(v.x * scale * vw[u].x, v.y * scale * vw[u].y, v.z * scale * vw[u].z, v.w * scale * vw[u].w);
    }
  }
  __syncthreads();
}
