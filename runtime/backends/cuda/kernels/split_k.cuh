// Flash-decoding's split-K over positions, shared by the decode attention kernels
// (attention_decode.cu, attention_decode_tc.cu; grid (S, Hkv, B), one block a split):
// which positions split s of a sequence takes, and the combine of the splits' partials by
// the last block of (b, g) to finish.
#pragma once
#include "common.cuh"

#ifndef MIN_SPLIT_POSITIONS
#define MIN_SPLIT_POSITIONS 48  // attention.py's: 0 runs every split of the grid
#endif

// A sequence of L positions uses Se <= S splits, each of at least MIN_SPLIT_POSITIONS positions
// (the graph of a decode step is captured once for every context length: short contexts
// leave the rest of the grid idle rather than pay more partials to combine). Split s covers
// ceil(blocks / Se) whole KV blocks, [start, end) (empty for a split past the last block).
struct DecodeSplit { int Se, start, end; };

__device__ __forceinline__ DecodeSplit decode_split(int L, int block_size, int s, int S) {
  const int nblk = (L + block_size - 1) / block_size;
  const int min_blocks = (MIN_SPLIT_POSITIONS + block_size - 1) / block_size;
  const int Se = min_blocks > 0 ? min(S, max(1, nblk / min_blocks)) : S;
  const int per = (nblk + Se - 1) / Se;
  return {Se, min(L, s * per * block_size), min(L, (s + 1) * per * block_size)};
}

// Called by the whole block of split s < Se (Se > 1) once its G rows' unnormalised outputs are
// in part_acc [B * Hq, S, D] (rows head0..): stores the rows' (max, sum) (m_run, l_run: shared,
// natural-log or, LOG2, log2 units) to part_ml [B * Hq, S, 2], and the last split of (b, g)
// to arrive combines every split into out [B * Hq, D]. counters[ci]: (b, g)'s arrivals, zero
// between launches (the last block resets it, so the kernel replays inside a CUDA graph).
// Scratch: w_split [G][32] (16-byte aligned), inv_l [G], is_last, all shared.
template <int D, int THREADS, bool LOG2>
__device__ __forceinline__ void combine_splits(int G, int s, int S, int Se, i64 head0, const float* m_run,
                                               const float* l_run, float* part_acc, float* part_ml,
                                               int* counters, int ci, float* out, float (*w_split)[32],
                                               float* inv_l, int* is_last) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid < G) {
    part_ml[((head0 + tid) * S + s) * 2] = m_run[tid];
    part_ml[((head0 + tid) * S + s) * 2 + 1] = l_run[tid];
  }
  // The barrier orders the block's partials before thread 0's release; its acquire (and the
  // barrier after it) orders the last block's reads of every split's partials after them.
  __syncthreads();
  if (tid == 0) *is_last = atomic_add_acq_rel(&counters[ci], 1) == Se - 1;
  __syncthreads();
  if (!*is_last) return;
  // Each head's split weights once (a warp, lane k = split k, S <= 32), then every output
  // reads its S partial accumulators with independent loads.
  for (int j = warp; j < G; j += THREADS / 32) {
    const float* ml = part_ml + (head0 + j) * S * 2;
    const float m = lane < Se ? ldcg(ml + 2 * lane) : NEG_INF;
    const float l = lane < Se ? ldcg(ml + 2 * lane + 1) : 0.0f;
    const float m_max = warp_max(m);                               // every lane shuffles
    const float w = lane < Se ? (LOG2 ? exp2f(m - m_max) : expf(m - m_max)) : 0.0f;   // empty split: w = 0
    const float lsum = warp_sum(w * l);
    w_split[j][lane] = w;
    if (lane == 0) inv_l[j] = 1.0f / lsum;
  }
  __syncthreads();
  // All 32 loads of an output issued at once (a split past Se re-reads split Se - 1 and
  // weighs 0): the loop of 8 at a time was S / 8 dependent L2 round trips.
  for (int e = tid; e < G * D; e += THREADS) {
    const int j = e / D, d = e % D;
    const float* pa = part_acc + (head0 + j) * S * D + d;
    float v[32];
#pragma unroll
    for (int k = 0; k < 32; k++) v[k] = ldcg(pa + (i64)min(k, Se - 1) * D);
    float o = 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) o += w_split[j][k] * v[k];
    out[(head0 + j) * D + d] = o * inv_l[j];
  }
  if (tid == 0) counters[ci] = 0;
}
