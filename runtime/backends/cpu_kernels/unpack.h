/* GGUF blocks -> a uniform unpacked row: w[i] = s[i / 16] * q[i] + m[i / 16], q unsigned 8-bit.
 *
 * Every block type the CPU kernels read has that form (Q8_0 stores q + 128, the offset types
 * fold their offset into m), so one int8 dot product serves all of them. Written as plain
 * loops over 16/32 bytes that gcc vectorizes for whatever target the including file sets.
 * Included by each ISA's kernel file; everything here is static.
 */
#include <stdint.h>
#include <string.h>

static inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) { bits = sign; }
        else {                                   /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) { bits = sign | 0x7f800000u | (man << 13); }
    else { bits = sign | ((exp + 127 - 15) << 23) | (man << 13); }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#if defined(ISA_AVX512) || defined(ISA_AVX2)
static inline float rd_fp16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
#else
static inline float rd_fp16(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return fp16_to_f32(h); }
#endif

#if defined(ISA_AVX2)
/* Byte j = 0xff where bit j of qh is set (AVX2 has no mask registers): byte j of the spread word
 * holds byte j/8 of qh, then bit j%8 of it is kept. */
static inline __m256i bits32(uint32_t qh) {
    __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
        _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
    __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
#endif

/* 16 bytes of nibble pairs -> 32 values: the low nibbles, then the high ones; with qh4, the
 * fifth bit of value j from bit j of that little-endian word. */
static inline void nibbles32(const uint8_t *qs, const uint8_t *qh4, uint8_t *q) {
    uint32_t qh = 0;
    if (qh4) memcpy(&qh, qh4, 4);
#if defined(ISA_AVX512) || defined(ISA_AVX2)
    __m128i v = _mm_loadu_si128((const __m128i *)qs), lo4 = _mm_set1_epi8(15);
    __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), lo4), _mm_and_si128(v, lo4));
#if defined(ISA_AVX512)
    n = _mm256_or_si256(n, _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(16)));
#else
    n = _mm256_or_si256(n, _mm256_and_si256(bits32(qh), _mm256_set1_epi8(16)));
#endif
    _mm256_storeu_si256((__m256i *)q, n);
#else
    for (int j = 0; j < 16; j++) { q[j] = qs[j] & 15; q[j + 16] = qs[j] >> 4; }
    for (int j = 0; j < 32; j++) q[j] |= (uint8_t)(((qh >> j) & 1u) << 4);
#endif
}

static void unpack_q4_0(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 32; b++, r += 18, q += 32, s += 2, m += 2) {
        float d = rd_fp16(r);
        nibbles32(r + 2, 0, q);
        s[0] = s[1] = d; m[0] = m[1] = -8.0f * d;
    }
}

static void unpack_q4_1(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 32; b++, r += 20, q += 32, s += 2, m += 2) {
        float d = rd_fp16(r), mn = rd_fp16(r + 2);
        nibbles32(r + 4, 0, q);
        s[0] = s[1] = d; m[0] = m[1] = mn;
    }
}

static void unpack_q5_0(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 32; b++, r += 22, q += 32, s += 2, m += 2) {
        float d = rd_fp16(r);
        nibbles32(r + 6, r + 2, q);
        s[0] = s[1] = d; m[0] = m[1] = -16.0f * d;
    }
}

static void unpack_q5_1(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 32; b++, r += 24, q += 32, s += 2, m += 2) {
        float d = rd_fp16(r), mn = rd_fp16(r + 2);
        nibbles32(r + 8, r + 4, q);
        s[0] = s[1] = d; m[0] = m[1] = mn;
    }
}

static void unpack_q8_0(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 32; b++, r += 34, q += 32, s += 2, m += 2) {
        float d = rd_fp16(r);
        for (int j = 0; j < 32; j++) q[j] = r[2 + j] ^ 0x80;      /* int8 + 128 */
        s[0] = s[1] = d; m[0] = m[1] = -128.0f * d;
    }
}

/* 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (12 packed bytes). */
static inline void scale_min_k4(int j, const uint8_t *sc, uint8_t *d, uint8_t *mn) {
    if (j < 4) { *d = sc[j] & 63; *mn = sc[j + 4] & 63; }
    else {
        *d = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

static inline void k4_scales(const uint8_t *r, float *s, float *m) {
    float d = rd_fp16(r), dmin = rd_fp16(r + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        scale_min_k4(j, r + 4, &sc, &mn);
        s[2 * j] = s[2 * j + 1] = d * sc;
        m[2 * j] = m[2 * j + 1] = -dmin * mn;
    }
}

static void unpack_q4_k(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 256; b++, r += 144, q += 256, s += 16, m += 16) {
        k4_scales(r, s, m);
        const uint8_t *qs = r + 16;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 32; l++) {
                q[64 * i + l] = qs[32 * i + l] & 15;
                q[64 * i + 32 + l] = qs[32 * i + l] >> 4;
            }
    }
}

static void unpack_q5_k(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 256; b++, r += 176, q += 256, s += 16, m += 16) {
        k4_scales(r, s, m);
        const uint8_t *qh = r + 16, *qs = r + 48;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 32; l++) {
                q[64 * i + l] = (qs[32 * i + l] & 15) | (((qh[l] >> (2 * i)) & 1) << 4);
                q[64 * i + 32 + l] = (qs[32 * i + l] >> 4) | (((qh[l] >> (2 * i + 1)) & 1) << 4);
            }
    }
}

static void unpack_q6_k(const uint8_t *r, int K, uint8_t *q, float *s, float *m) {
    for (int b = 0; b < K / 256; b++, r += 210, q += 256, s += 16, m += 16) {
        float d = rd_fp16(r + 208);
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = r + 64 * n, *qh = r + 128 + 32 * n;
            uint8_t *o = q + 128 * n;
            for (int l = 0; l < 32; l++) {
                o[l] = (ql[l] & 15) | ((qh[l] & 3) << 4);
                o[l + 32] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
                o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                o[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
            }
        }
        const int8_t *sc = (const int8_t *)(r + 192);
        for (int j = 0; j < 16; j++) { s[j] = d * sc[j]; m[j] = -32.0f * s[j]; }
    }
}

typedef void (*unpack_fn)(const uint8_t *, int, uint8_t *, float *, float *);

/* ggml type ids */
enum { T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14 };

static unpack_fn unpacker(int type) {
    switch (type) {
    case T_Q4_0: return unpack_q4_0;
    case T_Q4_1: return unpack_q4_1;
    case T_Q5_0: return unpack_q5_0;
    case T_Q5_1: return unpack_q5_1;
    case T_Q8_0: return unpack_q8_0;
    case T_Q4_K: return unpack_q4_k;
    case T_Q5_K: return unpack_q5_k;
    case T_Q6_K: return unpack_q6_k;
    default: return 0;
    }
}
