/* Quantized matrix products on GGUF blocks for the CPU backend, called through ctypes.
 *
 *   sv_init(threads)       pick the instruction set (AVX512-VNNI, AVX2, portable) and start
 *                          the worker threads; returns the level (2, 1, 0)
 *   sv_quantize(x[T,K])    activations -> int8 per 32 values (see kern.inc)
 *   sv_matmul(type, w)     y[T, ldy] columns [0, N) = x . w^T, w the raw GGUF rows [N, row_bytes]
 *
 * Threads: one pool, workers pinned one a CPU of the process's affinity set (the caller's
 * thread works too), taking tiles of rows from a shared counter. Between calls they spin a
 * little, then sleep, so torch's own threads get the cores back during the other ops.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kern_api.h"

extern const struct kern kern_scalar;
#if defined(__x86_64__)
extern const struct kern kern_avx2, kern_avx512;
#endif

#define MAX_THREADS 256
#define SPIN_ROUNDS 20000

static const struct kern *K_ = &kern_scalar;
static int level_ = 0;

struct scratch { uint8_t *q; float *s, *m; size_t cap_q, cap_h; };

/* One job at a time. A job is a number of tiles; whoever runs (the caller and any awake
 * worker) claims tiles from `next` and counts them into `done`; the caller returns when all
 * are done, without waiting for a worker that never woke (the machine may be busy). A worker
 * enters a job through `active` and `open`, so the caller rewrites the job only when no
 * worker is inside it. */
struct job { void (*fn)(void *, int, int); char arg[128]; int tiles; };

static struct {
    int n;                                   /* threads including the caller */
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;                         /* bumped when a job opens */
    atomic_int open;                         /* the job may be entered */
    atomic_int active;                       /* workers inside the job */
    atomic_int next, done;
    struct job job;
    struct scratch sc[MAX_THREADS];
} P = { .n = 1, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static inline void relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

static void take_tiles(int me) {
    for (int i; (i = atomic_fetch_add(&P.next, 1)) < P.job.tiles;) {
        P.job.fn(P.job.arg, me, i);
        atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    }
}

static void *worker(void *p) {
    int me = (int)(intptr_t)p;
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen) {
            if (++spins < SPIN_ROUNDS) { relax(); continue; }
            pthread_mutex_lock(&P.mu);
            while (atomic_load(&P.gen) == seen) pthread_cond_wait(&P.cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
        }
        seen = atomic_load(&P.gen);
        atomic_fetch_add(&P.active, 1);
        if (atomic_load(&P.open) && atomic_load(&P.gen) == seen) take_tiles(me);
        atomic_fetch_sub(&P.active, 1);
    }
    return 0;
}

static void run(void (*fn)(void *, int, int), const void *arg, size_t size, int tiles) {
    atomic_store(&P.open, 0);
    while (atomic_load(&P.active)) relax();  /* a late worker leaves the last job */
    P.job.fn = fn;
    memcpy(P.job.arg, arg, size);
    P.job.tiles = tiles;
    atomic_store(&P.next, 0);
    atomic_store(&P.done, 0);
    atomic_store(&P.open, 1);
    if (P.n > 1) {
        pthread_mutex_lock(&P.mu);
        atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
        pthread_cond_broadcast(&P.cv);
        pthread_mutex_unlock(&P.mu);
    }
    take_tiles(0);
    while (atomic_load_explicit(&P.done, memory_order_acquire) < tiles) relax();
}

static int grow(struct scratch *s, size_t q, size_t h) {
    if (q > s->cap_q) {
        free(s->q);
        s->q = aligned_alloc(64, (q + 63) / 64 * 64);
        s->cap_q = s->q ? q : 0;
    }
    if (h > s->cap_h) {
        free(s->s); free(s->m);
        s->s = aligned_alloc(64, (h * 4 + 63) / 64 * 64);
        s->m = aligned_alloc(64, (h * 4 + 63) / 64 * 64);
        s->cap_h = (s->s && s->m) ? h : 0;
    }
    return s->q && s->s && s->m;
}

int sv_set_level(int level);

int sv_init(int threads) {
    if (P.n > 1) return level_;              /* once a process */
#if defined(__x86_64__)
    __builtin_cpu_init();
#endif
    if (sv_set_level(2) < 2) sv_set_level(1);
    cpu_set_t set;
    int cpus[MAX_THREADS], ncpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && ncpu < MAX_THREADS; c++) if (CPU_ISSET(c, &set)) cpus[ncpu++] = c;
    if (threads <= 0) threads = ncpu > 0 ? ncpu : 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    P.n = threads;
    for (int i = 1; i < threads; i++) {
        pthread_create(&P.tid[i], 0, worker, (void *)(intptr_t)i);
        if (ncpu >= threads) {               /* worker i on the i-th CPU; the caller stays free */
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[i], &one);
            pthread_setaffinity_np(P.tid[i], sizeof one, &one);
        }
    }
    return level_;
}

int sv_threads(void) { return P.n; }

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
int sv_supported(int type) { return K_->unpacker(type) != 0; }

struct qjob { const float *x; int T, K; int8_t *xq; float *xh, *xsd; };
_Static_assert(sizeof(struct qjob) <= sizeof P.job.arg, "job too large");

static void quantize_job(void *p, int me, int t) {
    struct qjob *j = p;
    (void)me;
    int H = j->K / 16;
    K_->quantize(j->x + (long)t * j->K, j->K, j->xq + (long)t * j->K, j->xh + (long)t * H, j->xsd + (long)t * H);
}

void sv_quantize(const float *x, int T, int K, int8_t *xq, float *xh, float *xsd) {
    struct qjob j = { x, T, K, xq, xh, xsd };
    run(quantize_job, &j, sizeof j, T);
}

struct mjob {
    unpack_fn unpack; const uint8_t *w; long row_bytes; int N, K, tile;
    const int8_t *xq; const float *xh, *xsd; int T; float *y; long ldy;
};
_Static_assert(sizeof(struct mjob) <= sizeof P.job.arg, "job too large");

static void matmul_job(void *p, int me, int i) {
    struct mjob *j = p;
    int rows = j->T == 1 ? 16 : j->tile;
    struct scratch *sc = &P.sc[me];
    int r0 = i * j->tile, r1 = r0 + j->tile < j->N ? r0 + j->tile : j->N;
    for (int a = r0; a < r1; a += rows) {          /* a decode row is unpacked and used at once */
        int b = a + rows < r1 ? a + rows : r1;
        K_->rows(j->unpack, j->w, j->row_bytes, a, b, j->K, j->xq, j->xh, j->xsd, j->T,
                 j->y, j->ldy, sc->q, sc->s, sc->m);
    }
}

/* Returns 0, or -1 for an unknown type or a failed allocation. */
int sv_matmul(int type, const uint8_t *w, long row_bytes, int N, int K,
              const int8_t *xq, const float *xh, const float *xsd, int T, float *y, long ldy) {
    unpack_fn u = K_->unpacker(type);
    if (!u || K % 32) return -1;
    int tile = T == 1 ? 16 : 64;
    for (int i = 0; i < P.n; i++)                  /* scratch for a tile of unpacked rows */
        if (!grow(&P.sc[i], (size_t)tile * K, (size_t)tile * (K / 16))) return -1;
    struct mjob j = { u, w, row_bytes, N, K, tile, xq, xh, xsd, T, y, ldy };
    run(matmul_job, &j, sizeof j, (N + tile - 1) / tile);
    return 0;
}

/* Raw rows -> float32 (w = s q + m), for the embedding rows of a step and for tests. */
int sv_dequantize(int type, const uint8_t *w, long row_bytes, int N, int K, float *out) {
    static struct scratch own;
    unpack_fn u = K_->unpacker(type);
    struct scratch *sc = &own;
    if (!u || K % 32 || !grow(sc, (size_t)K, (size_t)K / 16)) return -1;
    for (int r = 0; r < N; r++) {
        u(w + (long)r * row_bytes, K, sc->q, sc->s, sc->m);
        for (int i = 0; i < K; i++) out[(long)r * K + i] = sc->s[i / 16] * sc->q[i] + sc->m[i / 16];
    }
    return 0;
}
