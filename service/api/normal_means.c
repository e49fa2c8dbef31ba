/*
 * api/normal_means.c: POST /v1/estimators/normal-means, empirical Bayes normal means with the
 * interface of R's ebnm(x, s, prior_family) (issue #15; estimators/eb_nm.h for the model, the
 * families and the fit).
 *
 * Request: {"x": [...], "s": [...] or a number, "prior_family": "normal" | "point_normal" |
 * "point_laplace" | "normal_scale_mixture" | "npmle", "mode": number | "estimate" (default 0, as
 * ebnm), "scale": number | "estimate" (default "estimate"; a number for normal, point_normal and
 * point_laplace), "grid":
 * [...] (the mixture families' sds or atoms), "grid_size" (npmle), "grid_mult" (scale mixture),
 * "draws" (posterior draws per observation, default 0), "seed", "max_iter", "tol", "results":
 * "full" (default) | "summary" (the fit alone: no posterior pass, no rows)}. Unknown keys,
 * lengths that differ, s <= 0 and bad options are 400 naming the field.
 *
 * Answer (201, stored as a run like the other estimators through api/estimators_run.h): the fitted
 * prior ("prior": family, mode, scale, pi0, components of weight/mean/sd), the per-observation
 * posterior ("estimates": mean, sd, second_moment, lfsr, draws), log_likelihood, iterations
 * (mixsqp's), evaluations (profile points), status. The stored params leave out x and s.
 *
 * Caps: observations x (4 + draws) result values against --max-estimator-cells (413), observations
 * x grid points x profile points against --max-estimator-work (400), the library's own limits
 * (EB_NM_MAX_CELLS likelihoods in memory). Memory: x and s arrive read from the body text into
 * doubles when they are plain arrays of numbers (the dispatcher's clients_json_load_numbers: no
 * jansson tree for a million of them, issue 15) and are used in place; else the tree's arrays are
 * copied into C arrays, freed at the end. The values and the errors are the same either way.
 * Thread-safety: runs on one compute thread per request (est_start).
 */
#include "service/api/routes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "estimators/eb_nm.h"
#include "service/api/estimators_run.h"
#include "service/codec/clients_json.h"
#include "service/codec/json_util.h"

#define NM_DEFAULT_SEED 1 /* as the other estimators' "seed" */

typedef struct nm_req {
    size_t n;
    double *x, *s, *grid;  /* owned (x, s: NULL when read from the body text) */
    const double *xv, *sv; /* the values: x and s, or the arrays read from the body text
                              (service/codec/clients_json.h), borrowed for the job's life */
    eb_nm_opts o;
    size_t draws;
    uint64_t seed;
} nm_req;

static void nm_req_free(nm_req *r)
{
    dp_free(r->x);
    dp_free(r->s);
    dp_free(r->grid);
}

/* An array of numbers into a new C array (*out owned by caller). */
static int parse_numbers(const json_t *a, const char *field, size_t *n, double **out, dp_err *err)
{
    if (!json_is_array(a))
        return dp_err_set(err, DP_EINVAL, field, "%s must be an array of numbers (got %s)", field,
                          json_util_type_name(a));
    *n = json_array_size(a);
    if (*n < 1 || *n > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, field, "%s must hold 1..%d numbers (got %zu)", field,
                          EB_MAX_CLIENTS, *n);
    *out = dp_calloc(*n, sizeof **out);
    if (*out == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < *n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) {
            char f[48];
            snprintf(f, sizeof f, "%s[%zu]", field, i);
            return dp_err_set(err, DP_EINVAL, f, "%s must be a number (got %s)", f,
                              json_util_type_name(v));
        }
        (*out)[i] = json_number_value(v);
    }
    return DP_OK;
}

/* The numbers of field: read from the body text when the dispatcher read them so (the tree then
 * holds []; *view borrows them, checked as parse_numbers checks the same values from a tree), else
 * from the tree into *own (*view = *own). */
static int get_numbers(const json_t *body, const clients_json *cj, const char *field, size_t *n,
                       double **own, const double **view, dp_err *err)
{
    const double *v = clients_json_numbers(cj, field, n);
    if (v == NULL) {
        int rc = parse_numbers(json_object_get(body, field), field, n, own, err);
        *view = *own;
        return rc;
    }
    if (*n < 1 || *n > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, field, "%s must hold 1..%d numbers (got %zu)", field,
                          EB_MAX_CLIENTS, *n);
    *view = v;
    return DP_OK;
}

/* "key": number or "estimate"; absent: *fixed = def_fixed, *v = def. */
static int parse_fixed_or_estimate(const json_t *body, const char *key, bool def_fixed, double def,
                                   bool *fixed, double *v, dp_err *err)
{
    const json_t *j = json_object_get(body, key);
    *fixed = def_fixed;
    *v = def;
    if (j == NULL)
        return DP_OK;
    if (json_is_number(j)) {
        *fixed = true;
        *v = json_number_value(j);
        return DP_OK;
    }
    if (json_is_string(j) && strcmp(json_string_value(j), "estimate") == 0) {
        *fixed = false;
        return DP_OK;
    }
    return dp_err_set(err, DP_EINVAL, key, "%s must be a number or \"estimate\"", key);
}

static int nm_parse(const json_t *body, const clients_json *cj, nm_req *r, dp_err *err)
{
    static const char *const keys[] = {
        "x",         "s",     "prior_family", "mode",     "scale", "grid",    "grid_size",
        "grid_mult", "draws", "seed",         "max_iter", "tol",   "results", "keep_results"};
    const char *fam = NULL;
    int64_t v;
    if (json_util_check_keys(body, keys, sizeof keys / sizeof keys[0], err) != DP_OK ||
        json_util_req_string(body, "prior_family", &fam, err) != DP_OK)
        return err->code;
    int f = eb_nm_family_parse(fam);
    if (f < 0)
        return dp_err_set(err, DP_EINVAL, "prior_family",
                          "prior_family must be normal, point_normal, point_laplace, "
                          "normal_scale_mixture or npmle (got \"%s\")",
                          fam);
    r->o = eb_nm_opts_default((eb_nm_family)f);
    if (get_numbers(body, cj, "x", &r->n, &r->x, &r->xv, err) != DP_OK)
        return err->code;
    const json_t *js = json_object_get(body, "s");
    if (json_is_number(js)) { /* one standard error for all, as ebnm's scalar s */
        r->s = dp_calloc(r->n, sizeof *r->s);
        if (r->s == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        for (size_t j = 0; j < r->n; j++)
            r->s[j] = json_number_value(js);
        r->sv = r->s;
    } else {
        size_t ns = 0;
        if (get_numbers(body, cj, "s", &ns, &r->s, &r->sv, err) != DP_OK)
            return err->code;
        if (ns != r->n)
            return dp_err_set(err, DP_EINVAL, "s",
                              "s must have one standard error per observation (x has %zu, s %zu)",
                              r->n, ns);
    }
    if (parse_fixed_or_estimate(body, "mode", true, 0.0, &r->o.mode_fixed, &r->o.mode, err) !=
            DP_OK ||
        parse_fixed_or_estimate(body, "scale", false, DP_NAN, &r->o.scale_fixed, &r->o.scale,
                                err) != DP_OK)
        return err->code;
    const json_t *jg = json_object_get(body, "grid");
    if (jg != NULL) {
        if (parse_numbers(jg, "grid", &r->o.n_grid, &r->grid, err) != DP_OK)
            return err->code;
        r->o.grid = r->grid;
    }
    if (json_util_opt_int(body, "grid_size", 0, &v, err) != DP_OK)
        return err->code;
    if (json_object_get(body, "grid_size") != NULL && (v < 1 || v > EB_NM_MAX_GRID))
        return dp_err_set(err, DP_EINVAL, "grid_size", "grid_size must be in 1..%d (got %lld)",
                          EB_NM_MAX_GRID, (long long)v);
    r->o.grid_size = (size_t)v;
    if (json_util_opt_number(body, "grid_mult", 0.0, &r->o.grid_mult, err) != DP_OK)
        return err->code;
    if (json_object_get(body, "grid_mult") != NULL && !(r->o.grid_mult > 1.0))
        return dp_err_set(err, DP_EINVAL, "grid_mult", "grid_mult must be > 1 (got %g)",
                          r->o.grid_mult);
    if (json_util_opt_int(body, "draws", 0, &v, err) != DP_OK)
        return err->code;
    if (v < 0 || v > EB_NM_MAX_DRAWS_PER_OBS)
        return dp_err_set(err, DP_EINVAL, "draws", "draws must be in 0..%d (got %lld)",
                          EB_NM_MAX_DRAWS_PER_OBS, (long long)v);
    r->draws = (size_t)v;
    if (json_util_opt_int(body, "seed", NM_DEFAULT_SEED, &v, err) != DP_OK)
        return err->code;
    if (v < 0)
        return dp_err_set(err, DP_EINVAL, "seed", "seed must be >= 0 (got %lld)", (long long)v);
    r->seed = (uint64_t)v;
    if (json_util_opt_int(body, "max_iter", r->o.max_iter, &v, err) != DP_OK)
        return err->code;
    if (v < 1 || v > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in 1..%d (got %lld)",
                          EB_MAX_ITER_CAP, (long long)v);
    r->o.max_iter = (unsigned)v;
    if (json_util_opt_number(body, "tol", r->o.tol, &r->o.tol, err) != DP_OK)
        return err->code;
    eb_nm_data d = {r->n, r->xv, r->sv};
    if (eb_nm_data_check(&d, err) != DP_OK || eb_nm_opts_check(&r->o, err) != DP_OK)
        return err->code;
    return DP_OK;
}

/* The caps of the daemon (est_check_work's, in the terms of this estimator). */
static int nm_check_caps(const est_job *job, const nm_req *r, dp_err *err)
{
    const cfg *c = est_job_cfg(job);
    double cap_work = c ? c->max_estimator_work : CFG_DEFAULT_MAX_EST_WORK;
    double cap_cells = c ? c->max_estimator_cells : CFG_DEFAULT_MAX_EST_CELLS;
    double n = (double)r->n, cells = n * (4.0 + (double)r->draws);
    if (cells > cap_cells)
        return dp_err_set(err, DP_ETOOBIG, r->draws ? "draws" : "x",
                          "the result would hold observations x (4 + draws) = %.0f x %zu = %.3g "
                          "values, above --max-estimator-cells %.3g; split the observations or "
                          "ask for fewer draws",
                          n, 4 + r->draws, cells, cap_cells);
    /* grid points: the default scale grid is about log2(range/min s) / log2(mult) + 2 */
    double k = r->o.grid
                   ? (double)r->o.n_grid
                   : (r->o.family == EB_NM_NPMLE
                          ? (double)(r->o.grid_size ? r->o.grid_size : EB_NM_NPMLE_DEFAULT_GRID)
                          : (r->o.family == EB_NM_SCALE_MIXTURE ? 64.0 : 2.0));
    /* profile points: one per parameter profiled, about EB_NM_SCAN + 40 golden-section steps */
    double per = EB_NM_SCAN + 40.0, points = 1.0;
    if (!r->o.mode_fixed && r->o.family != EB_NM_NPMLE)
        points *= per;
    if (!r->o.scale_fixed &&
        (r->o.family == EB_NM_POINT_NORMAL || r->o.family == EB_NM_POINT_LAPLACE))
        points *= per;
    double work = n * k * points;
    if (work > cap_work)
        return dp_err_set(err, DP_EINVAL, "mode",
                          "work of %.3g (observations x grid points x profile points = %.0f x "
                          "%.0f x %.0f) is above --max-estimator-work %.3g; fix the mode or the "
                          "scale, or split the observations",
                          work, n, k, points, cap_work);
    return DP_OK;
}

/* The fit's status in words (the answer's status_reason, docs/ESTIMATORS.md's status table);
 * NULL when converged. */
static const char *status_reason(const eb_nm_fit *f)
{
    switch (f->status) {
        case EB_STATUS_CONVERGED:
            return NULL;
        case EB_STATUS_MAX_ITER:
            return "the mixture-weight solver stopped at its iteration cap before meeting its "
                   "tolerance: the prior is its best so far";
        case EB_STATUS_BOUNDARY:
            return f->family == EB_NM_NORMAL
                       ? "the prior's scale is 0: every observation is shrunk all the way to the "
                         "mode (full pooling)"
                       : "the prior's weight on the point mass is at 0 or 1: the fit is on the "
                         "edge of its family";
        default:
            return "the fit is not a converged interior optimum: see status";
    }
}

static json_t *prior_json(const eb_nm_fit *f)
{
    json_t *comps = json_array();
    for (size_t c = 0; comps != NULL && c < f->k; c++) {
        json_t *o = json_pack("{s:o, s:o, s:o}", "weight", json_util_real(f->w[c]), "mean",
                              json_util_real(f->mean[c]), "sd", json_util_real(f->sd[c]));
        if (o == NULL || json_array_append_new(comps, o) != 0) {
            json_decref(comps);
            return NULL;
        }
    }
    if (comps == NULL)
        return NULL;
    return json_pack("{s:s, s:o, s:o, s:o, s:o}", "family", eb_nm_family_name(f->family), "mode",
                     json_util_real(f->mode), "scale", json_util_real(f->scale), "pi0",
                     json_util_real(f->pi0), "components", comps);
}

static int nm_compute(est_job *job, dp_err *err)
{
    nm_req r;
    memset(&r, 0, sizeof r);
    eb_nm_fit fit;
    memset(&fit, 0, sizeof fit);
    double *pm = NULL, *psd = NULL, *p2 = NULL, *lf = NULL, *dr = NULL;
    int rc = nm_parse(est_job_body(job), est_job_arrays(job), &r, err);
    if (rc == DP_OK)
        rc = nm_check_caps(job, &r, err);
    eb_nm_data d = {r.n, r.xv, r.sv};
    r.o.cancel = est_job_cancel(job); /* the fit and the posterior stop at the compute deadline */
    if (rc == DP_OK)
        rc = eb_nm_fit_prior(&d, &r.o, &fit, err);
    bool rows = est_rows_wanted(job); /* "summary" and not kept: the fit alone, no posterior pass */
    if (rc == DP_OK && rows) {
        pm = dp_calloc(r.n, sizeof *pm);
        psd = dp_calloc(r.n, sizeof *psd);
        p2 = dp_calloc(r.n, sizeof *p2);
        lf = dp_calloc(r.n, sizeof *lf);
        dr = r.draws ? dp_calloc(r.n * r.draws, sizeof *dr) : NULL;
        if (!pm || !psd || !p2 || !lf || (r.draws && !dr))
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    eb_nm_post post = {pm, psd, p2, lf, r.draws, dr, r.seed, r.o.cancel};
    if (rc == DP_OK && rows)
        rc = eb_nm_posterior(&d, &fit, &post, err);
    if (rc == DP_OK && rows) { /* the rows, as columns (api/estimators_run.h) */
        static const char *const names[] = {"posterior_mean", "posterior_sd",
                                            "posterior_second_moment", "lfsr", "draws"};
        const size_t widths[] = {1, 1, 1, 1, r.draws};
        static const bool vec[] = {false, false, false, false, true};
        double *v = NULL;
        size_t w = 0;
        rc = est_rows_begin(job, names, widths, vec, r.draws > 0 ? 5 : 4, r.n, &v, &w, err);
        for (size_t j = 0; rc == DP_OK && j < r.n; j++, v += w) {
            v[0] = pm[j];
            v[1] = psd[j];
            v[2] = p2[j];
            v[3] = lf[j];
            if (r.draws > 0)
                memcpy(v + 4, dr + j * r.draws, r.draws * sizeof *dr);
        }
    }
    if (rc == DP_OK) {
        json_t *result =
            json_pack("{s:s, s:s, s:o, s:I, s:[], s:I}", "model", "normal_means", "prior_family",
                      eb_nm_family_name(fit.family), "prior", prior_json(&fit), "n_observations",
                      (json_int_t)r.n, "estimates", "evaluations", (json_int_t)fit.evaluations);
        if (result == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        else
            rc = est_finish(job, r.n, result, fit.loglik, fit.iterations, fit.status,
                            status_reason(&fit), err);
    }
    dp_free(pm);
    dp_free(psd);
    dp_free(p2);
    dp_free(lf);
    dp_free(dr);
    eb_nm_fit_free(&fit);
    nm_req_free(&r);
    return rc;
}

int route_estimators_normal_means(const http_req *rq, http_resp *rs, dp_err *err)
{
    return est_start(rq, rs, "normal-means", nm_compute, err);
}
