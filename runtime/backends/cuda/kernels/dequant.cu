// dequant: rows of a GGUF-format weight to f32 or f16.
//
//   out[i, k] = W[ids[i] if ids else row0 + i, k]        i < gridDim.x, k < K
// Serves the embedding lookup (ids = token ids, f32 out) and the per-layer scratch that
// prefill and large batches hand to cuBLAS (all rows, f16 or f32 out).
// Reference: gguf.quants.dequantize. Compile: nvcc -arch=sm_90 -cubin -I. dequant.cu.
// Grid: one block per output row; threads take consecutive 16-byte chunks (quant.cuh).
#include "quant.cuh"

__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void store4(__half* p, float4 v) {
  __half2* h = reinterpret_cast<__half2*>(p);
  h[0] = __floats2half2_rn(v.x, v.y);
  h[1] = __floats2half2_rn(v.z, v.w);
}

template <class FMT, class OUT>
__device__ __forceinline__ void dequant_row(const u8* q, const u8* s, int K, OUT* dst) {
  const int nchunks = K / FMT::QK * FMT::C;
  for (int idx = threadIdx.x; idx < nchunks; idx += blockDim.x) {
    State st;
    int col[2];
    FMT::load(q, s, idx / FMT::C, idx % FMT::C, st, col);
#pragma unroll
    for (int run = 0; run < FMT::NR; run++)
#pragma unroll
      for (int i = 0; i < FMT::RL; i += 4) store4(dst + col[run] + i, FMT::get4(st, run, i));
  }
}

template <class OUT>
__device__ __forceinline__ void dequant(const Segment* segs, int nseg, int K, const int* ids,
                                        int row0, OUT* out, int ldo) {
  const int row = ids != nullptr ? ids[blockIdx.x] : row0 + (int)blockIdx.x;
  const Segment& g = find_segment(segs, nseg, row);
  const u8* q = reinterpret_cast<const u8*>(g.q) + (row - g.row0) * g.q_row_bytes;
  const u8* s = reinterpret_cast<const u8*>(g.s) + (row - g.row0) * g.s_row_bytes;
  OUT* dst = out + (i64)blockIdx.x * ldo;
  DISPATCH_QTYPE((int)g.qtype, (dequant_row<FMT, OUT>(q, s, K, dst)));
}

extern "C" __global__ void dequant_f32(const Segment* segs, int nseg, int K, const int* ids,
                                       int row0, float* out, int ldo) {
  dequant(segs, nseg, K, ids, row0, out, ldo);
}

extern "C" __global__ void dequant_f16(const Segment* segs, int nseg, int K, const int* ids,
                                       int row0, __half* out, int ldo) {
  dequant(segs, nseg, K, ids, row0, out, ldo);
}
