// sample_stats: what every sampled row needs from its raw logits, without moving them.
//
//   lse[r] = log sum_i exp(x[r, i]);   entropy[r] = -sum_i p_i log p_i = lse - sum_i p_i x_i
//   (computed as log s - w / s with s = sum e_i, w = sum e_i (x_i - max), e_i = exp(x_i - max))
//   id[r]  = argmax_i x[r, i] (lowest index on ties);  logprob[r] = x[r, id] - lse
// out [3, R] f32: ids (int bits), logprobs, entropies. This is the whole of greedy sampling;
// masks, penalties and filtered sampling (sample_select.cu) rewrite ids and logprobs.
// Reference: cpu.py CPUOps.sample. Compile: nvcc -arch=sm_90 -cubin -I. sample_stats.cu.
// Grid: one block of 1024 threads per row (a 151,936-entry row is 0.6 MB, read twice from L2).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(1024) sample_stats(const float* logits, int V, int ld,
                                                                float* out, float* lse_out) {
  __shared__ float redv[32];
  __shared__ int redi[32];
  __shared__ double redd[32];
  const int r = blockIdx.x, R = gridDim.x;
  const float* x = logits + (i64)r * ld;
  float m = NEG_INF;
  int id = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += blockDim.x) argmax_merge(m, id, x[i], i);
  block_argmax(m, id, redv, redi);
  // Sums in f64: the entropy lse - w / s cancels, and f32 sums of 151,936 terms lose ~1e-5.
  double s = 0.0, w = 0.0;
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const float e = expf(x[i] - m);
    s += e;
    w += (double)e * (x[i] - m);
  }
  s = block_sum_d(s, redd);
  w = block_sum_d(w, redd);
  if (threadIdx.x == 0) {
    const double lse = m + log(s);
    out[r] = __int_as_float(id);
    out[R + r] = (float)(m - lse);
    out[2 * R + r] = (float)(log(s) - w / s);
    lse_out[r] = (float)lse;
  }
}
