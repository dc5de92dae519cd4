// gather_rows: the rows of a step's activations whose next token is sampled (prefill steps
// want the last row of each sequence), as a kernel so a captured prefill step replays it.
//
//   out[i, k] = x[rows[i], k]        i < gridDim.x, k < K
// x [T, K] f32, rows [R] int32, out [R, K] f32. Reference: numpy take(x, rows, axis=0).
// Compile: nvcc -arch=sm_90 -cubin -I. gather_rows.cu.
#include "common.cuh"

extern "C" __global__ void gather_rows(const float* x, int K, const int* rows, float* out) {
  pdl_wait();
  pdl_launch();
  const float* src = x + (i64)rows[blockIdx.x] * K;
  float* dst = out + (i64)blockIdx.x * K;
  for (int k = threadIdx.x; k < K; k += blockDim.x) dst[k] = src[k];
}
