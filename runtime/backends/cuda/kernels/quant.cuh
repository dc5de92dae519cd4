// GGUF weight formats as uploaded by weights.py, and a decoder per format.
//
// Reference: ggml-quants.c dequantize_row_* (and gguf-py quants.py, the CPU reference).
// At upload, each row's blocks are split into a 16-byte-aligned payload array `q`
// [rows, nb, P] and, for formats whose block header breaks that alignment, a scale array
// `s` [rows, nb, S] (Q4_K and Q5_K keep their 144/176-byte blocks whole: already aligned).
//
// A row is read in chunks: chunk c (0 <= c < C) of block ib is one 16-byte payload load that
// decodes to NR runs of RL consecutive columns starting at col[0], col[1]. Lanes of a warp
// take consecutive chunks, so a warp's loads are contiguous.
#pragma once
#include "common.cuh"

enum QType {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30
};

// Small unsigned integer (< 2^23) to float in two full-rate instructions (OR + FADD)
// instead of one quarter-rate I2F conversion.
__device__ __forceinline__ float u2f(u32 v) { return __uint_as_float(0x4B000000u | v) - 8388608.0f; }

__device__ __forceinline__ uint4 load16(const u8* p) { return *reinterpret_cast<const uint4*>(p); }

__device__ __forceinline__ u32 word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Each Fmt<QT> has load(), which reads chunk c of block ib into a small State (one 16-byte
// payload load plus scales) and sets the first column of each run, and get4(st, run, i),
// which returns weights i..i+3 of a run (run and i compile-time after unrolling), so a
// caller never holds a whole chunk of floats in registers.
template <int QT> struct Fmt;

struct State {
  uint4 v, h;              // payload and, for the 5/6-bit formats, the high bits
  float d0, n0, d1, n1;    // per-run scale and offset: w = d * q + n
};

template <> struct Fmt<F32> {
  static constexpr int QK = 32, P = 128, S = 0, C = 8, NR = 1, RL = 4;
  __device__ static void load(const u8* q, const u8*, int ib, int c, State& st, int* col) {
    st.v = load16(q + ib * P + 16 * c);
    col[0] = ib * QK + 4 * c;
  }
  __device__ static float4 get4(const State& st, int, int) {
    return make_float4(__uint_as_float(st.v.x), __uint_as_float(st.v.y), __uint_as_float(st.v.z), __uint_as_float(st.v.w));
  }
};

template <> struct Fmt<F16> {
  static constexpr int QK = 32, P = 64, S = 0, C = 4, NR = 1, RL = 8;
  __device__ static void load(const u8* q, const u8*, int ib, int c, State& st, int* col) {
    st.v = load16(q + ib * P + 16 * c);
    col[0] = ib * QK + 8 * c;
  }
  __device__ static float4 get4(const State& st, int, int i) {
    const u32 a = word_of(st.v, i / 2), b = word_of(st.v, i / 2 + 1);
    return make_float4(f16_to_f32((u16)(a & 0xFFFF)), f16_to_f32((u16)(a >> 16)),
                 f16_to_f32((u16)(b & 0xFFFF)), f16_to_f32((u16)(b >> 16)));
  }
};

template <> struct Fmt<BF16> {
  static constexpr int QK = 32, P = 64, S = 0, C = 4, NR = 1, RL = 8;
  __device__ static void load(const u8* q, const u8*, int ib, int c, State& st, int* col) {
    st.v = load16(q + ib * P + 16 * c);
    col[0] = ib * QK + 8 * c;
  }
  __device__ static float4 get4(const State& st, int, int i) {
    const u32 a = word_of(st.v, i / 2), b = word_of(st.v, i / 2 + 1);
    return make_float4(__uint_as_float(a << 16), __uint_as_float(a & 0xFFFF0000u),
                 __uint_as_float(b << 16), __uint_as_float(b & 0xFFFF0000u));
  }
};

// f(byte, k) for the four bytes k = 0..3 of a payload word.
template <class F>
__device__ __forceinline__ float4 map4(u32 w, F f) {
  return make_float4(f(w & 0xFF, 0), f((w >> 8) & 0xFF, 1), f((w >> 16) & 0xFF, 2), f(w >> 24, 3));
}

// Q8_0: 32 int8 and one f16 scale; here q = [nb][32] int8, s = [nb] f16.
template <> struct Fmt<Q8_0> {
  static constexpr int QK = 32, P = 32, S = 2, C = 2, NR = 1, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int c, State& st, int* col) {
    st.v = load16(q + ib * P + 16 * c);
    st.d0 = f16_to_f32(reinterpret_cast<const u16*>(s)[ib]);
    st.n0 = -128.0f * st.d0;
    col[0] = ib * QK + 16 * c;
  }
  __device__ static float4 get4(const State& st, int, int i) {
    return map4(word_of(st.v, i / 4), [&](u32 b, int) { return st.d0 * u2f(b ^ 0x80u) + st.n0; });
  }
};

// Q4_0 / Q4_1: byte i holds column i (low nibble) and column i + 16 (high nibble).
template <> struct Fmt<Q4_0> {
  static constexpr int QK = 32, P = 16, S = 2, C = 1, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int, State& st, int* col) {
    st.v = load16(q + ib * P);
    st.d0 = f16_to_f32(reinterpret_cast<const u16*>(s)[ib]);
    st.n0 = -8.0f * st.d0;
    col[0] = ib * QK;
    col[1] = ib * QK + 16;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 w = word_of(st.v, i / 4) >> (4 * run);
    return map4(w, [&](u32 b, int) { return st.d0 * u2f(b & 0xF) + st.n0; });
  }
};

template <> struct Fmt<Q4_1> {
  static constexpr int QK = 32, P = 16, S = 4, C = 1, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int, State& st, int* col) {
    st.v = load16(q + ib * P);
    const u32 dm = reinterpret_cast<const u32*>(s)[ib];
    st.d0 = f16_to_f32((u16)(dm & 0xFFFF));
    st.n0 = f16_to_f32((u16)(dm >> 16));
    col[0] = ib * QK;
    col[1] = ib * QK + 16;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 w = word_of(st.v, i / 4) >> (4 * run);
    return map4(w, [&](u32 b, int) { return st.d0 * u2f(b & 0xF) + st.n0; });
  }
};

// Q5_0 / Q5_1: s = {d, m or 0, qh}; bit i of qh is the fifth bit of column i.
template <> struct Fmt<Q5_0> {
  static constexpr int QK = 32, P = 16, S = 8, C = 1, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int, State& st, int* col) {
    st.v = load16(q + ib * P);
    const uint2 h = reinterpret_cast<const uint2*>(s)[ib];
    st.d0 = f16_to_f32((u16)(h.x & 0xFFFF));
    st.n0 = -16.0f * st.d0;
    st.h.x = h.y;
    col[0] = ib * QK;
    col[1] = ib * QK + 16;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 hb = st.h.x >> (i + 16 * run), w = word_of(st.v, i / 4) >> (4 * run);
    return map4(w, [&](u32 b, int k) { return st.d0 * u2f((b & 0xF) | (((hb >> k) & 1) << 4)) + st.n0; });
  }
};

template <> struct Fmt<Q5_1> {
  static constexpr int QK = 32, P = 16, S = 8, C = 1, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int, State& st, int* col) {
    st.v = load16(q + ib * P);
    const uint2 h = reinterpret_cast<const uint2*>(s)[ib];
    st.d0 = f16_to_f32((u16)(h.x & 0xFFFF));
    st.n0 = f16_to_f32((u16)(h.x >> 16));
    st.h.x = h.y;
    col[0] = ib * QK;
    col[1] = ib * QK + 16;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 hb = st.h.x >> (i + 16 * run), w = word_of(st.v, i / 4) >> (4 * run);
    return map4(w, [&](u32 b, int k) { return st.d0 * u2f((b & 0xF) | (((hb >> k) & 1) << 4)) + st.n0; });
  }
};

// Q4_K: 256 columns in 8 sub-blocks of 32 with 6-bit scales and mins; block =
// {d f16, dmin f16, scales[12], qs[128]}; qs byte 32p + l holds column 64p + l (low
// nibble, sub-block 2p) and 64p + 32 + l (high nibble, sub-block 2p + 1).
__device__ __forceinline__ u32 byte_of(u32 w, int k) { return (w >> (8 * k)) & 0xFF; }

// The block header {d, dmin, scales[12]} as one 16-byte load (the 8 lanes reading a block's
// chunks share it): scale and min of sub-blocks 2p and 2p + 1, ggml's get_scale_min_k4 on
// the scale bytes y | z | w.
__device__ __forceinline__ void kquant_scale_min(const uint4& hd, int j, float& sc, float& mn) {
  const int k = j & 3;
  const u32 y = byte_of(hd.y, k), z = byte_of(hd.z, k), w = byte_of(hd.w, k);
  sc = u2f(j < 4 ? y & 63 : (w & 0xF) | ((y >> 6) << 4));
  mn = u2f(j < 4 ? z & 63 : (w >> 4) | ((z >> 6) << 4));
}

__device__ __forceinline__ void kquant_scales(const u8* b, int p, State& st) {
  const uint4 hd = load16(b);
  const float d = f16_to_f32((u16)(hd.x & 0xFFFF)), dmin = f16_to_f32((u16)(hd.x >> 16));
  float sc0, mn0, sc1, mn1;
  kquant_scale_min(hd, 2 * p, sc0, mn0);
  kquant_scale_min(hd, 2 * p + 1, sc1, mn1);
  st.d0 = d * sc0; st.n0 = -dmin * mn0;
  st.d1 = d * sc1; st.n1 = -dmin * mn1;
}

template <> struct Fmt<Q4_K> {
  static constexpr int QK = 256, P = 144, S = 0, C = 8, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8*, int ib, int c, State& st, int* col) {
    const u8* b = q + ib * P;
    const int p = c >> 1, l0 = (c & 1) * 16;
    st.v = load16(b + 16 + 16 * c);
    kquant_scales(b, p, st);
    col[0] = ib * QK + 64 * p + l0;
    col[1] = ib * QK + 64 * p + 32 + l0;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 w = word_of(st.v, i / 4) >> (4 * run);
    const float d = run == 0 ? st.d0 : st.d1, n = run == 0 ? st.n0 : st.n1;
    return map4(w, [&](u32 b, int) { return d * u2f(b & 0xF) + n; });
  }
};

// Q5_K: as Q4_K plus qh[32] (bit 2p / 2p + 1 of qh[l] is the fifth bit); block =
// {d, dmin, scales[12], qh[32], qs[128]}. h keeps qh shifted so bit 0 / 1 are ours.
template <> struct Fmt<Q5_K> {
  static constexpr int QK = 256, P = 176, S = 0, C = 8, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8*, int ib, int c, State& st, int* col) {
    const u8* b = q + ib * P;
    const int p = c >> 1, l0 = (c & 1) * 16;
    st.v = load16(b + 48 + 16 * c);
    const uint4 h = load16(b + 16 + l0);
    const int sh = 2 * p;
    st.h = make_uint4(h.x >> sh, h.y >> sh, h.z >> sh, h.w >> sh);
    kquant_scales(b, p, st);
    col[0] = ib * QK + 64 * p + l0;
    col[1] = ib * QK + 64 * p + 32 + l0;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 hw = word_of(st.h, i / 4) >> run;   // bit 8k of hw: fifth bit of byte i + k
    const u32 w = word_of(st.v, i / 4) >> (4 * run);
    const float d = run == 0 ? st.d0 : st.d1, n = run == 0 ? st.n0 : st.n1;
    return map4(w, [&](u32 b, int k) { return d * u2f((b & 0xF) | (((hw >> (8 * k)) & 1) << 4)) + n; });
  }
};

// Q6_K: q = {ql[128], qh[64], scales[16] int8} per block, s = [nb] f16 d. In half n
// (128 columns), ql byte 64n + m holds column 128n + m (low nibble) and 128n + 64 + m
// (high); qh[32n + m % 32] holds their top two bits at shift 2 (m / 32) and 2 (m / 32) + 4.
template <> struct Fmt<Q6_K> {
  static constexpr int QK = 256, P = 208, S = 2, C = 8, NR = 2, RL = 16;
  __device__ static void load(const u8* q, const u8* s, int ib, int c, State& st, int* col) {
    const u8* b = q + ib * P;
    const int n = c >> 2, m0 = (c & 3) * 16;
    st.v = load16(b + 16 * c);
    const uint4 h = load16(b + 128 + 32 * n + (m0 & 31));
    const int sh = 2 * (m0 >> 5);
    st.h = make_uint4(h.x >> sh, h.y >> sh, h.z >> sh, h.w >> sh);
    const float d = f16_to_f32(reinterpret_cast<const u16*>(s)[ib]);
    const uint4 scales = load16(b + 192);      // 16 int8 sub-block scales, one load
    const int si = 8 * n + ((m0 & 31) >> 4) + 2 * (m0 >> 5);
    st.d0 = d * (float)(i8)byte_of(word_of(scales, si >> 2), si & 3); st.n0 = -32.0f * st.d0;
    st.d1 = d * (float)(i8)byte_of(word_of(scales, (si + 4) >> 2), si & 3); st.n1 = -32.0f * st.d1;
    col[0] = ib * QK + 128 * n + m0;
    col[1] = ib * QK + 128 * n + 64 + m0;
  }
  __device__ static float4 get4(const State& st, int run, int i) {
    const u32 hw = word_of(st.h, i / 4) >> (4 * run);  // bits 8k..8k+1: top bits of byte i + k
    const u32 w = word_of(st.v, i / 4) >> (4 * run);
    const float d = run == 0 ? st.d0 : st.d1, n = run == 0 ? st.n0 : st.n1;
    return map4(w, [&](u32 b, int k) { return d * u2f((b & 0xF) | (((hw >> (8 * k)) & 3) << 4)) + n; });
  }
};

// Split decode for the matvec dot: w = d * q + n per run with q a small integer held exactly
// in a float, so a run of 16 weights costs one FMA each (sum q x) and the scale (and min)
// are applied once a run. q comes from a byte through one byte_perm into the mantissa of
// 2^23 and one FADD that also removes the format's offset (Q6_K 32, Q8_0 128), so the
// symmetric formats have no n term. Split<FMT>::ok is false for formats decoded by get4.
__device__ __forceinline__ float4 bytes_to_f4(u32 w, float bias) {
  return make_float4(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540)) - bias,
                     __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7541)) - bias,
                     __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7542)) - bias,
                     __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7543)) - bias);
}

template <class FMT> struct Split { static constexpr bool ok = false, has_n = false; };

template <> struct Split<Fmt<Q4_K>> {
  static constexpr bool ok = true, has_n = true;
  __device__ static float4 q4(const State& st, int run, int i) {
    return bytes_to_f4((word_of(st.v, i / 4) >> (4 * run)) & 0x0F0F0F0Fu, 8388608.0f);
  }
  __device__ static float d(const State& st, int run) { return run == 0 ? st.d0 : st.d1; }
  __device__ static float n(const State& st, int run) { return run == 0 ? st.n0 : st.n1; }
};

template <> struct Split<Fmt<Q6_K>> {
  static constexpr bool ok = true, has_n = false;
  __device__ static float4 q4(const State& st, int run, int i) {
    const u32 lo = (word_of(st.v, i / 4) >> (4 * run)) & 0x0F0F0F0Fu;
    const u32 hi = ((word_of(st.h, i / 4) >> (4 * run)) & 0x03030303u) << 4;
    return bytes_to_f4(lo | hi, 8388608.0f + 32.0f);
  }
  __device__ static float d(const State& st, int run) { return run == 0 ? st.d0 : st.d1; }
  __device__ static float n(const State&, int) { return 0.0f; }
};

template <> struct Split<Fmt<Q8_0>> {
  static constexpr bool ok = true, has_n = false;
  __device__ static float4 q4(const State& st, int, int i) {
    return bytes_to_f4(word_of(st.v, i / 4) ^ 0x80808080u, 8388608.0f + 128.0f);
  }
  __device__ static float d(const State& st, int) { return st.d0; }
  __device__ static float n(const State&, int) { return 0.0f; }
};

// Int8 decode for the dp4a matvec (matvec.cu with Q8X at one token): a run of 16 weights as
// 4 words of 4 small integers q (w = d * q + n per run), dotted with 16 int8 activations by 4
// __dp4a; the scale and min are applied once a run. Q8_0's bytes are its signed values; the
// unsigned formats' offsets (Q4_0 8, Q5_0 16, Q6_K 32) are in n, so every q fits a signed byte.
template <class FMT> struct Int8 { static constexpr bool ok = false; };

struct Int8PerRun {       // K-quants: a scale and min per run (State d0/n0, d1/n1)
  static constexpr bool ok = true, has_n = true;
  __device__ static float d(const State& st, int run) { return run == 0 ? st.d0 : st.d1; }
  __device__ static float n(const State& st, int run) { return run == 0 ? st.n0 : st.n1; }
};
struct Int8PerBlock {     // 32-column formats: one scale (and offset) for both runs
  static constexpr bool ok = true, has_n = true;
  __device__ static float d(const State& st, int) { return st.d0; }
  __device__ static float n(const State& st, int) { return st.n0; }
  __device__ static u32 q4(const State& st, int run, int w) { return (word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu; }
};

template <> struct Int8<Fmt<Q4_K>> : Int8PerRun {
  __device__ static u32 q4(const State& st, int run, int w) { return (word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu; }
};
template <> struct Int8<Fmt<Q6_K>> : Int8PerRun {
  __device__ static u32 q4(const State& st, int run, int w) {
    return ((word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu) | (((word_of(st.h, w) >> (4 * run)) & 0x03030303u) << 4);
  }
};
template <> struct Int8<Fmt<Q5_K>> : Int8PerRun {     // the fifth bit at bit 8k of h >> run
  __device__ static u32 q4(const State& st, int run, int w) {
    return ((word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu) | (((word_of(st.h, w) >> run) & 0x01010101u) << 4);
  }
};
template <> struct Int8<Fmt<Q4_0>> : Int8PerBlock {};
template <> struct Int8<Fmt<Q4_1>> : Int8PerBlock {};
// Q5_0 / Q5_1: bits 4w .. 4w + 3 of the run's 16 qh bits spread to bit 4 of each byte
// (x * 0x204081 puts bit k of x at bit 8k).
struct Int8Q5 : Int8PerBlock {
  __device__ static u32 q4(const State& st, int run, int w) {
    const u32 hb = (st.h.x >> (4 * w + 16 * run)) & 0xFu;
    return ((word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu) | (((hb * 0x204081u) & 0x01010101u) << 4);
  }
};
template <> struct Int8<Fmt<Q5_0>> : Int8Q5 {};
template <> struct Int8<Fmt<Q5_1>> : Int8Q5 {};
template <> struct Int8<Fmt<Q8_0>> : Int8PerBlock {
  static constexpr bool has_n = false;
  __device__ static u32 q4(const State& st, int, int w) { return word_of(st.v, w); }
};

// Weights i..i+RL of a run to dst: float4 stores (f32), or 8 halves a 16-byte store (f16).
template <class FMT>
__device__ __forceinline__ void store_run(const State& st, int run, float* dst) {
#pragma unroll
  for (int i = 0; i < FMT::RL; i += 4) *reinterpret_cast<float4*>(dst + i) = FMT::get4(st, run, i);
}

// f16 decode in half2 arithmetic for the common formats: a byte b < 1024 becomes the half
// 1024 + b through one byte_perm into the mantissa of 0x6400, HSUB2 removes 1024 and the
// format's offset exactly (small integers), and one HFMA2 / HMUL2 applies the run's scale
// (and min), rounding once: ~1.75 instructions a weight against ~6 through get4 and f32,
// which made the decode the bulk of matmul.cu's instructions.
__device__ __forceinline__ __half2 as_half2(u32 v) { return *reinterpret_cast<const __half2*>(&v); }
__device__ __forceinline__ u32 as_u32(__half2 h) { return *reinterpret_cast<const u32*>(&h); }

__device__ __forceinline__ __half2 fma2(__half2 a, __half2 b, __half2 c) {
#ifdef EMULATOR
  const float2 x = __half22float2(a), y = __half22float2(b), z = __half22float2(c);
  return __floats2half2_rn(fmaf(x.x, y.x, z.x), fmaf(x.y, y.y, z.y));
#else
  return __hfma2(a, b, c);
#endif
}

// Bytes 0..3 of w (values < 1024 - off) as four halves minus off, scaled: d * (b - off) + n.
// off is a half2 bit pattern (1024 + offset in both halves), so no conversion is spent on it.
template <bool HAS_N>
__device__ __forceinline__ uint2 bytes_to_h4(u32 w, u32 off, __half2 d, __half2 n) {
  const __half2 lo = __hsub2(as_half2(__byte_perm(w, 0x64646464u, 0x4140)), as_half2(off));
  const __half2 hi = __hsub2(as_half2(__byte_perm(w, 0x64646464u, 0x4342)), as_half2(off));
  if constexpr (HAS_N) return make_uint2(as_u32(fma2(lo, d, n)), as_u32(fma2(hi, d, n)));
  else return make_uint2(as_u32(__hmul2(lo, d)), as_u32(__hmul2(hi, d)));
}

// Half<FMT>::run16 decodes the 16 weights of a run (RL = 16 in these formats) to halves,
// h[0] = columns 0..7, h[1] = 8..15; the scale (and min) converted once a run.
template <class FMT> struct Half { static constexpr bool ok = false; };

template <> struct Half<Fmt<Q4_K>> {
  static constexpr bool ok = true;
  __device__ static void run16(const State& st, int run, uint4* h) {
    const __half2 d = __float2half2_rn(run == 0 ? st.d0 : st.d1), n = __float2half2_rn(run == 0 ? st.n0 : st.n1);
    uint2 q[4];
#pragma unroll
    for (int w = 0; w < 4; w++) q[w] = bytes_to_h4<true>((word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu, 0x64006400u, d, n);
    h[0] = make_uint4(q[0].x, q[0].y, q[1].x, q[1].y);
    h[1] = make_uint4(q[2].x, q[2].y, q[3].x, q[3].y);
  }
};

template <> struct Half<Fmt<Q6_K>> {
  static constexpr bool ok = true;
  __device__ static void run16(const State& st, int run, uint4* h) {
    const __half2 d = __float2half2_rn(run == 0 ? st.d0 : st.d1);
    uint2 q[4];
#pragma unroll
    for (int w = 0; w < 4; w++) {
      const u32 lo = (word_of(st.v, w) >> (4 * run)) & 0x0F0F0F0Fu;
      const u32 hi = ((word_of(st.h, w) >> (4 * run)) & 0x03030303u) << 4;
      q[w] = bytes_to_h4<false>(lo | hi, 0x64206420u, d, d);          // 1024 + 32
    }
    h[0] = make_uint4(q[0].x, q[0].y, q[1].x, q[1].y);
    h[1] = make_uint4(q[2].x, q[2].y, q[3].x, q[3].y);
  }
};

template <> struct Half<Fmt<Q8_0>> {
  static constexpr bool ok = true;
  __device__ static void run16(const State& st, int, uint4* h) {
    const __half2 d = __float2half2_rn(st.d0);
    uint2 q[4];
#pragma unroll
    for (int w = 0; w < 4; w++) q[w] = bytes_to_h4<false>(word_of(st.v, w) ^ 0x80808080u, 0x64806480u, d, d);  // 1024 + 128
    h[0] = make_uint4(q[0].x, q[0].y, q[1].x, q[1].y);
    h[1] = make_uint4(q[2].x, q[2].y, q[3].x, q[3].y);
  }
};

// Columns i..i+7 of a run as 8 halves, through get4 and f32.
template <class FMT>
__device__ __forceinline__ uint4 pack8(const State& st, int run, int i) {
  const float4 a = FMT::get4(st, run, i), b = FMT::get4(st, run, i + 4);
  return make_uint4(pack_half2(a.x, a.y), pack_half2(a.z, a.w), pack_half2(b.x, b.y), pack_half2(b.z, b.w));
}

// The 16 columns of a run (RL = 16) as halves: h[0] = 0..7, h[1] = 8..15.
template <class FMT>
__device__ __forceinline__ void pack16(const State& st, int run, uint4* h) {
  if constexpr (Half<FMT>::ok) {
    Half<FMT>::run16(st, run, h);
  } else {
    h[0] = pack8<FMT>(st, run, 0);
    h[1] = pack8<FMT>(st, run, 8);
  }
}

template <class FMT>
__device__ __forceinline__ void store_run(const State& st, int run, __half* dst) {
  if constexpr (FMT::RL == 16) {
    uint4 h[2];
    pack16<FMT>(st, run, h);
    *reinterpret_cast<uint4*>(dst) = h[0];
    *reinterpret_cast<uint4*>(dst + 8) = h[1];
  } else if constexpr (FMT::RL % 8 == 0) {
#pragma unroll
    for (int i = 0; i < FMT::RL; i += 8) *reinterpret_cast<uint4*>(dst + i) = pack8<FMT>(st, run, i);
  } else {
#pragma unroll
    for (int i = 0; i < FMT::RL; i += 4) {
      const float4 a = FMT::get4(st, run, i);
      *reinterpret_cast<uint2*>(dst + i) = make_uint2(pack_half2(a.x, a.y), pack_half2(a.z, a.w));
    }
  }
}

// Runs BODY with FMT = Fmt<qt> for a run-time qtype (uniform across the warp). A module
// compiled with -DQTYPES=<mask> (bit qt set for each format it must decode) holds only those
// decoders: matmul.cu is built per weight format, as its K loop with all eleven inlined made
// warps stall on instruction fetch.
#ifndef QTYPES
#define QTYPES 0xFFFFFFFFu
#endif
#define QTYPE_CASE(QT, BODY) \
  case QT: if constexpr (((QTYPES) >> QT) & 1u) { typedef Fmt<QT> FMT; BODY; } break;
#define DISPATCH_QTYPE(qt, BODY)                                                           \
  switch (qt) {                                                                            \
    QTYPE_CASE(F32, BODY) QTYPE_CASE(F16, BODY) QTYPE_CASE(BF16, BODY)                     \
    QTYPE_CASE(Q4_0, BODY) QTYPE_CASE(Q4_1, BODY) QTYPE_CASE(Q5_0, BODY)                   \
    QTYPE_CASE(Q5_1, BODY) QTYPE_CASE(Q8_0, BODY) QTYPE_CASE(Q4_K, BODY)                   \
    QTYPE_CASE(Q5_K, BODY) QTYPE_CASE(Q6_K, BODY)                                          \
    default: break;                                                                        \
  }

// One weight segment: rows [row0, row0 + rows) of a linear weight stored in one qtype.
// Filled by weights.py as 8 int64 words: {qtype, row0, rows, q, s, q_row_bytes, s_row_bytes, 0}.
struct Segment {
  i64 qtype, row0, rows, q, s, q_row_bytes, s_row_bytes, pad;
};

__device__ __forceinline__ const Segment& find_segment(const Segment* segs, int nseg, int row) {
  int i = 0;
  while (i + 1 < nseg && row >= segs[i + 1].row0) i++;
  return segs[i];
}
