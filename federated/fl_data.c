/*
 * fl_data.c: data sets and federations (freeing, the label rule) and fl_federate, which splits each
 * silo into a training and a test part and standardises its features. See fl_data.h; the
 * generator, the CSV and IDX readers and the partitions are in fl_synth.c, fl_csv.c, fl_idx.c and
 * fl_partition.c.
 *
 * Invariants of fl_federate: every row of the data set (but the FL_ROW_DROPPED ones) lands in
 * exactly one part of exactly one silo; silo k's split depends only on (seed, k) and its rows in
 * data-set order, so adding a silo never changes another's split. Sums for the standardisation run
 * in double, in row order.
 */
#include "federated/fl_data.h"
#include "federated/fl_data_priv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"
#include "federated/fl_model.h"

void fl_names_free(char **names, size_t k)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < k; i++)
        dp_free(names[i]);
    dp_free(names);
}

char **fl_numbered_names(size_t k)
{
    char **names = dp_calloc(k ? k : 1, sizeof *names);
    if (names == NULL)
        return NULL;
    for (size_t i = 0; i < k; i++) {
        char buf[24];
        snprintf(buf, sizeof buf, "%zu", i);
        names[i] = dp_strdup(buf);
        if (names[i] == NULL) {
            fl_names_free(names, k);
            return NULL;
        }
    }
    return names;
}

void fl_shuffle_u32(gsl_rng *r, uint32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gsl_rng_uniform_int(r, (unsigned long)i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

void fl_dataset_free(fl_dataset *d)
{
    if (d == NULL)
        return;
    dp_free(d->x);
    dp_free(d->y);
    dp_free(d->silo);
    fl_names_free(d->silo_names, d->n_silos);
    fl_names_free(d->feature_names, d->d);
    memset(d, 0, sizeof *d);
}

size_t fl_labels_n_classes(const float *y, size_t n)
{
    float mx = -1.0f;
    for (size_t i = 0; i < n; i++) {
        float v = y[i];
        /* !(v >= 0) also refuses NaN */
        if (!(v >= 0.0f) || v >= (float)FL_MAX_CLASSES || v != floorf(v))
            return 0;
        if (v > mx)
            mx = v;
    }
    return n ? (size_t)mx + 1 : 0;
}

void fl_federation_free(fl_federation *f)
{
    if (f == NULL)
        return;
    if (f->silo != NULL) {
        for (size_t k = 0; k < f->n_silos; k++) {
            fl_silo_data *s = &f->silo[k];
            dp_free(s->x_train);
            dp_free(s->x_train_inv_s);
            dp_free(s->y_train);
            dp_free(s->x_test);
            dp_free(s->y_test);
            dp_free(s->name);
        }
        dp_free(f->silo);
    }
    memset(f, 0, sizeof *f);
}

/* Centres and scales x_train (n x d) by its own column means and population standard deviations
 * and applies the same map to x_test (m x d). mean and sd are d-double scratch arrays. */
static void standardize_silo(float *xtr, size_t n, float *xte, size_t m, size_t d, double *mean,
                             double *sd)
{
    for (size_t j = 0; j < d; j++) {
        mean[j] = 0.0;
        sd[j] = 0.0;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            mean[j] += (double)xtr[i * d + j];
    for (size_t j = 0; j < d; j++)
        mean[j] /= (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double c = (double)xtr[i * d + j] - mean[j];
            sd[j] += c * c;
        }
    for (size_t j = 0; j < d; j++) {
        /* A column whose training values are all equal (compared as floats) has sd 0 and is only
         * centred: n equal floats sum exactly in double (n < 2^29), so its mean is the value and
         * the column becomes exactly 0. */
        bool constant = true;
        for (size_t i = 1; i < n && constant; i++)
            constant = xtr[i * d + j] == xtr[j];
        sd[j] = constant ? 1.0 : sqrt(sd[j] / (double)n);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            xtr[i * d + j] = (float)(((double)xtr[i * d + j] - mean[j]) / sd[j]);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < d; j++)
            xte[i * d + j] = (float)(((double)xte[i * d + j] - mean[j]) / sd[j]);
}

static bool is_natural(const fl_dataset *d, const uint32_t *assign, size_t n_silos)
{
    if (d->silo == NULL || d->silo_names == NULL || n_silos != d->n_silos)
        return false;
    for (size_t i = 0; i < d->n; i++)
        if (assign[i] != d->silo[i] && assign[i] != FL_ROW_DROPPED)
            return false;
    return true;
}

/* Fills silo k of out from its rows (rows[0..nk), data-set order; shuffled in place). */
static int build_silo(const fl_dataset *d, uint32_t *rows, size_t nk, size_t k,
                      double test_fraction, uint64_t seed, bool standardize, double *scratch,
                      fl_silo_data *s, dp_err *err)
{
    gsl_rng *r = dp_rng_alloc(dp_rng_derive(seed, (uint64_t)k), DP_RNG_STREAM_DATA, err);
    if (r == NULL)
        return err ? err->code : DP_ENOMEM;
    fl_shuffle_u32(r, rows, nk);
    gsl_rng_free(r);
    size_t nt = (size_t)floor(test_fraction * (double)nk + 0.5);
    if (nt > nk - 1)
        nt = nk - 1;
    size_t ntr = nk - nt, dd = d->d;
    s->n_train = ntr;
    s->n_test = nt;
    s->x_train = dp_malloc(ntr * dd * sizeof(float));
    s->y_train = dp_malloc(ntr * sizeof(float));
    s->x_test = dp_malloc((nt ? nt : 1) * dd * sizeof(float));
    s->y_test = dp_malloc((nt ? nt : 1) * sizeof(float));
    if (!s->x_train || !s->y_train || !s->x_test || !s->y_test)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory building a federation");
    for (size_t i = 0; i < nk; i++) {
        size_t row = rows[i];
        float *dst = i < nt ? s->x_test + i * dd : s->x_train + (i - nt) * dd;
        memcpy(dst, d->x + row * dd, dd * sizeof(float));
        if (i < nt)
            s->y_test[i] = d->y[row];
        else
            s->y_train[i - nt] = d->y[row];
    }
    if (standardize)
        standardize_silo(s->x_train, ntr, s->x_test, nt, dd, scratch, scratch + dd);
    s->x_train_inv_s = dp_malloc(ntr * sizeof(float));
    if (s->x_train_inv_s == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory building a federation");
    fl_rows_inv_s(s->x_train, ntr, dd, s->x_train_inv_s);
    return DP_OK;
}

int fl_federation_refresh(fl_federation *f, dp_err *err)
{
    if (f == NULL || (f->n_silos > 0 && f->silo == NULL))
        return dp_err_set(err, DP_EINVAL, "federation", "no federation given");
    for (size_t k = 0; k < f->n_silos; k++) {
        fl_silo_data *s = &f->silo[k];
        if (s->n_train == 0) {
            dp_free(s->x_train_inv_s);
            s->x_train_inv_s = NULL;
            continue;
        }
        if (s->x_train == NULL)
            return dp_err_set(err, DP_EINVAL, "federation", "silo %zu has no training rows", k);
        if (s->x_train_inv_s == NULL &&
            (s->x_train_inv_s = dp_malloc(s->n_train * sizeof(float))) == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory refreshing a federation");
        fl_rows_inv_s(s->x_train, s->n_train, f->d, s->x_train_inv_s);
    }
    return DP_OK;
}

static int federate_check(const fl_dataset *d, const uint32_t *assign, size_t n_silos,
                          double test_fraction, dp_err *err)
{
    if (!(test_fraction >= 0.0 && test_fraction < 1.0))
        return dp_err_set(err, DP_EINVAL, "test_fraction",
                          "test_fraction must be in [0, 1), got %g", test_fraction);
    if (n_silos < 1 || n_silos > FL_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "the number of silos must be in 1..%d, got %zu", FL_MAX_SILOS, n_silos);
    if (d == NULL || d->n == 0 || d->d == 0 || d->x == NULL || d->y == NULL || assign == NULL)
        return dp_err_set(err, DP_EINVAL, "data", "the data set is empty");
    if (d->n > FL_MAX_CELLS / d->d) /* row indices then fit a uint32_t */
        return dp_err_set(err, DP_EINVAL, "data", "the data set has more than %zu cells",
                          FL_MAX_CELLS);
    return DP_OK;
}

/* Counting sort of the rows by silo, stable (each silo's rows stay in data-set order): silo k's
 * rows are rows[start[k] .. start[k+1]). start has n_silos + 1 entries. */
static int group_by_silo(const fl_dataset *d, const uint32_t *assign, size_t n_silos, size_t *start,
                         uint32_t *rows, dp_err *err)
{
    for (size_t i = 0; i < d->n; i++) {
        if (assign[i] == FL_ROW_DROPPED)
            continue;
        if (assign[i] >= n_silos)
            return dp_err_set(err, DP_EINVAL, "partition",
                              "row %zu is assigned to silo %u, but there are %zu silos", i,
                              (unsigned)assign[i], n_silos);
        start[assign[i] + 1]++;
    }
    for (size_t k = 0; k < n_silos; k++) {
        if (start[k + 1] == 0)
            return dp_err_set(err, DP_EINVAL, "partition", "silo %zu has no rows", k);
        start[k + 1] += start[k];
    }
    size_t *fill = dp_malloc(n_silos * sizeof *fill);
    if (fill == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory building a federation");
    memcpy(fill, start, n_silos * sizeof *fill);
    for (size_t i = 0; i < d->n; i++)
        if (assign[i] != FL_ROW_DROPPED)
            rows[fill[assign[i]]++] = (uint32_t)i;
    dp_free(fill);
    return DP_OK;
}

int fl_federate(const fl_dataset *d, const uint32_t *assign, size_t n_silos, double test_fraction,
                uint64_t seed, bool standardize, fl_federation *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = federate_check(d, assign, n_silos, test_fraction, err);
    if (rc != DP_OK)
        return rc;
    size_t *start = dp_calloc(n_silos + 1, sizeof *start);
    uint32_t *rows = dp_malloc(d->n * sizeof *rows);
    double *scratch = dp_malloc(2 * d->d * sizeof *scratch);
    out->silo = dp_calloc(n_silos, sizeof *out->silo);
    if (!start || !rows || !scratch || !out->silo)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory building a federation");
    if (rc == DP_OK)
        rc = group_by_silo(d, assign, n_silos, start, rows, err);
    out->d = d->d;
    out->n_classes = d->n_classes;
    out->n_silos = n_silos;
    bool natural = rc == DP_OK && is_natural(d, assign, n_silos);
    for (size_t k = 0; k < n_silos && rc == DP_OK; k++) {
        fl_silo_data *s = &out->silo[k];
        char buf[24];
        snprintf(buf, sizeof buf, "%zu", k);
        s->name = dp_strdup(natural ? d->silo_names[k] : buf);
        if (s->name == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory building a federation");
        else
            rc = build_silo(d, rows + start[k], start[k + 1] - start[k], k, test_fraction, seed,
                            standardize, scratch, s, err);
    }
    dp_free(start);
    dp_free(rows);
    dp_free(scratch);
    if (rc != DP_OK)
        fl_federation_free(out);
    return rc;
}
