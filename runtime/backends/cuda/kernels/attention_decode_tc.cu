// attention_decode_tc: attention_decode.cu on the tensor cores, for an f16 KV cache and head
// sizes of 32 to 128 in steps of 32 (attention.py picks it). The same inputs, splits and result:
//
//   For sequence b, KV head g, its query heads j < G = Hq / Hkv, L = ctx[b], pos = L - 1:
//     q_j          = rope(norm(qkv[b, q_{gG+j}]), pos) * scale
//     cache[slot[b], g] = (rope(norm(qkv[b, k_g]), pos), qkv[b, v_g])       (split owning pos)
//     out[b, gG+j] = softmax_p(q_j . K[p]) V      over p < L, through the block table
// Grid (S, Hkv, B) of 4 warps, split s taking positions [start, end) (split_k.cuh). The G query
// rows, f16, pre-scaled by scale * log2 e and padded with zero rows to 16, are one m16 A operand
// of mma.sync m16n8k16, held in registers. Warp w takes the split's 16-position chunks
// start + 16 (w + 4i): its own K and V slices in shared memory, double-buffered with cp.async
// (rows padded to D + 8 halves), S = Q K^T, its own online softmax in f32 (exp2) and O += P V
// (flash.cuh). Then the four warps' (m, l, O) merge through shared memory, and with Se > 1 the
// split's partials go to the last-block combine as attention_decode.cu's do (in log2 units).
// Each warp's first chunk is copied before pdl_wait(): this step writes no earlier position of
// the cache. It does write the new token's row, after the wait: that row reaches the chunk that
// holds it from the writing warp (first chunks, whose early copy skips it) or through `fresh`.
// Dynamic shared memory: 512 (D + 8) bytes (attention.py decode_smem), 69.6 KB at D = 128.
// Why: attention_decode.cu's per-position dot products and shuffles were ~1,600 serial
// instructions a warp for a 48-position split, ~10 us a layer on an H100 at L = 384 against
// ~0.5 us for the bytes; here a warp's 16 positions are 16 + 16 mma at D = 128.
// Reference: cpu.py CPUOps.attention (dev/cuda/check.py check_attention, f16 cache). Compile: nvcc
// -arch=sm_90 -cubin -I. -DHEAD_DIM=128 attention_decode_tc.cu.
#include "flash.cuh"
#include "rope.cuh"
#include "split_k.cuh"

#define ADT_THREADS 128
constexpr int CH = 16;                  // positions a chunk: one k-step of P V
constexpr int NK = HEAD_DIM / 16;       // k-steps of Q K^T
constexpr int ND = HEAD_DIM / 8;        // n-tiles (8 dims) of O
constexpr int LDH = HEAD_DIM + 8;       // shared row stride in halves: ldmatrix rows hit distinct banks
constexpr int WARP_SMEM = 4 * CH * LDH; // halves of a warp's K and V slices, two stages each
static_assert(HEAD_DIM % 32 == 0 && HEAD_DIM <= 128, "attention_decode_tc: head sizes 32, 64, 96, 128");

extern "C" __global__ void __launch_bounds__(ADT_THREADS) attention_decode_tc(
    const float* qkv, int Hq, int Hkv, const int* ctx_lens, const int* slots, const int* tables,
    const int* table_stride, int block_size, const float* cos_t, const float* sin_t,
    const float* q_norm, const float* k_norm, float eps, int interleaved, float scale,
    __half* k_cache, __half* v_cache, float* out, float* part_acc, float* part_ml, int* counters) {
  constexpr int D = HEAD_DIM;
  DYNAMIC_SMEM(__half, smem);     // [warp][K, V][stage][CH][LDH]; after the chunks, each warp's O
  __shared__ __align__(16) __half qh[16][LDH];      // the A operand's rows
  __shared__ __align__(16) __half fresh[2][LDH];    // the new token's K, V rows for a later chunk
  __shared__ float fw[4][16], m_row[16], l_row[16]; // the warps' weights, a row's max and sum
  __shared__ int is_last;

  const int s = blockIdx.x, g = blockIdx.y, b = blockIdx.z, S = gridDim.x;
  const int G = Hq / Hkv, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int L = ctx_lens[b], pos = L - 1;
  const int* table = tables + (i64)b * table_stride[0];
  const float* row = qkv + (i64)b * (Hq + 2 * Hkv) * D;        // the new token's q, k, v
  const float *cr = cos_t + (i64)pos * (D / 2), *sr = sin_t + (i64)pos * (D / 2);
  const DecodeSplit sp = decode_split(L, block_size, s, S);
  if (s >= sp.Se) return;       // an idle split of a short context (it reads and writes nothing)
  __half* ks = smem + warp * WARP_SMEM;   // this warp's K slices [2][CH][LDH], then its V slices
  __half* vs = ks + 2 * CH * LDH;

  // Chunk t0 (positions t0.. t0 + 15) into stage st, lane pair r taking row r's 16-byte pieces
  // alternately. Rows past the split are zeros: P is 0 there, and 0 * stale memory may be NaN.
  // The new token's row comes from `fresh` (filled after the wait), not from the cache; the
  // early copy of a first chunk skips it.
  auto load = [&](int t0, int st, bool early) {
    const int r = lane >> 1, p = t0 + r;
    const bool is_new = p == pos && p < sp.end;
    __half* kd = ks + (st * CH + r) * LDH;
    __half* vd = vs + (st * CH + r) * LDH;
    if (p < sp.end && !is_new) {
      const i64 at = (((i64)table[p / block_size] * block_size + p % block_size) * Hkv + g) * D;
#pragma unroll
      for (int i = 0; i < D / 16; i++) {
        const int c = 16 * i + 8 * (lane & 1);
        cp_async16(kd + c, k_cache + at + c);
        cp_async16(vd + c, v_cache + at + c);
      }
    } else if (!(is_new && early)) {
      const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < D / 16; i++) {
        const int c = 16 * i + 8 * (lane & 1);
        *reinterpret_cast<uint4*>(kd + c) = is_new ? *reinterpret_cast<const uint4*>(&fresh[0][c]) : zero;
        *reinterpret_cast<uint4*>(vd + c) = is_new ? *reinterpret_cast<const uint4*>(&fresh[1][c]) : zero;
      }
    }
    cp_async_commit();
  };
  const int first = sp.start + CH * warp;
  const int chunks = first < sp.end ? (sp.end - first + 4 * CH - 1) / (4 * CH) : 0;
  load(first, 0, true);
  for (int e = tid; e < (16 - G) * D; e += ADT_THREADS) qh[G + e / D][e % D] = __float2half_rn(0.0f);
  if (warp == 0) prefetch_norm_rope<D>(q_norm, k_norm, cr, sr);
  pdl_wait();
  pdl_launch();

  float* tmp = reinterpret_cast<float*>(ks + CH * LDH);   // stage 1 of K: free until the loop
  const float qscale = scale * 1.4426950408889634f;
  for (int j = warp; j < G; j += 4)
    norm_rope_head<D>(row + (g * G + j) * D, tmp, q_norm, eps, cr, sr, interleaved,
                      [&](int e, float v) { qh[j][e] = __float2half_rn(v * qscale); });
  if (sp.start <= pos && pos < sp.end) {
    // The split's chunk i holds pos: warp i % 4's chunk i / 4, a first chunk for i < 4.
    const int i = (pos - sp.start) / CH;
    __half* kn = i < 4 ? smem + i * WARP_SMEM + (pos - sp.start) % CH * LDH : fresh[0];
    __half* vn = i < 4 ? kn + 2 * CH * LDH : fresh[1];
    const i64 at = ((i64)slots[b] * Hkv + g) * D;
    if (warp == G % 4)          // K and V by warps with the fewest query heads
      norm_rope_head<D>(row + (Hq + g) * D, tmp, k_norm, eps, cr, sr, interleaved, [&](int e, float v) {
        const __half h = __float2half_rn(v);
        k_cache[at + e] = h;
        kn[e] = h;
      });
    if (warp == (G + 1) % 4)
      for (int e = lane; e < D; e += 32) {
        const __half h = __float2half_rn(row[(Hq + Hkv + g) * D + e]);
        v_cache[at + e] = h;
        vn[e] = h;
      }
  }
  __syncthreads();              // Q's rows and the new K/V row

  u32 qa[NK][4];                // k-step kk: rows lane % 8 (+ 8), dims 16 kk (+ 8) by lane / 8
#pragma unroll
  for (int kk = 0; kk < NK; kk++)
    ldmatrix_x4(qa[kk], &qh[(lane & 7) + 8 * ((lane >> 3) & 1)][16 * kk + 8 * (lane >> 4)]);
  const int qr = lane >> 2, qc = 2 * (lane & 3);   // fragment row (and row + 8), column pair
  float o[ND][4];
#pragma unroll
  for (int n = 0; n < ND; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {FLASH_M0, FLASH_M0}, l[2] = {0.0f, 0.0f};   // l: this lane's columns only
  for (int i = 0; i < chunks; i++) {
    const int st = i & 1, t0 = first + 4 * CH * i;
    if (i + 1 < chunks) load(t0 + 4 * CH, st ^ 1, false);
    else cp_async_commit();     // an empty group keeps the wait count uniform
    cp_async_wait<1>();
    __syncwarp();               // every lane's copies of chunk i
    float sc[2][4];             // keys t0 + 8n + qc, + 1 of rows qr, qr + 8
    flash_scores<2, NK>(sc, qa, ks + st * CH * LDH, LDH);
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (t0 + 8 * n + qc + (e & 1) >= sp.end) sc[n][e] = NEG_INF;
    u32 pa[1][4];
    flash_softmax<2, ND>(sc, m, l, o, pa);
    flash_pv<1, ND>(o, pa, vs + st * CH * LDH, LDH);
    __syncwarp();               // stage st is refilled a chunk on
  }

  // The warps merge: each leaves its unnormalised O [16][D + 8] f32, then m [16] and l [16], in
  // its own slices (its copies are complete: the last wait left only an empty group).
#pragma unroll
  for (int h = 0; h < 2; h++) {
    l[h] += __shfl_xor_sync(FULL_MASK, l[h], 1);
    l[h] += __shfl_xor_sync(FULL_MASK, l[h], 2);
  }
  constexpr int OB = 16 * (D + 8);      // floats of a warp's O rows
  float* ob = reinterpret_cast<float*>(ks);
#pragma unroll
  for (int n = 0; n < ND; n++) {
    *reinterpret_cast<float2*>(ob + qr * (D + 8) + 8 * n + qc) = make_float2(o[n][0], o[n][1]);
    *reinterpret_cast<float2*>(ob + (qr + 8) * (D + 8) + 8 * n + qc) = make_float2(o[n][2], o[n][3]);
  }
  if ((lane & 3) == 0)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      ob[OB + qr + 8 * h] = m[h];
      ob[OB + 16 + qr + 8 * h] = l[h];
    }
  __syncthreads();
  auto warp_out = [&](int w) { return reinterpret_cast<const float*>(smem + w * WARP_SMEM); };
  if (tid < 16) {
    float mx = FLASH_M0, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; w++) mx = fmaxf(mx, warp_out(w)[OB + tid]);
#pragma unroll
    for (int w = 0; w < 4; w++) {
      fw[w][tid] = exp2f(warp_out(w)[OB + tid] - mx);
      sum += fw[w][tid] * warp_out(w)[OB + 16 + tid];
    }
    m_row[tid] = mx;
    l_row[tid] = sum;
  }
  __syncthreads();
  const i64 head0 = (i64)b * Hq + g * G;
  for (int e = tid; e < G * D; e += ADT_THREADS) {
    const int j = e / D, d = e % D;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; w++) v += fw[w][j] * warp_out(w)[j * (D + 8) + d];
    if (sp.Se == 1) out[(head0 + j) * D + d] = v / l_row[j];
    else part_acc[((head0 + j) * S + s) * D + d] = v;
  }
  if (sp.Se == 1) return;
  // The combine's scratch over warp 0's O rows: read by now (barriers inside, before its use).
  float* scratch = reinterpret_cast<float*>(smem);
  combine_splits<D, ADT_THREADS, true>(G, s, S, sp.Se, head0, m_row, l_row, part_acc, part_ml, counters,
                                       b * Hkv + g, out, reinterpret_cast<float (*)[32]>(scratch),
                                       scratch + 16 * 32, &is_last);
}
