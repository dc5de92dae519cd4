// penalize: repetition, frequency and presence penalties on a copy of the logits.
//
//   mode 0: x[r, id] = x > 0 ? x / rep[r] : x * rep[r]        (each (r, id) seen once)
//   mode 1: x[r, id] -= freq[r] * count + pres[r]             (each generated (r, id) once)
// Pairs are unique within a launch, so there are no write conflicts. Reference: cpu.py
// _apply_penalties. Compile: nvcc -arch=sm_90 -cubin -I. penalize.cu.
#include "common.cuh"

extern "C" __global__ void penalize(float* logits, int ld, const int* rows, const int* ids,
                                    const float* counts, int n, const float* rep,
                                    const float* freq, const float* pres, int mode) {
  pdl_wait();
  pdl_launch();
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int r = rows[e];
  float* x = logits + (i64)r * ld + ids[e];
  if (mode == 0) *x = *x > 0.0f ? *x / rep[r] : *x * rep[r];
  else *x -= freq[r] * counts[e] + pres[r];
}
