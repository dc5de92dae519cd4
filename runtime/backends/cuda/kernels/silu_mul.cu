// silu_mul: the SwiGLU product after a gate+up GEMM of prefill and mixed steps.
//
//   out[t, j] = silu(y[t, j]) * y[t, F + j],  silu(g) = g / (1 + exp(-g))     j < F
// y [T, 2F] f32, out [T, F] f32. Decode steps fuse this into matvec.cu (mode 1).
// Reference: cpu.py CPUOps.linear(act="silu_mul"). Compile: nvcc -arch=sm_90 -cubin -I. silu_mul.cu.
#include "common.cuh"

extern "C" __global__ void silu_mul(const float* y, int T, int F, float* out) {
  pdl_wait();
  pdl_launch();
  const i64 n = (i64)T * F;
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
    const i64 t = e / F, j = e % F;
    const float g = y[t * 2 * F + j];
    out[e] = g / (1.0f + expf(-g)) * y[t * 2 * F + F + j];
  }
}
