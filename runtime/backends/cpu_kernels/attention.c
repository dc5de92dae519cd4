/* Decode attention on the CPU (one query token a sequence), for the int8 mode: RoPE on q and
 * k, the new k and v written to the cache, then softmax(q k^T * scale) v over the sequence's
 * cached positions, per query head with its KV head (GQA), the (sequence, KV head) pairs over
 * the kernels' threads (qmatmul.c, kern.inc attend_decode). One C call instead of the ~45 torch
 * ops a layer the reference takes, which a decode step paid 24 times.
 *
 *   qkv     [S, (Hq + 2 Hkv) D]   this step's projections, one row a sequence
 *   k, v    [slots, Hkv, D]       the layer's cache
 *   slot    [S]                   where each sequence's new token goes
 *   pos     [S]                   its position (row of cos/sin [*, D/2])
 *   ctx     concatenated cache slots of each sequence's positions 0..n-1, from ctx_start [S+1]
 *   out     [S, Hq D]
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void rope(const float *x, float *o, const float *cos, const float *sin, int D, int interleaved) {
    int half = D / 2;
    for (int i = 0; i < half; i++) {
        int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        float x1 = x[a], x2 = x[b];
        o[a] = x1 * cos[i] - x2 * sin[i];
        o[b] = x2 * cos[i] + x1 * sin[i];
    }
}

int sv_attention_step(const float *q, int S, int Hq, int Hkv, int D, const float *k, const float *v,
                      const int64_t *ctx, const int64_t *ctx_start, float scale, float *out);

int sv_attention_decode(const float *qkv, int S, int Hq, int Hkv, int D, float *k, float *v,
                        const int64_t *slot, const int64_t *pos, const float *cos, const float *sin,
                        int interleaved, const int64_t *ctx, const int64_t *ctx_start, float scale, float *out) {
    int width = (Hq + 2 * Hkv) * D;
    float *q = malloc(sizeof(float) * (size_t)S * Hq * D);
    if (!q) return -1;
    for (int s = 0; s < S; s++) {           /* every sequence's keys in the cache before any attends */
        const float *row = qkv + (long)s * width, *c = cos + pos[s] * (D / 2), *sn = sin + pos[s] * (D / 2);
        for (int h = 0; h < Hq; h++) rope(row + h * D, q + ((long)s * Hq + h) * D, c, sn, D, interleaved);
        for (int h = 0; h < Hkv; h++) {
            rope(row + (Hq + h) * D, k + (slot[s] * Hkv + h) * D, c, sn, D, interleaved);
            memcpy(v + (slot[s] * Hkv + h) * D, row + (Hq + Hkv + h) * D, sizeof(float) * D);
        }
    }
    int rc = sv_attention_step(q, S, Hq, Hkv, D, k, v, ctx, ctx_start, scale, out);
    free(q);
    return rc;
}
