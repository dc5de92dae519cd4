/* Quantized matrix products on GGUF blocks for the CPU backend, called through ctypes.
 *
 *   sv_init(threads)       pick the instruction set (AVX512-VNNI, AVX2, portable) and start
 *                          the worker threads; returns the level (2, 1, 0)
 *   sv_quantize(x[T,K])    activations -> int8 per 32 values (see kern.inc), kept here
 *   sv_matmul(type, w)     y[T, ldy] columns [0, N) = x . w^T, w the raw GGUF rows [N, row_bytes]
 *
 * Threads: one pool of workers, not pinned (on a shared machine a pinned worker and the
 * caller could be kept on one CPU while the other ran someone else); the caller's thread
 * works too. Tiles of rows are claimed through `next`; after its own share the caller takes
 * back every tile no worker claimed (a worker may have been descheduled between taking an
 * index and claiming it), then waits for the tiles workers are computing: they read the
 * caller's weights and inputs, which may be freed (a model's mmap closed, a temporary array)
 * as soon as the call returns. A call that took such a tile back and returned left a
 * descheduled worker reading an unmapped file (a segfault in CI). Tile states carry the job's
 * id, so a worker that wakes late in a later job fails every claim; the buffers it may still
 * read then (activations, tile states, scratch) are owned here and reallocated only when no
 * worker is inside a job. Between calls workers wait about a millisecond, longer than the
 * gaps between the products of a decode step (a futex wake-up per product cost more than a
 * product), then sleep (yielding between looks instead made a worker miss most jobs on a
 * loaded machine).
 * Where the workers finish few tiles anyway, the caller works alone for a while (note_help).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include "kern_api.h"

extern const struct kern kern_scalar;
#if defined(__x86_64__)
extern const struct kern kern_avx2, kern_avx512;
#endif

#define MAX_THREADS 256
#define SPIN_CYCLES 4000000ull             /* ~1.5 ms of TSC: longer than the gaps inside a decode step */

static const struct kern *K_ = &kern_scalar;
static int level_ = 0;

enum { FREE, CLAIMED, DONE, TAKEN };       /* tile state, low 3 bits; the job id above */

struct mjob {
    unpack_fn unpack; const uint8_t *w; long row_bytes; int N, K, tile, tiles, T; float *y; long ldy;
    const struct attn *attn;                 /* set: the job is prefill attention, a tile a head */
    const struct attn_step *step;            /* set: decode attention, a tile a (sequence, KV head) */
};

struct attn { const float *q, *k, *v; int n_q, first, Hq, Hkv, D; float scale; };
struct attn_step { const float *q, *k, *v; const int64_t *ctx, *ctx_start; int Hq, Hkv, D; float scale; float *out; };

struct scratch { uint8_t *q; float *s, *m; size_t cap_q, cap_h; };

static struct {
    int n;                                   /* threads including the caller */
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_ulong seq;                        /* 2 * job id once published, odd while written */
    atomic_int active;                       /* workers inside a job */
    atomic_int next, done;
    _Atomic uint64_t *state;                 /* per tile */
    int cap_state;
    struct mjob job;
    int8_t *xq; float *xh, *xsd;             /* the activations of the last sv_quantize */
    int xT, xK;
    size_t cap_x;
    struct scratch sc[MAX_THREADS];
} P = { .n = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static inline void relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

static inline unsigned long long ticks(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
#endif
}

static void quiesce(void) {                  /* before reallocating what workers read */
    while (atomic_load(&P.active)) relax();
}

static void *grow_buf(void *old, size_t bytes) {
    free(old);
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static int grow_scratch(struct scratch *s, size_t q, size_t h) {
    if (q > s->cap_q) { s->q = grow_buf(s->q, q); s->cap_q = s->q ? q : 0; }
    if (h > s->cap_h) {
        s->s = grow_buf(s->s, h * 4);
        s->m = grow_buf(s->m, h * 4);
        s->cap_h = (s->s && s->m) ? h : 0;
    }
    return s->q && s->s && s->m;
}

/* Rows of tile i for all T tokens into out[t * ldo + (r - r0)]. */
static void tile_rows(const struct mjob *j, int i, struct scratch *sc, float *out, long ldo) {
    int r0 = i * j->tile, r1 = r0 + j->tile < j->N ? r0 + j->tile : j->N;
    if (j->attn) {                           /* head i: columns [i D, (i + 1) D) of [n_q, Hq D] */
        const struct attn *a = j->attn;
        long kv = (long)(i / (a->Hq / a->Hkv)) * a->D;
        K_->attend(a->q + (long)i * a->D, (long)a->Hq * a->D, a->k + kv, a->v + kv, (long)a->Hkv * a->D,
                   a->n_q, a->first, a->D, a->scale, out, ldo);
        return;
    }
    if (j->step) {                           /* sequence i / Hkv, the G query heads of KV head i % Hkv */
        const struct attn_step *a = j->step;
        int seq = i / a->Hkv, g = i % a->Hkv, G = a->Hq / a->Hkv;
        long first = (long)seq * a->Hq * a->D + (long)g * G * a->D;
        K_->attend_decode(a->q + first, G, a->k + (long)g * a->D, a->v + (long)g * a->D, (long)a->Hkv * a->D,
                          a->ctx + a->ctx_start[seq], a->ctx_start[seq + 1] - a->ctx_start[seq], a->D, a->scale,
                          a->out + first);
        return;
    }
    int step = j->T < PREFILL_MIN ? 16 : j->tile;    /* decode rows are unpacked 16 at a time */
    for (int a = r0; a < r1; a += step) {
        int b = a + step < r1 ? a + step : r1;
        K_->rows(j->unpack, j->w, j->row_bytes, a, b, j->K, P.xq, P.xh, P.xsd, j->T, out + (a - r0), ldo,
                 sc->q, sc->s, sc->m);
    }
}

static int claim(int i, uint64_t id, int from, int to) {
    uint64_t want = id << 3 | (uint64_t)from;
    return atomic_compare_exchange_strong(&P.state[i], &want, id << 3 | (uint64_t)to);
}

static void finish(int i, uint64_t id) {
    atomic_store_explicit(&P.state[i], id << 3 | DONE, memory_order_release);
    atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
}

static void worker_job(int me, uint64_t id, const struct mjob *j) {
    struct scratch *sc = &P.sc[me];
    for (int i; (i = atomic_fetch_add(&P.next, 1)) < j->tiles;) {
        if (!claim(i, id, FREE, CLAIMED)) continue;
        tile_rows(j, i, sc, j->y + (long)i * j->tile, j->ldy);
        finish(i, id);
    }
}

static void *worker(void *p) {
    int me = (int)(intptr_t)p;
    unsigned long seen = 0;
    for (;;) {
        unsigned long s;
        unsigned long long since = ticks();
        while ((s = atomic_load_explicit(&P.seq, memory_order_acquire)) == seen || (s & 1)) {
            if (ticks() - since < SPIN_CYCLES) { relax(); continue; }
            pthread_mutex_lock(&P.mu);
            while (atomic_load(&P.seq) == seen) pthread_cond_wait(&P.cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
            since = ticks();
        }
        atomic_fetch_add(&P.active, 1);
        struct mjob j = P.job;                /* a copy: the caller may publish the next job */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load(&P.seq) == s) { seen = s; worker_job(me, s >> 1, &j); }
        atomic_fetch_sub(&P.active, 1);
    }
    return 0;
}

static unsigned long job_id;

/* The workers help only where they are scheduled: the share of tiles they finished before the
 * caller was through its own is counted over PROBE_JOBS jobs, and below 1 in 10 (a loaded
 * machine, where a worker runs in bursts and the caller waits for its tiles) the caller runs
 * the next SOLO_JOBS jobs alone, then asks again. */
#define PROBE_JOBS 64
#define SOLO_JOBS 64
static struct { int solo_left, jobs; long tiles, helped; } share;
static long totals[3];                       /* tiles, tiles the workers finished, jobs run alone */

/* The pool's totals since start, for benchmarks: tiles, tiles by workers, jobs the caller ran alone. */
void sv_pool_totals(long *out) { memcpy(out, totals, sizeof totals); }

static void note_help(int tiles, int by_workers, int late) {
    totals[0] += tiles;
    totals[1] += by_workers;
    share.tiles += tiles;
    share.helped += by_workers - late;
    if (++share.jobs < PROBE_JOBS) return;
    if (share.helped * 10 < share.tiles) share.solo_left = SOLO_JOBS;
    share.jobs = 0;
    share.tiles = share.helped = 0;
}

static void run_matmul(const struct mjob *j) {
    if (P.n == 1 || share.solo_left > 0) {
        if (share.solo_left > 0) { share.solo_left--; totals[2]++; }
        for (int i = 0; i < j->tiles; i++) tile_rows(j, i, &P.sc[0], j->y + (long)i * j->tile, j->ldy);
        return;
    }
    uint64_t id = ++job_id;
    atomic_store(&P.seq, 2 * id - 1);
    P.job = *j;
    for (int i = 0; i < j->tiles; i++) atomic_store_explicit(&P.state[i], id << 3 | FREE, memory_order_relaxed);
    atomic_store(&P.next, 0);
    atomic_store(&P.done, 0);
    atomic_store_explicit(&P.seq, 2 * id, memory_order_release);
    if (P.n > 1) {
        pthread_mutex_lock(&P.mu);
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
    }
    int mine = 0, taken = 0;
    for (int i; (i = atomic_fetch_add(&P.next, 1)) < j->tiles;)
        if (claim(i, id, FREE, TAKEN)) { tile_rows(j, i, &P.sc[0], j->y + (long)i * j->tile, j->ldy); finish(i, id); mine++; }
    for (int i = 0; i < j->tiles; i++)        /* take back what no worker claimed */
        if (claim(i, id, FREE, TAKEN)) { tile_rows(j, i, &P.sc[0], j->y + (long)i * j->tile, j->ldy); finish(i, id); taken++; }
    note_help(j->tiles, j->tiles - mine - taken, j->tiles - atomic_load(&P.done));
    /* the workers' tiles: until they are done, workers read the weights and inputs */
    for (unsigned spins = 0; atomic_load_explicit(&P.done, memory_order_acquire) < j->tiles; spins++)
        if (spins < 4096) relax(); else sched_yield();      /* a descheduled worker may need this CPU */
}

int sv_set_level(int level);

int sv_init(int threads) {
    if (P.n > 1) return level_;              /* once a process */
#if defined(__x86_64__)
    __builtin_cpu_init();
#endif
    if (sv_set_level(2) < 2) sv_set_level(1);
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    if (threads <= 0) threads = ncpu > 0 ? ncpu : 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    P.n = threads;
    for (int i = 1; i < threads; i++) pthread_create(&P.tid[i], 0, worker, (void *)(intptr_t)i);
    return level_;
}

int sv_threads(void) { return P.n; }
int sv_supported(int type) { return K_->unpacker(type) != 0; }

/* Use a lower instruction set than the best one (tests check every path this CPU can run);
 * returns the level in use. Not while a product runs. */
int sv_set_level(int level) {
    if (level <= 0) { K_ = &kern_scalar; level_ = 0; }
#if defined(__x86_64__)
    else if (level == 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { K_ = &kern_avx2; level_ = 1; }
    else if (level >= 2 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl")) { K_ = &kern_avx512; level_ = 2; }
#endif
    return level_;
}

/* Returns 0, or -1 if the buffers cannot be had. */
int sv_quantize(const float *x, int T, int K) {
    int padded = (T + 7) / 8 * 8;              /* the prefill kernel reads tokens 8 at a time */
    size_t n = (size_t)padded * K;
    if (n > P.cap_x) {
        quiesce();
        P.xq = grow_buf(P.xq, n);
        P.xh = grow_buf(P.xh, n / 16 * 4);
        P.xsd = grow_buf(P.xsd, n / 16 * 4);
        P.cap_x = (P.xq && P.xh && P.xsd) ? n : 0;
        if (!P.cap_x) return -1;
    }
    int H = K / 16;
    for (long t = 0; t < T; t++) K_->quantize(x + t * K, K, P.xq + t * K, P.xh + t * H, P.xsd + t * H);
    memset(P.xq + (size_t)T * K, 0, (size_t)(padded - T) * K);
    memset(P.xh + (size_t)T * H, 0, (size_t)(padded - T) * H * 4);
    memset(P.xsd + (size_t)T * H, 0, (size_t)(padded - T) * H * 4);
    P.xT = T;
    P.xK = K;
    return 0;
}

/* Tile states for `tiles` and every thread's scratch of at least q unpacked bytes and h scales,
 * grown while no worker is inside a job. Returns 0, or -1 if memory fails. */
static int reserve(int tiles, size_t q, size_t h) {
    int fits = tiles <= P.cap_state;
    for (int i = 0; i < P.n; i++)
        fits &= q <= P.sc[i].cap_q && h <= P.sc[i].cap_h;
    if (fits) return 0;
    quiesce();
    if (tiles > P.cap_state) {
        P.state = grow_buf((void *)P.state, (size_t)tiles * 8);
        P.cap_state = P.state ? tiles : 0;
        if (!P.state) return -1;
        for (int i = 0; i < tiles; i++) atomic_store(&P.state[i], 0);
    }
    for (int i = 0; i < P.n; i++) if (!grow_scratch(&P.sc[i], q, h)) return -1;
    return 0;
}

/* Against the activations of the last sv_quantize. Returns 0, or -1 for an unknown type, a
 * shape that does not match them, or a failed allocation. */
int sv_matmul(int type, const uint8_t *w, long row_bytes, int N, int K, int T, float *y, long ldy) {
    unpack_fn u = K_->unpacker(type);
    if (!u || K % 32 || K != P.xK || T != P.xT) return -1;
    /* decode: about eight tiles a thread (at least 64 rows: a claim costs a shared cache line);
     * prefill: 64 rows for all T tokens */
    int decode = T < PREFILL_MIN;
    int tile = decode ? ((N + 8 * P.n - 1) / (8 * P.n) + 15) / 16 * 16 : 64;
    if (tile < 64) tile = 64;
    int tiles = (N + tile - 1) / tile;
    int unpacked = decode ? 16 : tile;                 /* rows in the unpack scratch at once */
    size_t q = (size_t)unpacked * K, h = (size_t)unpacked * (K / 16);
    if (reserve(tiles, q, h)) return -1;
    struct mjob j = { u, w, row_bytes, N, K, tile, tiles, T, y, ldy, 0, 0 };
    run_matmul(&j);
    return 0;
}

/* RMSNorm of T rows of K: sum = x + residual (residual may be NULL), out = sum / rms(sum) * w.
 * One pass of C instead of the eight torch ops it takes per call, which a decode step pays
 * twice a layer. */
void sv_rmsnorm(const float *x, const float *residual, const float *w, float eps, int T, int K,
                float *sum, float *out) {
    for (long t = 0; t < T; t++) {
        const float *a = x + t * K, *b = residual ? residual + t * K : 0;
        float *s = sum + t * K, *o = out + t * K;
        double ss = 0;
        for (int i = 0; i < K; i++) { s[i] = b ? a[i] + b[i] : a[i]; ss += (double)s[i] * s[i]; }
        float scale = 1.0f / sqrtf((float)(ss / K) + eps);
        for (int i = 0; i < K; i++) o[i] = s[i] * scale * w[i];
    }
}

/* Raw rows -> float32 (w = s q + m), for the embedding rows of a step and for tests. */
int sv_dequantize(int type, const uint8_t *w, long row_bytes, int N, int K, float *out) {
    static struct scratch own;
    unpack_fn u = K_->unpacker(type);
    struct scratch *sc = &own;
    if (!u || K % 32 || !grow_scratch(sc, (size_t)K, (size_t)K / 16)) return -1;
    for (int r = 0; r < N; r++) {
        u(w + (long)r * row_bytes, K, sc->q, sc->s, sc->m);
        for (int i = 0; i < K; i++) out[(long)r * K + i] = sc->s[i / 16] * sc->q[i] + sc->m[i / 16];
    }
    return 0;
}

/* The kernels of the instruction set in use, for merge.c. */
const struct kern *sv_kern(void) { return K_; }

/* Causal attention of one sequence's n_q queries, the last of its n_ctx = first + n_q positions,
 * the heads shared out over the pool: q [n_q, Hq, D] roped, k, v [n_ctx, Hkv, D] contiguous,
 * out [n_q, Hq D]. Returns 0, or -1 if the buffers cannot be had. */
int sv_attention_prefill(const float *q, const float *k, const float *v, int n_q, int first, int Hq, int Hkv,
                         int D, float scale, float *out) {
    struct attn a = { q, k, v, n_q, first, Hq, Hkv, D, scale };
    if (reserve(Hq, 64, 4)) return -1;
    struct mjob j = { 0, 0, 0, Hq * D, 0, D, Hq, n_q, out, (long)Hq * D, &a, 0 };
    run_matmul(&j);
    return 0;
}

/* The attention of a decode step, one query a sequence, over the pool: q [S, Hq, D] roped, the
 * layer's cache k, v [slots, Hkv, D] (this step's keys written), sequence s's positions at cache
 * slots ctx[ctx_start[s] .. ctx_start[s + 1]) -> out [S, Hq D]. Returns 0, or -1 if the buffers
 * cannot be had. */
int sv_attention_step(const float *q, int S, int Hq, int Hkv, int D, const float *k, const float *v,
                      const int64_t *ctx, const int64_t *ctx_start, float scale, float *out) {
    struct attn_step a = { q, k, v, ctx, ctx_start, Hq, Hkv, D, scale, out };
    if (reserve(S * Hkv, 64, 4)) return -1;
    struct mjob j = { 0, 0, 0, S * Hkv, 0, 1, S * Hkv, 1, out, 0, 0, &a };
    run_matmul(&j);
    return 0;
}
