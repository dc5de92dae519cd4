// matvec_tc: y = W x for 2 to 8 tokens on the tensor cores, W in Q4_K, Q6_K or Q8_0, at the
// f16 precision of matmul.cu (f16 weights and inputs, f32 sums); linear.py's use_tc.
//
//   mode 0:  y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n])                 n < N
//   mode 1:  y[t, j] = silu(W[j] . x[t]) * (W[F + j] . x[t])             j < F = N / 2
//   x is given ([ntok, K] f32, row stride ldx) or made by norm.cuh's prologue, as in matvec.cu.
//
// Reference: dev/cuda/check.py check_linear / check_matvec_splits (torch on gguf-dequantized weights).
// Compile check: nvcc -arch=sm_90 -cubin -I. matvec_tc.cu (tests compile it for sm_80, sm_90).
//
// Why: matvec.cu decodes in f32 at ~6 instructions a weight (byte_perm, the offset FADD, the
// FFMA, nibble and scale work) and then spends one FMA a weight per token (the H100 issued
// 7.7 M warp-instructions for the 1.7B's gate/up at one token). Here a weight costs ~1.5 for
// any token count up to 8: quant.cuh's Half<> decode (byte_perm into half2, HSUB2, HFMA2 with
// the run's scale) feeds mma.sync as its B operand, the tokens are the A rows, and the tensor
// core does the multiply-adds. At one token matvec.cu stays (latency-bound either way).
//
// Layout (mma.cuh's fragments, g = lane / 4, t = lane % 4): a warp owns a tile of 8 weight
// rows (mode 0: 8 output rows; mode 1: gate j and up j interleaved for 4 outputs j), lane
// (g, t) decodes row g. At step i the four lanes of a row read its chunks 4 i .. 4 i + 3
// (lane t chunk 4 i + t: 64 contiguous bytes a row); a 16-column run of lane t's chunk feeds
// four products, columns 4 j .. 4 j + 3 of the run being k slots 2 t, 2 t + 1 (b[0]) and
// 2 t + 8, 2 t + 9 (b[1]). The k slots' order is the lanes' own, so A (token g's x at the
// same columns, a[0] and a[2]; rows 8-15 zero) is gathered the same way, and D[g][2 t, 2 t + 1]
// is token g's output for tile rows 2 t and 2 t + 1.
// Teams of S warps (`split`) share a tile, taking every S-th step, and add their D in warp
// order through shared memory, as matvec.cu's teams do.
#include "quant.cuh"
#include "mma.cuh"
#include "norm.cuh"

constexpr int TC_WARPS = 8;     // linear.py's TC_WARPS
constexpr int TC_UNROLL = 2;    // steps whose chunk loads are issued before any is decoded

// Weight row of tile row n: mode 0 row 8 tile + n; mode 1 gate row 4 tile + n / 2 (n even) or
// its up row F + 4 tile + n / 2 (n odd). Past the end: the last valid row (never stored).
__device__ __forceinline__ int tc_row(int mode, int tile, int n, int n_out) {
  if (mode == 0) return min(8 * tile + n, n_out - 1);
  const int j = min(4 * tile + n / 2, n_out - 1);
  return n % 2 == 0 ? j : n_out + j;
}

// d += this lane's share of the tile's products over steps first, first + stride, ...
// (warp-uniform bounds: every lane reaches every mma). x: token g's row, or null for a lane
// whose A row is past the tokens.
template <class FMT>
__device__ __forceinline__ void tc_dot(const u8* q, const u8* s, int nsteps, int first, int stride,
                                       const float* x, float* d) {
  if constexpr (Half<FMT>::ok) {     // (the other formats are never launched here: linear.py)
    const int t = threadIdx.x & 3;
    for (int i0 = first; i0 < nsteps; i0 += stride * TC_UNROLL) {
      State st[TC_UNROLL];
      int col[TC_UNROLL][2];
#pragma unroll
      for (int u = 0; u < TC_UNROLL; u++) {
        const int idx = 4 * (i0 + u * stride) + t;
        if (i0 + u * stride < nsteps) FMT::load(q, s, idx / FMT::C, idx % FMT::C, st[u], col[u]);
      }
#pragma unroll
      for (int u = 0; u < TC_UNROLL; u++) {
        if (i0 + u * stride >= nsteps) break;
#pragma unroll
        for (int run = 0; run < FMT::NR; run++) {
          uint4 h[2];
          Half<FMT>::run16(st[u], run, h);
#pragma unroll
          for (int j = 0; j < 4; j++) {
            u32 a[4] = {0u, 0u, 0u, 0u};
            if (x != nullptr) {
              const float4 xv = *reinterpret_cast<const float4*>(x + col[u][run] + 4 * j);
              a[0] = pack_half2(xv.x, xv.y);
              a[2] = pack_half2(xv.z, xv.w);
            }
            const u32 b[2] = {word_of(h[j / 2], 2 * (j % 2)), word_of(h[j / 2], 2 * (j % 2) + 1)};
            mma_16816(d, a, b);
          }
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(TC_WARPS * 32) matvec_tc(
    const Segment* segs, int nseg, int K, int n_out, int mode, int split, const float* x, int ldx,
    int ntok, const float* norm_a, const float* norm_b, const float* norm_w, float eps,
    float* norm_sum, const float* bias, float* y, int ldy) {
  DYNAMIC_SMEM(float, xs);
  __shared__ float red[32];
  __shared__ float2 part[TC_WARPS][32];     // a team's D pieces (split > 1)
  const int nt = min(ntok, 8);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int teams = TC_WARPS / split, team = warp / split, sub = warp % split;
  const int tiles = mode == 0 ? (n_out + 7) / 8 : (n_out + 3) / 4;
  const int groups = (tiles + teams - 1) / teams;
  for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {     // the weights: asked of L2
    const int tile = grp * teams + team;                            // before the wait
    if (tile >= tiles) break;
    const int row = tc_row(mode, tile, g, n_out);
    const Segment& sg = find_segment(segs, nseg, row);
    prefetch_lines(reinterpret_cast<const u8*>(sg.q) + (row - sg.row0) * sg.q_row_bytes, sg.q_row_bytes,
                   4 * sub + t, 4 * split);
    prefetch_lines(reinterpret_cast<const u8*>(sg.s) + (row - sg.row0) * sg.s_row_bytes, sg.s_row_bytes,
                   4 * sub + t, 4 * split);
  }
  pdl_wait();
  pdl_launch();

  const float* xbase = x;
  int ld = ldx;
  if (norm_w != nullptr) {
    for (int tt = 0; tt < nt; tt++) {
      const i64 off = (i64)tt * K;
      norm_prologue(norm_a + off, norm_b != nullptr ? norm_b + off : nullptr, norm_w, eps, K,
                    norm_sum != nullptr && blockIdx.x == 0 ? norm_sum + off : nullptr, xs + tt * K, red);
    }
    xbase = xs;
    ld = K;
  }
  const float* xg = g < nt ? xbase + (i64)g * ld : nullptr;

  // No barriers below when split == 1; with teams of several warps every warp of the block
  // runs every group, for the two barriers around the partial sums.
  for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
    const int tile = grp * teams + team;
    const bool live = tile < tiles;
    if (!live && split == 1) break;
    const int row = tc_row(mode, min(tile, tiles - 1), g, n_out);
    const Segment& sg = find_segment(segs, nseg, row);
    const u8* q = reinterpret_cast<const u8*>(sg.q) + (row - sg.row0) * sg.q_row_bytes;
    const u8* s = reinterpret_cast<const u8*>(sg.s) + (row - sg.row0) * sg.s_row_bytes;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The tile's rows share one format with a Half<> decoder (linear.py checks).
    if (live) DISPATCH_QTYPE((int)sg.qtype, (tc_dot<FMT>(q, s, K / FMT::QK * FMT::C / 4, sub, split, xg, d)));
    if (split > 1) {
      part[warp][lane] = make_float2(d[0], d[1]);
      __syncthreads();
      if (sub == 0)
        for (int j = 1; j < split; j++) {
          const float2 p = part[warp + j][lane];
          d[0] += p.x;
          d[1] += p.y;
        }
      __syncthreads();
      if (sub != 0 || !live) continue;
    }
    if (g >= nt) continue;
    float* yt = y + (i64)g * ldy;
    if (mode == 0) {
      const int r = 8 * tile + 2 * t;
      if (r < n_out) yt[r] = bias != nullptr ? d[0] + bias[r] : d[0];
      if (r + 1 < n_out) yt[r + 1] = bias != nullptr ? d[1] + bias[r + 1] : d[1];
    } else {
      const int j = 4 * tile + t;
      if (j < n_out) yt[j] = d[0] / (1.0f + expf(-d[0])) * d[1];
    }
  }
}
