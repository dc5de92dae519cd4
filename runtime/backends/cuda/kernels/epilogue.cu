// epilogue: what follows a cuBLAS GEMM of prefill and large steps, as a kernel (not array
// arithmetic) so that a captured step replays it (the emulator's graphs record kernels only).
//
//   act 0:  out[t, j] = y[t, j] + bias[j]                                          j < N
//   act 1:  out[t, j] = silu(g) * u,  g = y[t, j] + bias[j],  u = y[t, F + j] + bias[F + j]
//           silu(g) = g / (1 + exp(-g)), F = N / 2                                 j < F
// y [T, N] f32; bias [N] or null; out [T, N] (may be y) or [T, F]. Decode steps fuse both into
// matvec.cu / matmul.cu. Reference: cpu.py CPUOps.linear. Compile: nvcc -arch=sm_90 -cubin
// -I. epilogue.cu.
#include "common.cuh"

extern "C" __global__ void epilogue(const float* y, int T, int N, const float* bias, int act, float* out) {
  pdl_wait();
  pdl_launch();
  const int F = act ? N / 2 : N;
  const i64 n = (i64)T * F;
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 t = e / F, j = e % F;
    float g = y[t * N + j];
    if (bias != nullptr) g += bias[j];
    if (act) {
      float u = y[t * N + F + j];
      if (bias != nullptr) u += bias[F + j];
      g = g / (1.0f + expf(-g)) * u;
    }
    out[e] = g;
  }
}
