/*
 * federated/fl_sgd.c: (DP-)SGD on one silo's rows (fl_sgd_run), optionally over several threads.
 *
 * One step (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Alg. 1, with Poisson
 * sampling as in Mironov, Talwar & Zhang, "Renyi Differential Privacy of the Sampled Gaussian
 * Mechanism", 2019, Sec. 3):
 *   1. Poisson sampling: each row joins the batch with probability q, independently, drawn from
 *      the stream (sample_seed, DP_RNG_STREAM_FL_SGD_SAMPLING) in increasing row order. For q <
 *      FL_SGD_BERNOULLI_Q by geometric skipping (the gap to the next member is
 *      floor(log U / log(1 - q)), U uniform on (0, 1]; Devroye, "Non-Uniform Random Variate
 *      Generation", 1986, Ch. X.2): O(q n) draws per step. For larger q each 64-bit draw decides
 *      two rows, one per 32-bit half, a row joining when its half is below t = floor(q 2^32):
 *      probability t / 2^32, which is q up to the 2^-32 resolution (q - 2^-32 < t / 2^32 <= q,
 *      never above q, so the accountant's q stays an upper bound), the halves being independent
 *      uniform bits; n / 2 draws and integer compares cost less than q n logarithms. Both give the
 *      same distribution of batches (up to that resolution); only which draws decide differs.
 *   2. G = sum over the batch of the per-row gradients, each clipped to norm clip (ghost clipping,
 *      fl_model.c), plus N(0, (noise_multiplier clip)^2) per coordinate. A parameter vector of at
 *      least FL_SGD_NOISE_SPLIT coordinates is cut into FL_SGD_LANES fixed segments (so that the
 *      threads fill them in parallel), a smaller one is one segment (a fill's seeding would
 *      otherwise cost more than its few normals); segment j of step t is fl_gauss_fill with the
 *      seed dp_rng_derive(dp_rng_derive(dp_rng_derive(noise_seed, DP_RNG_STREAM_FL_SGD_NOISE), t),
 *      j).
 *      Without prox the noise is added to G inside the update pass of step 3 (fl_vstep_sum: the
 *      same bits as adding it first, one pass over the parameters fewer).
 *   3. w <- w - lr (G / expected_batch + prox_lambda (w - anchor)).
 * Dividing by the expected batch q n rather than the drawn size keeps the sensitivity of the mean
 * fixed (the drawn size is itself private).
 *
 * The proximal term (MR-MTL, Liu, Hu, Wu & Smith, "On Privacy and Personalization in
 * Cross-Silo Federated Learning", NeurIPS 2022, Sec. 5, Eq. 3, the gradient of
 * lambda/2 ||w - anchor||^2) is added after clipping and noise and is never clipped: it depends
 * only on w and the anchor (the released average), not on any row, so it is post-processing and
 * costs no privacy; clipping it inside each example's gradient, as the paper's code does, would
 * also cap its pull towards the anchor at large lambda.
 *
 * Threads: a batch is cut into chunks of the workspace's max_rows rows; chunk k belongs to lane
 * k mod FL_SGD_LANES; each lane sums its chunks' gradients in chunk order, and the lanes are added
 * in lane order; lane j also fills noise segment j. The threads take whole lanes, in lane order,
 * from a counter of the step (the first thread done takes the next lane: a batch of 2 chunks and a
 * few rows keeps 2 threads busy alike), each lane in its thread's own scratch workspace. The
 * reduction tree is fixed, so neither T nor which thread ran a lane changes the bits. The T - 1
 * worker threads live for one fl_sgd_run call (step_pool); one that cannot be started simply takes
 * no lane (same bits). The reduction, the noise and the update are element-wise, so they are cut
 * by parameter ranges instead: for a model of at least FL_SGD_PAR_UPDATE parameters, once every
 * thread is done with its lanes (a barrier), the threads take blocks of FL_SGD_UPDATE_SPLIT
 * parameters from a second counter and, for each, sum all lanes in lane order, add the noise and
 * update w (update_range); a smaller model's update runs on the calling thread after the lanes.
 * Each element sees the same operations in the same order either way.
 */
#include "federated/fl_model.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_data.h"
#include "federated/fl_model_internal.h"
#include "federated/fl_rng.h"

#define FL_MAX_STEPS 100000000
/* Rates from which a step draws 32 uniform bits per row rather than skipping geometrically (a log,
 * a division and a floor per member, about 40 times the cost of a row's half of a draw): n / 2
 * cheap draws then cost less than q n logarithms. */
#define FL_SGD_BERNOULLI_Q (1.0 / 32.0)
/* Models from this many parameters update in parallel (file comment); below it a barrier costs more
 * than the update saves (an update costs about 0.6 ns per parameter on the VM). */
#define FL_SGD_PAR_UPDATE 65536
/* Longest busy-wait before a thread of a step sleeps (step_pool). */
#define FL_SGD_SPIN_NS 30000
/* Parameters per block a thread takes of a parallel update (a multiple of 16 floats: two threads
 * never write one cache line when the vector is 64-byte aligned). */
#define FL_SGD_UPDATE_SPLIT 16384
/* Models from this many parameters fill their noise in FL_SGD_LANES segments (file comment). */
#define FL_SGD_NOISE_SPLIT 16384
/* Parameters per sub-block of update_range: its passes (lanes, noise, step) reuse the sub-block in
 * L1 instead of streaming the whole vector once per pass. */
#define FL_SGD_UPDATE_BLOCK 1024

int fl_ws_set_threads(fl_ws *ws, size_t threads, dp_err *err)
{
    if (threads < 1 || threads > FL_SGD_LANES)
        return dp_err_set(err, DP_EINVAL, "threads", "threads must be in [1, %d] (got %zu)",
                          FL_SGD_LANES, threads);
    for (size_t t = 1; t < threads; t++) {
        if (ws->peer[t - 1] != NULL)
            continue;
        ws->peer[t - 1] = fl_ws_alloc(&ws->spec, ws->max_rows, err);
        if (ws->peer[t - 1] == NULL)
            return err != NULL ? err->code : DP_ENOMEM;
    }
    ws->n_threads = threads;
    return DP_OK;
}

/* One step's work shared by the threads (read-only but for the lanes each thread owns). */
typedef struct step_job {
    fl_ws *main;
    const float *w, *x, *y;
    const float *x_inv_s; /* NULL or 1 / sqrt(||x_i||^2 + 1) per row (fl_sgd_cfg.x_inv_s) */
    const size_t *idx;    /* batch rows, increasing */
    size_t batch;         /* rows drawn */
    double clip;
    double noise_std;    /* 0: no noise */
    uint64_t noise_seed; /* this step's */
    double lane_loss[FL_SGD_LANES];
    /* the update (update_range), after every lane is done */
    float *w_out;        /* = w */
    const float *anchor; /* prox anchor, or NULL (lam == 0) */
    float lr, inv_b, lam;
    bool par_update; /* the threads update blocks of w (else the calling thread all of it) */
    bool shared;     /* other threads take lanes too (the pool runs) */
    atomic_size_t next_lane;  /* the next lane to take */
    atomic_size_t next_block; /* the next block of FL_SGD_UPDATE_SPLIT parameters to update */
} step_job;

/* The workers of one fl_sgd_run: threads 1..n_threads-1 started once per run, each waiting for
 * the next step (a generation counter), running its lanes, and counting itself done. Threads live
 * for the whole run rather than one step: the scheduler spreads long-lived threads over the cores,
 * while a thread created per step tends to start on its creator's core and run only once the
 * creator blocks. Each wait (a worker for the next step, every thread at the barrier, the caller
 * for the workers) first spins for up to FL_SGD_SPIN_NS on the atomic counter and only then
 * sleeps on its condition variable: one more hand-off through the kernel per step (the barrier,
 * sleeping) cost about 15 microseconds per step on the shared 2-vCPU VM, while the waits of a step
 * are mostly shorter than the spin. The counters change under the mutex or, when they are
 * incremented outside it, the incrementing thread then signals under the mutex, so a sleeper that
 * checked under the mutex cannot miss its wake-up. */
typedef struct step_pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    step_job *job;        /* the current step's (written before gen, under mu) */
    atomic_size_t gen;    /* step generation, incremented per step (under mu) */
    atomic_size_t n_done; /* workers finished with gen */
    bool quit;            /* guarded by mu */
    pthread_cond_t lanes_done;
    atomic_size_t n_arrived; /* threads done with their lanes in this step */
    size_t n_running;        /* threads of a step: the caller and the started workers */
} step_pool;

typedef struct step_worker {
    step_pool *pool;
    fl_ws *ws; /* this thread's workspace */
    pthread_t tid;
    bool started;
} step_worker;

/* Lanes taken from the step's counter until none is left: their chunks' gradients into the main
 * workspace's lanes and their noise segments into its noise vector, with ws as scratch. */
static void run_lanes(step_job *j, fl_ws *ws)
{
    fl_ws *mw = j->main;
    size_t R = ws->max_rows, P = ws->n_params;
    size_t n_chunks = (j->batch + R - 1) / R;
    for (;;) {
        /* alone (no pool): plain loads and stores, no locked add per lane */
        size_t lane = atomic_load_explicit(&j->next_lane, memory_order_relaxed);
        if (j->shared)
            lane = atomic_fetch_add_explicit(&j->next_lane, 1, memory_order_relaxed);
        else
            atomic_store_explicit(&j->next_lane, lane + 1, memory_order_relaxed);
        if (lane >= FL_SGD_LANES)
            break;
        float *acc = mw->lane[lane];
        double loss = 0.0;
        for (size_t k = lane; k < n_chunks; k += FL_SGD_LANES) {
            size_t s = k * R, c = j->batch - s < R ? j->batch - s : R;
            float *g = k == lane ? acc : ws->gtmp;
            loss += fl_model_chunk_grad_rows(ws, j->w, j->x, j->y, j->x_inv_s, j->idx + s, c,
                                             j->clip, g);
            if (k != lane)
                fl_vadd(acc, g, P);
        }
        j->lane_loss[lane] = loss;
        if (j->noise_std > 0.0) {
            size_t segs = P >= FL_SGD_NOISE_SPLIT ? FL_SGD_LANES : 1;
            size_t seg = (P + segs - 1) / segs, lo = lane * seg;
            size_t hi = lo + seg < P ? lo + seg : P;
            if (lo < hi)
                fl_gauss_fill(mw->noise + lo, hi - lo, j->noise_std,
                              fl_rng_derive(j->noise_seed, (uint64_t)lane));
        }
    }
}

/* Parameters [lo, hi) of a step's update: G = ((lane 0 + lane 1) + lane 2) + lane 3 over the lanes
 * that hold chunks (0 when none), + noise, into lane 0; w <- w - lr (G / expected_batch + prox).
 * Element-wise, in sub-blocks of FL_SGD_UPDATE_BLOCK. */
static void update_range(const step_job *j, size_t lo, size_t hi)
{
    fl_ws *mw = j->main;
    size_t R = mw->max_rows;
    size_t n_chunks = (j->batch + R - 1) / R;
    for (size_t a = lo; a < hi; a += FL_SGD_UPDATE_BLOCK) {
        size_t len = hi - a < FL_SGD_UPDATE_BLOCK ? hi - a : FL_SGD_UPDATE_BLOCK;
        float *G = mw->lane[0] + a;
        if (n_chunks == 0)
            memset(G, 0, len * sizeof *G);
        for (size_t k = 1; k < FL_SGD_LANES && k < n_chunks; k++)
            fl_vadd(G, mw->lane[k] + a, len);
        if (j->noise_std > 0.0 && !(j->lam > 0.0f)) {
            /* the noise added inside the update pass: the same bits, one pass fewer */
            fl_vstep_sum(j->w_out + a, G, mw->noise + a, j->lr, j->inv_b, len);
            continue;
        }
        if (j->noise_std > 0.0)
            fl_vadd(G, mw->noise + a, len);
        if (j->lam > 0.0f)
            fl_vstep_prox(j->w_out + a, G, j->anchor + a, j->lr, j->inv_b, j->lam, len);
        else
            fl_vstep(j->w_out + a, G, j->lr, j->inv_b, len);
    }
}

/* Blocks of FL_SGD_UPDATE_SPLIT parameters taken from the step's counter until none is left. */
static void run_updates(step_job *j)
{
    size_t P = j->main->n_params;
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&j->next_block, 1, memory_order_relaxed);
        if (b >= (P + FL_SGD_UPDATE_SPLIT - 1) / FL_SGD_UPDATE_SPLIT)
            break;
        size_t lo = b * FL_SGD_UPDATE_SPLIT;
        update_range(j, lo, P - lo < FL_SGD_UPDATE_SPLIT ? P : lo + FL_SGD_UPDATE_SPLIT);
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy-waits up to FL_SGD_SPIN_NS until *v differs from old (ne) or is at least old (!ne); returns
 * whether it happened (acquire: what was written before the change is visible). */
static bool spin_for(atomic_size_t *v, size_t old, bool ne)
{
    uint64_t t0 = 0;
    for (unsigned k = 0;; k++) {
        size_t now = atomic_load_explicit(v, memory_order_acquire);
        if (ne ? now != old : now >= old)
            return true;
        if (k % 64 == 0) {
            uint64_t t = mono_ns();
            if (k == 0)
                t0 = t;
            else if (t - t0 > FL_SGD_SPIN_NS)
                return false;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

/* Waits until every thread of the step is done with its lanes (the update reads all of them). */
static void lanes_barrier(step_pool *p)
{
    size_t n = p->n_running;
    if (atomic_fetch_add_explicit(&p->n_arrived, 1, memory_order_acq_rel) + 1 == n) {
        (void)pthread_mutex_lock(&p->mu);
        (void)pthread_cond_broadcast(&p->lanes_done);
        (void)pthread_mutex_unlock(&p->mu);
        return;
    }
    if (spin_for(&p->n_arrived, n, false))
        return;
    (void)pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->n_arrived, memory_order_acquire) < n)
        (void)pthread_cond_wait(&p->lanes_done, &p->mu);
    (void)pthread_mutex_unlock(&p->mu);
}

static void *step_worker_main(void *arg)
{
    step_worker *me = arg;
    step_pool *p = me->pool;
    size_t seen = 0;
    for (;;) {
        step_job *job;
        if (spin_for(&p->gen, seen, true)) {
            seen = atomic_load_explicit(&p->gen, memory_order_acquire);
            job = p->job;
        } else {
            (void)pthread_mutex_lock(&p->mu);
            while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !p->quit)
                (void)pthread_cond_wait(&p->start, &p->mu);
            if (p->quit) {
                (void)pthread_mutex_unlock(&p->mu);
                return NULL;
            }
            seen = atomic_load_explicit(&p->gen, memory_order_acquire);
            job = p->job;
            (void)pthread_mutex_unlock(&p->mu);
        }
        run_lanes(job, me->ws);
        if (job->par_update) {
            lanes_barrier(p);
            run_updates(job);
        }
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel);
        (void)pthread_mutex_lock(&p->mu);
        (void)pthread_cond_signal(&p->done);
        (void)pthread_mutex_unlock(&p->mu);
    }
}

/* Starts the workers 1..T-1 of a run. A worker that cannot be started is left out (started =
 * false): the calling thread runs its lanes each step, which gives the same bits. Returns false
 * when the pool itself cannot be set up (then every lane runs on the calling thread). */
static bool pool_start(step_pool *p, step_worker *wk, fl_ws *ws, size_t T)
{
    memset(p, 0, sizeof *p);
    atomic_init(&p->gen, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->n_arrived, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return false;
    if (pthread_cond_init(&p->start, NULL) != 0) {
        (void)pthread_mutex_destroy(&p->mu);
        return false;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        (void)pthread_cond_destroy(&p->start);
        (void)pthread_mutex_destroy(&p->mu);
        return false;
    }
    if (pthread_cond_init(&p->lanes_done, NULL) != 0) {
        (void)pthread_cond_destroy(&p->done);
        (void)pthread_cond_destroy(&p->start);
        (void)pthread_mutex_destroy(&p->mu);
        return false;
    }
    p->n_running = 1;
    for (size_t k = 1; k < T; k++) {
        wk[k] = (step_worker){.pool = p, .ws = ws->peer[k - 1]};
        wk[k].started = pthread_create(&wk[k].tid, NULL, step_worker_main, &wk[k]) == 0;
        p->n_running += wk[k].started;
    }
    return true;
}

static void pool_stop(step_pool *p, step_worker *wk, size_t T)
{
    (void)pthread_mutex_lock(&p->mu);
    p->quit = true;
    (void)pthread_cond_broadcast(&p->start);
    (void)pthread_mutex_unlock(&p->mu);
    for (size_t k = 1; k < T; k++)
        if (wk[k].started)
            (void)pthread_join(wk[k].tid, NULL);
    (void)pthread_cond_destroy(&p->lanes_done);
    (void)pthread_cond_destroy(&p->done);
    (void)pthread_cond_destroy(&p->start);
    (void)pthread_mutex_destroy(&p->mu);
}

/* One step's lanes over the pool (or all on the calling thread when pooled is false), and with
 * job->par_update its update. */
static void pool_run(step_pool *p, bool pooled, step_job *job, fl_ws *ws)
{
    size_t running = 0;
    if (pooled) {
        running = p->n_running - 1;
        (void)pthread_mutex_lock(&p->mu);
        p->job = job;
        atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
        atomic_store_explicit(&p->n_arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
        (void)pthread_cond_broadcast(&p->start);
        (void)pthread_mutex_unlock(&p->mu);
    }
    run_lanes(job, ws);
    if (job->par_update) {
        if (running > 0)
            lanes_barrier(p);
        run_updates(job);
    }
    if (running > 0 && !spin_for(&p->n_done, running, false)) {
        (void)pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->n_done, memory_order_acquire) < running)
            (void)pthread_cond_wait(&p->done, &p->mu);
        (void)pthread_mutex_unlock(&p->mu);
    }
}

/* Whether every label is finite (exponent bits not all ones), as blocks of FL_VBLOCK with an
 * OR-reduction and no early exit so that gcc -O2 vectorises it: the engine calls fl_sgd_run once
 * per silo and round, so the labels are checked every round (a scalar test per label was 3% of
 * the School job). A label that is not finite is then found by the loop below. */
static bool labels_all_finite(const float *restrict y, size_t n)
{
    uint32_t bad = 0;
    size_t i = 0;
    for (; i + FL_VBLOCK <= n; i += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++) {
            uint32_t b;
            memcpy(&b, &y[i + k], sizeof b);
            bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
        }
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, &y[i], sizeof b);
        bad |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
}

static int check_cfg(const fl_model_spec *m, const fl_ws *ws, const float *w, const float *x,
                     const float *y, size_t n, const fl_sgd_cfg *c, double *train_loss, dp_err *err)
{
    if (fl_model_check(m, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (ws == NULL || ws->n_params != fl_model_n_params(m) || ws->spec.type != m->type ||
        ws->dims[0] != m->d_in)
        return dp_err_set(err, DP_EINVAL, "ws", "the workspace was not allocated for this model");
    if (c == NULL || w == NULL || train_loss == NULL || (n > 0 && (x == NULL || y == NULL)))
        return dp_err_set(err, DP_EINVAL, NULL, "a required argument is missing");
    if (!(c->lr > 0.0) || !isfinite(c->lr))
        return dp_err_set(err, DP_EINVAL, "lr", "lr must be finite and > 0 (got %g)", c->lr);
    if (c->steps > FL_MAX_STEPS)
        return dp_err_set(err, DP_EINVAL, "steps", "steps must be at most %d (got %zu)",
                          FL_MAX_STEPS, c->steps);
    if (!(c->q > 0.0 && c->q <= 1.0))
        return dp_err_set(err, DP_EINVAL, "q", "q must be in (0, 1] (got %g)", c->q);
    if (!(c->expected_batch > 0.0) || !isfinite(c->expected_batch))
        return dp_err_set(err, DP_EINVAL, "expected_batch",
                          "expected_batch must be finite and > 0 (got %g)", c->expected_batch);
    if (!(c->clip >= 0.0) || !isfinite(c->clip))
        return dp_err_set(err, DP_EINVAL, "clip", "clip must be finite and >= 0 (got %g)", c->clip);
    if (!(c->noise_multiplier >= 0.0) || !isfinite(c->noise_multiplier))
        return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                          "noise_multiplier must be finite and >= 0 (got %g)", c->noise_multiplier);
    if (c->noise_multiplier > 0.0 && !(c->clip > 0.0))
        return dp_err_set(err, DP_EINVAL, "clip",
                          "clip must be > 0 when noise_multiplier is > 0 (got %g)", c->clip);
    if (!(c->prox_lambda >= 0.0) || !isfinite(c->prox_lambda))
        return dp_err_set(err, DP_EINVAL, "prox_lambda",
                          "prox_lambda must be finite and >= 0 (got %g)", c->prox_lambda);
    if ((c->prox_lambda > 0.0) != (c->anchor != NULL))
        return dp_err_set(err, DP_EINVAL, "anchor",
                          "anchor must be given exactly when prox_lambda > 0");
    bool multi = m->type == FL_MODEL_SOFTMAX || m->type == FL_MODEL_MLP;
    if (!multi && labels_all_finite(y, n))
        return DP_OK;
    for (size_t i = 0; i < n; i++) {
        float v = y[i];
        bool ok = multi ? (v >= 0.0f && v < (float)m->n_classes && v == floorf(v)) : isfinite(v);
        if (!ok)
            return dp_err_set(err, DP_EINVAL, "y", "label %zu is %g, not %s", i, (double)v,
                              multi ? "a class index" : "a finite number");
    }
    return DP_OK;
}

/* Poisson sample of rows 0..n-1 at rate q into idx (increasing); returns the count. Each row is
 * included independently with probability q either way (file comment, step 1). */
static size_t poisson_sample(fl_rng *r, size_t n, double q, size_t *idx)
{
    if (q >= 1.0) {
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        return n;
    }
    size_t cnt = 0;
    if (q >= FL_SGD_BERNOULLI_Q) {
        /* P(half < t) = t / 2^32 = floor(q 2^32) / 2^32, in (q - 2^-32, q] (q < 1: t < 2^32);
         * rows i (low half) and i + 1 (high half) of one draw are independent. */
        uint32_t t = (uint32_t)floor(ldexp(q, 32));
        size_t i = 0;
        for (; i + 2 <= n; i += 2) {
            uint64_t u = fl_rng_next(r);
            idx[cnt] = i;
            cnt += (uint32_t)u < t;
            idx[cnt] = i + 1;
            cnt += (uint32_t)(u >> 32) < t;
        }
        if (i < n) {
            idx[cnt] = i;
            cnt += (uint32_t)fl_rng_next(r) < t;
        }
        return cnt;
    }
    double lq = log1p(-q); /* < 0 */
    double pos = -1.0;
    for (;;) {
        pos += floor(log(fl_rng_uniform_pos(r)) / lq) + 1.0;
        if (!(pos < (double)n))
            break;
        idx[cnt++] = (size_t)pos;
    }
    return cnt;
}

int fl_sgd_run(const fl_model_spec *m, float *w, const float *x, const float *y, size_t n,
               const fl_sgd_cfg *cfg, uint64_t sample_seed, uint64_t noise_seed, fl_ws *ws,
               double *train_loss, dp_err *err)
{
    int rc = check_cfg(m, ws, w, x, y, n, cfg, train_loss, err);
    if (rc != DP_OK)
        return rc;
    size_t P = ws->n_params, *idx = NULL;
    for (size_t k = 0; k < FL_SGD_LANES; k++)
        if (ws->lane[k] == NULL && (ws->lane[k] = dp_calloc(P, sizeof(float))) == NULL)
            goto oom;
    if (ws->noise == NULL && (ws->noise = dp_calloc(P, sizeof(float))) == NULL)
        goto oom;
    if (ws->idx_cap < n || ws->idx == NULL) {
        size_t cap = n > 0 ? n : 1;
        size_t *grown = dp_realloc(ws->idx, cap * sizeof *grown);
        if (grown == NULL)
            goto oom;
        ws->idx = grown;
        ws->idx_cap = cap;
    }
    idx = ws->idx;

    fl_rng sampler;
    fl_rng_seed(&sampler, sample_seed, DP_RNG_STREAM_FL_SGD_SAMPLING);
    uint64_t noise_base = dp_rng_derive(noise_seed, DP_RNG_STREAM_FL_SGD_NOISE);
    double noise_std = cfg->noise_multiplier * cfg->clip;
    float inv_b = (float)(1.0 / cfg->expected_batch), lr = (float)cfg->lr;
    float lam = (float)cfg->prox_lambda;
    double loss_total = 0.0, rows_total = 0.0;
    size_t R = ws->max_rows, T = ws->n_threads;
    step_pool pool;
    step_worker workers[FL_SGD_LANES];
    bool pooled = T > 1 && cfg->steps > 0 && pool_start(&pool, workers, ws, T);
    bool par_update = pooled && P >= FL_SGD_PAR_UPDATE;

    for (size_t t = 0; t < cfg->steps; t++) {
        step_job job = {.main = ws,
                        .w = w,
                        .x = x,
                        .y = y,
                        .x_inv_s = cfg->x_inv_s,
                        .idx = idx,
                        .clip = cfg->clip,
                        .noise_std = noise_std,
                        .noise_seed = fl_rng_derive(noise_base, (uint64_t)t),
                        .w_out = w,
                        .anchor = cfg->anchor,
                        .lr = lr,
                        .inv_b = inv_b,
                        .lam = lam,
                        .par_update = par_update,
                        .shared = pooled};
        atomic_init(&job.next_lane, 0);
        atomic_init(&job.next_block, 0);
        job.batch = poisson_sample(&sampler, n, cfg->q, idx);
        size_t n_chunks = (job.batch + R - 1) / R;
        pool_run(&pool, pooled, &job, ws);
        if (!par_update)
            update_range(&job, 0, P);
        for (size_t k = 0; k < FL_SGD_LANES && k < n_chunks; k++)
            loss_total += job.lane_loss[k];
        rows_total += (double)job.batch;
    }
    if (pooled)
        pool_stop(&pool, workers, T);
    *train_loss = rows_total > 0.0 ? loss_total / rows_total : DP_NAN;
    return DP_OK;
oom:
    return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for a training step");
}
