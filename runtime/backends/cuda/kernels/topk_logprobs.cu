// topk_logprobs: the k most likely tokens of each row and their raw log-probabilities.
//
//   ids[r, j], lp[r, j] = j-th largest x[r, :] (ties: lower index first), x - lse[r]
// k <= 20 selection passes over the row (asked for only when a request wants logprobs).
// Reference: cpu.py CPUOps.sample (raw.topk). Compile: nvcc -arch=sm_90 -cubin -I. topk_logprobs.cu.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(1024) topk_logprobs(const float* logits, int V, int ld,
                                                                 const float* lse, int k, int* ids,
                                                                 float* lps) {
  pdl_wait();
  pdl_launch();
  __shared__ float redv[32];
  __shared__ int redi[32];
  const int r = blockIdx.x;
  const float* x = logits + (i64)r * ld;
  float pv = __int_as_float(0x7f800000);
  int pi = -1;
  for (int j = 0; j < k; j++) {
    float m = NEG_INF;
    int id = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
      const float v = x[i];
      if (v < pv || (v == pv && i > pi)) argmax_merge(m, id, v, i);
    }
    block_argmax(m, id, redv, redi);
    if (threadIdx.x == 0) {
      ids[r * k + j] = id;
      lps[r * k + j] = m - lse[r];
    }
    pv = m;
    pi = id;
  }
}
