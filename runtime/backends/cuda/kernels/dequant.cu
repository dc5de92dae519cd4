// dequant: rows of a GGUF-format weight to f32 or f16.
//
//   out[i, k] = W[ids[i] if ids else row0 + i, k]        i < gridDim.x, k < K
// Serves the embedding lookup (ids = token ids, f32 out) and the per-layer scratch that
// prefill and large batches hand to cuBLAS (all rows, f16 or f32 out). An id -(j + 1) is a
// token the host has not seen yet: row j of the last sampling step, read from feed
// (sample_stats.cu / sample_select.cu write it), so a decode step can be launched before the
// previous step's tokens reach the host.
// Reference: gguf.quants.dequantize. Compile: nvcc -arch=sm_90 -cubin -I. dequant.cu.
// Grid: one block per output row; threads take consecutive 16-byte chunks (quant.cuh).
// Stores are 16 bytes a lane (8 halves or 4 floats): the cuBLAS path spends most of its time
// here, and 4-byte half2 stores (16 a lane per Q4_K chunk, each touching its own 32-byte
// sector) made the kernel store-bound. For f16 out of the formats whose even chunk and the
// next one hold adjacent runs of 16 (Q4_K, Q5_K, Q6_K, Q8_0), the two lanes swap 8 halves
// so that each store instruction writes a lane pair's whole 32-byte sector, not half of two.
#include "quant.cuh"

// Chunk 2j + 1 decodes to the columns right after chunk 2j's, run by run (C even, RL 16).
template <class FMT> struct Paired { static constexpr bool ok = false; };
template <> struct Paired<Fmt<Q4_K>> { static constexpr bool ok = true; };
template <> struct Paired<Fmt<Q5_K>> { static constexpr bool ok = true; };
template <> struct Paired<Fmt<Q6_K>> { static constexpr bool ok = true; };
template <> struct Paired<Fmt<Q8_0>> { static constexpr bool ok = true; };

template <class FMT, class OUT>
__device__ __forceinline__ void dequant_row(const u8* q, const u8* s, int K, OUT* dst) {
  const int nchunks = K / FMT::QK * FMT::C;
  if constexpr (Paired<FMT>::ok && sizeof(OUT) == 2) {
    // Lane pair (even e, odd o) holds columns [0, 16) and [16, 32) of each run: e keeps
    // [0, 8) and sends [8, 16), o sends [16, 24) and keeps [24, 32); store 1 writes [0, 16),
    // store 2 [16, 32). The trip count is warp-uniform (the shuffles need every lane).
    const int lane = threadIdx.x & 31;
    const bool odd = lane & 1;
    for (int idx = threadIdx.x; idx - lane < nchunks; idx += blockDim.x) {
      const bool on = idx < nchunks;
      State st{};
      int col[2] = {0, 0};
      if (on) FMT::load(q, s, idx / FMT::C, idx % FMT::C, st, col);
#pragma unroll
      for (int run = 0; run < FMT::NR; run++) {
        uint4 h[2];
        pack16<FMT>(st, run, h);
        const uint4 h0 = h[0], h1 = h[1];
        const uint4 send = odd ? h0 : h1;
        const uint4 got = make_uint4(__shfl_xor_sync(FULL_MASK, send.x, 1), __shfl_xor_sync(FULL_MASK, send.y, 1),
                                     __shfl_xor_sync(FULL_MASK, send.z, 1), __shfl_xor_sync(FULL_MASK, send.w, 1));
        if (!on) continue;
        OUT* p = dst + col[run];
        *reinterpret_cast<uint4*>(odd ? p - 8 : p) = odd ? got : h0;
        *reinterpret_cast<uint4*>(odd ? p + 8 : p + 16) = odd ? h1 : got;
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < nchunks; idx += blockDim.x) {
      State st;
      int col[2];
      FMT::load(q, s, idx / FMT::C, idx % FMT::C, st, col);
#pragma unroll
      for (int run = 0; run < FMT::NR; run++) store_run<FMT>(st, run, dst + col[run]);
    }
  }
}

template <class OUT>
__device__ __forceinline__ void dequant(const Segment* segs, int nseg, int K, const int* ids,
                                        const int* feed, int row0, OUT* out, int ldo) {
  int row = ids != nullptr ? ids[blockIdx.x] : row0 + (int)blockIdx.x;
  if (row < 0) row = feed[-row - 1];
  const Segment& g = find_segment(segs, nseg, row);
  const u8* q = reinterpret_cast<const u8*>(g.q) + (row - g.row0) * g.q_row_bytes;
  const u8* s = reinterpret_cast<const u8*>(g.s) + (row - g.row0) * g.s_row_bytes;
  OUT* dst = out + (i64)blockIdx.x * ldo;
  DISPATCH_QTYPE((int)g.qtype, (dequant_row<FMT, OUT>(q, s, K, dst)));
}

extern "C" __global__ void dequant_f32(const Segment* segs, int nseg, int K, const int* ids, const int* feed,
                                       int row0, float* out, int ldo) {
  pdl_wait();
  pdl_launch();
  dequant(segs, nseg, K, ids, feed, row0, out, ldo);
}

extern "C" __global__ void dequant_f16(const Segment* segs, int nseg, int K, const int* ids, const int* feed,
                                       int row0, __half* out, int ldo) {
  pdl_wait();
  pdl_launch();
  dequant(segs, nseg, K, ids, feed, row0, out, ldo);
}
