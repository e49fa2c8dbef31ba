/*
 * federated/fl_additive.c: the synthetic personalised regression of Bietti et al., ICML 2022, §6.1
 * (see fl_additive.h).
 */
#include "federated/fl_additive.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"
#include "federated/fl_model.h"

#define FL_SEED_ADDITIVE UINT64_C(0x6164646974) /* "addit" */

static int check_nonneg(double x, const char *field, dp_err *err)
{
    if (!(isfinite(x) && x >= 0))
        return dp_err_set(err, DP_EINVAL, field, "%s must be finite and >= 0 (got %g)", field, x);
    return DP_OK;
}

fl_additive_spec fl_additive_paper_spec(void)
{
    return (fl_additive_spec){.users = 1000,
                              .dim = 100,
                              .personal = 5,
                              .rows = 10,
                              .theta_scale = 10,
                              .s = 0.1,
                              .label_noise = 0.01,
                              .seed = 42};
}

int fl_additive_init(const fl_additive_spec *spec, fl_additive *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc;
    if (spec->users < 1 || spec->users > FL_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "users", "users must be in 1..%d (got %zu)", FL_MAX_SILOS,
                          spec->users);
    if (spec->dim < 1 || spec->personal > spec->dim)
        return dp_err_set(err, DP_EINVAL, "dim", "dim must be >= 1 and >= personal (%zu, %zu)",
                          spec->dim, spec->personal);
    if (spec->rows < 1 ||
        (double)spec->users * (double)spec->rows * (double)spec->dim > (double)FL_MAX_CELLS)
        return dp_err_set(err, DP_EINVAL, "rows",
                          "rows must be >= 1 with users x rows x dim at most %zu cells",
                          (size_t)FL_MAX_CELLS);
    if ((rc = check_nonneg(spec->theta_scale, "theta_scale", err)) != DP_OK ||
        (rc = check_nonneg(spec->s, "s", err)) != DP_OK ||
        (rc = check_nonneg(spec->label_noise, "label_noise", err)) != DP_OK)
        return rc;
    size_t d = spec->dim, n = spec->users;
    out->theta = dp_malloc(n * d * sizeof *out->theta);
    out->scale = dp_malloc(d * sizeof *out->scale);
    double *theta0 = dp_malloc(d * sizeof *theta0);
    gsl_rng *r = dp_rng_alloc(dp_rng_derive(spec->seed, FL_SEED_ADDITIVE), DP_RNG_STREAM_DATA, err);
    if (out->theta == NULL || out->scale == NULL || theta0 == NULL || r == NULL) {
        dp_free(theta0);
        gsl_rng_free(r);
        fl_additive_free(out);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    out->spec = *spec;
    for (size_t k = 0; k < d; k++)
        out->scale[k] = (float)(1.0 / sqrt((double)(k + 1)));
    for (size_t k = 0; k < d; k++)
        theta0[k] = gsl_ran_gaussian_ziggurat(r, spec->theta_scale > 0 ? spec->theta_scale : 1.0) *
                    (spec->theta_scale > 0 ? 1.0 : 0.0);
    size_t shared = d - spec->personal;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++) {
            double dev = k < shared ? 0.0 : spec->s * gsl_ran_gaussian_ziggurat(r, 1.0);
            out->theta[i * d + k] = theta0[k] + dev;
        }
    dp_free(theta0);
    gsl_rng_free(r);
    return DP_OK;
}

void fl_additive_free(fl_additive *a)
{
    if (a == NULL)
        return;
    dp_free(a->theta);
    dp_free(a->scale);
    memset(a, 0, sizeof *a);
}

int fl_additive_federation(const fl_additive *a, fl_federation *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t n = a->spec.users, d = a->spec.dim, m = a->spec.rows;
    out->d = d;
    out->n_silos = n;
    out->silo = dp_calloc(n, sizeof *out->silo);
    if (out->silo == NULL) {
        out->n_silos = 0;
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        fl_silo_data *s = &out->silo[i];
        char name[24];
        snprintf(name, sizeof name, "%zu", i);
        s->n_train = m;
        s->x_train = dp_calloc(m * d, sizeof(float));
        s->y_train = dp_calloc(m, sizeof(float));
        s->name = dp_strdup(name);
        if (s->x_train == NULL || s->y_train == NULL || s->name == NULL) {
            fl_federation_free(out);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
    }
    return DP_OK;
}

int fl_additive_draw(const fl_additive *a, uint64_t round, fl_federation *f, dp_err *err)
{
    size_t n = a->spec.users, d = a->spec.dim, m = a->spec.rows;
    uint64_t base = dp_rng_derive(dp_rng_derive(a->spec.seed, FL_SEED_ADDITIVE), round + 1);
    const float *scale = a->scale;
    for (size_t i = 0; i < n; i++) {
        fl_silo_data *s = &f->silo[i];
        uint64_t seed = dp_rng_derive(base, (uint64_t)i);
        /* m x d standard normals, then column k scaled by 1/sqrt(k + 1); then m label noises */
        fl_gauss_fill(s->x_train, m * d, 1.0, seed);
        fl_gauss_fill(s->y_train, m, a->spec.label_noise, dp_rng_derive(seed, 1));
        const double *th = a->theta + i * d;
        for (size_t r = 0; r < m; r++) {
            float *x = s->x_train + r * d;
            for (size_t k = 0; k < d; k++)
                x[k] *= scale[k];
            /* theta_i*.x in double, four partial sums (k mod 4) added in order */
            double p[4] = {0, 0, 0, 0};
            size_t k = 0;
            for (; k + 4 <= d; k += 4)
                for (size_t l = 0; l < 4; l++)
                    p[l] += th[k + l] * (double)x[k + l];
            for (; k < d; k++)
                p[k % 4] += th[k] * (double)x[k];
            s->y_train[r] = (float)((double)s->y_train[r] + ((p[0] + p[1]) + (p[2] + p[3])));
        }
    }
    return fl_federation_refresh(f, err);
}

double fl_additive_excess_risk(const fl_additive *a, const float *personal)
{
    size_t n = a->spec.users, d = a->spec.dim;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float *u = personal + i * (d + 1);
        const double *th = a->theta + i * d;
        double r = 0.0;
        for (size_t k = 0; k < d; k++) {
            double e = (double)u[k] - th[k];
            r += e * e / (double)(k + 1);
        }
        double b = (double)u[d];
        total += r + b * b;
    }
    return total / (double)n;
}
