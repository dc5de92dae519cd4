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
// groups of T tokens. Napkin math at T = 1: a Q4_K chunk is 16 bytes -> 32 weights -> ~100
// FP32 instructions per row, so 2 rows a warp share the x loads and stay under the
// 11.5 B/clk/SM that HBM delivers.
#include "quant.cuh"

#define MV_WARPS 4

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
      const float* a = norm_a + (i64)(t0 + t) * K;
      const float* b = norm_b != nullptr ? norm_b + (i64)(t0 + t) * K : nullptr;
      float ss = 0.0f;
      for (int k = threadIdx.x; k < K; k += blockDim.x) {
        const float v = b != nullptr ? a[k] + b[k] : a[k];
        xs[t * K + k] = v;
        ss += v * v;
      }
      const float scale = rsqrtf(block_sum(ss, red) / K + eps);
      for (int k = threadIdx.x; k < K; k += blockDim.x) {
        const float v = xs[t * K + k];
        if (norm_sum != nullptr && blockIdx.x == 0) norm_sum[(i64)(t0 + t) * K + k] = v;
        xs[t * K + k] = v * scale * norm_w[k];
      }
    }
    __syncthreads();
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
