// attention_decode: one new token per sequence attends to its paged KV cache
// (flash-decoding: split-K over positions, all query heads of a KV head in one block).
//
//   For sequence b, KV head g, its query heads j < G = Hq / Hkv, L = ctx[b], pos = L - 1:
//     q_j          = rope(norm(qkv[b, q_{gG+j}]), pos) * scale
//     cache[slot[b], g] = (rope(norm(qkv[b, k_g]), pos), qkv[b, v_g])       (split owning pos)
//     out[b, gG+j] = softmax_p(q_j . K[p]) V      over p < L, through the block table
// Grid (S, Hkv, B). A sequence uses Se <= S splits, each of at least MIN_SPLIT_POSITIONS
// positions, split s covering ceil(blocks / Se) whole KV blocks (split_k.cuh); with Se > 1 it
// writes its (max, sum, unnormalised output) to part_* and the last split of (b, g) to finish
// (a release/acquire counter, reset for the next step, so the kernel replays inside a CUDA
// graph) combines them.
// Reference: cpu.py CPUOps.attention. Compile: nvcc -arch=sm_90 -cubin -I. -DHEAD_DIM=128
// -DKV_T=__half attention_decode.cu. Napkin math: a token at L = 384 reads 2 * 384 * 8 * 128
// * 2 B = 1.5 MB of cache per layer (f16), 3% of a 1.7B Q4_K_M layer's weights.
#include "rope.cuh"
#include "split_k.cuh"

#define AD_THREADS 128
#ifndef MAX_GROUP
#define MAX_GROUP 16    // query heads a KV head, rounded up to a power of two (attention.py)
#endif

extern "C" __global__ void __launch_bounds__(AD_THREADS) attention_decode(
    const float* qkv, int Hq, int Hkv, const int* ctx_lens, const int* slots, const int* tables,
    const int* table_stride, int block_size, const float* cos_t, const float* sin_t,
    const float* q_norm, const float* k_norm, float eps, int interleaved, float scale,
    KV_T* k_cache, KV_T* v_cache, float* out, float* part_acc, float* part_ml, int* counters) {
  constexpr int D = HEAD_DIM;
  // P.V: lane owns DL consecutive dims of a V row (8- or 16-byte loads), LPR lanes a row (D / DL
  // rounded up to a power of two, so rows never straddle lanes of two position groups: at D = 96
  // lanes 24-31 own no dims), so the block reads NG rows at once and a thread sums every NG-th
  // position of a tile.
  constexpr int DL = D >= 128 ? D / 32 : 4;
  constexpr int LPR = D / DL <= 4 ? 4 : D / DL <= 8 ? 8 : D / DL <= 16 ? 16 : 32;
  constexpr int NG = (AD_THREADS / 32) * (32 / LPR);
  static_assert(D % DL == 0 && D / DL <= 32, "HEAD_DIM: a V row in at most 32 lanes");
  constexpr int KB = D % 64 == 0 ? 8 : D % 48 == 0 ? 6 : D % 32 == 0 ? 4 : D % 16 == 0 ? 2 : 1;  // K loads in flight
  static_assert(D % (8 * KB) == 0, "HEAD_DIM: whole rounds of KB 8-element loads");
  constexpr int VB = 64 / DL;                                 // V loads in flight a thread
  __shared__ __align__(16) float qs[MAX_GROUP][D];
  __shared__ float tmp[4][D];
  constexpr int NW = AD_THREADS / 32;
  constexpr int SC = MAX_GROUP * AD_THREADS > NW * D ? MAX_GROUP * AD_THREADS : NW * D;
  __shared__ __align__(16) float sc_buf[SC];  // scores [MAX_GROUP][AD_THREADS]; at the end the P.V sums
  float (*sc)[AD_THREADS] = reinterpret_cast<float (*)[AD_THREADS]>(sc_buf);
  __shared__ float m_run[MAX_GROUP], l_run[MAX_GROUP], corr[MAX_GROUP];
  __shared__ i64 slot_s[AD_THREADS];      // cache slot of each position of the current tile

  const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z, S = gridDim.x;
  const int G = Hq / Hkv, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int L = ctx_lens[b], pos = L - 1;
  const int* table = tables + (i64)b * table_stride[0];
  const DecodeSplit sp = decode_split(L, block_size, s, S);
  const int Se = sp.Se, start = sp.start, end = sp.end;
  if (s >= Se) return;        // an idle split of a short context (it reads and writes nothing)
  {                           // this block's first tile of cached K/V rows: before the wait
    const int p = start + tid;  // (the new token's slot is written below, after it)
    if (p < end) {
      const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
      prefetch_lines(k_cache + (slot * Hkv + g) * D, D * sizeof(KV_T));
      prefetch_lines(v_cache + (slot * Hkv + g) * D, D * sizeof(KV_T));
    }
  }
  const float* cr = cos_t + (i64)pos * (D / 2);
  const float* sr = sin_t + (i64)pos * (D / 2);
  if (warp == 0) prefetch_norm_rope<D>(q_norm, k_norm, cr, sr);
  pdl_wait();
  pdl_launch();
  const float* row = qkv + (i64)b * (Hq + 2 * Hkv) * D;

  for (int j = warp; j < G; j += 4)
    norm_rope_head<D>(row + (g * G + j) * D, tmp[warp], q_norm, eps, cr, sr, interleaved,
                      [&](int e, float v) { qs[j][e] = v * scale; });
  if (start <= pos && pos < end) {
    const i64 slot = slots[b];
    if (warp == 0) {
      KV_T* dst = k_cache + (slot * Hkv + g) * D;
      norm_rope_head<D>(row + (Hq + g) * D, tmp[0], k_norm, eps, cr, sr, interleaved,
                        [&](int e, float v) { dst[e] = from_f32<KV_T>(v); });
    } else if (warp == 1) {
      KV_T* dst = v_cache + (slot * Hkv + g) * D;
      for (int e = lane; e < D; e += 32) dst[e] = from_f32<KV_T>(row[(Hq + Hkv + g) * D + e]);
    }
  }
  if (tid < G) { m_run[tid] = NEG_INF; l_run[tid] = 0.0f; }
  __syncthreads();

  const int d0 = (lane % LPR) * DL, part = warp * (32 / LPR) + lane / LPR;
  const int dv = d0 < D ? d0 : 0;     // a lane past the row loads dims 0.. and stores nothing
  float acc[MAX_GROUP][DL];
#pragma unroll
  for (int j = 0; j < MAX_GROUP; j++)
#pragma unroll
    for (int k = 0; k < DL; k++) acc[j][k] = 0.0f;

  for (int t0 = start; t0 < end; t0 += AD_THREADS) {
    const int p = t0 + tid;
    float sj[MAX_GROUP];
#pragma unroll
    for (int j = 0; j < MAX_GROUP; j++) sj[j] = 0.0f;
    if (p < end) {
      const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
      slot_s[tid] = slot;
      const KV_T* kp = k_cache + (slot * Hkv + g) * D;
      // The row's loads are issued KB at a time before any is used: a loop of one 16-byte
      // load and its FMAs (as compiled before) was D / 8 dependent cache round trips a tile.
#pragma unroll
      for (int e0 = 0; e0 < D; e0 += 8 * KB) {
        float kv[KB][8];
#pragma unroll
        for (int u = 0; u < KB; u++) load8(kp + e0 + 8 * u, kv[u]);
#pragma unroll
        for (int u = 0; u < KB; u++)
#pragma unroll
          for (int j = 0; j < MAX_GROUP; j++) {
            if (j >= G) break;
            const float4 qa = *reinterpret_cast<const float4*>(&qs[j][e0 + 8 * u]);
            const float4 qb = *reinterpret_cast<const float4*>(&qs[j][e0 + 8 * u + 4]);
            sj[j] += qa.x * kv[u][0] + qa.y * kv[u][1] + qa.z * kv[u][2] + qa.w * kv[u][3] +
                     qb.x * kv[u][4] + qb.y * kv[u][5] + qb.z * kv[u][6] + qb.w * kv[u][7];
          }
      }
    }
#pragma unroll
    for (int j = 0; j < MAX_GROUP; j++)
      if (j < G) sc[j][tid] = p < end ? sj[j] : NEG_INF;
    __syncthreads();
    for (int j = warp; j < G; j += 4) {
      float mx = NEG_INF;
      for (int i = lane; i < AD_THREADS; i += 32) mx = fmaxf(mx, sc[j][i]);
      const float m_new = fmaxf(m_run[j], warp_max(mx));
      float sum = 0.0f;
      for (int i = lane; i < AD_THREADS; i += 32) {
        const float e = expf(sc[j][i] - m_new);
        sc[j][i] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float c = expf(m_run[j] - m_new);
        corr[j] = c;
        l_run[j] = l_run[j] * c + sum;
        m_run[j] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < MAX_GROUP; j++)
      if (j < G)
#pragma unroll
        for (int k = 0; k < DL; k++) acc[j][k] *= corr[j];
    const int n = min(AD_THREADS, end - t0);
    // Slots from shared memory, so the V loads are independent; VB positions' loads are
    // issued before any is used (unconditionally: a position past n reads position n - 1
    // and counts 0). One load and its FMAs a trip, as compiled before, were a dependent
    // cache round trip per position.
    for (int i0 = part; i0 < n; i0 += NG * VB) {
      float v[VB][DL];
#pragma unroll
      for (int u = 0; u < VB; u++) {
        const int i = min(i0 + u * NG, n - 1);
        load_dims<DL>(v_cache + (slot_s[i] * Hkv + g) * D + dv, v[u]);
      }
#pragma unroll
      for (int u = 0; u < VB; u++) {
        const int i = min(i0 + u * NG, n - 1);
        const bool in = i0 + u * NG < n;
#pragma unroll
        for (int j = 0; j < MAX_GROUP; j++) {
          if (j >= G) break;
          const float w = in ? sc[j][i] : 0.0f;
#pragma unroll
          for (int k = 0; k < DL; k++) acc[j][k] += w * v[u][k];
        }
      }
    }
    __syncthreads();
  }

  // Sum the position groups: those of a warp by shuffles, then the warps' through shared
  // memory (sc), HR heads a round; emit (j, d) values.
#pragma unroll
  for (int j = 0; j < MAX_GROUP; j++)
#pragma unroll
    for (int k = 0; k < DL; k++)
      for (int o = LPR; o < 32; o <<= 1) acc[j][k] += __shfl_xor_sync(FULL_MASK, acc[j][k], o);
  const i64 head0 = (i64)b * Hq + g * G;
  float* red = sc_buf;
  constexpr int HR = SC / (NW * D);                      // heads a round
  for (int j0 = 0; j0 < G; j0 += HR) {
    __syncthreads();                                     // red free
    if (lane < LPR && d0 < D)
#pragma unroll
      for (int j = 0; j < MAX_GROUP; j++)
        if (j >= j0 && j < j0 + HR && j < G)
#pragma unroll
          for (int k = 0; k < DL; k++) red[(warp * HR + j - j0) * D + d0 + k] = acc[j][k];
    __syncthreads();
    for (int e = tid; e < HR * D; e += AD_THREADS) {
      const int j = j0 + e / D, d = e % D;
      if (j >= G) break;
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < NW; w++) v += red[(w * HR + e / D) * D + d];
      if (Se == 1) out[(head0 + j) * D + d] = v / l_run[j];
      else part_acc[((head0 + j) * S + s) * D + d] = v;
    }
  }
  if (Se == 1) return;

  __shared__ __align__(16) float w_split[MAX_GROUP][32], inv_l[MAX_GROUP];
  __shared__ int is_last;
  combine_splits<D, AD_THREADS, false>(G, s, S, Se, head0, m_run, l_run, part_acc, part_ml, counters,
                                       b * Hkv + g, out, w_split, inv_l, &is_last);
}
