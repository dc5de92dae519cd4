// sample_select: the token of each row under a mask, temperature, top-k, top-p and min-p,
// choosing exactly what cpu.py's sampler chooses for the same logits and uniform.
//
//   x = allowed ? logits : -inf                     (bit i % 32 of mask word i / 32)
//   temperature 0:  id = argmax x
//   otherwise:      p = softmax(x / T); keep the top m tokens by p, m the largest with
//                   rank < top_k, mass ahead < top_p, p >= min_p * p_max (the first always);
//                   id = first i with cdf(i) > u * cdf(V-1), cdf the running sum of kept p
//                   in vocabulary order (double accumulation rounded to float, as torch's
//                   CPU cumsum does)
//   logprob[r] = raw[r, id] - lse[r]
// The kept set is a threshold on p: a bisection over the bits of a positive float finds the
// smallest threshold whose set satisfies the three rules (31 passes over the row), instead
// of sorting 151,936 entries. Ties at the threshold may differ from torch's sort order.
// Reference: cpu.py _sample_filtered. Compile: nvcc -arch=sm_90 -cubin -I. sample_select.cu.
// Grid: one block of 1024 threads per row; probs is a [R, V] f32 scratch. feed (null or >= R
// ints) gets the chosen ids, as sample_stats.cu's.
#include "common.cuh"

#define SS_THREADS 1024

__device__ __forceinline__ bool allowed(const int* mask, int i) {
  return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1);
}

extern "C" __global__ void __launch_bounds__(SS_THREADS) sample_select(
    const float* logits, const float* raw, int V, int ld, const int* masks, int mask_words,
    const float* temperature, const int* top_k, const float* top_p, const float* min_p,
    const float* uniforms, const float* lse, float* probs, float* out, int* feed) {
  pdl_wait();
  pdl_launch();
  __shared__ float redv[32];
  __shared__ int redi[32];
  __shared__ double redd[32];
  __shared__ double scan[SS_THREADS];
  const int r = blockIdx.x, R = gridDim.x, tid = threadIdx.x;
  const float* x = logits + (i64)r * ld;
  const int* mask = masks != nullptr ? masks + (i64)r * mask_words : nullptr;
  float* p = probs + (i64)r * V;
  const float temp = temperature[r];

  float m = NEG_INF;
  int id = 0x7fffffff;
  for (int i = tid; i < V; i += SS_THREADS)
    if (allowed(mask, i)) argmax_merge(m, id, temp > 0.0f ? x[i] / temp : x[i], i);
  block_argmax(m, id, redv, redi);
  id = min(id, V - 1);      // no finite allowed logit (NaN, a mask allowing nothing): still a token

  if (temp > 0.0f) {
    float s = 0.0f;
    for (int i = tid; i < V; i += SS_THREADS) {
      const float e = allowed(mask, i) ? expf(x[i] / temp - m) : 0.0f;
      p[i] = e;
      s += e;
    }
    s = block_sum(s, redv);
    float pmax = 0.0f;
    for (int i = tid; i < V; i += SS_THREADS) {
      p[i] = p[i] / s;
      pmax = fmaxf(pmax, p[i]);
    }
    pmax = block_max(pmax, redv);
    const int k = top_k[r];
    const float tp = top_p[r], mp = min_p[r];

    // Smallest threshold bits u whose set {p >= u} keeps the rules at its smallest member.
    u32 lo = 0, hi = 0;                 // no rule: every token stays (threshold 0)
    if (k > 0 || tp < 1.0f || mp > 0.0f) {
      hi = __float_as_uint(pmax);
      while (lo < hi) {
        const u32 mid = lo + (hi - lo) / 2;
        const float t = __uint_as_float(mid);
        float cnt = 0.0f, tmin = __int_as_float(0x7f800000);
        double mass = 0.0;
        for (int i = tid; i < V; i += SS_THREADS)
          if (p[i] >= t) { cnt += 1.0f; mass += p[i]; tmin = fminf(tmin, p[i]); }
        cnt = block_sum(cnt, redv);
        mass = block_sum_d(mass, redd);
        tmin = -block_max(-tmin, redv);
        const bool ok = (k <= 0 || cnt - 1.0f < (float)k) && (mass - tmin < (double)tp) && tmin >= mp * pmax;
        if (ok) hi = mid; else lo = mid + 1;
      }
    }
    const float thr = __uint_as_float(hi);

    // Inverse CDF over the kept probabilities in vocabulary order: each thread owns a
    // contiguous stretch, an exclusive scan of the stretch sums gives its starting cdf.
    const int per = (V + SS_THREADS - 1) / SS_THREADS, i0 = min(V, tid * per), i1 = min(V, i0 + per);
    double local = 0.0;
    for (int i = i0; i < i1; i++) local += p[i] >= thr ? (double)p[i] : 0.0;
    scan[tid] = local;
    __syncthreads();
    for (int off = 1; off < SS_THREADS; off <<= 1) {
      const double add = tid >= off ? scan[tid - off] : 0.0;
      __syncthreads();
      scan[tid] += add;
      __syncthreads();
    }
    const float total = (float)scan[SS_THREADS - 1];
    const float target = uniforms[r] * total;
    double c = scan[tid] - local;
    int hit = 0x7fffffff;
    for (int i = i0; i < i1; i++) {
      c += p[i] >= thr ? (double)p[i] : 0.0;
      if ((float)c > target) { hit = i; break; }
    }
    float hv = hit == 0x7fffffff ? NEG_INF : 0.0f;
    block_argmax(hv, hit, redv, redi);   // lowest index among the threads that crossed
    id = min(hit, V - 1);
  }
  if (tid == 0) {
    out[r] = __int_as_float(id);
    out[R + r] = raw[(i64)r * ld + id] - lse[r];
    if (feed != nullptr) feed[r] = id;
  }
}
