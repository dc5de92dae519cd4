// sample_stats: what every sampled row needs from its raw logits, without moving them.
//
//   lse[r] = log sum_i exp(x[r, i]);   entropy[r] = -sum_i p_i log p_i = lse - sum_i p_i x_i
//   (computed as log s - w / s with s = sum e_i, w = sum e_i (x_i - max), e_i = exp(x_i - max))
//   id[r]  = argmax_i x[r, i] (lowest index on ties);  logprob[r] = x[r, id] - lse
// out [3, R] f32: ids (int bits), logprobs, entropies. This is the whole of greedy sampling;
// masks, penalties and filtered sampling (sample_select.cu) rewrite ids and logprobs. feed
// (null or >= R ints) gets the ids too: the next step's embedding reads them (dequant.cu).
// Reference: cpu.py CPUOps.sample. Compile: nvcc -arch=sm_90 -cubin -I. sample_stats.cu.
// Grid (NB, R): block b of row r takes SS_CHUNK columns, each thread SS_PER values held in
// registers (one read of the row), and leaves (max, argmax, s, w) relative to its own max;
// the row's last block (atomic counter, reset for graph replay) rescales them to the row's
// max: s = sum_b s_b e^(m_b - M), w = sum_b e^(m_b - M) (w_b + (m_b - M) s_b). A 151,936-entry
// row is 38 blocks, not one 1,024-thread block walking 0.6 MB (66 us at batch 1).
#include "common.cuh"

#define SS_THREADS 256
#define SS_PER 16
#define SS_CHUNK (SS_THREADS * SS_PER)

extern "C" __global__ void __launch_bounds__(SS_THREADS) sample_stats(
    const float* logits, int V, int ld, float* out, float* lse_out, float* part_m, int* part_id,
    double* part_sw, int* counters, int* feed) {
  pdl_wait();
  pdl_launch();
  __shared__ float redv[32];
  __shared__ int redi[32];
  __shared__ double redd[32];
  __shared__ int is_last;
  const int b = blockIdx.x, NB = gridDim.x, r = blockIdx.y, R = gridDim.y, tid = threadIdx.x;
  const float* x = logits + (i64)r * ld;
  const int i0 = b * SS_CHUNK + tid;
  float v[SS_PER];
#pragma unroll
  for (int k = 0; k < SS_PER; k++) v[k] = i0 + k * SS_THREADS < V ? x[i0 + k * SS_THREADS] : NEG_INF;
  float m = NEG_INF;
  int id = 0x7fffffff;
#pragma unroll
  for (int k = 0; k < SS_PER; k++)
    if (i0 + k * SS_THREADS < V) argmax_merge(m, id, v[k], i0 + k * SS_THREADS);
  block_argmax(m, id, redv, redi);
  // Sums in f64: the entropy lse - w / s cancels, and f32 sums of 151,936 terms lose ~1e-5.
  double s = 0.0, w = 0.0;
#pragma unroll
  for (int k = 0; k < SS_PER; k++) {
    if (i0 + k * SS_THREADS >= V || m == NEG_INF) break;      // an all -inf block adds nothing
    const float e = expf(v[k] - m);
    s += e;
    w += (double)e * (v[k] - m);
  }
  s = block_sum_d(s, redd);
  w = block_sum_d(w, redd);
  const int p = r * NB + b;
  if (tid == 0) {
    part_m[p] = m;
    part_id[p] = id;
    part_sw[2 * p] = s;
    part_sw[2 * p + 1] = w;
    __threadfence();
    is_last = atomicAdd(&counters[r], 1) == NB - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  float mb = NEG_INF;
  int ib = 0x7fffffff;
  for (int k = tid; k < NB; k += SS_THREADS)
    argmax_merge(mb, ib, ldcg(part_m + r * NB + k), ldcg(part_id + r * NB + k));
  block_argmax(mb, ib, redv, redi);              // mb: the row's max, ib: its argmax
  ib = min(ib, V - 1);      // a row without a finite logit (NaN) still names a token: the next embed reads it
  double S = 0.0, W = 0.0;
  for (int k = tid; k < NB; k += SS_THREADS) {
    const float mk = ldcg(part_m + r * NB + k);
    if (mk == NEG_INF) continue;
    const double d = (double)mk - mb, f = exp(d);
    const double sb = ldcg(part_sw + 2 * (r * NB + k)), wb = ldcg(part_sw + 2 * (r * NB + k) + 1);
    S += sb * f;
    W += f * (wb + d * sb);
  }
  S = block_sum_d(S, redd);
  W = block_sum_d(W, redd);
  if (tid == 0) {
    const double lse = mb + log(S);
    out[r] = __int_as_float(ib);
    out[R + r] = (float)(mb - lse);
    out[2 * R + r] = (float)(log(S) - W / S);
    lse_out[r] = (float)lse;
    if (feed != nullptr) feed[r] = ib;
    counters[r] = 0;
  }
}
