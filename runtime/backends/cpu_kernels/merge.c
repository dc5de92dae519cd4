/* A LoRA merged at load (runtime/lora_merge.py): every adapted projection's Q8_0 rows of
 * W + B A in one call, on threads of its own. One call for the whole model, because the
 * merge runs beside the tokenizer's build, which holds Python's GIL: a call a tensor had to
 * win the GIL back 168 times (up to 5 ms each) for the default 0.5B.
 *
 *   sv_merge_q8_0(jobs, n, threads)   jobs[i].out = Q8_0(dequantize(jobs[i].w) + b a) (merge.inc)
 *
 * Work is handed out in tiles of rows; each thread has its own scratch. Reentrant: nothing
 * here is shared with the matmul pool. Returns 0, or -1 for an unknown type, a row length not
 * a multiple of 32 or a failed allocation (then some outputs may be partly written).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "kern_api.h"

#define TILE_ROWS 256
#define MAX_THREADS 64

struct merge_job {                 /* lora_merge.py's ctypes mirror: _MergeJob */
    int type, N, K, R;
    long row_bytes;
    const uint8_t *w;              /* [N, row_bytes] GGUF blocks */
    const float *b, *a;            /* [N, R], [R, K] */
    uint8_t *out;                  /* [N, K / 32 * 34] */
};

const struct kern *sv_kern(void);

struct merge_run {
    const struct kern *k;
    const struct merge_job *jobs;
    int n, tiles, maxK;
    const int *first_tile;         /* per job, its first tile's index; [n] = tiles */
    atomic_int next, failed;
};

static void *merge_worker(void *p) {
    struct merge_run *run = p;
    int K = run->maxK;
    uint8_t *q = malloc((size_t)K);
    float *s = malloc((size_t)K / 16 * 4), *m = malloc((size_t)K / 16 * 4), *x = malloc((size_t)K * 4);
    if (!(q && s && m && x)) atomic_store(&run->failed, 1);
    int job = 0;
    for (int t; !atomic_load(&run->failed) && (t = atomic_fetch_add(&run->next, 1)) < run->tiles;) {
        while (run->first_tile[job + 1] <= t) job++;          /* tiles are claimed in increasing order */
        const struct merge_job *j = run->jobs + job;
        int r0 = (t - run->first_tile[job]) * TILE_ROWS, r1 = r0 + TILE_ROWS < j->N ? r0 + TILE_ROWS : j->N;
        run->k->merge_q8_0(run->k->unpacker(j->type), j->w + (long)r0 * j->row_bytes, j->row_bytes, r1 - r0, j->K,
                           j->b + (long)r0 * j->R, j->R, j->a, j->out + (long)r0 * (j->K / 32 * 34), q, s, m, x);
    }
    free(q); free(s); free(m); free(x);
    return 0;
}

int sv_merge_q8_0(const struct merge_job *jobs, int n, int threads) {
    struct merge_run run = { sv_kern(), jobs, n, 0, 32 };
    int *first = malloc(((size_t)n + 1) * sizeof *first);
    if (!first) return -1;
    for (int i = 0; i < n; i++) {
        if (!run.k->unpacker(jobs[i].type) || jobs[i].K % 32) { free(first); return -1; }
        first[i] = run.tiles;
        run.tiles += (jobs[i].N + TILE_ROWS - 1) / TILE_ROWS;
        if (jobs[i].K > run.maxK) run.maxK = jobs[i].K;
    }
    first[n] = run.tiles;
    run.first_tile = first;
    atomic_init(&run.next, 0);
    atomic_init(&run.failed, 0);
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&tid[started], 0, merge_worker, &run) == 0) started++;
    merge_worker(&run);
    for (int i = 0; i < started; i++) pthread_join(tid[i], 0);
    free(first);
    return atomic_load(&run.failed) ? -1 : 0;
}
