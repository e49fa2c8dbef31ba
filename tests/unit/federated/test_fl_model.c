/*
 * test_fl_model.c: federated/fl_model (the five models, their summed gradients, ghost clipping,
 * evaluation) and fl_gauss_fill.
 *
 * Gradients are checked against central finite differences of an independent double-precision
 * reference of each loss written here (not the library's forward pass), at points where no ReLU or
 * hinge kink lies within the difference step (the reference reports its smallest kink distance and
 * the tests require it to be large). The distillation term's gradients (fl_model_kd) likewise,
 * against a reference KL computed from the probabilities. Ghost clipping is checked against the
 * materialised computation (one row at a time through fl_model_grad_sum, clipped and summed in
 * double). The noise is checked for its mean, standard deviation, tail mass, a chi-square over 100
 * equiprobable bins and a Kolmogorov-Smirnov test over 10^6 draws (fixed seeds: the tests are
 * deterministic; the bounds are the 0.1% / 1% critical values, so a correct generator passes them
 * for all but rare seeds).
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_math.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_model.h"
#include "federated/fl_model_internal.h"

/* ---- test data ---- */

static uint64_t tst_state;

static double tst_uniform(void)
{
    return (double)((dp_splitmix64(&tst_state) >> 11) + 1) * 0x1.0p-53;
}

static double tst_normal(void)
{
    return sqrt(-2.0 * log(tst_uniform())) * cos(6.283185307179586 * tst_uniform());
}

static fl_model_spec spec_of(fl_model_type t)
{
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.type = t;
    m.d_in = 5;
    if (t == FL_MODEL_SOFTMAX || t == FL_MODEL_MLP)
        m.n_classes = 3;
    if (t == FL_MODEL_MLP) {
        m.n_hidden = 2;
        m.hidden[0] = 6;
        m.hidden[1] = 4;
    }
    return m;
}

/* Random rows, labels fitting the model, and random parameters (the MLP from fl_model_init plus
 * random biases so that the biases' gradients are exercised). */
static void make_problem(const fl_model_spec *m, size_t n, uint64_t seed, float *x, float *y,
                         float *w)
{
    tst_state = seed;
    for (size_t i = 0; i < n * m->d_in; i++)
        x[i] = (float)tst_normal();
    for (size_t i = 0; i < n; i++) {
        if (m->type == FL_MODEL_LINEAR)
            y[i] = (float)(2.0 * tst_normal());
        else if (m->type == FL_MODEL_LOGISTIC || m->type == FL_MODEL_SVM)
            y[i] = tst_uniform() < 0.5 ? 0.0f : 1.0f;
        else
            y[i] = (float)(size_t)(tst_uniform() * (double)m->n_classes);
    }
    size_t p = fl_model_n_params(m);
    if (m->type == FL_MODEL_MLP) {
        fl_model_init(m, seed, w);
        for (size_t j = 0; j < p; j++)
            w[j] += (float)(0.1 * tst_normal());
    } else {
        for (size_t j = 0; j < p; j++)
            w[j] = (float)(0.5 * tst_normal());
    }
}

/* ---- an independent double-precision reference ---- */

/* Loss of one row at w; *kink receives the smallest distance of a ReLU input or hinge margin from
 * its kink. */
static double ref_loss(const fl_model_spec *m, const double *w, const float *x, float y,
                       double *kink)
{
    double a[64], z[64];
    size_t din = m->d_in, off = 0;
    for (size_t j = 0; j < din; j++)
        a[j] = (double)x[j];
    size_t widths[FL_MAX_HIDDEN + 1], nl = 0;
    if (m->type == FL_MODEL_MLP)
        for (size_t k = 0; k < m->n_hidden; k++)
            widths[nl++] = m->hidden[k];
    widths[nl++] = (m->type == FL_MODEL_SOFTMAX || m->type == FL_MODEL_MLP) ? m->n_classes : 1;
    for (size_t l = 0; l < nl; l++) {
        size_t dout = widths[l];
        for (size_t o = 0; o < dout; o++) {
            double s = w[off + dout * din + o];
            for (size_t j = 0; j < din; j++)
                s += w[off + o * din + j] * a[j];
            z[o] = s;
        }
        off += dout * (din + 1);
        if (l + 1 < nl)
            for (size_t o = 0; o < dout; o++) {
                *kink = fmin(*kink, fabs(z[o]));
                a[o] = z[o] > 0 ? z[o] : 0.0;
            }
        din = dout;
    }
    double sgn = y > 0.0f ? 1.0 : -1.0;
    switch (m->type) {
        case FL_MODEL_LINEAR:
            return 0.5 * (z[0] - (double)y) * (z[0] - (double)y);
        case FL_MODEL_LOGISTIC:
            return log(1.0 + exp(-sgn * z[0]));
        case FL_MODEL_SVM:
            *kink = fmin(*kink, fabs(1.0 - sgn * z[0]));
            return fmax(0.0, 1.0 - sgn * z[0]);
        default: {
            double s = 0.0;
            for (size_t o = 0; o < m->n_classes; o++)
                s += exp(z[o]);
            return log(s) - z[(size_t)y];
        }
    }
}

static double ref_loss_sum(const fl_model_spec *m, const double *w, const float *x, const float *y,
                           size_t n, double *kink)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += ref_loss(m, w, x + i * m->d_in, y[i], kink);
    return s;
}

/* ---- gradients ---- */

static void check_gradient(fl_model_type t)
{
    fl_model_spec m = spec_of(t);
    size_t n = 7, p = fl_model_n_params(&m);
    float x[7 * 5], y[7], *w = calloc(p, sizeof *w), *g = calloc(p, sizeof *g);
    double *wd = calloc(p, sizeof *wd);
    assert_non_null(w);
    assert_non_null(g);
    assert_non_null(wd);
    make_problem(&m, n, 0x5eed0000u + (uint64_t)t, x, y, w);
    dp_err e;
    dp_err_clear(&e);
    fl_ws *ws = fl_ws_alloc(&m, 16, &e);
    assert_non_null(ws);
    double loss = fl_model_grad_sum(&m, w, x, y, n, ws, g);
    for (size_t j = 0; j < p; j++)
        wd[j] = (double)w[j];
    double kink = DP_INF;
    assert_close(loss, ref_loss_sum(&m, wd, x, y, n, &kink), 1e-5, 1e-6);
    /* The difference step is 1e-6: every kink is farther than that from the point. */
    assert_true(kink > 1e-3);
    double h = 1e-6;
    for (size_t j = 0; j < p; j++) {
        double k2 = DP_INF;
        wd[j] = (double)w[j] + h;
        double lp = ref_loss_sum(&m, wd, x, y, n, &k2);
        wd[j] = (double)w[j] - h;
        double lm = ref_loss_sum(&m, wd, x, y, n, &k2);
        wd[j] = (double)w[j];
        assert_close((double)g[j], (lp - lm) / (2.0 * h), 1e-4, 1e-5);
    }
    fl_ws_free(ws);
    free(w);
    free(g);
    free(wd);
}

static void linear_gradient_matches_finite_differences(void **state)
{
    (void)state;
    check_gradient(FL_MODEL_LINEAR);
}

static void logistic_gradient_matches_finite_differences(void **state)
{
    (void)state;
    check_gradient(FL_MODEL_LOGISTIC);
}

static void svm_gradient_matches_finite_differences(void **state)
{
    (void)state;
    check_gradient(FL_MODEL_SVM);
}

static void softmax_gradient_matches_finite_differences(void **state)
{
    (void)state;
    check_gradient(FL_MODEL_SOFTMAX);
}

static void mlp_gradient_matches_finite_differences(void **state)
{
    (void)state;
    check_gradient(FL_MODEL_MLP);
}

/* A batch larger than the workspace (chunks) gives the same gradient as one chunk. */
static void gradient_over_chunks_matches_one_chunk(void **state)
{
    (void)state;
    fl_model_spec m = spec_of(FL_MODEL_MLP);
    size_t n = 23, p = fl_model_n_params(&m);
    float x[23 * 5], y[23], *w = calloc(p, sizeof *w), *g1 = calloc(p, sizeof *g1),
                            *g2 = calloc(p, sizeof *g2);
    assert_true(w && g1 && g2);
    make_problem(&m, n, 77, x, y, w);
    fl_ws *big = fl_ws_alloc(&m, 32, NULL), *small = fl_ws_alloc(&m, 5, NULL);
    assert_true(big && small);
    double l1 = fl_model_grad_sum(&m, w, x, y, n, big, g1);
    double l2 = fl_model_grad_sum(&m, w, x, y, n, small, g2);
    assert_close(l2, l1, 1e-12, 0);
    for (size_t j = 0; j < p; j++)
        assert_close((double)g2[j], (double)g1[j], 1e-5, 1e-6);
    fl_ws_free(big);
    fl_ws_free(small);
    free(w);
    free(g1);
    free(g2);
}

/* The training step reads its batch rows in place (fl_model_chunk_grad_rows): for every model and
 * with or without clipping, the same bits as gathering the rows and calling fl_model_chunk_grad,
 * and (clip large) the plain gradient of those rows. Rows repeat and come in any order. With the
 * rows' cached 1 / sqrt(||x_i||^2 + 1) (fl_rows_inv_s) the bits are the same again; the one-output
 * models really read the cache (wrong norms give another clipped sum), the others ignore it. */
static void gradient_of_indexed_rows_equals_the_gathered_chunk(void **state)
{
    (void)state;
    for (int t = FL_MODEL_LINEAR; t <= FL_MODEL_MLP; t++) {
        fl_model_spec m = spec_of((fl_model_type)t);
        m.d_in = 11; /* not a multiple of the kernels' blocks */
        size_t n = 40, p = fl_model_n_params(&m), b = 17;
        float *x = calloc(n * m.d_in, sizeof *x), *y = calloc(n, sizeof *y),
              *w = calloc(p, sizeof *w), *g1 = calloc(p, sizeof *g1), *g2 = calloc(p, sizeof *g2),
              *g3 = calloc(p, sizeof *g3), *xg = calloc(b * m.d_in, sizeof *xg);
        float yg[17];
        size_t idx[17];
        float *xsq = calloc(n, sizeof *xsq), *xsq_bad = calloc(n, sizeof *xsq_bad);
        assert_true(x && y && w && g1 && g2 && g3 && xg && xsq && xsq_bad);
        make_problem(&m, n, 900 + (uint64_t)t, x, y, w);
        fl_rows_inv_s(x, n, m.d_in, xsq);
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t j = 0; j < m.d_in; j++)
                s += (double)x[i * m.d_in + j] * (double)x[i * m.d_in + j];
            assert_close((double)xsq[i], 1.0 / sqrt(s + 1.0), 1e-7, 0);
            xsq_bad[i] = 0.5f * xsq[i]; /* stale: larger norms, more clipping */
        }
        for (size_t i = 0; i < b; i++) {
            idx[i] = (i * 7 + 3) % n;
            if (i == 5)
                idx[i] = idx[2]; /* a repeated row */
            memcpy(xg + i * m.d_in, x + idx[i] * m.d_in, m.d_in * sizeof *x);
            yg[i] = y[idx[i]];
        }
        fl_ws *ws = fl_ws_alloc(&m, 32, NULL);
        assert_non_null(ws);
        for (int clipped = 0; clipped < 3; clipped++) {
            double clip = clipped == 0 ? 0.0 : clipped == 1 ? 0.3 : 1e30;
            double l1 = fl_model_chunk_grad_rows(ws, w, x, y, NULL, idx, b, clip, g1);
            double l2 = fl_model_chunk_grad(ws, w, xg, yg, b, clip, g2, NULL);
            assert_memory_equal(g1, g2, p * sizeof *g1);
            assert_true(l1 == l2);
            double l3 = fl_model_chunk_grad_rows(ws, w, x, y, xsq, idx, b, clip, g3);
            assert_memory_equal(g1, g3, p * sizeof *g1);
            assert_true(l1 == l3);
            if (clipped == 1) {
                (void)fl_model_chunk_grad_rows(ws, w, x, y, xsq_bad, idx, b, clip, g3);
                bool dense1 = t == FL_MODEL_LINEAR || t == FL_MODEL_LOGISTIC || t == FL_MODEL_SVM;
                assert_true((memcmp(g1, g3, p * sizeof *g1) != 0) == dense1);
            }
            if (clipped != 1) { /* no row clipped: the plain sum */
                fl_model_grad_sum(&m, w, xg, yg, b, ws, g3);
                assert_memory_equal(g1, g3, p * sizeof *g1);
            }
        }
        fl_ws_free(ws);
        free(x);
        free(y);
        free(w);
        free(g1);
        free(g2);
        free(g3);
        free(xg);
        free(xsq);
        free(xsq_bad);
    }
}

/* ---- ghost clipping ---- */

static void check_clipping(fl_model_type t, size_t max_rows)
{
    fl_model_spec m = spec_of(t);
    size_t n = 11, p = fl_model_n_params(&m);
    float x[11 * 5], y[11], norms[11], *w = calloc(p, sizeof *w), *g = calloc(p, sizeof *g),
                                       *gi = calloc(p, sizeof *gi);
    double *ref = calloc(p, sizeof *ref), rn[11], sorted[11];
    assert_true(w && g && gi && ref);
    make_problem(&m, n, 0xc11bu + (uint64_t)t, x, y, w);
    fl_ws *ws = fl_ws_alloc(&m, max_rows, NULL);
    assert_non_null(ws);
    double ref_loss_total = 0.0;
    for (size_t i = 0; i < n; i++) {
        ref_loss_total += fl_model_grad_sum(&m, w, x + i * m.d_in, y + i, 1, ws, gi);
        double s = 0.0;
        for (size_t j = 0; j < p; j++)
            s += (double)gi[j] * (double)gi[j];
        rn[i] = sorted[i] = sqrt(s);
    }
    /* clip between the smallest and largest norms: some rows are clipped and some are not. */
    for (size_t i = 0; i < n; i++)
        for (size_t k = i + 1; k < n; k++)
            if (sorted[k] < sorted[i]) {
                double tmp = sorted[i];
                sorted[i] = sorted[k];
                sorted[k] = tmp;
            }
    double clip = 0.5 * (sorted[n / 2] + sorted[n / 2 + 1]);
    assert_true(sorted[0] < clip && clip < sorted[n - 1]);
    for (size_t i = 0; i < n; i++) {
        fl_model_grad_sum(&m, w, x + i * m.d_in, y + i, 1, ws, gi);
        double c = fmin(1.0, clip / (rn[i] + 1e-15));
        for (size_t j = 0; j < p; j++)
            ref[j] += c * (double)gi[j];
    }
    double loss = fl_model_clipped_grad_sum(&m, w, x, y, n, clip, ws, g, norms);
    assert_close(loss, ref_loss_total, 1e-6, 1e-6);
    double scale = 0.0;
    for (size_t j = 0; j < p; j++)
        scale = fmax(scale, fabs(ref[j]));
    for (size_t j = 0; j < p; j++)
        assert_close((double)g[j], ref[j], 1e-5, 1e-6 * scale);
    for (size_t i = 0; i < n; i++)
        assert_close((double)norms[i], rn[i], 1e-5, 1e-7);
    /* The clipped sum's norm is at most n * clip (each clipped row has norm <= clip). */
    double gn = 0.0;
    for (size_t j = 0; j < p; j++)
        gn += (double)g[j] * (double)g[j];
    assert_true(sqrt(gn) <= (double)n * clip * (1.0 + 1e-6));
    fl_ws_free(ws);
    free(w);
    free(g);
    free(gi);
    free(ref);
}

static void clipped_sum_matches_materialised_per_example_gradients(void **state)
{
    (void)state;
    for (int t = FL_MODEL_LINEAR; t <= FL_MODEL_MLP; t++) {
        check_clipping((fl_model_type)t, 16);
        check_clipping((fl_model_type)t, 4); /* through chunks */
    }
}

/* The one-output models clip by a clamp of the row's loss derivative to +-clip / sqrt(||x_i||^2 +
 * 1) (fl_rows_inv_s, cached or not): at School's width (28 features) and over a batch of rows read
 * through their indexes (several blocks of the kernel, repeated rows, half of them clipped), the
 * clipped sum equals the materialised computation (each row's gradient from fl_model_grad_sum,
 * scaled by min(1, clip / ||g_i||), summed in double) to float tolerance; a clipped row alone has
 * norm clip (to float rounding) and keeps its direction. */
static void clamp_clipping_matches_materialised_per_example_clipping(void **state)
{
    (void)state;
    const fl_model_type types[] = {FL_MODEL_LINEAR, FL_MODEL_LOGISTIC, FL_MODEL_SVM};
    for (size_t k = 0; k < 3; k++) {
        fl_model_spec m = spec_of(types[k]);
        m.d_in = 28;
        size_t n = 120, b = 70, p = fl_model_n_params(&m), d = m.d_in;
        float *x = calloc(n * d, sizeof *x), *y = calloc(n, sizeof *y), *w = calloc(p, sizeof *w),
              *g = calloc(p, sizeof *g), *gi = calloc(p, sizeof *gi),
              *inv_s = calloc(n, sizeof *inv_s);
        double *ref = calloc(p, sizeof *ref), *rn = calloc(n, sizeof *rn);
        size_t idx[70];
        assert_true(x && y && w && g && gi && inv_s && ref && rn);
        make_problem(&m, n, 0x5c400u + k, x, y, w);
        for (size_t i = 0; i < n; i++)
            y[i] = types[k] == FL_MODEL_LINEAR ? 4.0f * y[i] - 1.0f : y[i];
        fl_rows_inv_s(x, n, d, inv_s);
        fl_ws *ws = fl_ws_alloc(&m, 128, NULL);
        assert_non_null(ws);
        for (size_t i = 0; i < n; i++) {
            fl_model_grad_sum(&m, w, x + i * d, y + i, 1, ws, gi);
            double s = 0.0;
            for (size_t j = 0; j < p; j++)
                s += (double)gi[j] * (double)gi[j];
            rn[i] = sqrt(s);
        }
        for (size_t i = 0; i < b; i++)
            idx[i] = (i * 37 + 11) % n; /* every row once or more, out of order */
        idx[9] = idx[3];
        /* the median norm over the batch: about half of its rows are clipped */
        double sorted[70];
        for (size_t i = 0; i < b; i++)
            sorted[i] = rn[idx[i]];
        for (size_t i = 0; i < b; i++)
            for (size_t j = i + 1; j < b; j++)
                if (sorted[j] < sorted[i]) {
                    double tmp = sorted[i];
                    sorted[i] = sorted[j];
                    sorted[j] = tmp;
                }
        double clip = sorted[b / 2];
        assert_true(clip > 0.0 && sorted[b / 4] < clip && clip < sorted[3 * b / 4]);
        for (size_t i = 0; i < b; i++) {
            fl_model_grad_sum(&m, w, x + idx[i] * d, y + idx[i], 1, ws, gi);
            double c = fmin(1.0, clip / rn[idx[i]]);
            for (size_t j = 0; j < p; j++)
                ref[j] += c * (double)gi[j];
        }
        double scale = 0.0;
        for (size_t j = 0; j < p; j++)
            scale = fmax(scale, fabs(ref[j]));
        for (int cached = 0; cached < 2; cached++) {
            fl_model_chunk_grad_rows(ws, w, x, y, cached ? inv_s : NULL, idx, b, clip, g);
            for (size_t j = 0; j < p; j++)
                assert_close((double)g[j], ref[j], 1e-5, 1e-6 * scale);
        }
        /* one clipped row alone: norm clip, the direction of its unclipped gradient */
        size_t r = 0;
        while (!(rn[idx[r]] > 1.5 * clip))
            r++;
        fl_model_grad_sum(&m, w, x + idx[r] * d, y + idx[r], 1, ws, gi);
        fl_model_chunk_grad_rows(ws, w, x, y, inv_s, idx + r, 1, clip, g);
        double s = 0.0;
        for (size_t j = 0; j < p; j++) {
            s += (double)g[j] * (double)g[j];
            assert_close((double)g[j], (double)gi[j] * clip / rn[idx[r]], 1e-6, 1e-7 * clip);
        }
        assert_close(sqrt(s), clip, 1e-6, 0);
        fl_ws_free(ws);
        free(x);
        free(y);
        free(w);
        free(g);
        free(gi);
        free(inv_s);
        free(ref);
        free(rn);
    }
}

/* clip <= 0: no clipping, the plain sum (norms still reported). */
static void clip_zero_is_the_plain_sum(void **state)
{
    (void)state;
    fl_model_spec m = spec_of(FL_MODEL_SOFTMAX);
    size_t n = 6, p = fl_model_n_params(&m);
    float x[6 * 5], y[6], norms[6], w[18], g1[18], g2[18];
    assert_int_equal(p, 18);
    make_problem(&m, n, 3, x, y, w);
    fl_ws *ws = fl_ws_alloc(&m, 8, NULL);
    assert_non_null(ws);
    fl_model_grad_sum(&m, w, x, y, n, ws, g1);
    fl_model_clipped_grad_sum(&m, w, x, y, n, 0.0, ws, g2, norms);
    assert_memory_equal(g1, g2, sizeof g1);
    for (size_t i = 0; i < n; i++)
        assert_true(norms[i] > 0.0f);
    fl_ws_free(ws);
}

/* LINEAR w = (1, 2), b = 0 on x = (1, 1): y = 3 gives a zero gradient (norm 0, left alone, no
 * division by zero); y = 0 gives residual 3, gradient 3 (1, 1, 1) of norm 3 sqrt(3), clipped to
 * norm 1: (1, 1, 1) / sqrt(3). */
static void clipping_by_hand_with_a_zero_gradient(void **state)
{
    (void)state;
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.type = FL_MODEL_LINEAR;
    m.d_in = 2;
    fl_ws *ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    float w[3] = {1, 2, 0}, x[4] = {1, 1, 1, 1}, y[2] = {3, 0}, g[3], norms[2];
    double loss = fl_model_clipped_grad_sum(&m, w, x, y, 2, 1.0, ws, g, norms);
    assert_close(loss, 4.5, 1e-12, 0);
    assert_true(norms[0] == 0.0f);
    assert_close((double)norms[1], 3.0 * sqrt(3.0), 1e-7, 0);
    for (size_t j = 0; j < 3; j++)
        assert_close((double)g[j], 1.0 / sqrt(3.0), 1e-6, 0);
    fl_ws_free(ws);
}

/* ---- evaluation on hand-computed cases ---- */

static void eval_metrics_on_hand_computed_cases(void **state)
{
    (void)state;
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.d_in = 1;

    /* LINEAR w = 2, b = 1: f = 3, 5 against y = 3, 4. */
    m.type = FL_MODEL_LINEAR;
    fl_ws *ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    float wl[2] = {2, 1}, xl[2] = {1, 2}, yl[2] = {3, 4};
    fl_eval e = {0};
    fl_model_eval(&m, wl, xl, yl, 2, ws, &e);
    assert_close(e.sq_err, 1.0, 1e-12, 0);
    assert_close(e.loss_sum, 0.5, 1e-12, 0);
    fl_model_eval(&m, wl, xl, yl, 1, ws, &e); /* pooled */
    assert_int_equal(e.n, 3);
    assert_close(e.sq_err, 1.0, 1e-12, 0);
    fl_ws_free(ws);

    /* LOGISTIC w = 1, b = 0: f = 2, -1, 0.5 against y = 1, 1, 0: one right. */
    m.type = FL_MODEL_LOGISTIC;
    ws = fl_ws_alloc(&m, 2, NULL); /* 3 rows in chunks of 2 */
    assert_non_null(ws);
    float wg[2] = {1, 0}, xg[3] = {2, -1, 0.5f}, yg[3] = {1, 1, 0};
    memset(&e, 0, sizeof e);
    fl_model_eval(&m, wg, xg, yg, 3, ws, &e);
    assert_close(e.correct, 1.0, 0, 0);
    assert_close(e.loss_sum, log1p(exp(-2.0)) + log1p(exp(1.0)) + log1p(exp(0.5)), 1e-7, 0);
    assert_int_equal(e.n, 3);
    fl_ws_free(ws);

    /* SVM w = 1, b = 0: f = 0.5, -2 against y = 1, 1: hinge 0.5 + 3, one right. */
    m.type = FL_MODEL_SVM;
    ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    float xs[2] = {0.5f, -2}, ys[2] = {1, 1};
    memset(&e, 0, sizeof e);
    fl_model_eval(&m, wg, xs, ys, 2, ws, &e);
    assert_close(e.loss_sum, 3.5, 1e-12, 0);
    assert_close(e.correct, 1.0, 0, 0);
    fl_ws_free(ws);

    /* SOFTMAX W = (1, 0, -1), b = 0, x = 2: logits 2, 0, -2; y = 0 right, y = 2 wrong. */
    m.type = FL_MODEL_SOFTMAX;
    m.n_classes = 3;
    ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    float wsx[6] = {1, 0, -1, 0, 0, 0}, xx[2] = {2, 2}, yx[2] = {0, 2};
    memset(&e, 0, sizeof e);
    fl_model_eval(&m, wsx, xx, yx, 2, ws, &e);
    double lse = log(exp(2.0) + 1.0 + exp(-2.0));
    assert_close(e.loss_sum, (lse - 2.0) + (lse + 2.0), 1e-6, 0);
    assert_close(e.correct, 1.0, 0, 0);
    fl_ws_free(ws);

    /* MLP 1-1-2: h = relu(x - 1), logits (h, -h). x = 3: h = 2, class 0 (y = 0 right); x = 0:
     * h = 0, a tie, the first class wins (y = 1 wrong). */
    m.type = FL_MODEL_MLP;
    m.n_classes = 2;
    m.n_hidden = 1;
    m.hidden[0] = 1;
    assert_int_equal(fl_model_n_params(&m), 6);
    ws = fl_ws_alloc(&m, 4, NULL);
    assert_non_null(ws);
    float wm[6] = {1, -1, 1, -1, 0, 0}, xm[2] = {3, 0}, ym[2] = {0, 1};
    memset(&e, 0, sizeof e);
    fl_model_eval(&m, wm, xm, ym, 2, ws, &e);
    assert_close(e.correct, 1.0, 0, 0);
    assert_close(e.loss_sum, log1p(exp(-4.0)) + log(2.0), 1e-6, 0);
    fl_ws_free(ws);
}

/* ---- specs, names, initialisation ---- */

static void specs_are_checked_and_sized(void **state)
{
    (void)state;
    fl_model_spec m;
    memset(&m, 0, sizeof m);
    m.type = FL_MODEL_MLP;
    m.d_in = 784;
    m.n_classes = 10;
    m.n_hidden = 1;
    m.hidden[0] = 256;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_OK);
    assert_int_equal(fl_model_n_params(&m), 784 * 256 + 256 + 256 * 10 + 10);
    assert_false(fl_model_is_regression(&m));

    m.hidden[0] = FL_MAX_WIDTH + 1;
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.hidden");
    m.hidden[0] = 256;
    m.n_hidden = FL_MAX_HIDDEN + 1;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.hidden");

    m.type = FL_MODEL_SOFTMAX;
    m.n_classes = 1;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.n_classes");

    m.type = FL_MODEL_LOGISTIC; /* n_classes ignored */
    assert_int_equal(fl_model_check(&m, NULL), DP_OK);
    assert_int_equal(fl_model_n_params(&m), 785);
    m.d_in = 0;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.d_in");
    m.d_in = 3;
    m.type = (fl_model_type)7;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.type");

    /* too many parameters */
    m.type = FL_MODEL_MLP;
    m.d_in = FL_MAX_FEATURES;
    m.n_classes = 10;
    m.n_hidden = 2;
    m.hidden[0] = m.hidden[1] = FL_MAX_WIDTH;
    dp_err_clear(&e);
    assert_int_equal(fl_model_check(&m, &e), DP_EINVAL);
    assert_string_equal(e.field, "model");

    m.type = FL_MODEL_LINEAR;
    m.d_in = 3;
    assert_true(fl_model_is_regression(&m));
    dp_err_clear(&e);
    assert_null(fl_ws_alloc(&m, 0, &e));
    assert_string_equal(e.field, "max_rows");
}

static void type_names_round_trip(void **state)
{
    (void)state;
    for (int t = FL_MODEL_LINEAR; t <= FL_MODEL_MLP; t++)
        assert_int_equal(fl_model_type_parse(fl_model_type_name((fl_model_type)t)), t);
    assert_string_equal(fl_model_type_name(FL_MODEL_SVM), "svm");
    assert_int_equal(fl_model_type_parse("resnet"), -1);
    assert_int_equal(fl_model_type_parse(NULL), -1);
}

static void init_is_zero_for_linear_models_and_seeded_he_uniform_for_mlp(void **state)
{
    (void)state;
    fl_model_spec m = spec_of(FL_MODEL_SOFTMAX);
    float w[18];
    memset(w, 0x7f, sizeof w);
    fl_model_init(&m, 1, w);
    for (size_t j = 0; j < 18; j++)
        assert_true(w[j] == 0.0f);

    m = spec_of(FL_MODEL_MLP);
    size_t p = fl_model_n_params(&m);
    assert_int_equal(p, 6 * 5 + 6 + 4 * 6 + 4 + 3 * 4 + 3);
    float *a = calloc(p, sizeof *a), *b = calloc(p, sizeof *b), *c = calloc(p, sizeof *c);
    assert_true(a && b && c);
    fl_model_init(&m, 42, a);
    fl_model_init(&m, 42, b);
    fl_model_init(&m, 43, c);
    assert_memory_equal(a, b, p * sizeof *a);
    assert_memory_not_equal(a, c, p * sizeof *a);
    /* layer 1: 6 x 5 weights in +-sqrt(6/5), then 6 zero biases */
    double bound = sqrt(6.0 / 5.0);
    bool any_nonzero = false;
    for (size_t j = 0; j < 30; j++) {
        assert_true(fabs((double)a[j]) <= bound);
        any_nonzero |= a[j] != 0.0f;
    }
    assert_true(any_nonzero);
    for (size_t j = 30; j < 36; j++)
        assert_true(a[j] == 0.0f);
    for (size_t j = 36; j < 36 + 24; j++)
        assert_true(fabs((double)a[j]) <= sqrt(6.0 / 6.0));
    free(a);
    free(b);
    free(c);
}

static void workspace_allocation_failures_are_clean(void **state)
{
    (void)state;
    fl_model_spec m = spec_of(FL_MODEL_MLP);
    for (long k = 1;; k++) {
        dp_err e;
        dp_err_clear(&e);
        dp_alloc_fail_after(k);
        fl_ws *ws = fl_ws_alloc(&m, 8, &e);
        dp_alloc_fail_after(0);
        if (ws != NULL) {
            fl_ws_free(ws);
            assert_true(k > 5);
            break;
        }
        assert_int_equal(e.code, DP_ENOMEM);
    }
}

/* ---- noise ---- */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void gauss_fill_has_the_normal_distribution(void **state)
{
    (void)state;
    size_t n = 1000000;
    double sigma = 2.5;
    float *z = malloc(n * sizeof *z);
    assert_non_null(z);
    fl_gauss_fill(z, n, sigma, 20261127);
    double s = 0, s2 = 0;
    size_t beyond_r = 0, bins[100] = {0};
    for (size_t i = 0; i < n; i++) {
        double v = (double)z[i] / sigma;
        s += v;
        s2 += v * v;
        beyond_r += fabs(v) > 3.852046150368391;
        double u = gsl_cdf_ugaussian_P(v);
        size_t b = (size_t)(u * 100.0);
        bins[b < 100 ? b : 99]++;
    }
    double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
    /* 5 standard errors: 1/sqrt(n) for the mean, 1/sqrt(2n) for the standard deviation. */
    assert_true(fabs(mean) < 5.0 / sqrt((double)n));
    assert_true(fabs(sd - 1.0) < 5.0 / sqrt(2.0 * (double)n));
    /* The ziggurat's tail path: P(|Z| > r) = 2 (1 - Phi(r)), within 5 standard errors. */
    double pt = 2.0 * gsl_cdf_ugaussian_Q(3.852046150368391), et = pt * (double)n;
    assert_true(fabs((double)beyond_r - et) < 5.0 * sqrt(et));
    /* chi-square over 100 equiprobable bins, 99 degrees of freedom: 0.1% critical value 148.23. */
    double chi2 = 0, eb = (double)n / 100.0;
    for (size_t b = 0; b < 100; b++)
        chi2 += ((double)bins[b] - eb) * ((double)bins[b] - eb) / eb;
    assert_true(chi2 < 148.23);
    /* Kolmogorov-Smirnov: sqrt(n) D < 1.628 (1% critical value). */
    qsort(z, n, sizeof *z, cmp_float);
    double dmax = 0;
    for (size_t i = 0; i < n; i++) {
        double f = gsl_cdf_ugaussian_P((double)z[i] / sigma);
        dmax = fmax(dmax,
                    fmax(fabs(f - (double)i / (double)n), fabs((double)(i + 1) / (double)n - f)));
    }
    assert_true(sqrt((double)n) * dmax < 1.628);
    free(z);
}

static void gauss_fill_is_deterministic_by_seed(void **state)
{
    (void)state;
    float a[1001], b[1001], c[1001], zero[7];
    fl_gauss_fill(a, 1001, 1.0, 5);
    fl_gauss_fill(b, 1001, 1.0, 5);
    fl_gauss_fill(c, 1001, 1.0, 6);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    /* a prefix of a longer fill */
    fl_gauss_fill(b, 500, 1.0, 5);
    assert_memory_equal(a, b, 500 * sizeof *a);
    /* scaling by sigma */
    fl_gauss_fill(c, 1001, 3.0, 5);
    for (size_t i = 0; i < 1001; i++)
        assert_true(c[i] == 3.0f * a[i]);
    fl_gauss_fill(zero, 7, 0.0, 5);
    for (size_t i = 0; i < 7; i++)
        assert_true(zero[i] == 0.0f);
}

/* Every path (portable C, AVX2, AVX-512; those this CPU runs) gives the same bits, on sizes that
 * are not multiples of the 16-normal block and on fills long enough to take the slow path many
 * times (the tail beyond r comes only from the slow path, and it appears). */
static void gauss_fill_paths_give_the_same_bits(void **state)
{
    (void)state;
    static const size_t sizes[] = {0,  1,  2,   7,    15,   16,   17,   31,
                                   32, 33, 100, 1000, 1023, 9940, 65537};
    size_t big = 1 << 18;
    float *ref = malloc(big * sizeof *ref), *got = malloc(big * sizeof *got);
    assert_true(ref != NULL && got != NULL);
    assert_int_equal(fl_gauss_fill_path(ref, 4, 1.0, 1, FL_ZIG_SCALAR), FL_ZIG_SCALAR);
    int best = fl_simd_level(), paths = 0;
    for (int p = FL_ZIG_SCALAR; p <= FL_ZIG_AVX512; p++) {
        if (p > best) {
            assert_int_equal(fl_gauss_fill_path(got, 4, 1.0, 1, p), -1);
            continue;
        }
        paths++;
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (uint64_t seed = 0; seed < 40; seed++) {
                size_t n = sizes[k];
                double sigma = 0.5 + (double)seed;
                fl_gauss_fill_path(ref, n, sigma, seed * 0x9e3779b97f4a7c15ULL, FL_ZIG_SCALAR);
                memset(got, 0xff, (n + 1) * sizeof *got);
                assert_int_equal(fl_gauss_fill_path(got, n, sigma, seed * 0x9e3779b97f4a7c15ULL, p),
                                 p);
                assert_memory_equal(ref, got, n * sizeof *ref);
                uint32_t after; /* nothing written past n */
                memcpy(&after, &got[n], sizeof after);
                assert_true(after == 0xffffffffu);
            }
        size_t tails = 0;
        for (uint64_t seed = 1; seed <= 4; seed++) {
            fl_gauss_fill_path(ref, big, 1.0, seed, FL_ZIG_SCALAR);
            fl_gauss_fill_path(got, big, 1.0, seed, p);
            assert_memory_equal(ref, got, big * sizeof *ref);
            for (size_t i = 0; i < big; i++)
                tails += fabsf(ref[i]) > 3.852046150368391f;
        }
        assert_true(tails > 0);
        /* fl_gauss_fill is the best path */
        fl_gauss_fill(got, 1001, 2.0, 77);
        fl_gauss_fill_path(ref, 1001, 2.0, 77, p);
        assert_memory_equal(ref, got, 1001 * sizeof *ref);
    }
    assert_true(paths >= 1);
    free(ref);
    free(got);
}

/* The 16 positions of a block come from eight generators (two per output): each position has mean
 * 0 and variance 1, and neighbours within a block (the two halves of one output, and adjacent
 * generators) and across blocks are uncorrelated, within 5 standard errors. */
static void gauss_fill_block_positions_are_independent_standard_normals(void **state)
{
    (void)state;
    size_t n = 16 * 65536, per = n / 16;
    float *z = malloc(n * sizeof *z);
    assert_non_null(z);
    fl_gauss_fill(z, n, 1.0, 424242);
    for (size_t j = 0; j < 16; j++) {
        double s = 0, s2 = 0, c1 = 0, c16 = 0;
        for (size_t b = 0; b < per; b++) {
            double v = (double)z[16 * b + j];
            s += v;
            s2 += v * v;
            c1 += v * (double)z[16 * b + (j + 1) % 16];
            if (b + 1 < per)
                c16 += v * (double)z[16 * (b + 1) + j];
        }
        double se = 1.0 / sqrt((double)per);
        assert_true(fabs(s / (double)per) < 5.0 * se);
        assert_true(fabs(s2 / (double)per - 1.0) < 5.0 * sqrt(2.0) * se);
        assert_true(fabs(c1 / (double)per) < 5.0 * se);
        assert_true(fabs(c16 / (double)(per - 1)) < 5.0 * se);
    }
    free(z);
}

/* The ziggurat's slow regions: the mass beyond r (tail method) has the normal's conditional mean
 * E[|Z| | |Z| > r] = phi(r) / Q(r), and a fine histogram of |Z| over the top layers' range [0, 0.3)
 * (where the fast test fails most: the top layer has no fast region at all) matches the normal
 * (chi-square, 59 degrees of freedom, 0.1% critical value 99.6). */
static void gauss_fill_slow_regions_have_the_normal_law(void **state)
{
    (void)state;
    size_t n = 4000000;
    double r = 3.852046150368391;
    float *z = malloc(n * sizeof *z);
    assert_non_null(z);
    fl_gauss_fill(z, n, 1.0, 99);
    double tail_sum = 0;
    size_t tail_n = 0, bins[60] = {0}, in_range = 0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)z[i]);
        if (a > r) {
            tail_sum += a;
            tail_n++;
        }
        if (a < 0.3) {
            bins[(size_t)(a / 0.005) < 60 ? (size_t)(a / 0.005) : 59]++;
            in_range++;
        }
    }
    double q = gsl_cdf_ugaussian_Q(r), phi = exp(-0.5 * r * r) / sqrt(2.0 * M_PI);
    double cmean = phi / q;
    /* sd of |Z| given |Z| > r is about 0.24 at this r: 5 standard errors */
    assert_true(tail_n > 100);
    assert_true(fabs(tail_sum / (double)tail_n - cmean) < 5.0 * 0.25 / sqrt((double)tail_n));
    double p_range = 2.0 * (gsl_cdf_ugaussian_P(0.3) - 0.5), chi2 = 0;
    for (size_t b = 0; b < 60; b++) {
        double lo = 0.005 * (double)b, hi = lo + 0.005;
        double e = (double)n * 2.0 * (gsl_cdf_ugaussian_P(hi) - gsl_cdf_ugaussian_P(lo));
        chi2 += ((double)bins[b] - e) * ((double)bins[b] - e) / e;
    }
    assert_true(fabs((double)in_range - (double)n * p_range) <
                5.0 * sqrt((double)n * p_range * (1.0 - p_range)));
    assert_true(chi2 < 99.6);
    free(z);
}

/* The ghost norms' squared norm gives the same bits on every path and matches a long double sum. */
static void sq_norm_paths_give_the_same_bits(void **state)
{
    (void)state;
    float v[1000];
    uint64_t st = 5;
    for (size_t i = 0; i < 1000; i++)
        v[i] = (float)((double)(dp_splitmix64(&st) >> 11) * 0x1.0p-53 * 4.0 - 2.0);
    static const size_t sizes[] = {0, 1, 10, 15, 16, 17, 50, 255, 784, 1000};
    int best = fl_simd_level();
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (size_t off = 0; off < 3; off++) {
            size_t n = sizes[k] - (sizes[k] > off ? off : sizes[k]);
            double ref = fl_sq_norm_path(v + off, n, FL_ZIG_SCALAR);
            long double exact = 0;
            for (size_t i = 0; i < n; i++)
                exact += (long double)v[off + i] * (long double)v[off + i];
            assert_close(ref, (double)exact, 1e-14, 0.0);
            for (int p = FL_ZIG_AVX2; p <= best; p++) {
                double got = fl_sq_norm_path(v + off, n, p);
                assert_memory_equal(&ref, &got, sizeof ref);
            }
        }
    }
}

/* ---- knowledge distillation (fl_model_kd) ---- */

/* An independent reference: KL(p_mu(.|x) || p_theta(.|x)) summed over the rows, in double, from
 * the probabilities themselves (not the library's log-sum-exp forms). */
static double ref_kd(const fl_model_spec *m, const double *th, const double *mu, const float *x,
                     size_t n)
{
    size_t d = m->d_in, c_n = m->type == FL_MODEL_SOFTMAX ? m->n_classes : 1;
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        double u[8], v[8];
        for (size_t c = 0; c < c_n; c++) {
            u[c] = mu[c_n * d + c];
            v[c] = th[c_n * d + c];
            for (size_t j = 0; j < d; j++) {
                u[c] += mu[c * d + j] * (double)x[i * d + j];
                v[c] += th[c * d + j] * (double)x[i * d + j];
            }
        }
        if (m->type == FL_MODEL_LINEAR) {
            total += 0.5 * (u[0] - v[0]) * (u[0] - v[0]);
        } else if (m->type == FL_MODEL_LOGISTIC) {
            double p = 1 / (1 + exp(-u[0])), q = 1 / (1 + exp(-v[0]));
            total += p * log(p / q) + (1 - p) * log((1 - p) / (1 - q));
        } else {
            double zp = 0, zq = 0;
            for (size_t c = 0; c < c_n; c++) {
                zp += exp(u[c]);
                zq += exp(v[c]);
            }
            for (size_t c = 0; c < c_n; c++) {
                double p = exp(u[c]) / zp, q = exp(v[c]) / zq;
                total += p * log(p / q);
            }
        }
    }
    return total;
}

static void kd_gradients_match_finite_differences(void **state)
{
    (void)state;
    const fl_model_type types[3] = {FL_MODEL_LINEAR, FL_MODEL_LOGISTIC, FL_MODEL_SOFTMAX};
    for (size_t t = 0; t < 3; t++) {
        fl_model_spec m = spec_of(types[t]);
        size_t n = 7, p = fl_model_n_params(&m);
        float x[7 * 5], y[7], th[32], mu[32], gt[32], gm[32];
        double thd[32], mud[32];
        assert_true(p <= 32);
        make_problem(&m, n, 0x6b640000u + t, x, y, th);
        make_problem(&m, n, 0x6b650000u + t, x, y, mu); /* mu: another seed's parameters */
        make_problem(&m, n, 0x6b640000u + t, x, y, th); /* the rows of the first draw again */
        for (size_t j = 0; j < p; j++) {
            thd[j] = (double)th[j];
            mud[j] = (double)mu[j];
        }
        double kd = -1;
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(fl_model_kd(&m, th, mu, x, n, &kd, gt, gm, &e), DP_OK);
        double ref = ref_kd(&m, thd, mud, x, n);
        assert_true(ref > 0.1); /* the two models differ: the test would see a wrong gradient */
        assert_close(kd, ref, 1e-9, 1e-12);
        double h = 1e-6;
        for (size_t j = 0; j < p; j++) {
            thd[j] = (double)th[j] + h;
            double lp = ref_kd(&m, thd, mud, x, n);
            thd[j] = (double)th[j] - h;
            double lm = ref_kd(&m, thd, mud, x, n);
            thd[j] = (double)th[j];
            assert_close((double)gt[j], (lp - lm) / (2 * h), 1e-5, 1e-6);
            mud[j] = (double)mu[j] + h;
            lp = ref_kd(&m, thd, mud, x, n);
            mud[j] = (double)mu[j] - h;
            lm = ref_kd(&m, thd, mud, x, n);
            mud[j] = (double)mu[j];
            assert_close((double)gm[j], (lp - lm) / (2 * h), 1e-5, 1e-6);
        }
        /* the same model: no divergence, no gradient; NULL gradients are allowed */
        assert_int_equal(fl_model_kd(&m, mu, mu, x, n, &kd, gt, NULL, &e), DP_OK);
        assert_true(fabs(kd) < 1e-12);
        for (size_t j = 0; j < p; j++)
            assert_true(fabs((double)gt[j]) < 1e-6);
    }
    fl_model_spec svm = spec_of(FL_MODEL_SVM);
    float z[6] = {0}, x1[5] = {0};
    double kd;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(fl_model_kd(&svm, z, z, x1, 1, &kd, NULL, NULL, &e), DP_EINVAL);
    assert_string_equal(e.field, "model.type");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(linear_gradient_matches_finite_differences),
        cmocka_unit_test(logistic_gradient_matches_finite_differences),
        cmocka_unit_test(svm_gradient_matches_finite_differences),
        cmocka_unit_test(softmax_gradient_matches_finite_differences),
        cmocka_unit_test(mlp_gradient_matches_finite_differences),
        cmocka_unit_test(kd_gradients_match_finite_differences),
        cmocka_unit_test(gradient_over_chunks_matches_one_chunk),
        cmocka_unit_test(gradient_of_indexed_rows_equals_the_gathered_chunk),
        cmocka_unit_test(clipped_sum_matches_materialised_per_example_gradients),
        cmocka_unit_test(clamp_clipping_matches_materialised_per_example_clipping),
        cmocka_unit_test(clip_zero_is_the_plain_sum),
        cmocka_unit_test(clipping_by_hand_with_a_zero_gradient),
        cmocka_unit_test(eval_metrics_on_hand_computed_cases),
        cmocka_unit_test(specs_are_checked_and_sized),
        cmocka_unit_test(type_names_round_trip),
        cmocka_unit_test(init_is_zero_for_linear_models_and_seeded_he_uniform_for_mlp),
        cmocka_unit_test(workspace_allocation_failures_are_clean),
        cmocka_unit_test(gauss_fill_has_the_normal_distribution),
        cmocka_unit_test(gauss_fill_is_deterministic_by_seed),
        cmocka_unit_test(gauss_fill_paths_give_the_same_bits),
        cmocka_unit_test(gauss_fill_block_positions_are_independent_standard_normals),
        cmocka_unit_test(gauss_fill_slow_regions_have_the_normal_law),
        cmocka_unit_test(sq_norm_paths_give_the_same_bits),
    };
    return cmocka_run_group_tests_name("fl_model", tests, NULL, NULL);
}
