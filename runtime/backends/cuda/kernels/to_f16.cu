// to_f16: f32 token rows to f16, the input matmul.cu and the cuBLAS path read.
//
//   out[i] = (half) x[i]      i < n
// A kernel rather than an array assignment so that a captured step replays it like every
// other op (the emulator's graphs record kernel launches only).
// Reference: numpy astype(float16). Compile: nvcc -arch=sm_90 -cubin -I. to_f16.cu.
#include "common.cuh"

extern "C" __global__ void to_f16(const float* x, i64 n, __half* out) {
  pdl_wait();
  pdl_launch();
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<__half2*>(out)[2 * i] = __floats2half2_rn(v.x, v.y);
    reinterpret_cast<__half2*>(out)[2 * i + 1] = __floats2half2_rn(v.z, v.w);
  }
  for (i64 i = n / 4 * 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = __float2half_rn(x[i]);
}
