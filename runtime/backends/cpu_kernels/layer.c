/* One decoder layer of a decode step in one call, for the int8 mode:
 *
 *   h, r = rmsnorm(x + r);  x = o_proj(attention(qkv(h) + bias))
 *   h, r = rmsnorm(x + r);  x = down(silu(gate(h)) * up(h))
 *
 * The same kernels as the op-by-op path (sv_quantize, sv_matmul, sv_attention_decode), without
 * the ~10 Python calls and tensor allocations a layer costs there, which at batch 1 took longer
 * than the layer's work on two cores, and with the matrix products back to back, so the pool's
 * workers, spinning between jobs, never go to sleep inside a step.
 *
 *   x, r   [S, H] float32, updated in place (r starts at zero for layer 0)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

struct sv_part { int type; int rows; long row_bytes; const uint8_t *w; };
struct sv_weight { int nparts; int K; int N; struct sv_part part[3]; };
struct sv_layer {
    const float *attn_norm, *qkv_bias, *ffn_norm;    /* qkv_bias may be NULL */
    struct sv_weight qkv, o, gate_up, down;
    float *k, *v;                                    /* the layer's cache [slots, Hkv, D] */
};
struct sv_step {                                     /* what every layer of a step shares */
    int S, H, n_heads, n_kv_heads, head_dim, interleaved;
    float eps, scale;
    const int64_t *slots, *positions, *ctx, *ctx_start;
    const float *cos, *sin;
};

int sv_quantize(const float *x, int T, int K);
int sv_matmul(int type, const uint8_t *w, long row_bytes, int N, int K, int T, float *y, long ldy);
void sv_rmsnorm(const float *x, const float *residual, const float *w, float eps, int T, int K,
                float *sum, float *out);
int sv_attention_decode(const float *qkv, int S, int Hq, int Hkv, int D, float *k, float *v,
                        const int64_t *slot, const int64_t *pos, const float *cos, const float *sin,
                        int interleaved, const int64_t *ctx, const int64_t *ctx_start, float scale, float *out);

/* y [T, w->N] = x [T, w->K] . w^T */
static int linear(const struct sv_weight *w, const float *x, int T, float *y) {
    if (sv_quantize(x, T, w->K)) return -1;
    for (int i = 0, col = 0; i < w->nparts; col += w->part[i++].rows)
        if (sv_matmul(w->part[i].type, w->part[i].w, w->part[i].row_bytes, w->part[i].rows, w->K, T, y + col, w->N))
            return -1;
    return 0;
}

static float *grow(float **buf, size_t *cap, size_t n) {
    if (n > *cap) {
        free(*buf);
        *buf = malloc(n * sizeof(float));
        *cap = *buf ? n : 0;
    }
    return *buf;
}

int sv_decode_layer(const struct sv_layer *L, const struct sv_step *P, float *x, float *r) {
    static float *buf;
    static size_t cap;
    int S = P->S, H = P->H, F = L->gate_up.N / 2, Nq = L->qkv.N, Ho = P->n_heads * P->head_dim;
    size_t need = (size_t)S * (H + Nq + Ho + 2 * (size_t)F);
    if (!grow(&buf, &cap, need)) return -1;
    float *h = buf, *qkv = h + (size_t)S * H, *att = qkv + (size_t)S * Nq, *gu = att + (size_t)S * Ho;

    sv_rmsnorm(x, r, L->attn_norm, P->eps, S, H, r, h);
    if (linear(&L->qkv, h, S, qkv)) return -1;
    if (L->qkv_bias)
        for (long i = 0; i < (long)S * Nq; i++) qkv[i] += L->qkv_bias[i % Nq];
    if (sv_attention_decode(qkv, S, P->n_heads, P->n_kv_heads, P->head_dim, L->k, L->v, P->slots, P->positions,
                            P->cos, P->sin, P->interleaved, P->ctx, P->ctx_start, P->scale, att))
        return -1;
    if (linear(&L->o, att, S, x)) return -1;

    sv_rmsnorm(x, r, L->ffn_norm, P->eps, S, H, r, h);
    if (linear(&L->gate_up, h, S, gu)) return -1;
    for (int s = 0; s < S; s++) {                    /* silu(gate) * up, into the gate half */
        float *g = gu + (long)s * 2 * F, *u = g + F, *a = gu + (long)s * F;
        for (int i = 0; i < F; i++) a[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
    return linear(&L->down, gu, S, x);
}
