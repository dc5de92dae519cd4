// rms_norm: the residual add and RMSNorm of prefill and mixed steps, written out for GEMMs.
//
//   sum[t] = a[t] + b[t]                              (stored when b and sum are given)
//   out[t] = sum[t] * rsqrt(mean(sum[t]^2) + eps) * w  as f32 or f16
// a, b, sum [T, K] f32. Decode steps fuse this into matvec.cu's prologue instead.
// Reference: cpu.py CPUOps.rms_norm. Compile: nvcc -arch=sm_90 -cubin -I. rms_norm.cu.
// Grid: one block of 256 threads per token.
#include "common.cuh"

template <class OUT>
__device__ __forceinline__ void rms_norm(const float* a, const float* b, const float* w, float eps,
                                         int K, float* sum, OUT* out) {
  __shared__ float red[32];
  const i64 off = (i64)blockIdx.x * K;
  float ss = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const float v = b != nullptr ? a[off + k] + b[off + k] : a[off + k];
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss, red) / K + eps);
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const float v = b != nullptr ? a[off + k] + b[off + k] : a[off + k];
    if (sum != nullptr) sum[off + k] = v;
    out[off + k] = from_f32<OUT>(v * scale * w[k]);
  }
}

extern "C" __global__ void rms_norm_f32(const float* a, const float* b, const float* w, float eps,
                                        int K, float* sum, float* out) {
  pdl_wait();
  pdl_launch();
  rms_norm(a, b, w, eps, K, sum, out);
}

extern "C" __global__ void rms_norm_f16(const float* a, const float* b, const float* w, float eps,
                                        int K, float* sum, __half* out) {
  pdl_wait();
  pdl_launch();
  rms_norm(a, b, w, eps, K, sum, out);
}
