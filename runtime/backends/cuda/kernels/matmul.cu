// matmul: Y = X W^T for batches of 9 to a few hundred tokens, W in any GGUF format, on the
// tensor cores, reading each weight byte once per tile of up to 64 tokens.
//
//   mode 0:  y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n])                 n < N
//   mode 1:  y[t, j] = silu(W[j] . x[t]) * (W[F + j] . x[t])             j < F = N / 2
//   x f16 [ntok, K] (row stride ldx), y f32 [ntok, ldy].
//
// Reference: dev/cuda/check.py check_linear (torch on gguf-dequantized weights).
// Compile check: nvcc -arch=sm_90 -cubin -I. matmul.cu (tests compile it for sm_80, sm_90).
//
// Work split: a block of 4 warps owns a tile of 64 weight rows (mode 0) or of 32 gate rows and
// their 32 up rows (mode 1), and BT = 16, 32 or 64 tokens (blockIdx.y); blockIdx.z splits K, so
// that the 32 tiles of a 2048-row weight still fill 132 SMs. Per step of 256 columns the block
// copies its X tile to shared memory with cp.async while two threads a row decode the row's
// chunks (quant.cuh) into a shared f16 tile; then warp w multiplies rows 16w..16w+15 by the
// tokens (mma.cuh, f32 accumulation). Unlike the cuBLAS path (dequant.cu into an f16 scratch,
// then a GEMM: 4 bytes of traffic a weight on top of its GGUF bytes), no f16 copy of W ever
// reaches memory.
// Split K: each split stores its partial tile to `part`; the last block of the tile to arrive
// (a ticket in `count`, left at 0 for the next launch) adds the splits in split order, so the
// result does not depend on which block finished last, and runs the epilogue.
#include "quant.cuh"
#include "mma.cuh"

constexpr int KS = 256;             // columns a step
constexpr int ROWS = 64;            // weight rows a tile
constexpr int LDS = KS + 8;         // shared row stride in halves: fragment loads hit 32 banks
constexpr int LDC = ROWS + 4;       // f32 stride of the accumulator tile
constexpr int THREADS = 128;
constexpr int MATMUL_MAX_SPLITS = 8;   // linear.py's MATMUL_MAX_SPLITS

// Weight row of tile row r: mode 0 rows tile * 64 + r; mode 1 gate rows tile * 32 + r (r < 32)
// and their up rows F + tile * 32 + r - 32. Rows past the end read the last valid one.
__device__ __forceinline__ int tile_row(int mode, int tile, int r, int n_out) {
  if (mode == 0) return min(tile * ROWS + r, n_out - 1);
  const int j = min(tile * (ROWS / 2) + r % (ROWS / 2), n_out - 1);
  return r < ROWS / 2 ? j : n_out + j;
}

// A thread's chunks of a step: c0, c0 + 2, ... < c1 of its row (its lane pair shares the row).
// The first PRE are loaded into registers one step ahead (load_chunks) and decoded to f16 in
// the shared tile the next step (store_chunks); the rest (F16, F32: 16 and 32 a thread) are
// loaded and decoded in place.
constexpr int PRE = 8;

template <class FMT>
__device__ __forceinline__ void load_chunks(const u8* q, const u8* s, int c0, int c1, State* st, int (*col)[2]) {
  constexpr int N = KS / FMT::QK * FMT::C / 2 < PRE ? KS / FMT::QK * FMT::C / 2 : PRE;
#pragma unroll
  for (int u = 0; u < N; u++)
    if (c0 + 2 * u < c1) FMT::load(q, s, (c0 + 2 * u) / FMT::C, (c0 + 2 * u) % FMT::C, st[u], col[u]);
}

template <class FMT>
__device__ __forceinline__ void store_chunks(const u8* q, const u8* s, int c0, int c1, int k0, const State* st,
                                             const int (*col)[2], __half* wrow) {
  constexpr int N = KS / FMT::QK * FMT::C / 2 < PRE ? KS / FMT::QK * FMT::C / 2 : PRE;
#pragma unroll
  for (int u = 0; u < N; u++)
    if (c0 + 2 * u < c1)
#pragma unroll
      for (int run = 0; run < FMT::NR; run++) store_run<FMT>(st[u], run, wrow + col[u][run] - k0);
  for (int c = c0 + 2 * N; c < c1; c += 2) {
    State t;
    int tc[2];
    FMT::load(q, s, c / FMT::C, c % FMT::C, t, tc);
#pragma unroll
    for (int run = 0; run < FMT::NR; run++) store_run<FMT>(t, run, wrow + tc[run] - k0);
  }
}

// acc[f] += W[16 warp .. +16][kk .. kk+16] . X[8 f .. 8 f + 8][kk .. kk+16]^T: the warp's
// weight fragment and two token fragments at a time through ldmatrix (mma.cuh).
template <int NF>
__device__ __forceinline__ void products(const __half* ws, const __half* xs, int kk, float (*acc)[4]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i = lane & 7, j = lane >> 3;
  u32 a[4];
  ldmatrix_x4(a, ws + (16 * warp + i + 8 * (j & 1)) * LDS + kk + 8 * (j >> 1));
#pragma unroll
  for (int f = 0; f < NF; f += 2) {
    u32 b[4];
    ldmatrix_x4(b, xs + (8 * (f + (j >> 1)) + i) * LDS + kk + 8 * (j & 1));
    mma_16816(acc[f], a, b);
    mma_16816(acc[f + 1], a, b + 2);
  }
}

template <int BT>
__device__ __forceinline__ void copy_x(const __half* x, int ldx, int t0, int ntok, int k0, int kw, __half* xs) {
  const int pieces = kw / 8;
  for (int p = threadIdx.x; p < BT * pieces; p += THREADS) {
    const int t = p / pieces, kq = p - t * pieces;
    cp_async16(xs + t * LDS + 8 * kq, x + (i64)min(t0 + t, ntok - 1) * ldx + k0 + 8 * kq);
  }
}

template <int NF>                   // token tile BT = 8 NF
__device__ __forceinline__ void matmul(const Segment* segs, int nseg, int K, int n_out, int mode,
                                       const __half* x, int ldx, int ntok, int ksplit, const float* bias,
                                       float* y, int ldy, float* part, int* count) {
  constexpr int BT = 8 * NF;
  DYNAMIC_SMEM(__half, sm);
  __half* ws = sm;                  // [ROWS][LDS] this step's weights
  __half* xs = sm + ROWS * LDS;     // [2][BT][LDS] this step's tokens and the next step's
  float* cs = reinterpret_cast<float*>(sm);   // [BT][LDC] the result, after the last step
  __shared__ int last;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int tile = blockIdx.x, t0 = blockIdx.y * BT, nt = min(BT, ntok - t0);
  const int kbeg = blockIdx.z * ksplit, kend = min(K, kbeg + ksplit), steps = (kend - kbeg + KS - 1) / KS;
  const int r = tid >> 1, half_ = tid & 1, row = tile_row(mode, tile, r, n_out);
  const Segment& seg = find_segment(segs, nseg, row);
  const u8* q = reinterpret_cast<const u8*>(seg.q) + (row - seg.row0) * seg.q_row_bytes;
  const u8* s = reinterpret_cast<const u8*>(seg.s) + (row - seg.row0) * seg.s_row_bytes;
  const int qt = (int)seg.qtype;
  State st[PRE];
  int col[PRE][2];
  // Before the wait: the first step's weights (they do not depend on the previous kernel).
  DISPATCH_QTYPE(qt, (load_chunks<FMT>(q, s, kbeg / FMT::QK * FMT::C + half_, min(kend, kbeg + KS) / FMT::QK * FMT::C,
                                       st, col)));
  pdl_wait();
  pdl_launch();
  copy_x<BT>(x, ldx, t0, ntok, kbeg, min(KS, kend - kbeg), xs);
  cp_async_commit();

  float acc[NF][4];
#pragma unroll
  for (int f = 0; f < NF; f++) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.0f;
  for (int i = 0; i < steps; i++) {
    const int k0 = kbeg + i * KS, kw = min(KS, kend - k0), k1 = k0 + KS, kw1 = min(KS, kend - k1);
    __half* xcur = xs + (i & 1) * BT * LDS;
    __syncthreads();                // the previous step's products are done: ws and the other xs are free
    if (i + 1 < steps) copy_x<BT>(x, ldx, t0, ntok, k1, kw1, xs + ((i + 1) & 1) * BT * LDS);
    cp_async_commit();
    DISPATCH_QTYPE(qt, (store_chunks<FMT>(q, s, k0 / FMT::QK * FMT::C + half_, (k0 + kw) / FMT::QK * FMT::C, k0,
                                          st, col, ws + r * LDS)));
    if (i + 1 < steps)
      DISPATCH_QTYPE(qt, (load_chunks<FMT>(q, s, k1 / FMT::QK * FMT::C + half_, (k1 + kw1) / FMT::QK * FMT::C,
                                           st, col)));
    cp_async_wait<1>();             // this step's tokens have landed
    __syncthreads();
    if (kw == KS) {
#pragma unroll 4
      for (int kk = 0; kk < KS; kk += 16) products<NF>(ws, xcur, kk, acc);
    } else {
      for (int kk = 0; kk < kw; kk += 16) products<NF>(ws, xcur, kk, acc);
    }
  }
  __syncthreads();                  // cs overlaps ws and xs

#pragma unroll
  for (int f = 0; f < NF; f++)
#pragma unroll
    for (int i = 0; i < 4; i++) cs[(8 * f + 2 * t4 + i % 2) * LDC + 16 * warp + g + 8 * (i / 2)] = acc[f][i];
  __syncthreads();
  if (gridDim.z > 1) {
    // float4s of the tile: row t of the tile is 16 of them (LDC keeps them 16-byte aligned)
    constexpr int V = BT * ROWS / 4 / THREADS;      // float4s a thread
    const i64 at = (i64)blockIdx.y * gridDim.x + blockIdx.x, stride = (i64)gridDim.y * gridDim.x;
    float4* mine = reinterpret_cast<float4*>(part) + (blockIdx.z * stride + at) * (BT * ROWS / 4);
#pragma unroll
    for (int v = 0; v < V; v++) {
      const int e = tid + v * THREADS, t = e / (ROWS / 4), c = e % (ROWS / 4);
      if (t < nt) mine[e] = *reinterpret_cast<const float4*>(cs + t * LDC + 4 * c);
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      last = atomicAdd(count + at, 1) == (int)gridDim.z - 1;
      if (last) count[at] = 0;      // ready for the next launch (graph replays)
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Sum the splits in split order, all of a thread's loads in flight at once.
    const float4* all = reinterpret_cast<const float4*>(part) + at * (BT * ROWS / 4);
#pragma unroll
    for (int v = 0; v < V; v += 2) {
      float4 sum[2] = {make_float4(0.0f, 0.0f, 0.0f, 0.0f), make_float4(0.0f, 0.0f, 0.0f, 0.0f)};
      float4 got[MATMUL_MAX_SPLITS][2];
#pragma unroll
      for (int z = 0; z < MATMUL_MAX_SPLITS; z++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
          const int e = tid + (v + u) * THREADS;
          if (z < (int)gridDim.z && v + u < V && e / (ROWS / 4) < nt) got[z][u] = ldcg(all + z * stride * (BT * ROWS / 4) + e);
        }
#pragma unroll
      for (int z = 0; z < MATMUL_MAX_SPLITS; z++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
          const int e = tid + (v + u) * THREADS;
          if (z < (int)gridDim.z && v + u < V && e / (ROWS / 4) < nt) {
            sum[u].x += got[z][u].x; sum[u].y += got[z][u].y; sum[u].z += got[z][u].z; sum[u].w += got[z][u].w;
          }
        }
#pragma unroll
      for (int u = 0; u < 2; u++) {
        const int e = tid + (v + u) * THREADS;
        if (v + u < V && e / (ROWS / 4) < nt) *reinterpret_cast<float4*>(cs + e / (ROWS / 4) * LDC + 4 * (e % (ROWS / 4))) = sum[u];
      }
    }
    __syncthreads();
  }
  if (mode == 0) {
    for (int e = tid; e < nt * ROWS; e += THREADS) {
      const int t = e / ROWS, rr = e % ROWS, n = tile * ROWS + rr;
      if (n < n_out) y[(i64)(t0 + t) * ldy + n] = cs[t * LDC + rr] + (bias != nullptr ? bias[n] : 0.0f);
    }
  } else {
    constexpr int H = ROWS / 2;
    for (int e = tid; e < nt * H; e += THREADS) {
      const int t = e / H, rr = e % H, j = tile * H + rr;
      const float gate = cs[t * LDC + rr], up = cs[t * LDC + H + rr];
      if (j < n_out) y[(i64)(t0 + t) * ldy + j] = gate / (1.0f + expf(-gate)) * up;
    }
  }
}

#define MATMUL_KERNEL(NF)                                                                              \
  extern "C" __global__ void __launch_bounds__(THREADS) matmul_t##NF(                                  \
      const Segment* segs, int nseg, int K, int n_out, int mode, const __half* x, int ldx, int ntok,    \
      int ksplit, const float* bias, float* y, int ldy, float* part, int* count) {                     \
    matmul<NF>(segs, nseg, K, n_out, mode, x, ldx, ntok, ksplit, bias, y, ldy, part, count);             \
  }
MATMUL_KERNEL(2)
MATMUL_KERNEL(4)
MATMUL_KERNEL(8)
