// FlashAttention-2's inner step (Dao 2023, algorithm 1) on mma.sync m16n8k16 fragments
// (mma.cuh), for one warp's 16 query rows: S = Q K^T against a key tile in shared memory, the
// online softmax in f32 and log2 units (Q pre-scaled by scale * log2 e, so exp2), O += P V.
// Used by attention_prefill_tc.cu and attention_decode_tc.cu. A lane holds rows qr = lane / 4
// and qr + 8, columns 2 (lane % 4) and + 1 of each 8-column n-tile (s[n][0..1] row qr,
// s[n][2..3] row qr + 8; likewise o[n] for dims 8n..). Tiles are f16 rows of ldh halves (rows
// 16-byte aligned; ldh = D + 8 puts the 8 rows of an ldmatrix in distinct banks).
#pragma once
#include "mma.cuh"

#define FLASH_M0 -1e30f    // a row maximum below any score (f16 operands), and finite

// s[n] = Q K^T for keys 8n.. 8n + 7 (n < NT) of tile k; qa holds Q's NK k-steps (16 dims each).
template <int NT, int NK>
__device__ __forceinline__ void flash_scores(float (*s)[4], const u32 (*qa)[4], const __half* k, int ldh) {
  static_assert(NK % 2 == 0, "two k-steps an ldmatrix: head sizes of a multiple of 32");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < NT; n++) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < NK; kk += 2) {
      u32 b[4];       // keys 8n.. of dims 16kk + 8j (j = 0..3): k-steps kk and kk + 1
      ldmatrix_x4(b, k + (8 * n + (lane & 7)) * ldh + 16 * kk + 8 * (lane >> 3));
      mma_16816(s[n], qa[kk], b);
      mma_16816(s[n], qa[kk + 1], b + 2);
    }
  }
}

// One online-softmax step over NT n-tiles of scores (masked ones already -inf): the row maxima
// m move to cover them, l (this lane's columns' sum) and o (ND n-tiles) are rescaled to them,
// and P = exp2(S - m) becomes the f16 A fragments of O += P V (pa[kp]: keys 16kp.., n-tiles
// 2kp and 2kp + 1). m may start at -inf only where every row meets a key in the first step;
// otherwise at a finite floor (FLASH_M0), so that a step of masked scores only (-inf) gives
// c = 1 and P = 0 rather than exp2(-inf - -inf) = NaN.
template <int NT, int ND>
__device__ __forceinline__ void flash_softmax(float (*s)[4], float* m, float* l, float (*o)[4], u32 (*pa)[4]) {
  float mx[2] = {m[0], m[1]}, c[2];
#pragma unroll
  for (int n = 0; n < NT; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
#pragma unroll
  for (int h = 0; h < 2; h++) {        // the quad's four lanes share the row
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL_MASK, mx[h], 2));
    c[h] = exp2f(m[h] - mx[h]);
    m[h] = mx[h];
    l[h] *= c[h];
  }
#pragma unroll
  for (int n = 0; n < ND; n++) {
    o[n][0] *= c[0]; o[n][1] *= c[0];
    o[n][2] *= c[1]; o[n][3] *= c[1];
  }
#pragma unroll
  for (int n = 0; n < NT; n++) {
    const float p0 = exp2f(s[n][0] - m[0]), p1 = exp2f(s[n][1] - m[0]);
    const float p2 = exp2f(s[n][2] - m[1]), p3 = exp2f(s[n][3] - m[1]);
    l[0] += p0 + p1;
    l[1] += p2 + p3;
    pa[n / 2][2 * (n & 1)] = pack_half2(p0, p1);
    pa[n / 2][2 * (n & 1) + 1] = pack_half2(p2, p3);
  }
}

// o += P V over KP k-steps of 16 keys of tile v (rows = keys), ND n-tiles of 8 dims.
template <int KP, int ND>
__device__ __forceinline__ void flash_pv(float (*o)[4], const u32 (*pa)[4], const __half* v, int ldh) {
  static_assert(ND % 2 == 0, "two n-tiles an ldmatrix");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int kp = 0; kp < KP; kp++)
#pragma unroll
    for (int n = 0; n < ND; n += 2) {
      u32 b[4];       // V keys 16kp + 8 (j & 1).., dims 8 (n + j / 2)..: n-tiles n and n + 1
      ldmatrix_x4_trans(b, v + (16 * kp + (lane & 7) + 8 * ((lane >> 3) & 1)) * ldh + 8 * n + 8 * (lane >> 4));
      mma_16816(o[n], pa[kp], b);
      mma_16816(o[n + 1], pa[kp], b + 2);
    }
}
