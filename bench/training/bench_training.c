/*
 * bench_training.c: training throughput of federated/ (fl_sgd_run) in samples per second, on
 * Fashion-MNIST-sized random data (60,000 rows of 784 features in [0, 1), 10 classes; labels 0/1
 * for the binary logistic model), and the rate of fl_gauss_fill in normals per second (fills of
 * 2^22, and fills of 9,940: one noise lane of the 784-50-10 MLP's step).
 *
 * Each configuration runs fl_sgd_run with Poisson sampling at q = B / 60000 (expected batch B),
 * once without privacy (no clipping, no noise) and once as DP-SGD (clip 1, noise multiplier 1.1,
 * ghost clipping), on 1 thread and, for the 784-256-10 MLP, on 2 threads (chunks of 128 rows, so a
 * batch of ~256 splits in two; the 1-thread run with the same chunks gives the same bits).
 * samples/s = expected rows (B x steps) / wall time (and / CPU time of all threads); the median of
 * BENCH_REPEATS (default 5) timed calls of BENCH_STEPS steps each (default: about 0.3 s of work),
 * after one warm-up call, the non-private and DP-SGD calls alternating so that both see the same
 * background load. BENCH_ONLY=text runs only the cases whose name contains text (e.g. "784-50-10",
 * or "none" for the noise rate alone) and then skips the Fashion-MNIST accuracy pass.
 * Not part of make test; bench/training/run.sh runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_rng.h"
#include "federated/fl_data.h"
#include "federated/fl_model.h"

#define N_ROWS 60000
#define D_IN   784

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static double cpu_s(void)
{
    return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *s = getenv(name);
    if (s == NULL)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end != '\0' || v < lo || v > hi) ? def : (int)v;
}

typedef struct bench_case {
    const char *name;
    const char *json; /* the model's name in bench/training/table.py's rows (NULL: text only) */
    fl_model_spec spec;
    size_t batch, chunk, threads;
} bench_case;

/* One mode (non-private or DP-SGD) of a case: its workspace, parameters, configuration and the
 * samples/s (wall and per CPU second) and CPUs used of each timed run. */
typedef struct runner {
    fl_ws *ws;
    float *w;
    fl_sgd_cfg c;
    double *t, *tc, *u;
} runner;

static void runner_close(runner *r)
{
    fl_ws_free(r->ws);
    free(r->w);
    free(r->t);
}

/* Allocates, then one warm-up call of 5 steps that also sizes the timed calls (~0.3 s each unless
 * steps_opt > 0). 0 or -1. */
static int runner_open(runner *r, const bench_case *bc, const float *x, const float *y, bool dp,
                       int repeats, int steps_opt, dp_err *e)
{
    memset(r, 0, sizeof *r);
    r->w = calloc(fl_model_n_params(&bc->spec), sizeof *r->w);
    r->t = calloc(3 * (size_t)repeats, sizeof *r->t);
    r->ws = fl_ws_alloc(&bc->spec, bc->chunk, e);
    if (r->w == NULL || r->t == NULL || r->ws == NULL ||
        fl_ws_set_threads(r->ws, bc->threads, e) != DP_OK)
        return -1;
    r->tc = r->t + repeats;
    r->u = r->tc + repeats;
    fl_model_init(&bc->spec, 1, r->w);
    r->c = (fl_sgd_cfg){.lr = 0.01,
                        .steps = 5,
                        .q = (double)bc->batch / N_ROWS,
                        .expected_batch = (double)bc->batch,
                        .clip = dp ? 1.0 : 0.0,
                        .noise_multiplier = dp ? 1.1 : 0.0};
    double loss, t0 = now_s();
    if (fl_sgd_run(&bc->spec, r->w, x, y, N_ROWS, &r->c, 1, 2, r->ws, &loss, e) != DP_OK)
        return -1;
    double per_step = (now_s() - t0) / 5.0;
    r->c.steps = steps_opt > 0 ? (size_t)steps_opt : (size_t)(0.3 / per_step) + 1;
    return 0;
}

static int runner_time(runner *r, const bench_case *bc, const float *x, const float *y, int k,
                       dp_err *e)
{
    double loss, t0 = now_s(), c0 = cpu_s();
    if (fl_sgd_run(&bc->spec, r->w, x, y, N_ROWS, &r->c, 10 + (uint64_t)k, 20 + (uint64_t)k, r->ws,
                   &loss, e) != DP_OK)
        return -1;
    double wall = now_s() - t0, cpu = cpu_s() - c0, rows = (double)(bc->batch * r->c.steps);
    r->t[k] = rows / wall;
    r->tc[k] = rows / cpu;
    r->u[k] = cpu / wall;
    return 0;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Times the non-private and the DP-SGD mode of a case in alternation (so that both see the same
 * background load) and prints its row. 0 or -1. */
static int run_case(const bench_case *bc, const float *x, const float *y, int repeats,
                    int steps_opt)
{
    runner np, dp;
    dp_err e;
    dp_err_clear(&e);
    int rc = -1;
    memset(&dp, 0, sizeof dp);
    if (runner_open(&np, bc, x, y, false, repeats, steps_opt, &e) != 0 ||
        runner_open(&dp, bc, x, y, true, repeats, steps_opt, &e) != 0)
        goto out;
    for (int k = 0; k < repeats; k++)
        if (runner_time(&np, bc, x, y, k, &e) != 0 || runner_time(&dp, bc, x, y, k, &e) != 0)
            goto out;
    double a = median(np.t, repeats), b = median(dp.t, repeats);
    double ac = median(np.tc, repeats), bc_ = median(dp.tc, repeats);
    printf("%-16s %5zu %6zu %7zu %11.0f %11.0f %7.2fx %11.0f %11.0f %7.2fx %5.2f/%4.2f\n", bc->name,
           bc->batch, bc->chunk, bc->threads, a, b, a / b, ac, bc_, ac / bc_, median(np.u, repeats),
           median(dp.u, repeats));
    /* the same figures as rows of table.py (DP-SGD first: the reference of its ratios) */
    if (bc->json != NULL)
        for (int m = 0; m < 2; m++)
            printf("{\"impl\": \"dpsilo\", \"model\": \"%s\", \"batch\": %zu, \"threads\": %zu, "
                   "\"mode\": \"%s\", \"samples_per_s\": %.0f, \"samples_per_cpu_s\": %.0f, "
                   "\"test_accuracy\": null}\n",
                   bc->json, bc->batch, bc->threads, m == 0 ? "dp_sgd" : "non_private",
                   m == 0 ? b : a, m == 0 ? bc_ : ac);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "bench_training: %s: %s\n", bc->name, e.msg);
    runner_close(&np);
    runner_close(&dp);
    return rc;
}

/* Test accuracy after one epoch on the real Fashion-MNIST (Debian's dataset-fashion-mnist; skipped
 * when absent), at the anchor's settings (bench/training/torch_anchor.py): pixels / 255, lr 0.1,
 * batch mean; one epoch = 60000 / B steps of Poisson sampling at q = B / 60000; DP-SGD with clip 1
 * and noise multiplier 1.0 (the anchor's Opacus settings). Prints a text line and a table.py row
 * per model and mode. */
#define FMNIST "/usr/share/datasets/fashion-mnist/"

static void accuracy_pass(void)
{
    fl_dataset tr = {0}, te = {0};
    dp_err e;
    dp_err_clear(&e);
    if (fl_idx_load(FMNIST "train-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz", 0,
                    &tr, &e) != DP_OK ||
        fl_idx_load(FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz", 0, &te,
                    &e) != DP_OK) {
        printf("accuracy after one epoch: skipped (Fashion-MNIST not readable: %s)\n", e.msg);
        fl_dataset_free(&tr);
        fl_dataset_free(&te);
        return;
    }
    const struct {
        const char *json;
        fl_model_spec spec;
        size_t batch;
    } cases[] = {
        {"logistic", {.type = FL_MODEL_SOFTMAX, .d_in = 784, .n_classes = 10}, 256},
        {"mlp-784-50-10",
         {.type = FL_MODEL_MLP, .d_in = 784, .n_classes = 10, .n_hidden = 1, .hidden = {50}},
         64},
        {"mlp-784-256-10",
         {.type = FL_MODEL_MLP, .d_in = 784, .n_classes = 10, .n_hidden = 1, .hidden = {256}},
         256},
    };
    printf("accuracy after one epoch on Fashion-MNIST (lr 0.1, Poisson q = B / %zu, DP: clip 1, "
           "noise 1.0):\n",
           tr.n);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int dp = 1; dp >= 0; dp--) {
            size_t P = fl_model_n_params(&cases[k].spec);
            float *w = calloc(P, sizeof *w);
            fl_ws *ws = fl_ws_alloc(&cases[k].spec, cases[k].batch, &e);
            if (w == NULL || ws == NULL) {
                free(w);
                fl_ws_free(ws);
                return;
            }
            fl_model_init(&cases[k].spec, 1, w);
            fl_sgd_cfg c = {.lr = 0.1,
                            .steps = tr.n / cases[k].batch,
                            .q = (double)cases[k].batch / (double)tr.n,
                            .expected_batch = (double)cases[k].batch,
                            .clip = dp ? 1.0 : 0.0,
                            .noise_multiplier = dp ? 1.0 : 0.0};
            double loss, t0 = now_s();
            int rc = fl_sgd_run(&cases[k].spec, w, tr.x, tr.y, tr.n, &c, 3, 4, ws, &loss, &e);
            double secs = now_s() - t0;
            fl_eval ev = {0};
            if (rc == DP_OK)
                fl_model_eval(&cases[k].spec, w, te.x, te.y, te.n, ws, &ev);
            double acc = rc == DP_OK && ev.n ? ev.correct / (double)ev.n : -1;
            printf("  %-16s B=%-4zu %-11s accuracy %.4f  (%.0f samples/s)\n", cases[k].json,
                   cases[k].batch, dp ? "DP-SGD" : "non-private", acc,
                   (double)(c.steps * cases[k].batch) / secs);
            printf("{\"impl\": \"dpsilo\", \"model\": \"%s\", \"batch\": %zu, \"threads\": 1, "
                   "\"mode\": \"%s\", \"samples_per_s\": %.0f, \"test_accuracy\": %.4f, "
                   "\"data\": \"fashion-mnist\"}\n",
                   cases[k].json, cases[k].batch, dp ? "dp_sgd_epoch" : "non_private_epoch",
                   (double)(c.steps * cases[k].batch) / secs, acc);
            free(w);
            fl_ws_free(ws);
        }
    }
    fl_dataset_free(&tr);
    fl_dataset_free(&te);
}

int main(void)
{
    int repeats = env_int("BENCH_REPEATS", 5, 1, 1000);
    int steps = env_int("BENCH_STEPS", 0, 0, 1000000);
    float *x = malloc((size_t)N_ROWS * D_IN * sizeof *x);
    float *y10 = malloc(N_ROWS * sizeof *y10), *y2 = malloc(N_ROWS * sizeof *y2);
    if (x == NULL || y10 == NULL || y2 == NULL)
        return 1;
    uint64_t st = 20261127;
    for (size_t i = 0; i < (size_t)N_ROWS * D_IN; i++)
        x[i] = (float)((double)(dp_splitmix64(&st) >> 40) * 0x1.0p-24);
    for (size_t i = 0; i < N_ROWS; i++) {
        y10[i] = (float)(dp_splitmix64(&st) % 10);
        y2[i] = y10[i] >= 5.0f ? 1.0f : 0.0f;
    }
    fl_model_spec logistic = {.type = FL_MODEL_LOGISTIC, .d_in = D_IN};
    /* multinomial logistic regression (784 -> 10): the anchor's "logistic" row */
    fl_model_spec softmax = {.type = FL_MODEL_SOFTMAX, .d_in = D_IN, .n_classes = 10};
    fl_model_spec mlp50 = {
        .type = FL_MODEL_MLP, .d_in = D_IN, .n_classes = 10, .n_hidden = 1, .hidden = {50}};
    fl_model_spec mlp256 = {
        .type = FL_MODEL_MLP, .d_in = D_IN, .n_classes = 10, .n_hidden = 1, .hidden = {256}};
    const bench_case cases[] = {
        {"logistic 784", NULL, logistic, 256, 256, 1},
        {"softmax 784-10", "logistic", softmax, 256, 256, 1},
        {"mlp 784-50-10", "mlp-784-50-10", mlp50, 64, 64, 1},
        {"mlp 784-256-10", NULL, mlp256, 256, 256, 1},
        {"mlp 784-256-10", "mlp-784-256-10", mlp256, 256, 128, 1},
        {"mlp 784-256-10", "mlp-784-256-10", mlp256, 256, 128, 2},
    };
    printf(
        "federated/ training throughput: %d rows x %d features, Poisson q = B / %d, DP-SGD clip 1,"
        " noise multiplier 1.1; median of %d runs\n",
        N_ROWS, D_IN, N_ROWS, repeats);
    printf("%-16s %5s %6s %7s %11s %11s %8s %11s %11s %8s %10s\n", "model", "B", "chunk", "threads",
           "non-priv/s", "DP-SGD/s", "DP cost", "np/CPU-s", "DP/CPU-s", "(CPU)", "CPUs used");
    const char *only = getenv("BENCH_ONLY");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const float *y = cases[k].spec.type == FL_MODEL_LOGISTIC ? y2 : y10;
        if (only != NULL && strstr(cases[k].name, only) == NULL)
            continue;
        if (run_case(&cases[k], x, y, repeats, steps) != 0)
            return 1;
    }
    printf(
        "(samples/s on the wall clock, and per CPU second of all threads; DP cost = non-private\n"
        " rate / DP-SGD rate; CPUs used = CPU seconds per wall second, non-private/DP: below the\n"
        " thread count when other processes share the cores)\n");
    free(x);
    free(y10);
    free(y2);

    size_t n = 1 << 22;
    float *z = malloc(n * sizeof *z);
    double *t = calloc((size_t)repeats, sizeof *t);
    if (z == NULL || t == NULL)
        return 1;
    fl_gauss_fill(z, n, 1.0, 1);
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        for (int k = 0; k < 10; k++)
            fl_gauss_fill(z, n, 1.0, (uint64_t)(r * 10 + k));
        t[r] = 10.0 * (double)n / (now_s() - t0);
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp_double);
    printf("fl_gauss_fill: %.0f M normals/s (1 thread, median of %d runs of 10 x %zu)\n",
           t[repeats / 2] / 1e6, repeats, n);
    /* the size DP-SGD fills: a quarter (one noise lane) of the 784-50-10 MLP's 39,760 parameters,
     * in cache, as in a training step */
    size_t seg = 9940, calls = n / seg;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        for (size_t k = 0; k < 10 * calls; k++)
            fl_gauss_fill(z, seg, 1.0, (uint64_t)k);
        t[r] = 10.0 * (double)(calls * seg) / (now_s() - t0);
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp_double);
    printf("fl_gauss_fill: %.0f M normals/s in fills of %zu (1 thread, median of %d runs)\n",
           t[repeats / 2] / 1e6, seg, repeats);
    free(z);
    free(t);
    if (only == NULL)
        accuracy_pass();
    return 0;
}
