/*
 * api/calculators.c: the papers' closed forms for the best hyperparameters of a federated job, so
 * that a user can plan before spending any budget (issue #13; docs/TRAINING.md "Planning
 * calculators"). Stateless and open like the accounting calculators: no token, no database.
 *
 *   POST /v1/calculators/mrmtl   MR-MTL's lambda* and the errors of local / FedAvg / MR-MTL in the
 *                                mean-estimation model of Liu et al., NeurIPS 2022, §6 and App. E.5
 *   POST /v1/calculators/fedhdp  FedHDP's server weights r* and Ditto weights lambda* per privacy
 *                                group (Aldaghri et al., App. A, Lemmas 1-3, Eqs. 28-29, 41, 47,
 * 61-64) POST /v1/calculators/ppsgd   PPSGD's threshold n* (Bietti et al., ICML 2022, Lemma 4.6,
 * Eq. 10) and the bound of Theorem 4.5 (Eq. 7) minimised over alpha
 *
 * The arithmetic is federated/fl_theory.c; this file is parse (JSON -> C, every bad field named)
 * and render (C -> JSON; infinite values, such as lambda* = inf for "use the global model", go out
 * as null with a word saying what they mean).
 */
#include "service/api/routes.h"

#include <math.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "federated/fl_theory.h"
#include "service/codec/json_util.h"

#define CALC_MAX_SILOS  10000
#define CALC_MAX_GROUPS 64

static int set_real(json_t *o, const char *key, double x, dp_err *err)
{
    return json_util_set(o, key, json_util_real(x), err);
}

/* The privacy noise of one silo: sigma_dp, or noise_multiplier and clip (sigma_dp = their product,
 * the std of the Gaussian noise on the silo's sum), or none of them (0: no privacy). */
static int parse_sigma_dp(const json_t *o, double *sigma_dp, dp_err *err)
{
    double s, z, c;
    int rc;
    if ((rc = json_util_opt_number(o, "sigma_dp", DP_NAN, &s, err)) != DP_OK ||
        (rc = json_util_opt_number(o, "noise_multiplier", DP_NAN, &z, err)) != DP_OK ||
        (rc = json_util_opt_number(o, "clip", DP_NAN, &c, err)) != DP_OK)
        return rc;
    if (!isnan(s)) {
        if (!isnan(z) || !isnan(c))
            return dp_err_set(err, DP_EINVAL, "sigma_dp",
                              "give sigma_dp, or noise_multiplier and clip, not both");
        *sigma_dp = s;
        return DP_OK;
    }
    if (isnan(z) != isnan(c))
        return dp_err_set(err, DP_EINVAL, isnan(z) ? "noise_multiplier" : "clip",
                          "noise_multiplier and clip go together (sigma_dp = clip * "
                          "noise_multiplier)");
    if (isnan(z)) {
        *sigma_dp = 0.0;
        return DP_OK;
    }
    if (!(z >= 0.0) || !isfinite(z))
        return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                          "noise_multiplier must be finite and >= 0 (got %g)", z);
    if (!(c > 0.0) || !isfinite(c))
        return dp_err_set(err, DP_EINVAL, "clip", "clip must be finite and > 0 (got %g)", c);
    *sigma_dp = z * c;
    return DP_OK;
}

/* ---- POST /v1/calculators/mrmtl ---- */

static const char MRMTL_REF[] = "Liu, Zhao, Smith & Chen, On Privacy and Personalization in "
                                "Cross-Silo Federated Learning, NeurIPS 2022, Sec. 6 and App. E";

static json_t *mse_obj(double local, double fedavg, double star)
{
    json_t *o = json_object();
    if (o == NULL || json_util_set(o, "local", json_util_real(local), NULL) != DP_OK ||
        json_util_set(o, "fedavg", json_util_real(fedavg), NULL) != DP_OK ||
        json_util_set(o, "mrmtl_star", json_util_real(star), NULL) != DP_OK) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *mrmtl_best(double lambda_star)
{
    return isinf(lambda_star) ? "fedavg" : lambda_star == 0.0 ? "local" : "mrmtl";
}

static int mrmtl_same(const json_t *body, int64_t k, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {
        "silos", "n", "sigma", "tau", "sigma_dp", "noise_multiplier", "clip", "lambda"};
    fl_mrmtl_in in = {.silos = k > 0 ? (size_t)k : 0};
    int rc;
    if ((rc = json_util_check_keys(body, keys, 8, err)) != DP_OK ||
        (rc = json_util_req_number(body, "n", &in.n, err)) != DP_OK ||
        (rc = json_util_req_number(body, "sigma", &in.sigma, err)) != DP_OK ||
        (rc = json_util_req_number(body, "tau", &in.tau, err)) != DP_OK ||
        (rc = parse_sigma_dp(body, &in.sigma_dp, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "lambda", DP_NAN, &in.lambda, err)) != DP_OK)
        return rc;
    if (k < 2 || k > CALC_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "silos", "silos must be in [2, %d] (got %lld)",
                          CALC_MAX_SILOS, (long long)k);
    fl_mrmtl_out o;
    if ((rc = fl_mrmtl_theory(&in, &o, err)) != DP_OK)
        return rc;
    json_t *r = json_object();
    if (r == NULL || (rc = json_util_set(r, "model", json_string("mean_estimation"), err)) ||
        (rc = json_util_set(r, "silos", json_integer(k), err)) ||
        (rc = set_real(r, "sigma_dp", in.sigma_dp, err)) ||
        (rc = set_real(r, "sigma_loc2", o.sigma_loc2, err)) ||
        (rc = set_real(r, "lambda_star", o.lambda_star, err)) ||
        (rc = json_util_set(r, "best", json_string(mrmtl_best(o.lambda_star)), err)) ||
        (rc = json_util_set(r, "mse", mse_obj(o.mse_local, o.mse_fedavg, o.mse_star), err)) ||
        (rc = json_util_set(r, "gain",
                            json_pack("{s:o, s:o}", "vs_local", json_util_real(o.gain_local),
                                      "vs_fedavg", json_util_real(o.gain_fedavg)),
                            err)) ||
        (rc = json_util_set(r, "reference", json_string(MRMTL_REF), err))) {
        json_decref(r);
        return r == NULL ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : rc;
    }
    if (!isnan(in.lambda) &&
        (rc = json_util_set(r, "at_lambda",
                            json_pack("{s:o, s:o, s:o, s:o}", "lambda", json_util_real(in.lambda),
                                      "mse", json_util_real(o.mse_lambda), "privacy_gap",
                                      json_util_real(o.privacy_gap), "own_weight",
                                      json_util_real(o.alpha_lambda)),
                            err)) != DP_OK) {
        json_decref(r);
        return rc;
    }
    return http_resp_json(rs, 200, r, err);
}

static int mrmtl_differ(const json_t *body, const json_t *arr, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"silos", "tau"};
    static const char *const silo_keys[] = {"n", "sigma", "sigma_dp", "noise_multiplier", "clip"};
    double tau;
    int rc;
    if ((rc = json_util_check_keys(body, keys, 2, err)) != DP_OK ||
        (rc = json_util_req_number(body, "tau", &tau, err)) != DP_OK)
        return rc;
    size_t k = json_array_size(arr);
    if (k < 2 || k > CALC_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "silos", "silos must list 2 to %d silos (got %zu)",
                          CALC_MAX_SILOS, k);
    fl_mrmtl_silo *s = dp_calloc(k, sizeof *s);
    fl_mrmtl_silo_out *o = dp_calloc(k, sizeof *o);
    json_t *r = NULL, *list = NULL;
    if (s == NULL || o == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < k; i++) {
        const json_t *e = json_array_get(arr, i);
        if ((rc = json_util_require_object(e, "silos", err)) != DP_OK ||
            (rc = json_util_check_keys(e, silo_keys, 5, err)) != DP_OK ||
            (rc = json_util_req_number(e, "n", &s[i].n, err)) != DP_OK ||
            (rc = json_util_req_number(e, "sigma", &s[i].sigma, err)) != DP_OK ||
            (rc = parse_sigma_dp(e, &s[i].sigma_dp, err)) != DP_OK) {
            rc = dp_err_prefix_index(err, "silos", i, rc);
            goto done;
        }
    }
    if ((rc = fl_mrmtl_theory_silos(s, k, tau, o, err)) != DP_OK)
        goto done;
    if ((r = json_object()) == NULL || (list = json_array()) == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_pack(
            "{s:I, s:o, s:o, s:o, s:s, s:o}", "index", (json_int_t)i, "sigma_dp",
            json_util_real(s[i].sigma_dp), "sigma_loc2", json_util_real(o[i].sigma_loc2),
            "lambda_star", json_util_real(o[i].lambda_star), "best", mrmtl_best(o[i].lambda_star),
            "mse", mse_obj(o[i].mse_local, o[i].mse_fedavg, o[i].mse_star));
        if (e == NULL || json_array_append_new(list, e) != 0) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            goto done;
        }
    }
    rc = json_util_set(r, "silos", list, err);
    list = NULL; /* stolen, also on failure */
    if (rc != DP_OK || (rc = json_util_set(r, "model", json_string("mean_estimation"), err)) ||
        (rc = set_real(r, "tau", tau, err)) ||
        (rc = json_util_set(r, "reference", json_string(MRMTL_REF), err)))
        goto done;
    rc = http_resp_json(rs, 200, r, err);
    r = NULL, list = NULL;
done:
    json_decref(list);
    json_decref(r);
    free(s);
    free(o);
    return rc;
}

int route_calculators_mrmtl(const http_req *rq, http_resp *rs, dp_err *err)
{
    int rc = json_util_require_object(rq->body, NULL, err);
    if (rc != DP_OK)
        return rc;
    const json_t *silos = json_object_get(rq->body, "silos");
    if (json_is_array(silos))
        return mrmtl_differ(rq->body, silos, rs, err);
    if (silos == NULL)
        return dp_err_set(err, DP_EINVAL, "silos",
                          "silos is required: a count of identical silos, or a list of silos");
    if (!json_is_integer(silos))
        return dp_err_set(err, DP_EINVAL, "silos",
                          "silos must be an integer (identical silos) or a list of silos (got %s)",
                          json_util_type_name(silos));
    return mrmtl_same(rq->body, (int64_t)json_integer_value(silos), rs, err);
}

/* ---- POST /v1/calculators/fedhdp ---- */

static const char FEDHDP_REF[] = "Aldaghri, Mahdavifar & Beirami, Federated Learning with "
                                 "Heterogeneous Differential Privacy, App. A";

/* Reads the optional per-group array `key` (n numbers) into out; *given says whether it was there.
 */
static int group_array(const json_t *body, const char *key, size_t n, double *out, bool *given,
                       dp_err *err)
{
    const json_t *a = json_object_get(body, key);
    *given = a != NULL;
    if (a == NULL)
        return DP_OK;
    if (!json_is_array(a) || json_array_size(a) != n)
        return dp_err_set(err, DP_EINVAL, key, "%s must be a list of %zu numbers, one per group",
                          key, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0.0)
            return dp_err_set(err, DP_EINVAL, key, "%s[%zu] must be a finite number >= 0", key, i);
        out[i] = json_number_value(v);
    }
    return DP_OK;
}

int route_calculators_fedhdp(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"groups", "alpha2", "tau2", "r", "lambda"};
    static const char *const gkeys[] = {"name", "clients", "per_client_noise", "gamma2"};
    const json_t *body = rq->body;
    double alpha2, tau2;
    int rc;
    if ((rc = json_util_require_object(body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(body, keys, 5, err)) != DP_OK ||
        (rc = json_util_req_number(body, "alpha2", &alpha2, err)) != DP_OK ||
        (rc = json_util_req_number(body, "tau2", &tau2, err)) != DP_OK)
        return rc;
    const json_t *ga = json_object_get(body, "groups");
    if (!json_is_array(ga) || json_array_size(ga) < 1 || json_array_size(ga) > CALC_MAX_GROUPS)
        return dp_err_set(err, DP_EINVAL, "groups", "groups must be a list of 1 to %d groups",
                          CALC_MAX_GROUPS);
    size_t n = json_array_size(ga);
    fl_hdp_group g[CALC_MAX_GROUPS];
    const char *names[CALC_MAX_GROUPS];
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(ga, i);
        int64_t clients;
        double L, g2;
        if ((rc = json_util_require_object(e, "groups", err)) != DP_OK ||
            (rc = json_util_check_keys(e, gkeys, 4, err)) != DP_OK ||
            (rc = json_util_opt_string(e, "name", NULL, &names[i], err)) != DP_OK ||
            (rc = json_util_req_int(e, "clients", &clients, err)) != DP_OK ||
            (rc = json_util_opt_number(e, "per_client_noise", DP_NAN, &L, err)) != DP_OK ||
            (rc = json_util_opt_number(e, "gamma2", DP_NAN, &g2, err)) != DP_OK)
            return dp_err_prefix_index(err, "groups", i, rc);
        if (isnan(L) == isnan(g2))
            return dp_err_prefix_index(
                err, "groups", i,
                dp_err_set(err, DP_EINVAL, "per_client_noise",
                           "give per_client_noise (the variance each client adds) "
                           "or gamma2 (the variance of the group mean's noise: "
                           "per_client_noise = clients * gamma2), exactly one"));
        if (!isnan(g2) && !(g2 >= 0.0 && isfinite(g2)))
            return dp_err_prefix_index(err, "groups", i,
                                       dp_err_set(err, DP_EINVAL, "gamma2",
                                                  "gamma2 must be finite and >= 0 (got %g)", g2));
        if (clients < 1 || clients > 1000000000000LL)
            return dp_err_prefix_index(err, "groups", i,
                                       dp_err_set(err, DP_EINVAL, "clients",
                                                  "clients must be in [1, 1e12] (got %lld)",
                                                  (long long)clients));
        g[i] = (fl_hdp_group){(double)clients, isnan(L) ? (double)clients * g2 : L};
    }
    double r[CALC_MAX_GROUPS], lam[CALC_MAX_GROUPS];
    bool have_r, have_l;
    if ((rc = group_array(body, "r", n, r, &have_r, err)) != DP_OK ||
        (rc = group_array(body, "lambda", n, lam, &have_l, err)) != DP_OK)
        return rc;
    fl_hdp_out o;
    fl_hdp_group_out og[CALC_MAX_GROUPS];
    if ((rc = fl_hdp_theory(g, n, alpha2, tau2, &o, og, err)) != DP_OK)
        return rc;
    if (!have_r)
        for (size_t i = 0; i < n; i++)
            r[i] = og[i].r_star;
    double var_r = DP_NAN;
    if (have_r && (rc = fl_hdp_server_var(g, n, alpha2, tau2, r, &var_r, err)) != DP_OK)
        return rc;
    json_t *res = json_object(), *list = json_array();
    if (res == NULL || list == NULL) {
        json_decref(res);
        json_decref(list);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n && rc == DP_OK; i++) {
        const fl_hdp_group_out *x = &og[i];
        json_t *e =
            json_pack("{s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "name",
                      names[i] != NULL ? json_string(names[i]) : json_null(), "clients",
                      (json_int_t)g[i].clients, "per_client_noise", json_util_real(g[i].noise),
                      "sigma_p2", json_util_real(x->sigma_p2), "r_star", json_util_real(x->r_star),
                      "weight_star", json_util_real(x->weight_star), "lambda_star",
                      json_util_real(x->lambda_star), "bayes_mse", json_util_real(x->bayes_mse),
                      "mse_at_star_with_own_noise", json_util_real(x->mse_own_noise),
                      "lambda_best_with_own_noise", json_util_real(x->lambda_best_own),
                      "mse_best_with_own_noise", json_util_real(x->mse_best_own));
        if (e == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if (rc == DP_OK && have_l) {
            double m_own, m_no;
            if ((rc = fl_hdp_client_mse(g, n, alpha2, tau2, r, i, lam[i], true, &m_own, err)) ==
                    DP_OK &&
                (rc = fl_hdp_client_mse(g, n, alpha2, tau2, r, i, lam[i], false, &m_no, err)) ==
                    DP_OK)
                rc = json_util_set(e, "at",
                                   json_pack("{s:o, s:o, s:o, s:o}", "r", json_util_real(r[i]),
                                             "lambda", json_util_real(lam[i]), "mse",
                                             json_util_real(m_own), "mse_without_own_noise",
                                             json_util_real(m_no)),
                                   err);
        }
        if (e != NULL && json_array_append_new(list, e) != 0 && rc == DP_OK)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc != DP_OK) {
        json_decref(res);
        json_decref(list);
        return rc;
    }
    if ((rc = json_util_set(res, "groups", list, err)) ||
        (rc = json_util_set(
             res, "server_variance",
             json_pack("{s:o, s:o, s:o}", "optimal", json_util_real(o.server_var_star), "uniform",
                       json_util_real(o.server_var_uniform), "at_r", json_util_real(var_r)),
             err)) ||
        (rc = set_real(res, "alpha2", alpha2, err)) || (rc = set_real(res, "tau2", tau2, err)) ||
        (rc = json_util_set(res, "reference", json_string(FEDHDP_REF), err))) {
        json_decref(res);
        return rc;
    }
    return http_resp_json(rs, 200, res, err);
}

/* ---- POST /v1/calculators/ppsgd ---- */

static const char PPSGD_REF[] = "Bietti, Wei, Dudik, Langford & Wu, Personalization Improves "
                                "Privacy-Accuracy Tradeoffs in Federated Learning, ICML 2022, "
                                "Sec. 4";

int route_calculators_ppsgd(const http_req *rq, http_resp *rs, dp_err *err)
{
    static const char *const keys[] = {"users",      "sigma", "epsilon", "delta",      "dim_w",
                                       "grad_bound", "c",     "n",       "smoothness", "v_norm2"};
    const json_t *body = rq->body;
    fl_ppsgd_in in;
    int rc;
    if ((rc = json_util_require_object(body, NULL, err)) != DP_OK ||
        (rc = json_util_check_keys(body, keys, 10, err)) != DP_OK ||
        (rc = json_util_req_number(body, "users", &in.users, err)) != DP_OK ||
        (rc = json_util_req_number(body, "sigma", &in.sigma, err)) != DP_OK ||
        (rc = json_util_req_number(body, "epsilon", &in.epsilon, err)) != DP_OK ||
        (rc = json_util_req_number(body, "delta", &in.delta, err)) != DP_OK ||
        (rc = json_util_req_number(body, "dim_w", &in.dim_w, err)) != DP_OK ||
        (rc = json_util_req_number(body, "grad_bound", &in.grad, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "c", 1.0, &in.c, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "n", DP_NAN, &in.n, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "smoothness", DP_NAN, &in.smooth, err)) != DP_OK ||
        (rc = json_util_opt_number(body, "v_norm2", DP_NAN, &in.v_norm2, err)) != DP_OK)
        return rc;
    fl_ppsgd_out o;
    if ((rc = fl_ppsgd_theory(&in, &o, err)) != DP_OK)
        return rc;
    json_t *r = json_object();
    if (r == NULL || (rc = set_real(r, "n_star", o.n_star, err)) ||
        (rc = json_util_set(r, "reference", json_string(PPSGD_REF), err))) {
        json_decref(r);
        return r == NULL ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : rc;
    }
    if (!isnan(in.n)) {
        const char *fav = in.n >= o.n_star ? "local" : "global";
        const char *best = o.alpha_best == 0.0   ? "local"
                           : isinf(o.alpha_best) ? "global"
                                                 : "personalized";
        if ((rc = json_util_set(r, "variance_favours", json_string(fav), err)) ||
            (rc = json_util_set(r, "bound",
                                json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "sigma_zeta",
                                          json_util_real(o.sigma_zeta), "alpha_0",
                                          json_util_real(o.bound_local), "alpha_1_over_users",
                                          json_util_real(o.bound_1n), "alpha_inf",
                                          json_util_real(o.bound_global), "alpha_best",
                                          json_util_real(o.alpha_best), "at_alpha_best",
                                          json_util_real(o.bound_best), "best", best),
                                err))) {
            json_decref(r);
            return rc;
        }
    }
    return http_resp_json(rs, 200, r, err);
}
