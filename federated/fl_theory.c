/*
 * federated/fl_theory.c: closed forms for planning (see fl_theory.h for the papers and equations).
 * Everything is in double; the formulas are written in the papers' notation so that each line can
 * be checked against its equation.
 */
#include "federated/fl_theory.h"

#include <math.h>

#include "common/dp_math.h"

#define HDP_MAX_GROUPS 64
#define LN10           2.302585092994045684

/* x must be finite and >= lo (or > lo when strict). */
static int check_num(double x, double lo, bool strict, const char *field, dp_err *err)
{
    if (!isfinite(x) || (strict ? !(x > lo) : !(x >= lo)))
        return dp_err_set(err, DP_EINVAL, field, "%s must be finite and %s %g (got %g)", field,
                          strict ? ">" : ">=", lo, x);
    return DP_OK;
}

/* ---- MR-MTL (Liu et al., NeurIPS 2022, §6, App. E) ---- */

int fl_mrmtl_theory(const fl_mrmtl_in *in, fl_mrmtl_out *out, dp_err *err)
{
    int rc;
    if (in->silos < 2)
        return dp_err_set(err, DP_EINVAL, "silos", "silos must be >= 2 (got %zu)", in->silos);
    if ((rc = check_num(in->n, 0.0, true, "n", err)) != DP_OK ||
        (rc = check_num(in->sigma, 0.0, false, "sigma", err)) != DP_OK ||
        (rc = check_num(in->tau, 0.0, false, "tau", err)) != DP_OK ||
        (rc = check_num(in->sigma_dp, 0.0, false, "sigma_dp", err)) != DP_OK)
        return rc;
    if (!isnan(in->lambda) && !(in->lambda >= 0.0))
        return dp_err_set(err, DP_EINVAL, "lambda", "lambda must be >= 0 (got %g)", in->lambda);
    double K = (double)in->silos, n = in->n, tau2 = in->tau * in->tau;
    double dp2 = in->sigma_dp * in->sigma_dp / (n * n);
    double s = in->sigma * in->sigma / n + dp2; /* Eq. 5 */
    if (!(s > 0.0) && !(tau2 > 0.0))
        return dp_err_set(err, DP_EINVAL, "sigma",
                          "sigma, sigma_dp and tau are all 0: every estimate is exact");
    *out = (fl_mrmtl_out){
        .sigma_loc2 = s, .mse_lambda = DP_NAN, .privacy_gap = DP_NAN, .alpha_lambda = DP_NAN};
    out->lambda_star = tau2 > 0.0 ? s / tau2 : DP_INF; /* Theorem 6.3 */
    out->mse_local = s;
    out->mse_fedavg = (s + (K - 1.0) * tau2) / K;
    out->mse_star = s * (s + K * tau2) / (K * (s + tau2));         /* Corollary 6.4 */
    out->gain_local = (1.0 - 1.0 / K) * s * s / (s + tau2);        /* Prop. 6.5 */
    out->gain_fedavg = (1.0 - 1.0 / K) * tau2 * tau2 / (s + tau2); /* Prop. 6.6 */
    if (!isnan(in->lambda)) {
        double l = in->lambda;
        if (isinf(l)) {
            out->mse_lambda = out->mse_fedavg;
            out->privacy_gap = dp2 / K;
            out->alpha_lambda = 1.0 / K;
        } else {
            double l1 = (l + 1.0) * (l + 1.0);
            out->mse_lambda = (1.0 - 1.0 / K) * (s + l * l * tau2) / l1 + s / K; /* Lemma 6.7 */
            out->privacy_gap = (1.0 - 1.0 / K) * dp2 / l1 + dp2 / K;             /* Theorem 6.8 */
            out->alpha_lambda = (K + l) / ((1.0 + l) * K);                       /* Lemma 6.1 */
        }
    }
    return DP_OK;
}

int fl_mrmtl_theory_silos(const fl_mrmtl_silo *silos, size_t k, double tau, fl_mrmtl_silo_out *out,
                          dp_err *err)
{
    int rc;
    if (k < 2)
        return dp_err_set(err, DP_EINVAL, "silos", "silos must list at least 2 silos (got %zu)", k);
    if ((rc = check_num(tau, 0.0, false, "tau", err)) != DP_OK)
        return rc;
    double sum = 0.0;
    for (size_t i = 0; i < k; i++) {
        const fl_mrmtl_silo *x = &silos[i];
        if ((rc = check_num(x->n, 0.0, true, "n", err)) != DP_OK ||
            (rc = check_num(x->sigma, 0.0, false, "sigma", err)) != DP_OK ||
            (rc = check_num(x->sigma_dp, 0.0, false, "sigma_dp", err)) != DP_OK)
            return dp_err_prefix_index(err, "silos", i, rc);
        double s =
            x->sigma * x->sigma / x->n + x->sigma_dp * x->sigma_dp / (x->n * x->n); /* Eq. 39 */
        out[i] = (fl_mrmtl_silo_out){.sigma_loc2 = s, .mse_local = s};
        sum += s;
    }
    double K = (double)k, tau2 = tau * tau;
    if (!(sum > 0.0) && !(tau2 > 0.0))
        return dp_err_set(err, DP_EINVAL, "tau",
                          "every silo's sigma and sigma_dp and tau are 0: every estimate is exact");
    for (size_t i = 0; i < k; i++) {
        double s = out[i].sigma_loc2, others = sum - s;
        /* The leave-one-out mean observes w_k with variance V (App. E.5). */
        double V = K * tau2 / (K - 1.0) + others / ((K - 1.0) * (K - 1.0));
        double a_fed = 1.0 / K;
        out[i].mse_fedavg = a_fed * a_fed * s + (1.0 - a_fed) * (1.0 - a_fed) * V;
        /* Theorem E.5; a denominator <= 0 (up to rounding) means the best weight on the silo's own
         * estimate is at most 1/K, which MR-MTL reaches only as lambda -> inf. */
        double den = tau2 + (others / (K - 1.0) - s) / K;
        if (!(den > 1e-12 * (tau2 + sum / K))) {
            out[i].lambda_star = DP_INF;
            out[i].mse_star = out[i].mse_fedavg;
        } else {
            out[i].lambda_star = s / den;
            out[i].mse_star = s * V / (s + V); /* Lemma E.4 */
        }
    }
    return DP_OK;
}

/* ---- FedHDP (Aldaghri et al., App. A) ---- */

static int hdp_check(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                     dp_err *err)
{
    int rc;
    if (n_groups < 1 || n_groups > HDP_MAX_GROUPS)
        return dp_err_set(err, DP_EINVAL, "groups", "groups must list 1 to %d groups (got %zu)",
                          HDP_MAX_GROUPS, n_groups);
    if ((rc = check_num(alpha2, 0.0, true, "alpha2", err)) != DP_OK ||
        (rc = check_num(tau2, 0.0, false, "tau2", err)) != DP_OK)
        return rc;
    double n = 0.0;
    for (size_t i = 0; i < n_groups; i++) {
        if (!(g[i].clients >= 1.0 && g[i].clients <= 1e12 && floor(g[i].clients) == g[i].clients))
            return dp_err_prefix_index(
                err, "groups", i,
                dp_err_set(err, DP_EINVAL, "clients",
                           "clients must be an integer in [1, 1e12] (got %g)", g[i].clients));
        if ((rc = check_num(g[i].noise, 0.0, false, "per_client_noise", err)) != DP_OK)
            return dp_err_prefix_index(err, "groups", i, rc);
        n += g[i].clients;
    }
    if (n < 2.0)
        return dp_err_set(err, DP_EINVAL, "groups", "the groups must hold at least 2 clients");
    return DP_OK;
}

/* r*_g = sigma_p1^2 / sigma_pg^2 with sigma_p1^2 the smallest (Eqs. 63-64). */
static void hdp_r_star(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                       double *r)
{
    double lo = DP_INF;
    for (size_t i = 0; i < n_groups; i++)
        lo = fmin(lo, alpha2 + tau2 + g[i].noise);
    for (size_t i = 0; i < n_groups; i++)
        r[i] = lo / (alpha2 + tau2 + g[i].noise);
}

int fl_hdp_server_var(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                      const double *r, double *var, dp_err *err)
{
    int rc = hdp_check(g, n_groups, alpha2, tau2, err);
    if (rc != DP_OK)
        return rc;
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n_groups; i++) {
        if (!isfinite(r[i]) || !(r[i] >= 0.0))
            return dp_err_set(err, DP_EINVAL, "r", "r[%zu] must be finite and >= 0 (got %g)", i,
                              r[i]);
        num += g[i].clients * r[i] * r[i] * (alpha2 + tau2 + g[i].noise);
        den += g[i].clients * r[i];
    }
    if (!(den > 0.0))
        return dp_err_set(err, DP_EINVAL, "r", "r must give some group a positive weight");
    *var = num / (den * den);
    return DP_OK;
}

/* The terms of a client of `group` in its exact error (fl_theory.h, fl_hdp_client_mse): its server
 * weight w_j and q = (1 - w_j)^2 tau^2 + [own] w_j^2 L_j + sum_{i != j} w_i^2 (tau^2 + alpha^2 +
 * L_i), with w = r / sum_g N_g r_g. */
static void hdp_client_terms(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                             const double *r, size_t group, bool own_noise, double *wj_out,
                             double *q_out)
{
    double S = 0.0;
    for (size_t i = 0; i < n_groups; i++)
        S += g[i].clients * r[i];
    double wj = r[group] / S, others = 0.0;
    for (size_t i = 0; i < n_groups; i++) {
        double wi = r[i] / S, m = g[i].clients - (i == group ? 1.0 : 0.0);
        others += m * wi * wi * (tau2 + alpha2 + g[i].noise);
    }
    double own = own_noise ? wj * wj * g[group].noise : 0.0;
    *wj_out = wj;
    *q_out = (1.0 - wj) * (1.0 - wj) * tau2 + own + others;
}

int fl_hdp_client_mse(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                      const double *r, size_t group, double lambda, bool own_noise, double *mse,
                      dp_err *err)
{
    double var;
    int rc = fl_hdp_server_var(g, n_groups, alpha2, tau2, r, &var, err);
    if (rc != DP_OK)
        return rc;
    if (group >= n_groups)
        return dp_err_set(err, DP_EINVAL, "group", "group must be < %zu (got %zu)", n_groups,
                          group);
    if (!(lambda >= 0.0))
        return dp_err_set(err, DP_EINVAL, "lambda", "lambda must be >= 0 (got %g)", lambda);
    double wj, q;
    hdp_client_terms(g, n_groups, alpha2, tau2, r, group, own_noise, &wj, &q);
    if (isinf(lambda)) { /* the global model: (w_j^2 alpha^2 + q) */
        *mse = wj * wj * alpha2 + q;
        return DP_OK;
    }
    double a = (1.0 + lambda * wj) * (1.0 + lambda * wj) * alpha2;
    *mse = (a + lambda * lambda * q) / ((1.0 + lambda) * (1.0 + lambda));
    return DP_OK;
}

/* The lambda that minimises fl_hdp_client_mse: the error is (a + b l + c l^2) / (1 + l)^2 with
 * a = alpha^2, b = 2 w_j alpha^2, c = w_j^2 alpha^2 + q, whose derivative vanishes at
 * l = (2a - b) / (2c - b) = alpha^2 (1 - w_j) / (c - w_j alpha^2); +inf when that is not positive
 * and finite (the error then falls all the way to the global model). */
static double hdp_lambda_best(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                              const double *r, size_t group, bool own_noise)
{
    double wj, q;
    hdp_client_terms(g, n_groups, alpha2, tau2, r, group, own_noise, &wj, &q);
    double den = wj * wj * alpha2 + q - wj * alpha2; /* c - w_j alpha^2 */
    double l = alpha2 * (1.0 - wj) / den;
    return den > 0.0 && isfinite(l) && l >= 0.0 ? l : DP_INF;
}

int fl_hdp_theory(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                  fl_hdp_out *out, fl_hdp_group_out *out_g, dp_err *err)
{
    int rc = hdp_check(g, n_groups, alpha2, tau2, err);
    if (rc != DP_OK)
        return rc;
    double rs[HDP_MAX_GROUPS], ones[HDP_MAX_GROUPS] = {0};
    hdp_r_star(g, n_groups, alpha2, tau2, rs);
    double S = 0.0, prec = 0.0;
    for (size_t i = 0; i < n_groups; i++) {
        S += g[i].clients * rs[i];
        prec += g[i].clients / (alpha2 + tau2 + g[i].noise);
    }
    out->server_var_star = 1.0 / prec; /* Eq. 61 */
    for (size_t i = 0; i < n_groups; i++)
        ones[i] = 1.0;
    if ((rc = fl_hdp_server_var(g, n_groups, alpha2, tau2, ones, &out->server_var_uniform, err)) !=
        DP_OK)
        return rc;
    for (size_t j = 0; j < n_groups; j++) {
        fl_hdp_group_out *o = &out_g[j];
        o->sigma_p2 = alpha2 + tau2 + g[j].noise;
        o->r_star = rs[j];
        o->weight_star = rs[j] / S;
        /* The other clients' updates observe phi with precision P; phi_j = phi + N(0, tau^2) and
         * the client's own estimate observes phi_j with variance alpha^2 (Lemma 1). */
        double P = 0.0;
        size_t other = n_groups; /* a group holding another client (there is one: >= 2 clients) */
        for (size_t i = 0; i < n_groups; i++) {
            double m = g[i].clients - (i == j ? 1.0 : 0.0);
            P += m / (alpha2 + tau2 + g[i].noise);
            if (m > 0.0 && other == n_groups)
                other = i;
        }
        double X = 1.0 / P + tau2;
        o->bayes_mse = alpha2 * X / (alpha2 + X); /* Eq. 41 */
        /* Bayes coefficient on one client of group `other`, matched to lambda w_i / (1 + lambda)
         * (Eq. 43 with theta_hat = sum_i w_i psi_i): lambda / (1 + lambda) = B. */
        double coef = o->bayes_mse / X * (1.0 / (alpha2 + tau2 + g[other].noise)) / P;
        double B = coef * S / rs[other];
        o->lambda_star = B < 1.0 ? B / (1.0 - B) : DP_INF; /* Eq. 47 */
        if ((rc = fl_hdp_client_mse(g, n_groups, alpha2, tau2, rs, j, o->lambda_star, true,
                                    &o->mse_own_noise, err)) != DP_OK)
            return rc;
        o->lambda_best_own = hdp_lambda_best(g, n_groups, alpha2, tau2, rs, j, true);
        if ((rc = fl_hdp_client_mse(g, n_groups, alpha2, tau2, rs, j, o->lambda_best_own, true,
                                    &o->mse_best_own, err)) != DP_OK)
            return rc;
    }
    return DP_OK;
}

/* ---- PPSGD (Bietti et al., ICML 2022, §4) ---- */

static double ppsgd_sigma_zeta(const fl_ppsgd_in *in)
{
    /* Eq. 4: sigma_zeta = c G sqrt(n log(1/delta)) / (N eps) */
    return in->c * in->grad * sqrt(in->n * log(1.0 / in->delta)) / (in->users * in->epsilon);
}

double fl_ppsgd_bound(const fl_ppsgd_in *in, double alpha)
{
    double N = in->users, n = in->n, v2 = in->v_norm2, s2 = in->sigma * in->sigma;
    double z = ppsgd_sigma_zeta(in), dz2 = in->dim_w * z * z;
    if (isinf(alpha)) /* the limits of both terms as alpha -> inf */
        return 4.0 * in->smooth * v2 / n + 3.0 * sqrt(v2 * (s2 / N + dz2)) / sqrt(n);
    double l_a = in->smooth * fmax(alpha, 1.0 / N);               /* L_alpha */
    double zn2 = N * v2 / (alpha * N + 1.0);                      /* ||z*||_alpha^2, Lemma 4.6 */
    double st2 = (alpha * s2 + s2) / N + alpha * dz2;             /* Eq. 6 */
    return 4.0 * l_a * zn2 / n + 3.0 * sqrt(st2 * zn2) / sqrt(n); /* Eq. 7 */
}

int fl_ppsgd_theory(const fl_ppsgd_in *in, fl_ppsgd_out *out, dp_err *err)
{
    int rc;
    if ((rc = check_num(in->users, 2.0, false, "users", err)) != DP_OK ||
        (rc = check_num(in->sigma, 0.0, false, "sigma", err)) != DP_OK ||
        (rc = check_num(in->epsilon, 0.0, true, "epsilon", err)) != DP_OK ||
        (rc = check_num(in->dim_w, 1.0, false, "dim_w", err)) != DP_OK ||
        (rc = check_num(in->grad, 0.0, true, "grad_bound", err)) != DP_OK ||
        (rc = check_num(in->c, 0.0, true, "c", err)) != DP_OK)
        return rc;
    if (!(in->delta > 0.0 && in->delta < 1.0))
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", in->delta);
    double N = in->users, L = log(1.0 / in->delta);
    *out = (fl_ppsgd_out){.sigma_zeta = DP_NAN,
                          .bound_local = DP_NAN,
                          .bound_1n = DP_NAN,
                          .bound_global = DP_NAN,
                          .alpha_best = DP_NAN,
                          .bound_best = DP_NAN};
    /* Eq. 10 with the constant of Eq. 4 squared (it enters through sigma_zeta^2) */
    out->n_star = N * (N - 1.0) * in->sigma * in->sigma * in->epsilon * in->epsilon /
                  (in->c * in->c * in->dim_w * in->grad * in->grad * L);
    bool any = !isnan(in->n) || !isnan(in->smooth) || !isnan(in->v_norm2);
    if (!any)
        return DP_OK;
    if ((rc = check_num(in->n, 0.0, true, "n", err)) != DP_OK ||
        (rc = check_num(in->smooth, 0.0, true, "smoothness", err)) != DP_OK ||
        (rc = check_num(in->v_norm2, 0.0, false, "v_norm2", err)) != DP_OK)
        return rc;
    out->sigma_zeta = ppsgd_sigma_zeta(in);
    out->bound_local = fl_ppsgd_bound(in, 0.0);
    out->bound_1n = fl_ppsgd_bound(in, 1.0 / N);
    out->bound_global = fl_ppsgd_bound(in, DP_INF);
    /* The bound is smooth in log alpha except at the kink alpha = 1/N: scan 12 decades on each
     * side of 1/N (40 points a decade), then refine around the best point by golden section in
     * log alpha; the endpoints 0 and inf are candidates too. */
    double best_a = 0.0, best_b = out->bound_local;
    if (out->bound_global < best_b)
        best_a = DP_INF, best_b = out->bound_global;
    if (out->bound_1n < best_b)
        best_a = 1.0 / N, best_b = out->bound_1n;
    const int per = 40, dec = 12;
    double lo = log(1.0 / N) - dec * LN10, step = LN10 / per;
    int best_i = -1;
    for (int i = 0; i <= 2 * dec * per; i++) {
        double b = fl_ppsgd_bound(in, exp(lo + i * step));
        if (b < best_b)
            best_b = b, best_i = i, best_a = exp(lo + i * step);
    }
    if (best_i >= 0) {
        double a = lo + (best_i - 1) * step, c = lo + (best_i + 1) * step;
        const double gr = 0.5 * (sqrt(5.0) - 1.0);
        double x1 = c - gr * (c - a), x2 = a + gr * (c - a);
        double f1 = fl_ppsgd_bound(in, exp(x1)), f2 = fl_ppsgd_bound(in, exp(x2));
        for (int it = 0; it < 100 && c - a > 1e-12; it++) {
            if (f1 < f2)
                c = x2, x2 = x1, f2 = f1, x1 = c - gr * (c - a), f1 = fl_ppsgd_bound(in, exp(x1));
            else
                a = x1, x1 = x2, f1 = f2, x2 = a + gr * (c - a), f2 = fl_ppsgd_bound(in, exp(x2));
        }
        double x = 0.5 * (a + c), fx = fl_ppsgd_bound(in, exp(x));
        if (fx < best_b)
            best_b = fx, best_a = exp(x);
    }
    out->alpha_best = best_a;
    out->bound_best = best_b;
    return DP_OK;
}

int fl_hdp_alg1(size_t n, size_t d, const double *phi, const double *psi, const uint32_t *group,
                size_t n_groups, const double *r, const double *lambda, double *global,
                double *personal, dp_err *err)
{
    if (n < 1 || d < 1)
        return dp_err_set(err, DP_EINVAL, "clients", "need >= 1 client and >= 1 dimension");
    if (n_groups < 1 || n_groups > HDP_MAX_GROUPS)
        return dp_err_set(err, DP_EINVAL, "groups", "groups must number 1..%d", HDP_MAX_GROUPS);
    for (size_t g = 0; g < n_groups; g++) {
        if (!(isfinite(r[g]) && r[g] >= 0.0))
            return dp_err_set(err, DP_EINVAL, "r", "r[%zu] must be finite and >= 0 (got %g)", g,
                              r[g]);
        if (!(lambda[g] >= 0.0))
            return dp_err_set(err, DP_EINVAL, "lambda", "lambda[%zu] must be >= 0 (got %g)", g,
                              lambda[g]);
    }
    double W = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (group[j] >= n_groups)
            return dp_err_set(err, DP_EINVAL, "group", "group[%zu] must be < %zu (got %u)", j,
                              n_groups, (unsigned)group[j]);
        W += r[group[j]];
    }
    if (!(W > 0.0))
        return dp_err_set(err, DP_EINVAL, "r", "r must give some client a positive weight");
    for (size_t i = 0; i < d; i++) {
        double acc = 0.0;
        for (size_t j = 0; j < n; j++)
            acc += r[group[j]] * psi[j * d + i];
        global[i] = acc / W;
    }
    for (size_t j = 0; j < n; j++) {
        double l = lambda[group[j]];
        for (size_t i = 0; i < d; i++)
            personal[j * d + i] =
                isinf(l) ? global[i] : (phi[j * d + i] + l * global[i]) / (1.0 + l);
    }
    return DP_OK;
}
