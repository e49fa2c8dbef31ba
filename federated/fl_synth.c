/*
 * fl_synth.c: seeded synthetic federations (fl_data.h, fl_synth_generate).
 *
 * The heterogeneity model of Liu, Hu, Wu & Smith, "On Privacy and Personalization in Cross-Silo
 * Federated Learning", NeurIPS 2022, Sec. 6 ("Setup": silo centres w_k = theta + z with
 * z ~ N(0, tau^2) around a meta-centre theta), lifted from mean estimation to linear models: a
 * shared theta ~ N(0, I/d), silo models w_k = theta + tau * N(0, I), rows x ~ N(0, I_d) and
 * y = w_k.x + noise * N(0, 1) (regression), thresholded at 0 (binary, as the paper's Vehicle
 * task, App. C.1) or the argmax of one such score per class (multiclass).
 *
 * Streams (fl_data.h): the sizes n_k and then theta come from (seed, DP_RNG_STREAM_DATA); silo k's
 * perturbation, rows and noise from (dp_rng_derive(dp_rng_derive(seed, FL_SEED_SYNTH), k),
 * DP_RNG_STREAM_DATA), in that order. Dot products run in double over the stored float rows, so
 * with noise = 0 a regression label is w_k.x of the row as stored, rounded once to float.
 */
#include "federated/fl_data.h"
#include "federated/fl_data_priv.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"
#include "federated/fl_altmin.h"

static int synth_check(const fl_synth_spec *s, dp_err *err)
{
    if (s->silos < 1 || s->silos > FL_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "silos", "silos must be in 1..%d, got %zu", FL_MAX_SILOS,
                          s->silos);
    if (s->dim < 1 || s->dim > 100000)
        return dp_err_set(err, DP_EINVAL, "dim", "dim must be in 1..100000, got %zu", s->dim);
    if (s->n_min < 1)
        return dp_err_set(err, DP_EINVAL, "n_min", "n_min must be at least 1, got %zu", s->n_min);
    if (s->n_max < s->n_min)
        return dp_err_set(err, DP_EINVAL, "n_max", "n_max (%zu) must be at least n_min (%zu)",
                          s->n_max, s->n_min);
    if (s->n_max > FL_MAX_CELLS / s->dim / s->silos)
        return dp_err_set(err, DP_EINVAL, "n_max",
                          "silos * n_max * dim must be at most %zu cells, got %zu * %zu * %zu",
                          FL_MAX_CELLS, s->silos, s->n_max, s->dim);
    if (!(isfinite(s->tau) && s->tau >= 0.0))
        return dp_err_set(err, DP_EINVAL, "tau", "tau must be finite and >= 0, got %g", s->tau);
    if (!(isfinite(s->noise) && s->noise >= 0.0))
        return dp_err_set(err, DP_EINVAL, "noise", "noise must be finite and >= 0, got %g",
                          s->noise);
    if (s->classes == 1 || s->classes > FL_MAX_CLASSES)
        return dp_err_set(err, DP_EINVAL, "classes",
                          "classes must be 0 (regression) or in 2..%d, got %zu", FL_MAX_CLASSES,
                          s->classes);
    return DP_OK;
}

/* The label of row x (dim floats) under the silo's models w (dim x m, column c the model of
 * score c; m = 1 unless classes > 2). */
static float synth_label(const fl_synth_spec *s, const double *w, size_t m, const float *x,
                         gsl_rng *r)
{
    size_t best = 0;
    double best_score = 0.0;
    for (size_t c = 0; c < m; c++) {
        double acc = 0.0;
        for (size_t j = 0; j < s->dim; j++)
            acc += w[j * m + c] * (double)x[j];
        if (s->noise > 0.0)
            acc += gsl_ran_gaussian_ziggurat(r, s->noise);
        if (c == 0 || acc > best_score) {
            best = c;
            best_score = acc;
        }
    }
    if (s->classes == 0)
        return (float)best_score;
    if (s->classes == 2)
        return best_score > 0.0 ? 1.0f : 0.0f;
    return (float)best;
}

/* Draws silo k's model and its rows out->x/y[row0 .. row0 + nk). */
static int synth_silo(const fl_synth_spec *s, size_t k, const double *theta, double *w, size_t m,
                      size_t row0, size_t nk, fl_dataset *out, dp_err *err)
{
    uint64_t ks = dp_rng_derive(dp_rng_derive(s->seed, FL_SEED_SYNTH), (uint64_t)k);
    gsl_rng *r = dp_rng_alloc(ks, DP_RNG_STREAM_DATA, err);
    if (r == NULL)
        return err ? err->code : DP_ENOMEM;
    for (size_t j = 0; j < s->dim * m; j++)
        w[j] = theta[j] + (s->tau > 0.0 ? gsl_ran_gaussian_ziggurat(r, s->tau) : 0.0);
    for (size_t i = row0; i < row0 + nk; i++) {
        float *x = out->x + i * s->dim;
        for (size_t j = 0; j < s->dim; j++)
            x[j] = (float)gsl_ran_gaussian_ziggurat(r, 1.0);
        out->y[i] = synth_label(s, w, m, x, r);
        out->silo[i] = (uint32_t)k;
    }
    gsl_rng_free(r);
    return DP_OK;
}

/* From the shared stream: the silo sizes nk, then theta (dim x m, N(0, 1/dim) entries). Returns
 * the total number of rows. */
static size_t draw_shared(const fl_synth_spec *s, size_t m, gsl_rng *r, size_t *nk, double *theta)
{
    size_t n = 0;
    for (size_t k = 0; k < s->silos; k++) {
        nk[k] = s->n_min + (size_t)gsl_rng_uniform_int(r, (unsigned long)(s->n_max - s->n_min + 1));
        n += nk[k];
    }
    double sd_theta = 1.0 / sqrt((double)s->dim);
    for (size_t j = 0; j < s->dim * m; j++)
        theta[j] = gsl_ran_gaussian_ziggurat(r, sd_theta);
    return n;
}

int fl_synth_generate(const fl_synth_spec *s, fl_dataset *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = synth_check(s, err);
    if (rc != DP_OK)
        return rc;
    if (s->rank > 0) {
        fl_lowrank_spec ls = {s->silos, s->n_min, s->dim, s->rank, s->noise, s->seed};
        fl_lowrank g;
        if ((rc = fl_lowrank_init(&ls, &g, err)) != DP_OK)
            return rc;
        rc = fl_lowrank_dataset(&g, out, err);
        fl_lowrank_free(&g);
        return rc;
    }
    size_t m = s->classes > 2 ? s->classes : 1;
    size_t *nk = dp_malloc(s->silos * sizeof *nk);
    double *theta = dp_malloc(s->dim * m * sizeof *theta);
    double *w = dp_malloc(s->dim * m * sizeof *w);
    gsl_rng *r = NULL;
    if (!nk || !theta || !w) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory generating a synthetic data set");
        goto done;
    }
    r = dp_rng_alloc(s->seed, DP_RNG_STREAM_DATA, err);
    if (r == NULL) {
        rc = err ? err->code : DP_ENOMEM;
        goto done;
    }
    out->n = draw_shared(s, m, r, nk, theta);
    out->d = s->dim;
    out->n_classes = s->classes;
    out->n_silos = s->silos;
    out->x = dp_malloc(out->n * s->dim * sizeof(float));
    out->y = dp_malloc(out->n * sizeof(float));
    out->silo = dp_malloc(out->n * sizeof(uint32_t));
    out->silo_names = fl_numbered_names(s->silos);
    if (!out->x || !out->y || !out->silo || !out->silo_names) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory generating a synthetic data set");
        goto done;
    }
    size_t row0 = 0;
    for (size_t k = 0; k < s->silos && rc == DP_OK; k++) {
        rc = synth_silo(s, k, theta, w, m, row0, nk[k], out, err);
        row0 += nk[k];
    }
done:
    if (r != NULL)
        gsl_rng_free(r);
    dp_free(nk);
    dp_free(theta);
    dp_free(w);
    if (rc != DP_OK)
        fl_dataset_free(out);
    return rc;
}
