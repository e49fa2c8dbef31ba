/*
 * test_fl_sgd.c: federated/fl_sgd_run, (DP-)SGD on one silo's rows.
 *
 * Checks: the same seeds give the same bits and each seed matters; the drawn batch size has mean
 * q n and variance q (1 - q) n (Poisson sampling, read off an update that counts the rows drawn);
 * with q = 1, no effective clipping, no noise and no prox it is exactly full-batch gradient descent
 * computed through fl_model_grad_sum; the proximal term's effect in closed form, unclipped even
 * when the data gradients are clipped hard; the noise's scale noise_multiplier * clip;
 * bit-identical results for 1..4 threads; argument validation and clean allocation failures.
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_model.h"

static uint64_t tst_state;

static double tst_uniform(void)
{
    return (double)((dp_splitmix64(&tst_state) >> 11) + 1) * 0x1.0p-53;
}

static double tst_normal(void)
{
    return sqrt(-2.0 * log(tst_uniform())) * cos(6.283185307179586 * tst_uniform());
}

static fl_model_spec mlp_spec(size_t d, size_t h, size_t classes)
{
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.type = FL_MODEL_MLP;
    m.d_in = d;
    m.n_classes = classes;
    m.n_hidden = 1;
    m.hidden[0] = h;
    return m;
}

static fl_model_spec linear_spec(fl_model_type t, size_t d)
{
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.type = t;
    m.d_in = d;
    return m;
}

static void random_rows(const fl_model_spec *m, size_t n, uint64_t seed, float *x, float *y)
{
    tst_state = seed;
    for (size_t i = 0; i < n * m->d_in; i++)
        x[i] = (float)tst_normal();
    for (size_t i = 0; i < n; i++)
        y[i] = m->n_classes >= 2 ? (float)(size_t)(tst_uniform() * (double)m->n_classes)
                                 : (tst_uniform() < 0.5 ? 0.0f : 1.0f);
}

static fl_sgd_cfg dp_cfg(size_t n, double q)
{
    fl_sgd_cfg c = {.lr = 0.1,
                    .steps = 5,
                    .q = q,
                    .expected_batch = q * (double)n,
                    .clip = 1.0,
                    .noise_multiplier = 1.1,
                    .prox_lambda = 0.0,
                    .anchor = NULL};
    return c;
}

/* Runs fl_sgd_run from the seeded MLP initialisation and returns the parameters (owned). */
static float *run_mlp(const fl_model_spec *m, const float *x, const float *y, size_t n,
                      const fl_sgd_cfg *c, uint64_t ss, uint64_t ns, size_t max_rows,
                      size_t threads)
{
    size_t p = fl_model_n_params(m);
    float *w = calloc(p, sizeof *w);
    assert_non_null(w);
    fl_model_init(m, 9, w);
    dp_err e;
    dp_err_clear(&e);
    fl_ws *ws = fl_ws_alloc(m, max_rows, &e);
    assert_non_null(ws);
    assert_int_equal(fl_ws_set_threads(ws, threads, &e), DP_OK);
    double loss = 0;
    assert_int_equal(fl_sgd_run(m, w, x, y, n, c, ss, ns, ws, &loss, &e), DP_OK);
    assert_true(isfinite(loss) && loss > 0.0);
    fl_ws_free(ws);
    return w;
}

static void same_seeds_give_the_same_bits_and_each_seed_matters(void **state)
{
    (void)state;
    fl_model_spec m = mlp_spec(12, 8, 3);
    size_t n = 300, p = fl_model_n_params(&m);
    float *x = malloc(n * 12 * sizeof *x), *y = malloc(n * sizeof *y);
    assert_true(x && y);
    random_rows(&m, n, 1, x, y);
    fl_sgd_cfg c = dp_cfg(n, 0.1);
    float *a = run_mlp(&m, x, y, n, &c, 11, 22, 16, 1);
    float *b = run_mlp(&m, x, y, n, &c, 11, 22, 16, 1);
    float *s = run_mlp(&m, x, y, n, &c, 12, 22, 16, 1);
    float *z = run_mlp(&m, x, y, n, &c, 11, 23, 16, 1);
    assert_memory_equal(a, b, p * sizeof *a);
    assert_memory_not_equal(a, s, p * sizeof *a);
    assert_memory_not_equal(a, z, p * sizeof *a);
    free(a);
    free(b);
    free(s);
    free(z);
    free(x);
    free(y);
}

/* 1, 2, 3 and 4 threads: the same bits (batches of ~150 rows in chunks of 16 over 4 lanes). */
static void threads_do_not_change_the_bits(void **state)
{
    (void)state;
    fl_model_spec m = mlp_spec(20, 16, 4);
    size_t n = 500, p = fl_model_n_params(&m);
    float *x = malloc(n * 20 * sizeof *x), *y = malloc(n * sizeof *y);
    assert_true(x && y);
    random_rows(&m, n, 2, x, y);
    fl_sgd_cfg c = dp_cfg(n, 0.3);
    float *ref = run_mlp(&m, x, y, n, &c, 5, 6, 16, 1);
    for (size_t t = 2; t <= 4; t++) {
        float *w = run_mlp(&m, x, y, n, &c, 5, 6, 16, t);
        assert_memory_equal(ref, w, p * sizeof *w);
        free(w);
    }
    /* the non-private path too */
    c.clip = 0;
    c.noise_multiplier = 0;
    free(ref);
    ref = run_mlp(&m, x, y, n, &c, 5, 6, 16, 1);
    float *w = run_mlp(&m, x, y, n, &c, 5, 6, 16, 2);
    assert_memory_equal(ref, w, p * sizeof *w);
    free(w);
    free(ref);
    free(x);
    free(y);
}

/* A model of at least FL_SGD_PAR_UPDATE (65,536) parameters updates in parallel, the threads taking
 * blocks of the parameters after a barrier: 2, 3 and 4 threads give the bits of 1 thread (which
 * updates serially) with noise and the prox term, with many chunks per lane, with one chunk (lanes
 * 1-3 empty), with steps whose batch is empty (noise only), and without privacy. */
static void parallel_update_of_a_large_model_gives_the_same_bits(void **state)
{
    (void)state;
    fl_model_spec m = mlp_spec(256, 256, 5);
    size_t n = 300, d = 256, p = fl_model_n_params(&m);
    assert_true(p >= 65536);
    float *x = malloc(n * d * sizeof *x), *y = malloc(n * sizeof *y),
          *anchor = malloc(p * sizeof *anchor);
    assert_true(x && y && anchor);
    random_rows(&m, n, 3, x, y);
    for (size_t j = 0; j < p; j++)
        anchor[j] = (float)(0.01 * tst_normal());
    for (int v = 0; v < 5; v++) {
        fl_sgd_cfg c = dp_cfg(n, v == 3 ? 0.002 : 0.3);
        size_t max_rows = v == 2 ? 128 : 16;
        if (v == 1) {
            c.prox_lambda = 0.5;
            c.anchor = anchor;
        }
        if (v == 4) {
            c.clip = 0;
            c.noise_multiplier = 0;
        }
        c.steps = v == 3 ? 20 : 4;
        float *ref = run_mlp(&m, x, y, n, &c, 5 + v, 6, max_rows, 1);
        for (size_t t = 2; t <= 4; t++) {
            float *w = run_mlp(&m, x, y, n, &c, 5 + v, 6, max_rows, t);
            if (memcmp(ref, w, p * sizeof *w) != 0)
                fail_msg("variant %d, %zu threads: other bits than 1 thread", v, t);
            free(w);
        }
        free(ref);
    }
    free(x);
    free(y);
    free(anchor);
}

/* The one-output models with the rows' cached 1 / sqrt(||x_i||^2 + 1) (cfg.x_inv_s, fl_rows_inv_s):
 * the same bits as without, on 1..4 threads and at both sampling paths (q below and above
 * FL_SGD_BERNOULLI_Q); stale norms (the rows changed after caching) give other bits, so the cache
 * really is what clips. */
static void cached_row_norms_give_the_same_bits_on_any_thread_count(void **state)
{
    (void)state;
    const fl_model_type types[] = {FL_MODEL_LINEAR, FL_MODEL_LOGISTIC, FL_MODEL_SVM};
    const size_t dims[] = {28, 11, 5};
    for (size_t k = 0; k < 3; k++) {
        fl_model_spec m = {.type = types[k], .d_in = dims[k]};
        size_t n = 400, d = m.d_in, p = fl_model_n_params(&m);
        float *x = malloc(n * d * sizeof *x), *y = malloc(n * sizeof *y);
        float *xsq = malloc(n * sizeof *xsq);
        assert_true(x && y && xsq);
        random_rows(&m, n, 40 + k, x, y);
        if (types[k] == FL_MODEL_LINEAR)
            for (size_t i = 0; i < n; i++)
                y[i] = 3.0f * y[i] - 1.0f; /* residuals large enough to clip */
        fl_rows_inv_s(x, n, d, xsq);
        for (int path = 0; path < 2; path++) {
            fl_sgd_cfg c = dp_cfg(n, path == 0 ? 0.02 : 0.3);
            c.clip = 0.5;
            float *ref = run_mlp(&m, x, y, n, &c, 7, 8, 16, 1);
            c.x_inv_s = xsq;
            for (size_t t = 1; t <= 4; t++) {
                float *w = run_mlp(&m, x, y, n, &c, 7, 8, 16, t);
                assert_memory_equal(ref, w, p * sizeof *w);
                free(w);
            }
            for (size_t i = 0; i < n * d; i++) /* the rows change, the cache does not */
                x[i] *= 2.0f;
            float *stale = run_mlp(&m, x, y, n, &c, 7, 8, 16, 1);
            c.x_inv_s = NULL;
            float *fresh = run_mlp(&m, x, y, n, &c, 7, 8, 16, 1);
            assert_memory_not_equal(stale, fresh, p * sizeof *stale);
            for (size_t i = 0; i < n * d; i++)
                x[i] *= 0.5f; /* exact: back to the cached rows */
            free(stale);
            free(fresh);
            free(ref);
        }
        free(x);
        free(y);
        free(xsq);
    }
}

/* Regression labels must be finite: a NaN or an infinity anywhere (in a block of the vectorised
 * scan or in its tail) is refused naming the label's index, and w is left unchanged. */
static void nonfinite_regression_labels_are_refused_with_their_index(void **state)
{
    (void)state;
    fl_model_spec m = {.type = FL_MODEL_LINEAR, .d_in = 3};
    size_t n = 37, p = fl_model_n_params(&m);
    float x[37 * 3], y[37], w[4] = {0.5f, -1.0f, 2.0f, 0.25f}, w0[4];
    memcpy(w0, w, sizeof w);
    random_rows(&m, n, 77, x, y);
    fl_ws *ws = fl_ws_alloc(&m, 8, NULL);
    assert_non_null(ws);
    fl_sgd_cfg c = {.lr = 0.1, .steps = 2, .q = 0.5, .expected_batch = 18.5};
    const size_t at[] = {0, 15, 16, 31, 32, 36};
    const float bad[] = {(float)DP_NAN, (float)DP_INF, (float)-DP_INF};
    double loss;
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++)
        for (size_t b = 0; b < 3; b++) {
            float keep = y[at[a]];
            y[at[a]] = bad[b];
            dp_err e;
            dp_err_clear(&e);
            assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1, 2, ws, &loss, &e), DP_EINVAL);
            assert_string_equal(e.field, "y");
            char want[32];
            snprintf(want, sizeof want, "label %zu is", at[a]);
            assert_non_null(strstr(e.msg, want));
            assert_memory_equal(w, w0, p * sizeof *w);
            y[at[a]] = keep;
        }
    assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1, 2, ws, &loss, NULL), DP_OK);
    fl_ws_free(ws);
}

/* LINEAR on rows x = 0, y = -1 from w = 0 with lr = 1, expected_batch = 1: one step moves the bias
 * to -(rows drawn), exactly (small integers are exact in float). */
static void poisson_batch_size_has_mean_qn_and_variance_qn_1_minus_q(void **state)
{
    (void)state;
    fl_model_spec m = linear_spec(FL_MODEL_LINEAR, 1);
    size_t n = 1000, runs = 3000;
    double q = 0.05;
    float *x = calloc(n, sizeof *x), *y = malloc(n * sizeof *y);
    assert_true(x && y);
    for (size_t i = 0; i < n; i++)
        y[i] = -1.0f;
    fl_ws *ws = fl_ws_alloc(&m, 64, NULL);
    assert_non_null(ws);
    fl_sgd_cfg c = {.lr = 1.0, .steps = 1, .q = q, .expected_batch = 1.0};
    double s = 0, s2 = 0;
    for (size_t r = 0; r < runs; r++) {
        float w[2] = {0, 0};
        double loss;
        assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1000 + r, 0, ws, &loss, NULL), DP_OK);
        double k = -(double)w[1];
        assert_true(k == floor(k) && k >= 0);
        assert_true(w[0] == 0.0f);
        s += k;
        s2 += k * k;
    }
    double mean = s / (double)runs, var = s2 / (double)runs - mean * mean;
    double mu = q * (double)n, v = q * (1 - q) * (double)n;
    assert_true(fabs(mean - mu) < 5.0 * sqrt(v / (double)runs));
    /* the sample variance's standard error is about v sqrt(2 / runs) */
    assert_true(fabs(var - v) < 5.0 * v * sqrt(2.0 / (double)runs));
    fl_ws_free(ws);
    free(x);
    free(y);
}

/* LINEAR on one-hot rows x_i = e_i, y = -1, from w = 0 with lr = 1, expected_batch = 1: one step
 * sets w_j = -1 exactly when row j was drawn. Below and above FL_SGD_BERNOULLI_Q = 1/32 (geometric
 * skipping; one 32-bit half of a draw per row, the two halves deciding rows 2i and 2i + 1, and an
 * odd row count leaving a last row with a draw of its own) every row joins with probability q,
 * pairs of rows (adjacent: the same draw or the next; far) together with probability q^2, and the
 * batch size has mean q n and variance q (1 - q) n. */
static void every_row_joins_independently_with_probability_q(void **state)
{
    (void)state;
    enum { N = 41 };
    fl_model_spec m = linear_spec(FL_MODEL_LINEAR, N);
    float *x = calloc(N * N, sizeof *x), y[N];
    assert_non_null(x);
    for (size_t i = 0; i < N; i++) {
        x[i * N + i] = 1.0f;
        y[i] = -1.0f;
    }
    fl_ws *ws = fl_ws_alloc(&m, 64, NULL);
    assert_non_null(ws);
    const double qs[5] = {0.02, 0.07, 0.25, 0.6, 0.97};
    const size_t runs = 4000;
    for (int qi = 0; qi < 5; qi++) {
        double q = qs[qi];
        fl_sgd_cfg c = {.lr = 1.0, .steps = 1, .q = q, .expected_batch = 1.0};
        double hits[N] = {0}, adj = 0, pair = 0, far = 0, s = 0, s2 = 0;
        for (size_t r = 0; r < runs; r++) {
            float w[N + 1] = {0};
            double loss;
            assert_int_equal(fl_sgd_run(&m, w, x, y, N, &c, 77 + r, 0, ws, &loss, NULL), DP_OK);
            double k = 0;
            for (size_t j = 0; j < N; j++) {
                assert_true(w[j] == 0.0f || w[j] == -1.0f);
                hits[j] += w[j] < 0;
                k += w[j] < 0;
                if (j + 1 < N)
                    adj += w[j] < 0 && w[j + 1] < 0;
                if (j % 2 == 0 && j + 1 < N)
                    pair += w[j] < 0 && w[j + 1] < 0;
                if (j < N / 2)
                    far += w[j] < 0 && w[j + N / 2] < 0;
            }
            assert_true(-(double)w[N] == k); /* the bias counts the batch */
            s += k;
            s2 += k * k;
        }
        double sd = sqrt(q * (1 - q) / (double)runs);
        for (size_t j = 0; j < N; j++)
            if (!(fabs(hits[j] / (double)runs - q) < 5.0 * sd))
                fail_msg("q %g: row %zu joined %g of the time", q, j, hits[j] / (double)runs);
        double pa = adj / ((double)runs * (N - 1)), pf = far / ((double)runs * (N / 2));
        double pp = pair / ((double)runs * (N / 2));
        double sd2 = sqrt(q * q * (1 - q * q) / ((double)runs * (N / 2)));
        if (!(fabs(pp - q * q) < 10.0 * sd2))
            fail_msg("q %g: rows 2i and 2i + 1 joined together %g of the time", q, pp);
        assert_true(fabs(pa - q * q) < 10.0 * sd2);
        assert_true(fabs(pf - q * q) < 10.0 * sd2);
        double mean = s / (double)runs, var = s2 / (double)runs - mean * mean;
        double mu = q * N, v = q * (1 - q) * N;
        assert_true(fabs(mean - mu) < 5.0 * sqrt(v / (double)runs));
        assert_true(fabs(var - v) < 5.0 * v * sqrt(2.0 / (double)runs));
    }
    /* q = 1 draws every row at every step, exactly; so does (up to a miss of probability 2^-32 per
     * row, none expected in these 8,200 rows) the largest q below 1, whose 32-bit threshold
     * floor(q 2^32) = 2^32 - 1 must not wrap around to 0. */
    for (int qi = 0; qi < 2; qi++) {
        fl_sgd_cfg c = {
            .lr = 1.0, .steps = 1, .q = qi == 0 ? 1.0 : 1.0 - 0x1.0p-40, .expected_batch = 1.0};
        for (size_t r = 0; r < 200; r++) {
            float w[N + 1] = {0};
            double loss;
            assert_int_equal(fl_sgd_run(&m, w, x, y, N, &c, 5 + r, 0, ws, &loss, NULL), DP_OK);
            for (size_t j = 0; j < N; j++)
                assert_true(w[j] == -1.0f);
            assert_true(w[N] == -(float)N);
        }
    }
    fl_ws_free(ws);
    free(x);
}

/* q = 1, clip huge, no noise, no prox: w <- w - lr * (grad_sum / n) with the same float ops. */
static void full_batch_without_privacy_is_exactly_gradient_descent(void **state)
{
    (void)state;
    fl_model_spec ms[2] = {linear_spec(FL_MODEL_LOGISTIC, 7), mlp_spec(7, 5, 3)};
    for (size_t k = 0; k < 2; k++) {
        const fl_model_spec *m = &ms[k];
        size_t n = 40, p = fl_model_n_params(m);
        float x[40 * 7], y[40];
        random_rows(m, n, 3 + k, x, y);
        float *w = calloc(p, sizeof *w), *v = calloc(p, sizeof *v), *g = calloc(p, sizeof *g);
        assert_true(w && v && g);
        fl_model_init(m, 4, w);
        memcpy(v, w, p * sizeof *w);
        fl_ws *ws = fl_ws_alloc(m, 64, NULL);
        assert_non_null(ws);
        fl_sgd_cfg c = {.lr = 0.5, .steps = 6, .q = 1.0, .expected_batch = (double)n, .clip = 1e30};
        double loss;
        assert_int_equal(fl_sgd_run(m, w, x, y, n, &c, 1, 2, ws, &loss, NULL), DP_OK);
        float inv_b = (float)(1.0 / (double)n), lr = 0.5f;
        double first_loss = 0.0;
        for (size_t t = 0; t < 6; t++) {
            double l = fl_model_grad_sum(m, v, x, y, n, ws, g);
            first_loss += l;
            for (size_t j = 0; j < p; j++)
                v[j] -= lr * (g[j] * inv_b);
        }
        assert_memory_equal(w, v, p * sizeof *w);
        assert_close(loss, first_loss / (6.0 * (double)n), 1e-12, 0);
        fl_ws_free(ws);
        free(w);
        free(v);
        free(g);
    }
}

/* LINEAR with d = 1 on rows x = 0, y = 0: the weight's data gradient is 0, so only the prox term
 * moves it: w_t - a = (1 - lr lambda)^t (w_0 - a). Clipping every row to 1e-6 must not touch the
 * prox pull. The bias (data gradient b per row, n rows, expected_batch n) follows
 * b <- b - lr (b + lambda (b - a_b)). */
static void prox_term_is_exact_and_never_clipped(void **state)
{
    (void)state;
    fl_model_spec m = linear_spec(FL_MODEL_LINEAR, 1);
    size_t n = 8;
    float x[8] = {0}, y[8] = {0}, anchor[2] = {0.75f, -0.5f};
    fl_ws *ws = fl_ws_alloc(&m, 8, NULL);
    assert_non_null(ws);
    for (int clipped = 0; clipped <= 1; clipped++) {
        float w[2] = {2.0f, 1.0f};
        fl_sgd_cfg c = {.lr = 0.1,
                        .steps = 10,
                        .q = 1.0,
                        .expected_batch = (double)n,
                        .clip = clipped ? 1e-6 : 0.0,
                        .prox_lambda = 3.0,
                        .anchor = anchor};
        double loss;
        assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1, 2, ws, &loss, NULL), DP_OK);
        double expect_w = 0.75 + pow(1.0 - 0.1 * 3.0, 10) * (2.0 - 0.75);
        assert_close((double)w[0], expect_w, 1e-5, 1e-7);
        double b = 1.0;
        for (int t = 0; t < 10; t++) {
            double gb = clipped ? fmin(fabs(b), 1e-6) * (b > 0 ? 1 : -1) : b;
            b -= 0.1 * (gb + 3.0 * (b - -0.5));
        }
        assert_close((double)w[1], b, 1e-5, 1e-7);
    }
    fl_ws_free(ws);
}

/* Rows x = 0, y = 0 and w = 0: every data gradient is 0, so one step with lr = 1 and
 * expected_batch = 1 leaves w = -noise, N(0, (noise_multiplier * clip)^2) per coordinate. */
static void noise_has_std_noise_multiplier_times_clip(void **state)
{
    (void)state;
    size_t d = 20000, n = 4;
    fl_model_spec m = linear_spec(FL_MODEL_LINEAR, d);
    float *x = calloc(n * d, sizeof *x), y[4] = {0}, *w = calloc(d + 1, sizeof *w);
    assert_true(x && w);
    fl_ws *ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    fl_sgd_cfg c = {.lr = 1.0,
                    .steps = 1,
                    .q = 0.5,
                    .expected_batch = 1.0,
                    .clip = 0.5,
                    .noise_multiplier = 3.0};
    double loss;
    assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1, 2, ws, &loss, NULL), DP_OK);
    double s = 0, s2 = 0;
    for (size_t j = 0; j <= d; j++) {
        s += (double)w[j];
        s2 += (double)w[j] * (double)w[j];
    }
    double mean = s / (double)(d + 1), sd = sqrt(s2 / (double)(d + 1) - mean * mean);
    assert_true(fabs(mean) < 5.0 * 1.5 / sqrt((double)d));
    assert_true(fabs(sd - 1.5) < 5.0 * 1.5 / sqrt(2.0 * (double)d));
    /* no rows at all: the step still adds noise, and the loss is NaN */
    float *w2 = calloc(d + 1, sizeof *w2);
    assert_non_null(w2);
    assert_int_equal(fl_sgd_run(&m, w2, NULL, NULL, 0, &c, 1, 2, ws, &loss, NULL), DP_OK);
    assert_true(isnan(loss));
    /* the noise depends on the noise seed and step only: the same vector as with rows */
    assert_memory_equal(w, w2, (d + 1) * sizeof *w);
    fl_ws_free(ws);
    free(x);
    free(w);
    free(w2);
}

/* The noise of step t is the documented segments (fl_sgd.c, step 2): segment j of the P
 * parameters is fl_gauss_fill with the seed derive(derive(derive(noise_seed, STREAM), t), j). With
 * zero gradients, lr = 1 and expected_batch = 1 each step subtracts exactly that vector (no prox:
 * the noise is added inside the update pass; prox with anchor = w = 0: through G first). */
/* One model size: small (one noise segment) or at least 16384 parameters (four). */
static void noise_segments_of(size_t d)
{
    size_t n = 4, P = d + 1, segs = P >= 16384 ? 4 : 1, seg = (P + segs - 1) / segs;
    fl_model_spec m = linear_spec(FL_MODEL_LINEAR, d);
    float *x = calloc(n * d, sizeof *x), y[4] = {0}, *w = calloc(P, sizeof *w);
    float *z = calloc(P, sizeof *z), *anchor = calloc(P, sizeof *anchor);
    assert_true(x && w && z && anchor);
    fl_ws *ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    for (int prox = 0; prox < 2; prox++) {
        fl_sgd_cfg c = {.lr = 1.0,
                        .steps = 1,
                        .q = 0.5,
                        .expected_batch = 1.0,
                        .clip = 0.5,
                        .noise_multiplier = 3.0,
                        .prox_lambda = prox ? 0.25 : 0.0,
                        .anchor = prox ? anchor : NULL};
        for (size_t t = 0; t < 2; t++) {
            memset(w, 0, P * sizeof *w);
            double loss;
            /* steps = t + 1 from w = 0: step t's noise is w_after - w_before; take one step at t
             * by running t + 1 steps and t steps */
            c.steps = t + 1;
            assert_int_equal(fl_sgd_run(&m, w, x, y, n, &c, 1, 77, ws, &loss, NULL), DP_OK);
            uint64_t base = dp_rng_derive(dp_rng_derive(77, DP_RNG_STREAM_FL_SGD_NOISE), t);
            for (size_t j = 0; j < segs; j++)
                fl_gauss_fill(z + j * seg, j * seg + seg <= P ? seg : P - j * seg, 1.5,
                              dp_rng_derive(base, j));
            float *w0 = calloc(P, sizeof *w0);
            assert_non_null(w0);
            if (t > 0) {
                c.steps = t;
                assert_int_equal(fl_sgd_run(&m, w0, x, y, n, &c, 1, 77, ws, &loss, NULL), DP_OK);
            }
            /* after step 0 the bias has a gradient (the prediction is the bias, y = 0), and the
             * prox pull lam (w - 0) moves every coordinate: compare the weights (their gradient
             * stays x = 0) of later steps without prox */
            size_t upto = t == 0 ? P : prox ? 0 : d;
            for (size_t k = 0; k < upto; k++)
                assert_true(w[k] == w0[k] - z[k]);
            free(w0);
        }
    }
    fl_ws_free(ws);
    free(x);
    free(w);
    free(z);
    free(anchor);
}

static void noise_is_the_documented_segments_with_or_without_prox(void **state)
{
    (void)state;
    noise_segments_of(1001);  /* 1002 parameters: one segment */
    noise_segments_of(20000); /* 20001: four */
}

static void bad_arguments_are_refused_with_the_field(void **state)
{
    (void)state;
    fl_model_spec m = mlp_spec(3, 2, 3);
    float x[6] = {0}, y[2] = {0, 2}, w[17] = {0}, anchor[17] = {0};
    assert_int_equal(fl_model_n_params(&m), 17);
    fl_ws *ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    double loss;
    struct {
        fl_sgd_cfg c;
        const char *field;
    } cases[] = {
        {{.lr = 0, .steps = 1, .q = 0.5, .expected_batch = 1}, "lr"},
        {{.lr = 0.1, .steps = 1, .q = 0, .expected_batch = 1}, "q"},
        {{.lr = 0.1, .steps = 1, .q = 1.5, .expected_batch = 1}, "q"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 0}, "expected_batch"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1, .clip = -1}, "clip"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1, .noise_multiplier = 1}, "clip"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1, .prox_lambda = 1}, "anchor"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1, .anchor = anchor}, "anchor"},
        {{.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1, .prox_lambda = -1}, "prox_lambda"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(fl_sgd_run(&m, w, x, y, 2, &cases[k].c, 1, 2, ws, &loss, &e), DP_EINVAL);
        assert_string_equal(e.field, cases[k].field);
    }
    fl_sgd_cfg ok = {.lr = 0.1, .steps = 1, .q = 0.5, .expected_batch = 1};
    dp_err e;
    float bad_y[2] = {0, 3}; /* class 3 of 3 */
    dp_err_clear(&e);
    assert_int_equal(fl_sgd_run(&m, w, x, bad_y, 2, &ok, 1, 2, ws, &loss, &e), DP_EINVAL);
    assert_string_equal(e.field, "y");
    bad_y[1] = 0.5f;
    dp_err_clear(&e);
    assert_int_equal(fl_sgd_run(&m, w, x, bad_y, 2, &ok, 1, 2, ws, &loss, &e), DP_EINVAL);
    /* a workspace for another model */
    fl_model_spec other = mlp_spec(3, 4, 3);
    fl_ws *ws2 = fl_ws_alloc(&other, 4, NULL);
    assert_non_null(ws2);
    dp_err_clear(&e);
    assert_int_equal(fl_sgd_run(&m, w, x, y, 2, &ok, 1, 2, ws2, &loss, &e), DP_EINVAL);
    assert_string_equal(e.field, "ws");
    dp_err_clear(&e);
    assert_int_equal(fl_ws_set_threads(ws, 5, &e), DP_EINVAL);
    assert_string_equal(e.field, "threads");
    assert_int_equal(fl_ws_set_threads(ws, 0, NULL), DP_EINVAL);
    fl_ws_free(ws2);
    fl_ws_free(ws);
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    fl_model_spec m = mlp_spec(6, 4, 3);
    size_t n = 50, p = fl_model_n_params(&m);
    float x[50 * 6], y[50], *w = calloc(p, sizeof *w);
    assert_non_null(w);
    random_rows(&m, n, 8, x, y);
    fl_sgd_cfg c = dp_cfg(n, 0.5);
    for (long k = 1;; k++) {
        dp_err e;
        dp_err_clear(&e);
        fl_model_init(&m, 1, w);
        dp_alloc_fail_after(k);
        fl_ws *ws = fl_ws_alloc(&m, 8, &e);
        int rc = ws == NULL ? e.code : fl_ws_set_threads(ws, 2, &e);
        double loss;
        if (rc == DP_OK)
            rc = fl_sgd_run(&m, w, x, y, n, &c, 1, 2, ws, &loss, &e);
        dp_alloc_fail_after(0);
        fl_ws_free(ws);
        if (rc == DP_OK) {
            assert_true(k > 10);
            break;
        }
        assert_int_equal(rc, DP_ENOMEM);
        assert_int_equal(e.code, DP_ENOMEM);
    }
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_seeds_give_the_same_bits_and_each_seed_matters),
        cmocka_unit_test(threads_do_not_change_the_bits),
        cmocka_unit_test(parallel_update_of_a_large_model_gives_the_same_bits),
        cmocka_unit_test(cached_row_norms_give_the_same_bits_on_any_thread_count),
        cmocka_unit_test(nonfinite_regression_labels_are_refused_with_their_index),
        cmocka_unit_test(poisson_batch_size_has_mean_qn_and_variance_qn_1_minus_q),
        cmocka_unit_test(every_row_joins_independently_with_probability_q),
        cmocka_unit_test(full_batch_without_privacy_is_exactly_gradient_descent),
        cmocka_unit_test(prox_term_is_exact_and_never_clipped),
        cmocka_unit_test(noise_has_std_noise_multiplier_times_clip),
        cmocka_unit_test(noise_is_the_documented_segments_with_or_without_prox),
        cmocka_unit_test(bad_arguments_are_refused_with_the_field),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests_name("fl_sgd", tests, NULL, NULL);
}
