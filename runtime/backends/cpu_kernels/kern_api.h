/* What each ISA file exports to the dispatcher (qmatmul.c). */
#ifndef KERN_API_H
#define KERN_API_H
#include <stdint.h>
/* From this many tokens a product is prefill-shaped (AVX512: row-interleaved tiles, 64 rows a
 * tile); below it, decode-shaped (a token a sequence: each weight block read once for all of
 * them, tiles sized for the threads). */
#define PREFILL_MIN 16
typedef void (*unpack_fn)(const uint8_t *, int, uint8_t *, float *, float *);
struct kern {
    void (*quantize)(const float *x, int K, int8_t *xq, float *xh, float *xsd);
    void (*rows)(unpack_fn unpack, const uint8_t *w, long row_bytes, int r0, int r1, int K,
                 const int8_t *xq, const float *xh, const float *xsd, int T,
                 float *y, long ldy, uint8_t *q, float *s, float *m);
    unpack_fn (*unpacker)(int type);
    void (*attend)(const float *q, long ldq, const float *k, const float *v, long ldkv, int n_q, int first,
                   int D, float scale, float *out, long ldo);
    void (*attend_decode)(const float *q, int G, const float *k, const float *v, long ldkv,
                          const int64_t *slots, long n, int D, float scale, float *out);
    void (*merge_q8_0)(unpack_fn unpack, const uint8_t *w, long row_bytes, int N, int K, const float *b, int R,
                       const float *a, uint8_t *out, uint8_t *q, float *s, float *m, float *x);
};
#endif
#ifdef NAME
#define KERN_API(isa) \
    static unpack_fn unpacker_##isa(int type) { return unpacker(type); } \
    const struct kern kern_##isa = { quantize_##isa, rows_##isa, unpacker_##isa, attend_##isa, attend_decode_##isa, \
                                merge_q8_0_##isa };
#endif
