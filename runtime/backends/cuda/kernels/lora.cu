// lora: a LoRA adapter's low-rank product added to a linear's output (runtime/lora.py),
// the base weight left in its GGUF blocks.
//
//   lora_down:  u[t, j] = h[t] . A[j]              h = x, or rmsnorm(a + b) * w (a Normed input,
//                                                  normed here from the same two sums as rms_norm.cu)
//   lora_up:    d(t, n) = u[t, p(n) r : p(n) r + r] . B[n],  p(n) = (n >= e0) + (n >= e1)
//               act 0:  out[t, n] = y[t, n] + d(t, n)                                   (out may be y)
//               act 1:  out[t, j] = silu(g) * v,  g = y[t, j] + d(t, j),  v = y[t, F + j] + d(t, F + j)
// A [R, K] f32 (R = parts * r), B [N, r] f32 (the scale folded in), u [T, R], y [T, N], F = N / 2.
// Two small launches a linear, graph-capturable (no host sync, shapes fixed by the bucket).
// Grids: lora_down (R, ceil(T / DOWN_TOKENS)) blocks of 128 threads; lora_up grid-stride, 256.
// Reference: cpu.py CPUOps.linear (lora). Compile: nvcc -arch=sm_90 -cubin -I. lora.cu.
#include "common.cuh"

#define DOWN_TOKENS 8

extern "C" __global__ void lora_down(const float* x, const float* a, const float* b, const float* w, float eps,
                                     const float* A, int K, int T, float* u, int R) {
  __shared__ float red[32];
  pdl_wait();
  pdl_launch();
  const int j = blockIdx.x, t0 = blockIdx.y * DOWN_TOKENS;
  const float* Aj = A + (i64)j * K;
  float dot[DOWN_TOKENS], ss[DOWN_TOKENS];
#pragma unroll
  for (int i = 0; i < DOWN_TOKENS; i++) dot[i] = ss[i] = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    const float aw = w != nullptr ? Aj[k] * w[k] : Aj[k];
#pragma unroll
    for (int i = 0; i < DOWN_TOKENS; i++) {
      if (t0 + i < T) {
        const i64 o = (i64)(t0 + i) * K + k;
        const float v = x != nullptr ? x[o] : b != nullptr ? a[o] + b[o] : a[o];
        dot[i] += v * aw;
        ss[i] += v * v;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < DOWN_TOKENS; i++) {
    if (t0 + i < T) {             // the same for every thread of the block: the barriers agree
      const float d = block_sum(dot[i], red);
      const float s = block_sum(ss[i], red);
      if (threadIdx.x == 0) u[(i64)(t0 + i) * R + j] = x != nullptr ? d : d * rsqrtf(s / K + eps);
    }
  }
}

__device__ __forceinline__ float lora_delta(const float* ut, const float* B, int r, int n, int e0, int e1) {
  const float* un = ut + ((n >= e0) + (n >= e1)) * r;
  const float* bn = B + (i64)n * r;
  float s = 0.0f;
  for (int i = 0; i < r; i++) s += un[i] * bn[i];
  return s;
}

extern "C" __global__ void lora_up(const float* u, int R, const float* B, int r, int N, int e0, int e1,
                                   const float* y, int T, int act, float* out) {
  pdl_wait();
  pdl_launch();
  const int F = act ? N / 2 : N;
  const i64 n = (i64)T * F;
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 t = e / F;
    const int j = (int)(e % F);
    const float* ut = u + t * R;
    float g = y[t * N + j] + lora_delta(ut, B, r, j, e0, e1);
    if (act) {
      const float v = y[t * N + F + j] + lora_delta(ut, B, r, F + j, e0, e1);
      g = g / (1.0f + expf(-g)) * v;
    }
    out[e] = g;
  }
}
