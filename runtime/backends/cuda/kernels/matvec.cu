// matvec: y = W x for up to 8 tokens at a time, W in any GGUF format, dequantized in
// registers so each weight byte is read from memory once per group of T tokens.
//
//   mode 0:  y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n])                 n < N
//   mode 1:  y[t, j] = silu(W[j] . x[t]) * (W[F + j] . x[t])             j < F = N / 2
//   x is either given ([ntok, K], row stride ldx) or made by the fused prologue
//   x[t] = rmsnorm(a[t] + b[t]) * norm_w, with a[t] + b[t] stored to norm_sum (the new
//   residual stream) by the blocks of blockIdx.x == 0.
//
// Reference: check.py ref_linear / ref_rms_norm (torch on gguf-dequantized weights).
// Compile check: nvcc -arch=sm_90 -cubin -I. matvec.cu (tests compile it for sm_80, sm_90).
//
// Work split: 4 warps a block, 2 weight rows a warp (two output rows, or the gate and up
// rows of one output), lanes over consecutive 16-byte chunks of the rows; blockIdx.y walks
// groups of T tokens. matvec1_* (below) is the T = 1 variant for K-quant rows: each lane
// issues U chunks of loads ahead, the first batch before the norm prologue.
// Napkin math at T = 1: a Q4_K chunk is 16 bytes -> 32 weights -> ~7 instructions a weight
// and row (nibble, int-to-float, scale FMA, dot FMA); HBM delivers ~11.5 B/clk/SM, i.e. 20
// Q4_K weights/clk/SM, against 128 instructions/clk/SM: the decode, not the bytes, is the
// limit (measured on the H100: as slow with the weights in L2 as from DRAM).
#include "quant.cuh"

#define MV_WARPS 4

// xs[0..K) = rmsnorm(a + b) * w for one token, and sum_out = a + b where given. Loads are
// float4, four per thread issued before any is used, so the prologue costs one or two memory
// round trips instead of one per column a thread owns. Ends with a barrier (xs ready).
__device__ __forceinline__ void norm_prologue(const float* a, const float* b, const float* w, float eps, int K,
                                              float* sum_out, float* xs, float* red) {
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* x4 = reinterpret_cast<float4*>(xs);
  const int n4 = K / 4, step = 4 * blockDim.x;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float ss = 0.0f;
  for (int k0 = threadIdx.x; k0 < n4; k0 += step) {
    float4 va[4], vb[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      va[u] = k < n4 ? a4[k] : zero;
      vb[u] = b != nullptr && k < n4 ? b4[k] : zero;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      const float4 v = make_float4(va[u].x + vb[u].x, va[u].y + vb[u].y, va[u].z + vb[u].z, va[u].w + vb[u].w);
      if (k < n4) x4[k] = v;
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  }
  const float scale = rsqrtf(block_sum(ss, red) / K + eps);
  for (int k0 = threadIdx.x; k0 < n4; k0 += step) {
    float4 vw[4];
#pragma unroll
    for (int u = 0; u < 4; u++) vw[u] = k0 + u * blockDim.x < n4 ? w4[k0 + u * blockDim.x] : zero;
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int k = k0 + u * blockDim.x;
      if (k >= n4) break;
      const float4 v = x4[k];
      if (sum_out != nullptr) reinterpret_cast<float4*>(sum_out)[k] = v;
      x4[k] = make_float4(v.x * scale * vw[u].x, v.y * scale * vw[u].y, v.z * scale * vw[u].z, v.w * scale * vw[u].w);
    }
  }
  __syncthreads();
}

template <class FMT, int T>
__device__ __forceinline__ void dot_rows(const u8* const* q, const u8* const* s, int nchunks,
                                         const float* const* xr, float (*acc)[T]) {
  const int lane = threadIdx.x & 31;
  for (int idx = lane; idx < nchunks; idx += 32) {
    const int ib = idx / FMT::C, c = idx % FMT::C;
    State st[2];
    int col[2];
    FMT::load(q[0], s[0], ib, c, st[0], col);
    FMT::load(q[1], s[1], ib, c, st[1], col);
#pragma unroll
    for (int run = 0; run < FMT::NR; run++) {
#pragma unroll
      for (int i = 0; i < FMT::RL; i += 4) {
        const float4 w0 = FMT::get4(st[0], run, i), w1 = FMT::get4(st[1], run, i);
#pragma unroll
        for (int t = 0; t < T; t++) {
          const float4 xv = *reinterpret_cast<const float4*>(xr[t] + col[run] + i);
          acc[0][t] += w0.x * xv.x + w0.y * xv.y + w0.z * xv.z + w0.w * xv.w;
          acc[1][t] += w1.x * xv.x + w1.y * xv.y + w1.z * xv.z + w1.w * xv.w;
        }
      }
    }
  }
}

template <int T>
__device__ __forceinline__ void matvec(const Segment* segs, int nseg, int K, int n_out, int mode,
                                       const float* x, int ldx, int ntok, const float* norm_a,
                                       const float* norm_b, const float* norm_w, float eps,
                                       float* norm_sum, const float* bias, float* y, int ldy) {
  DYNAMIC_SMEM(float, xs);
  __shared__ float red[32];
  const int t0 = blockIdx.y * T, nt = min(T, ntok - t0);
  const float* xbase = x + (i64)t0 * ldx;
  int ld = ldx;
  if (norm_w != nullptr) {
    for (int t = 0; t < nt; t++) {
      const i64 off = (i64)(t0 + t) * K;
      norm_prologue(norm_a + off, norm_b != nullptr ? norm_b + off : nullptr, norm_w, eps, K,
                    norm_sum != nullptr && blockIdx.x == 0 ? norm_sum + off : nullptr, xs + t * K, red);
    }
    xbase = xs;
    ld = K;
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int out0 = (blockIdx.x * MV_WARPS + warp) * (mode == 0 ? 2 : 1);
  if (out0 >= n_out) return;
  const int rows[2] = {out0, mode == 0 ? min(out0 + 1, n_out - 1) : out0 + n_out};  // odd N: last row twice
  const u8* q[2];
  const u8* s[2];
  int qt = 0;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const Segment& g = find_segment(segs, nseg, rows[r]);
    q[r] = reinterpret_cast<const u8*>(g.q) + (rows[r] - g.row0) * g.q_row_bytes;
    s[r] = reinterpret_cast<const u8*>(g.s) + (rows[r] - g.row0) * g.s_row_bytes;
    qt = (int)g.qtype;
  }
  const float* xr[T];
#pragma unroll
  for (int t = 0; t < T; t++) xr[t] = xbase + (i64)min(t, nt - 1) * ld;

  float acc[2][T];
#pragma unroll
  for (int r = 0; r < 2; r++)
#pragma unroll
    for (int t = 0; t < T; t++) acc[r][t] = 0.0f;
  // Both rows of a warp share one qtype: linear.py checks that segments start at even rows
  // and runs gate/up pairs of different types as a mode-0 launch plus silu_mul.cu.
  DISPATCH_QTYPE(qt, (dot_rows<FMT, T>(q, s, K / FMT::QK * FMT::C, xr, acc)));
#pragma unroll
  for (int t = 0; t < T; t++) {
    const float v0 = warp_sum(acc[0][t]), v1 = warp_sum(acc[1][t]);
    if (lane != 0 || t >= nt) continue;
    float* yt = y + (i64)(t0 + t) * ldy;
    if (mode == 0) {
      yt[rows[0]] = bias != nullptr ? v0 + bias[rows[0]] : v0;
      if (out0 + 1 < n_out) yt[rows[1]] = bias != nullptr ? v1 + bias[rows[1]] : v1;
    } else {
      yt[out0] = v0 / (1.0f + expf(-v0)) * v1;
    }
  }
}

// ---- T = 1 ------------------------------------------------------------------------------
// One token is latency-bound, not arithmetic-bound: a warp takes R weight rows and each lane
// issues the loads of U chunks of every row (R * U 16-byte loads, plus the block headers)
// before it uses any of them; the first batch goes out before the fused norm prologue, so
// the prologue's reductions overlap the weight fetch. linear.py launches this only where a
// block's 4 * R rows share one format (segments aligned to them), so every thread of a block
// takes the same DISPATCH_QTYPE branch and the prologue's __syncthreads is uniform.
// Mode 1 takes R / 2 outputs: gate rows j.. and up rows n_out + j...
// Formats with separate high bits (Q5_*, Q6_K) fetch two 16-byte loads a chunk: half the chunks ahead.
template <class FMT> struct Ahead { static constexpr int div = 1; };
template <> struct Ahead<Fmt<Q5_0>> { static constexpr int div = 2; };
template <> struct Ahead<Fmt<Q5_1>> { static constexpr int div = 2; };
template <> struct Ahead<Fmt<Q5_K>> { static constexpr int div = 2; };
template <> struct Ahead<Fmt<Q6_K>> { static constexpr int div = 2; };

template <class FMT, int R, int U>
__device__ __forceinline__ void load_chunks(const u8* const* q, const u8* const* s, bool active, int nchunks,
                                            int base, State (&st)[U][R], int (&col)[U][FMT::NR]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int idx = base + 32 * u + lane;
    if (active && idx < nchunks) {
#pragma unroll
      for (int r = 0; r < R; r++) FMT::load(q[r], s[r], idx / FMT::C, idx % FMT::C, st[u][r], col[u]);
    }
  }
}

template <class FMT, int R, int U0, int U = (U0 > 1 ? U0 / Ahead<FMT>::div : 1)>
__device__ __forceinline__ void matvec1_rows(const u8* const* q, const u8* const* s, bool active, int K,
                                             const float* x, const float* norm_a, const float* norm_b,
                                             const float* norm_w, float eps, float* norm_sum, float* xs,
                                             float* red, float* acc) {
  const int lane = threadIdx.x & 31, nchunks = K / FMT::QK * FMT::C;
  State st[U][R];
  int col[U][FMT::NR];
  load_chunks<FMT, R, U>(q, s, active, nchunks, 0, st, col);
  if (norm_w != nullptr) {
    norm_prologue(norm_a, norm_b, norm_w, eps, K, blockIdx.x == 0 ? norm_sum : nullptr, xs, red);
    x = xs;
  }
  if (!active) return;
  for (int base = 0;;) {
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (base + 32 * u + lane < nchunks) {
#pragma unroll
        for (int run = 0; run < FMT::NR; run++) {
#pragma unroll
          for (int i = 0; i < FMT::RL; i += 4) {
            const float4 xv = *reinterpret_cast<const float4*>(x + col[u][run] + i);
#pragma unroll
            for (int r = 0; r < R; r++) {
              const float4 w = FMT::get4(st[u][r], run, i);
              acc[r] += w.x * xv.x + w.y * xv.y + w.z * xv.z + w.w * xv.w;
            }
          }
        }
      }
    }
    base += 32 * U;
    if (base >= nchunks) break;
    load_chunks<FMT, R, U>(q, s, active, nchunks, base, st, col);
  }
}

template <int R, int U>
__device__ __forceinline__ void matvec1(const Segment* segs, int nseg, int K, int n_out, int mode,
                                        const float* x, const float* norm_a, const float* norm_b,
                                        const float* norm_w, float eps, float* norm_sum, const float* bias,
                                        float* y) {
  DYNAMIC_SMEM(float, xs);
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per_warp = mode == 0 ? R : R / 2;
  const int out0 = (blockIdx.x * MV_WARPS + warp) * per_warp;
  const bool active = out0 < n_out;
  int rows[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int o = min(out0 + (mode == 0 ? r : r % (R / 2)), n_out - 1);   // past the end: a repeat
    rows[r] = mode == 0 || r < R / 2 ? o : o + n_out;
  }
  const u8* q[R];
  const u8* s[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    const Segment& g = find_segment(segs, nseg, rows[r]);
    q[r] = reinterpret_cast<const u8*>(g.q) + (rows[r] - g.row0) * g.q_row_bytes;
    s[r] = reinterpret_cast<const u8*>(g.s) + (rows[r] - g.row0) * g.s_row_bytes;
  }
  const int qt = (int)find_segment(segs, nseg, min((int)blockIdx.x * MV_WARPS * per_warp, n_out - 1)).qtype;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  DISPATCH_QTYPE(qt, (matvec1_rows<FMT, R, U>(q, s, active, K, x, norm_a, norm_b, norm_w, eps, norm_sum,
                                              xs, red, acc)));
  if (!active) return;
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
  if (lane != 0) return;
  if (mode == 0) {
#pragma unroll
    for (int r = 0; r < R; r++)
      if (out0 + r < n_out) y[out0 + r] = bias != nullptr ? acc[r] + bias[out0 + r] : acc[r];
  } else {
#pragma unroll
    for (int r = 0; r < R / 2; r++)
      if (out0 + r < n_out) {
        const float g = acc[r];
        y[out0 + r] = g / (1.0f + expf(-g)) * acc[r + R / 2];
      }
  }
}

#define MATVEC1_KERNEL(R, U)                                                                    \
  extern "C" __global__ void __launch_bounds__(MV_WARPS * 32) matvec1_r##R##_u##U(              \
      const Segment* segs, int nseg, int K, int n_out, int mode, const float* x,                 \
      const float* norm_a, const float* norm_b, const float* norm_w, float eps, float* norm_sum, \
      const float* bias, float* y) {                                                             \
    matvec1<R, U>(segs, nseg, K, n_out, mode, x, norm_a, norm_b, norm_w, eps, norm_sum, bias, y); \
  }
MATVEC1_KERNEL(2, 2)
MATVEC1_KERNEL(2, 4)

#define MATVEC_KERNEL(T)                                                                        \
  extern "C" __global__ void __launch_bounds__(MV_WARPS * 32) matvec_t##T(                      \
      const Segment* segs, int nseg, int K, int n_out, int mode, const float* x, int ldx,        \
      int ntok, const float* norm_a, const float* norm_b, const float* norm_w, float eps,        \
      float* norm_sum, const float* bias, float* y, int ldy) {                                   \
    matvec<T>(segs, nseg, K, n_out, mode, x, ldx, ntok, norm_a, norm_b, norm_w, eps, norm_sum,   \
              bias, y, ldy);                                                                     \
  }
MATVEC_KERNEL(1)
MATVEC_KERNEL(2)
MATVEC_KERNEL(4)
MATVEC_KERNEL(8)
