// matvec: y = W x for up to 8 tokens at a time, W in any GGUF format, dequantized in
// registers so each weight byte is read from memory once per group of T tokens.
//
//   mode 0:  y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n])                 n < N
//   mode 1:  y[t, j] = silu(W[j] . x[t]) * (W[F + j] . x[t])             j < F = N / 2
//   x is either given ([ntok, K], row stride ldx) or made by the fused prologue
//   x[t] = rmsnorm(a[t] + b[t]) * norm_w, with a[t] + b[t] stored to norm_sum (the new
//   residual stream) by the blocks of blockIdx.x == 0.
//
// Reference: dev/cuda/check.py ref_linear / ref_rms_norm (torch on gguf-dequantized weights).
// Compile check: nvcc -arch=sm_90 -cubin -I. matvec.cu (tests compile it for sm_80, sm_90).
//
// Work split: W warps a block (4 at T = 1, 8 there with a prologue, else 8) in W / S row teams
// of S warps (S = `split`, a power of two up to W: linear.py raises it while the GPU has room,
// so a narrow weight with long rows still fills the SMs); a team owns 2 weight rows (two
// output rows, or the gate and up rows of one output) and its 32 S lanes take consecutive
// 16-byte chunks of them; a team's warps add their partial sums through shared memory in
// warp order. blockIdx.y walks groups of T tokens. Napkin math at T = 1: HBM delivers ~11.5 B/clk/SM, i.e. 20 Q4_K
// weights/clk/SM, against 128 instructions/clk/SM, so a weight may cost ~6 instructions a
// row; the get4 decode (nibble, int-to-float, scale FMA, dot FMA) cost ~7 and the kernel
// was as slow with its weights in L2 as from DRAM. dot_run's split decode (Split<> in
// quant.cuh: one FMA a weight, the scale once a run of 16) is what T = 1 uses for Q4_K,
// Q6_K and Q8_0. With -DQ8X=1 (linear.py, f16 gemm_dtype) T = 1 goes further for the formats
// with an Int8 decoder (the quantized ones): each block quantizes x to int8 in
// blocks of 16 (d = max|x| / 127, rounded half to even; llama.cpp's MMVQ rounds activations
// the same way in blocks of 32) and a run of 16 weights costs 4 __dp4a plus its nibble masks.
//
// matvec_t1_stage (end of file) is the one-token launch of a weight whose rows fit half an SM's
// shared memory per block (every linear of a layer up to a 1.7B at Q4_K): it copies them there
// before pdl_wait(), so the copy runs while the previous kernel does.
#include "quant.cuh"
#include "norm.cuh"

#ifndef MV_UNROLL
#define MV_UNROLL 2     // chunks a lane loads before it decodes them, at T = 1 (linear.py)
#endif
static_assert(MV_UNROLL >= 1, "MV_UNROLL: chunks a lane loads a round, at least 1");
#ifndef Q8X
#define Q8X 0           // 1: int8 activations and __dp4a at one token (linear.py)
#endif

// |v| < 2^22 to float in two full-rate instructions (IADD + FADD) instead of an I2F.
__device__ __forceinline__ float small_i2f(int v) { return __int_as_float(0x4B400000 + v) - 12582912.0f; }

// Four adjacent lanes' float4s as one int8 block of 16 columns: q = rint(v / d) with
// d = max|v| / 127 (rounding adds 1.5 * 2^23, whose sum's low byte is the rounded value), and
// (d, d * sum q), the sum for the formats' min / offset term. Every lane of the warp calls it.
__device__ __forceinline__ u32 quantize16(float4 v, float2& ds) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, 2));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const u32 r0 = __float_as_uint(__fmul_rn(v.x, inv) + 12582912.0f);
  const u32 r1 = __float_as_uint(__fmul_rn(v.y, inv) + 12582912.0f);
  const u32 r2 = __float_as_uint(__fmul_rn(v.z, inv) + 12582912.0f);
  const u32 r3 = __float_as_uint(__fmul_rn(v.w, inv) + 12582912.0f);
  const u32 q = __byte_perm(__byte_perm(r0, r1, 0x0040), __byte_perm(r2, r3, 0x0040), 0x5410);
  int sum = __dp4a((int)q, 0x01010101, 0);
  sum += __shfl_xor_sync(FULL_MASK, sum, 1);
  sum += __shfl_xor_sync(FULL_MASK, sum, 2);
  ds = make_float2(amax / 127.0f, amax / 127.0f * (float)sum);
  return q;
}

// x[0..K) as int8 blocks of 16 columns (quantize16) into xq, the pairs into ds[k / 16]. A
// thread takes 4 columns, so a block of 16 is 4 adjacent lanes. Each thread issues QB loads
// before it uses any (x may come from L2: one round trip, not one a trip), and every thread
// runs every trip (the shuffles).
#define QB 8
__device__ __forceinline__ void quantize_q8(const float* x, int K, float2* ds, u32* xq) {
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const int n4 = K / 4, step = blockDim.x;
  for (int k0 = 0; k0 < n4; k0 += QB * step) {
    float4 v[QB];
#pragma unroll
    for (int u = 0; u < QB; u++) {
      const int k = k0 + u * step + threadIdx.x;
      v[u] = k < n4 ? x4[k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < QB; u++) {
      if (k0 + u * step >= n4) break;      // the same for every thread of the block
      const int k = k0 + u * step + threadIdx.x;
      float2 d;
      const u32 q = quantize16(v[u], d);
      if (k < n4) {
        xq[k] = q;
        if ((k & 3) == 0) ds[k >> 2] = d;
      }
    }
  }
}

// The norm-fused prologue of a one-token int8 launch: x = rmsnorm(a + b) * w, quantized as
// quantize_q8 does, in one pass over a, b and w (one memory round trip and one barrier, where
// norm_prologue + quantize_q8 take two and four). Rounding by a block's own maximum makes the
// integers scale-free, so the pass quantizes h = (a + b) * w and the caller multiplies its sums
// by the returned rstd = rsqrt(mean((a + b)^2) + eps). Block 0 stores a + b to sum_out.
#define NQ 2
__device__ __forceinline__ float norm_quantize_q8(const float* a, const float* b, const float* w, float eps,
                                                  int K, float* sum_out, float2* ds, u32* xq, float* red) {
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int n4 = K / 4, step = blockDim.x;
  float ss = 0.0f;
  for (int k0 = 0; k0 < n4; k0 += NQ * step) {
    float4 va[NQ], vb[NQ], vw[NQ];
#pragma unroll
    for (int u = 0; u < NQ; u++) {
      const int k = k0 + u * step + threadIdx.x;
      va[u] = k < n4 ? a4[k] : zero;
      vb[u] = b != nullptr && k < n4 ? b4[k] : zero;
      vw[u] = k < n4 ? w4[k] : zero;
    }
#pragma unroll
    for (int u = 0; u < NQ; u++) {
      if (k0 + u * step >= n4) break;      // the same for every thread of the block
      const int k = k0 + u * step + threadIdx.x;
      const float4 v = make_float4(va[u].x + vb[u].x, va[u].y + vb[u].y, va[u].z + vb[u].z, va[u].w + vb[u].w);
      ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      float2 d;
      const u32 q = quantize16(make_float4(v.x * vw[u].x, v.y * vw[u].y, v.z * vw[u].z, v.w * vw[u].w), d);
      if (k < n4) {
        if (sum_out != nullptr) reinterpret_cast<float4*>(sum_out)[k] = v;
        xq[k] = q;
        if ((k & 3) == 0) ds[k >> 2] = d;
      }
    }
  }
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < (int)(blockDim.x >> 5); i++) total += red[i];
  return rsqrtf(total / K + eps);
}

// acc[r] += row r's run `run` . x over the run's 16 columns from c0, with x as int8 (quantize_q8).
template <class FMT>
__device__ __forceinline__ void dot_run_q8(const State* st, int run, int c0, const float2* xds, const u8* xq, float* acc) {
  const uint4 xw = *reinterpret_cast<const uint4*>(xq + c0);
  const float2 ds = xds[c0 >> 4];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int dot = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) dot = __dp4a((int)Int8<FMT>::q4(st[r], run, w), (int)word_of(xw, w), dot);
    acc[r] = fmaf(Int8<FMT>::d(st[r], run), ds.x * small_i2f(dot), acc[r]);
    if (Int8<FMT>::has_n) acc[r] = fmaf(Int8<FMT>::n(st[r], run), ds.y, acc[r]);
  }
}


// acc[r] += row r's run `run` of a chunk . x[0 .. RL): through Split where the format has one.
template <class FMT, int R>
__device__ __forceinline__ void dot_run(const State* st, int run, const float* x, float* acc) {
  if constexpr (Split<FMT>::ok) {
    float sq[R], sx = 0.0f;
#pragma unroll
    for (int r = 0; r < R; r++) sq[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < FMT::RL; i += 4) {
      const float4 xv = *reinterpret_cast<const float4*>(x + i);
      if (Split<FMT>::has_n) sx += (xv.x + xv.y) + (xv.z + xv.w);
#pragma unroll
      for (int r = 0; r < R; r++) {
        const float4 q = Split<FMT>::q4(st[r], run, i);
        sq[r] = fmaf(q.x, xv.x, fmaf(q.y, xv.y, fmaf(q.z, xv.z, fmaf(q.w, xv.w, sq[r]))));
      }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
      acc[r] = fmaf(Split<FMT>::d(st[r], run), sq[r], acc[r]);
      if (Split<FMT>::has_n) acc[r] = fmaf(Split<FMT>::n(st[r], run), sx, acc[r]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < FMT::RL; i += 4) {
      const float4 xv = *reinterpret_cast<const float4*>(x + i);
#pragma unroll
      for (int r = 0; r < R; r++) {
        const float4 w = FMT::get4(st[r], run, i);
        acc[r] += w.x * xv.x + w.y * xv.y + w.z * xv.z + w.w * xv.w;
      }
    }
  }
}

// Chunks first, first + stride, ... of the two rows (first = the lane's place in its team).
template <class FMT, int T>
__device__ __forceinline__ void dot_rows(const u8* const* q, const u8* const* s, int nchunks, int first,
                                         int stride, const float* const* xr, const float2* xds,
                                         const u8* xq, float (*acc)[T]) {
  if constexpr (T == 1) {
    // MV_UNROLL chunks of both rows loaded before any is decoded: one memory round trip
    // for them, not one each (a lane past the end re-reads the last chunk and skips it).
    for (int idx0 = first; idx0 < nchunks; idx0 += MV_UNROLL * stride) {
      State st[MV_UNROLL][2];
      int col[MV_UNROLL][2];
#pragma unroll
      for (int u = 0; u < MV_UNROLL; u++) {
        const int idx = min(idx0 + u * stride, nchunks - 1), ib = idx / FMT::C, c = idx % FMT::C;
        FMT::load(q[0], s[0], ib, c, st[u][0], col[u]);
        FMT::load(q[1], s[1], ib, c, st[u][1], col[u]);
      }
      float a[2] = {acc[0][0], acc[1][0]};
#pragma unroll
      for (int u = 0; u < MV_UNROLL; u++) {
        if (idx0 + u * stride >= nchunks) break;
#pragma unroll
        for (int run = 0; run < FMT::NR; run++) {
          if constexpr (Q8X && Int8<FMT>::ok) dot_run_q8<FMT>(st[u], run, col[u][run], xds, xq, a);
          else dot_run<FMT, 2>(st[u], run, xr[0] + col[u][run], a);
        }
      }
      acc[0][0] = a[0];
      acc[1][0] = a[1];
    }
  } else {
    for (int idx = first; idx < nchunks; idx += stride) {
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
}

// The two weight rows of row team `team` (counted over the grid): output rows out0, out0 + 1
// (mode 0; odd N reads the last row twice) or gate/up rows out0, out0 + F (mode 1). Returns
// out0; a team past n_out gets the last rows (pointers stay valid) and must not store.
__device__ __forceinline__ int team_rows(const Segment* segs, int nseg, int n_out, int mode, int team,
                                         const u8** q, const u8** s, int* rows, int& qt, i64* row_bytes) {
  const int out0 = team * (mode == 0 ? 2 : 1), o = min(out0, n_out - 1);
  rows[0] = o;
  rows[1] = mode == 0 ? min(o + 1, n_out - 1) : o + n_out;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const Segment& g = find_segment(segs, nseg, rows[r]);
    q[r] = reinterpret_cast<const u8*>(g.q) + (rows[r] - g.row0) * g.q_row_bytes;
    s[r] = reinterpret_cast<const u8*>(g.s) + (rows[r] - g.row0) * g.s_row_bytes;
    qt = (int)g.qtype;
    row_bytes[2 * r] = g.q_row_bytes;
    row_bytes[2 * r + 1] = g.s_row_bytes;
  }
  return out0;
}

// The x a launch multiplies, made after pdl_wait(): row t of xr[] (given, or normed into
// xs by the prologue), and at one token with Q8X its int8 blocks (xds, xq) in shared memory.
template <int T> struct XIn {
  const float* xr[T];
  const float2* xds = nullptr;
  const u8* xq = nullptr;
  float rstd = 1.0f;        // the one-pass prologue's sums are scaled by it
};

template <int T>
__device__ __forceinline__ void make_x(float* xs, const float* x, int ldx, int t0, int nt, int K, const float* norm_a,
                                       const float* norm_b, const float* norm_w, float eps, float* norm_sum, float* red,
                                       XIn<T>& in) {
  // A one-token int8 launch over a weight with no float rows norms and quantizes in one pass
  // (norm_quantize_q8; linear.py gives it no float x in shared memory): its sums are scaled by rstd.
  constexpr bool q8_only = T == 1 && Q8X && !((QTYPES) & ((1u << 0) | (1u << 1) | (1u << 30)));
  const bool one_pass = q8_only && norm_w != nullptr;
  const float* xbase = x + (i64)t0 * ldx;
  int ld = ldx;
  if (norm_w != nullptr && !one_pass) {
    for (int t = 0; t < nt; t++) {
      const i64 off = (i64)(t0 + t) * K;
      norm_prologue(norm_a + off, norm_b != nullptr ? norm_b + off : nullptr, norm_w, eps, K,
                    norm_sum != nullptr && blockIdx.x == 0 ? norm_sum + off : nullptr, xs + t * K, red);
    }
    xbase = xs;
    ld = K;
  }
#pragma unroll
  for (int t = 0; t < T; t++) in.xr[t] = xbase + (i64)min(t, nt - 1) * ld;
  if constexpr (T == 1 && Q8X) {      // x as int8 behind the normed floats
    float2* ds = reinterpret_cast<float2*>(xs + (norm_w != nullptr && !one_pass ? K : 0));
    u32* q = reinterpret_cast<u32*>(ds + K / 16);
    if (one_pass)
      in.rstd = norm_quantize_q8(norm_a, norm_b, norm_w, eps, K,
                                 norm_sum != nullptr && blockIdx.x == 0 ? norm_sum : nullptr, ds, q, red);
    else
      quantize_q8(in.xr[0], K, ds, q);
    __syncthreads();
    in.xds = ds;
    in.xq = reinterpret_cast<const u8*>(q);
  }
}

// Lane 0 of a team stores its outputs: rows[0], rows[1] (mode 0; the second only if out0 + 1 <
// n_out) or the SwiGLU product of gate/up output out0 (mode 1).
__device__ __forceinline__ void store_out(int mode, const int* rows, int out0, int n_out, float v0, float v1,
                                          const float* bias, float* yt) {
  if (mode == 0) {
    yt[rows[0]] = bias != nullptr ? v0 + bias[rows[0]] : v0;
    if (out0 + 1 < n_out) yt[rows[1]] = bias != nullptr ? v1 + bias[rows[1]] : v1;
  } else {
    yt[out0] = v0 / (1.0f + expf(-v0)) * v1;
  }
}

// Blocks walk row groups (W / S teams x 1-2 rows) with a stride of gridDim.x: linear.py
// caps the grid of a norm-fused launch at a few blocks an SM, so the prologue's reads of
// a, b and w (12 bytes a column) are paid per block, not per row group.
template <int T, int W>
__device__ __forceinline__ void matvec(const Segment* segs, int nseg, int K, int n_out, int mode, int split,
                                       const float* x, int ldx, int ntok, const float* norm_a,
                                       const float* norm_b, const float* norm_w, float eps,
                                       float* norm_sum, const float* bias, float* y, int ldy) {
  DYNAMIC_SMEM(float, xs);
  __shared__ float red[32];
  __shared__ float part[W][2][T];     // a team's partial sums (split > 1)
  const int t0 = blockIdx.y * T, nt = min(T, ntok - t0);
  if (nt <= 0) return;          // the whole block: no token rows here (x would be read at row -1)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int teams = W / split, team = warp / split, sub = warp % split;
  const int per_team = mode == 0 ? 2 : 1;
  const int groups = (n_out + teams * per_team - 1) / (teams * per_team);
  const u8* q[2];
  const u8* s[2];
  int rows[2], qt = 0;
  i64 nbytes[4];
  if (blockIdx.y == 0)          // the weights of its first two row groups: asked of L2 before the wait
    for (int grp = blockIdx.x; grp < groups && grp < blockIdx.x + 2 * gridDim.x; grp += gridDim.x)
      if (team_rows(segs, nseg, n_out, mode, grp * teams + team, q, s, rows, qt, nbytes) < n_out) {
        const int first = sub * 32 + lane, step = 32 * split;
        prefetch_lines(q[0], nbytes[0], first, step);
        prefetch_lines(s[0], nbytes[1], first, step);
        prefetch_lines(q[1], nbytes[2], first, step);
        prefetch_lines(s[1], nbytes[3], first, step);
      }
  pdl_wait();
  pdl_launch();

  XIn<T> in;
  make_x<T>(xs, x, ldx, t0, nt, K, norm_a, norm_b, norm_w, eps, norm_sum, red, in);
  const float* const* xr = in.xr;

  // No barriers below when split == 1 (a warp leaves at the end of the weight); with teams of
  // several warps, every warp of the block runs every group (the same trip count) for the
  // two barriers around the partial sums.
  for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
    const int out0 = team_rows(segs, nseg, n_out, mode, grp * teams + team, q, s, rows, qt, nbytes);
    if (out0 >= n_out && split == 1) break;
    float acc[2][T];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int t = 0; t < T; t++) acc[r][t] = 0.0f;
    // Both rows of a team share one qtype: linear.py checks that segments start at even rows
    // and runs gate/up pairs of different types as a mode-0 launch plus epilogue.cu.
    if (out0 < n_out)
      DISPATCH_QTYPE(qt, (dot_rows<FMT, T>(q, s, K / FMT::QK * FMT::C, sub * 32 + lane, 32 * split, xr, in.xds, in.xq, acc)));
#pragma unroll
    for (int t = 0; t < T; t++) {
      acc[0][t] = warp_sum(acc[0][t]);
      acc[1][t] = warp_sum(acc[1][t]);
    }
    if (split > 1) {
      if (lane == 0)
#pragma unroll
        for (int t = 0; t < T; t++) part[warp][0][t] = acc[0][t], part[warp][1][t] = acc[1][t];
      __syncthreads();
      if (sub == 0)
#pragma unroll
        for (int t = 0; t < T; t++)
          for (int j = 1; j < split; j++) acc[0][t] += part[warp + j][0][t], acc[1][t] += part[warp + j][1][t];
      __syncthreads();
      if (sub != 0 || out0 >= n_out) continue;
    }
#pragma unroll
    for (int t = 0; t < T; t++) {
      const float v0 = acc[0][t] * in.rstd, v1 = acc[1][t] * in.rstd;
      if (lane != 0 || t >= nt) continue;
      store_out(mode, rows, out0, n_out, v0, v1, bias, y + (i64)(t0 + t) * ldy);
    }
  }
}

#define MATVEC_KERNEL_BOUNDS(NAME, T, W, BOUNDS)                                                \
  extern "C" __global__ void BOUNDS NAME(                                                        \
      const Segment* segs, int nseg, int K, int n_out, int mode, int split, const float* x,      \
      int ldx, int ntok, const float* norm_a, const float* norm_b, const float* norm_w,          \
      float eps, float* norm_sum, const float* bias, float* y, int ldy) {                        \
    matvec<T, W>(segs, nseg, K, n_out, mode, split, x, ldx, ntok, norm_a, norm_b, norm_w, eps,   \
                 norm_sum, bias, y, ldy);                                                        \
  }
// Warps a block (linear.py's MV_WARPS): at T = 1 with a plain x blocks of 4, many of them, were
// faster on the H100 than blocks of 8 (24 warps an SM at 80 registers); from T = 2, blocks of 8
// with the grid of a norm-fused launch capped (its prologue is then paid by fewer blocks).
#define MATVEC_KERNEL(NAME, T, W) MATVEC_KERNEL_BOUNDS(NAME, T, W, __launch_bounds__(W * 32))
MATVEC_KERNEL(matvec_t1, 1, 4)
MATVEC_KERNEL(matvec_t2, 2, 8)
MATVEC_KERNEL(matvec_t4, 4, 8)
MATVEC_KERNEL(matvec_t8, 8, 8)
// One token with a prologue (norm-fused or int8 x): blocks of 8 warps, 3 an SM (linear.py
// MV_NORMED_WARPS), so half as many blocks re-read x, the residual and the norm weight from L2.
// With int8 x, held to the <= 80 registers that 3 blocks an SM allow (the one-pass prologue took
// 84-92); the f32 path (Q8X = 0) would spill 12-212 bytes under that bound, and keeps its 88-104.
#if Q8X
MATVEC_KERNEL_BOUNDS(matvec_t1_w8, 1, 8, __launch_bounds__(256, 3))
#else
MATVEC_KERNEL(matvec_t1_w8, 1, 8)
#endif

// ---- one token, its weights staged in shared memory (linear.py MV_STAGE) ----------------------
// Block b owns row teams [b * tpb, (b + 1) * tpb) (a team: rows 2t, 2t + 1, or gate/up rows t,
// t + n_out) and copies their bytes into shared memory with cp.async *before* pdl_wait(). A
// block asks at most half an SM's shared memory, so while the previous kernel's block still
// runs on the SM this one's copy streams from HBM beside it (PDL starts this launch once every
// block of that one has passed its own wait); after the wait the block makes x (make_x) and
// its warps dot a row pair at a time from shared memory. What stays on the critical path is
// the prologue and the dot, not the weight's trip from HBM.
// The copied ranges are the pieces: each row range (mode 1: gate and up) cut at segment ends.
#define STAGE_PIECES 8      // linear.py stages weights of at most 4 segments
struct Piece {
  int row0, rows, qtype, q_rb, s_rb;
  int q, s;                 // byte offsets of its rows (and their scale bytes) in the stage
};

// n bytes from src to dst (shared, 16-byte aligned) in 16-byte copies where src and n allow,
// else 4-byte ones (linear.py stages only rows of whole 4-byte words).
__device__ __forceinline__ void stage_copy(u8* dst, const u8* src, int n) {
  if (((reinterpret_cast<u64>(src) | (u64)n) & 15) == 0)
    for (int i = 16 * threadIdx.x; i < n; i += 16 * blockDim.x) cp_async16(dst + i, src + i);
  else
    for (int i = 4 * threadIdx.x; i < n; i += 4 * blockDim.x) cp_async4(dst + i, src + i);
}

template <int W>
__device__ __forceinline__ void matvec_staged(const Segment* segs, int nseg, int K, int n_out, int mode, int tpb,
                                              int stage_off, const float* x, const float* norm_a,
                                              const float* norm_b, const float* norm_w, float eps,
                                              float* norm_sum, const float* bias, float* y) {
  DYNAMIC_SMEM(float, xs);
  __shared__ float red[32];
  __shared__ Piece pieces[STAGE_PIECES];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int teams = mode == 0 ? (n_out + 1) / 2 : n_out;
  const int t_lo = blockIdx.x * tpb, t_hi = min(t_lo + tpb, teams);
  u8* stage = reinterpret_cast<u8*>(xs) + stage_off;
  int np = 0, off = 0;
  for (int range = 0; range < (mode == 0 ? 1 : 2); range++) {
    const int lo = mode == 0 ? 2 * t_lo : t_lo + range * n_out;
    const int hi = mode == 0 ? min(2 * t_hi, n_out) : t_hi + range * n_out;
    for (int i = 0; i < nseg && np < STAGE_PIECES; i++) {
      const Segment& g = segs[i];
      const int a = max(lo, (int)g.row0), b = min(hi, (int)(g.row0 + g.rows));
      if (a >= b) continue;
      Piece p{a, b - a, (int)g.qtype, (int)g.q_row_bytes, (int)g.s_row_bytes, off, 0};
      stage_copy(stage + off, reinterpret_cast<const u8*>(g.q) + (i64)(a - g.row0) * p.q_rb, p.rows * p.q_rb);
      off += (p.rows * p.q_rb + 15) & ~15;
      p.s = off;
      if (p.s_rb > 0) {
        stage_copy(stage + off, reinterpret_cast<const u8*>(g.s) + (i64)(a - g.row0) * p.s_rb, p.rows * p.s_rb);
        off += (p.rows * p.s_rb + 15) & ~15;
      }
      if (threadIdx.x == 0) pieces[np] = p;
      np++;
    }
  }
  cp_async_commit();
  pdl_wait();
  pdl_launch();

  XIn<1> in;
  make_x<1>(xs, x, K, 0, 1, K, norm_a, norm_b, norm_w, eps, norm_sum, red, in);
  cp_async_wait<0>();
  __syncthreads();          // every thread's copies (and pieces[]) visible to every warp
  for (int t = t_lo + warp; t < t_hi; t += W) {      // a warp a row pair
    int rows[2];
    rows[0] = mode == 0 ? 2 * t : t;
    rows[1] = mode == 0 ? min(2 * t + 1, n_out - 1) : t + n_out;
    const u8* q[2];
    const u8* s[2];
    int qt = 0;
#pragma unroll
    for (int r = 0; r < 2; r++) {
      int i = 0;
      while (i + 1 < np && rows[r] >= pieces[i].row0 + pieces[i].rows) i++;
      const Piece& p = pieces[i];
      // offsets from `stage`, not pointers kept in pieces[]: the compiler then knows the loads
      // are of shared memory (LDS, not generic loads queued behind the next launch's cp.async)
      q[r] = stage + p.q + (rows[r] - p.row0) * p.q_rb;
      s[r] = stage + p.s + (rows[r] - p.row0) * p.s_rb;
      qt = p.qtype;
    }
    float acc[2][1] = {{0.0f}, {0.0f}};
    DISPATCH_QTYPE(qt, (dot_rows<FMT, 1>(q, s, K / FMT::QK * FMT::C, lane, 32, in.xr, in.xds, in.xq, acc)));
    const float v0 = warp_sum(acc[0][0]) * in.rstd, v1 = warp_sum(acc[1][0]) * in.rstd;
    if (lane == 0) store_out(mode, rows, rows[0], n_out, v0, v1, bias, y);
  }
}

// 16 warps (8 measured slower: 1.7B step 0.987 against 0.936 ms, its dot exposed after the wait);
// <= 64 registers, so two blocks (this launch's and the next one's) fit an SM's register file.
extern "C" __global__ void __launch_bounds__(512, 2) matvec_t1_stage(
    const Segment* segs, int nseg, int K, int n_out, int mode, int tpb, int stage_off, const float* x,
    const float* norm_a, const float* norm_b, const float* norm_w, float eps, float* norm_sum,
    const float* bias, float* y) {
  matvec_staged<16>(segs, nseg, K, n_out, mode, tpb, stage_off, x, norm_a, norm_b, norm_w, eps, norm_sum, bias, y);
}
