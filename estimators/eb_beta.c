/*
 * eb_beta.c: Beta-Bernoulli empirical Bayes (Ozkara et al. 2023, eq. 6-7, Thm 3-4, App C), and its
 * central-DP release (issue #15). See eb_beta.h for the model, the variants, the clamps and the
 * central model's sensitivities.
 */
#include "estimators/eb_beta.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_math.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_gamma.h>
#include <gsl/gsl_sf_psi.h>

#include "common/dp_alloc.h"
#include "estimators/eb_ldp.h"
#include "common/dp_math.h"

/* Newton stops when the largest step in (log alpha, log beta) is below this: a 1e-8 relative change
 * in alpha and beta, far below their sampling error for any m the service accepts, and above the
 * rounding noise of the digamma sums at m = 10^6 (steps of ~1e-10 keep wandering there). */
#define EB_BETA_STEP_TOL 1e-8
/* Largest Newton step in log-parameters (a factor e^2 per iteration) to stay in the basin. */
#define EB_BETA_MAX_STEP 2.0
/* Backtracking halvings before the iteration is declared stuck. */
#define EB_BETA_MAX_HALVINGS 60
/* alpha or beta below this is a boundary estimate (a point mass at 0 or 1 for the rate). */
#define EB_BETA_PARAM_MIN 1e-10

int eb_beta_data_check(const eb_beta_data *b, dp_err *err)
{
    if (b->m < 1 || b->m > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "number of clients must be in [1, %d] (got %zu)", EB_MAX_CLIENTS, b->m);
    char f[DP_ERR_FIELD_MAX];
    for (size_t i = 0; i < b->m; i++) {
        double n = b->n[i], z = b->z[i];
        if (!isfinite(n) || n < 1 || n > EB_BETA_MAX_TRIALS || floor(n) != n) {
            snprintf(f, sizeof f, "clients[%zu].trials", i);
            return dp_err_set(err, DP_EINVAL, f, "trials must be an integer in [1, 1e9] (got %g)",
                              n);
        }
        if (!isfinite(z) || z < 0 || floor(z) != z) {
            snprintf(f, sizeof f, "clients[%zu].successes", i);
            return dp_err_set(err, DP_EINVAL, f, "successes must be an integer >= 0 (got %g)", z);
        }
        if (z > n) {
            snprintf(f, sizeof f, "clients[%zu].successes", i);
            return dp_err_set(err, DP_EINVAL, f, "successes (%g) must not exceed trials (%g)", z,
                              n);
        }
    }
    return DP_OK;
}

double eb_beta_known_mse(double alpha, double beta, double n)
{
    double s = alpha + beta;
    return alpha * beta / (s * (s + 1.0) * (s + n));
}

/* ---- distinct (n, z) pairs ---- */

typedef struct bb_pairs {
    size_t k;      /* distinct pairs */
    double *n, *z; /* k each */
    double *c;     /* multiplicities */
} bb_pairs;

/* LSD radix sort, 16 bits per pass; cnt is a caller-provided 65536-entry scratch (kept off the
 * stack: handler threads may have small stacks). */
static void radix_sort_u64(uint64_t *a, uint64_t *tmp, size_t *cnt, size_t m)
{
    for (int pass = 0; pass < 4; pass++) {
        int sh = 16 * pass;
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (size_t i = 0; i < m; i++)
            cnt[(a[i] >> sh) & 0xffff]++;
        if (cnt[(a[0] >> sh) & 0xffff] == m)
            continue; /* every key has the same digit: nothing to do */
        size_t s = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = cnt[d];
            cnt[d] = s;
            s += c;
        }
        for (size_t i = 0; i < m; i++)
            tmp[cnt[(a[i] >> sh) & 0xffff]++] = a[i];
        memcpy(a, tmp, m * sizeof *a);
    }
}

static int pairs_build(const eb_beta_data *b, bb_pairs *p, dp_err *err)
{
    memset(p, 0, sizeof *p);
    uint64_t *key = dp_calloc(b->m, sizeof *key), *tmp = dp_calloc(b->m, sizeof *tmp);
    size_t *cnt = dp_calloc(65536, sizeof *cnt);
    if (key == NULL || tmp == NULL || cnt == NULL) {
        dp_free(key);
        dp_free(tmp);
        dp_free(cnt);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < b->m; i++)
        key[i] = ((uint64_t)b->n[i] << 32) | (uint64_t)b->z[i];
    radix_sort_u64(key, tmp, cnt, b->m);
    dp_free(cnt);
    size_t k = 1;
    for (size_t i = 1; i < b->m; i++)
        k += key[i] != key[i - 1];
    p->n = dp_calloc(k, sizeof *p->n);
    p->z = dp_calloc(k, sizeof *p->z);
    p->c = dp_calloc(k, sizeof *p->c);
    if (p->n == NULL || p->z == NULL || p->c == NULL) {
        dp_free(p->n);
        dp_free(p->z);
        dp_free(p->c);
        dp_free(key);
        dp_free(tmp);
        memset(p, 0, sizeof *p);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    size_t j = 0;
    for (size_t i = 0; i < b->m; i++) {
        if (i > 0 && key[i] != key[i - 1])
            j++;
        p->n[j] = (double)(key[i] >> 32);
        p->z[j] = (double)(key[i] & 0xffffffffULL);
        p->c[j] += 1.0;
    }
    p->k = k;
    dp_free(key);
    dp_free(tmp);
    return DP_OK;
}

static void pairs_free(bb_pairs *p)
{
    dp_free(p->n);
    dp_free(p->z);
    dp_free(p->c);
}

/* Stirling tail c(y) of log Gamma(y) = (y - 1/2) log y - y + log(2 pi)/2 + c(y); for y >= 20 the
 * omitted term 1/(1680 y^7) is below 5e-13. */
static double stirling_tail(double y)
{
    double y2 = y * y;
    return 1.0 / (12.0 * y) - 1.0 / (360.0 * y * y2) + 1.0 / (1260.0 * y * y2 * y2);
}

/* log Gamma(x + k) - log Gamma(x) for integer k >= 0, accurate when x >> k too. GSL's lnpoch loses
 * about 1e-5 absolute at x = 4e8 (cancellation of two lngammas), which is enough to mistake the
 * S = inf boundary for an interior maximum, so large x uses the Stirling difference with log1p. */
static double lnpoch(double x, double k)
{
    if (k == 0.0)
        return 0.0;
    if (x >= 20.0)
        return (x - 0.5) * log1p(k / x) + k * log(x + k) - k + stirling_tail(x + k) -
               stirling_tail(x);
    if (k <= 64.0) {
        double s = 0.0;
        for (double j = 0; j < k; j++)
            s += log(x + j);
        return s;
    }
    gsl_sf_result r;
    if (gsl_sf_lnpoch_e(x, k, &r) != GSL_SUCCESS)
        return DP_NAN;
    return r.val;
}

static double psi(double x)
{
    gsl_sf_result r;
    if (gsl_sf_psi_e(x, &r) != GSL_SUCCESS)
        return DP_NAN;
    return r.val;
}

static double psi1(double x)
{
    gsl_sf_result r;
    if (gsl_sf_psi_1_e(x, &r) != GSL_SUCCESS)
        return DP_NAN;
    return r.val;
}

/* Beta-binomial log-likelihood over the pairs without the binomial coefficients:
 * sum c [lnG(a+z) - lnG(a) + lnG(b+n-z) - lnG(b) + lnG(a+b) - lnG(a+b+n)]. */
static double pairs_ll(const bb_pairs *p, double a, double b)
{
    double ll = 0.0;
    for (size_t k = 0; k < p->k; k++) {
        double n = p->n[k], z = p->z[k];
        ll += p->c[k] * (lnpoch(a, z) + lnpoch(b, n - z) - lnpoch(a + b, n));
    }
    return ll;
}

static double pairs_lnchoose(const bb_pairs *p)
{
    double s = 0.0;
    for (size_t k = 0; k < p->k; k++) {
        gsl_sf_result r;
        if (gsl_sf_lnchoose_e((unsigned)p->n[k], (unsigned)p->z[k], &r) != GSL_SUCCESS)
            return DP_NAN;
        s += p->c[k] * r.val;
    }
    return s;
}

double eb_beta_loglik(const eb_beta_data *b, double alpha, double beta)
{
    double ll = 0.0;
    for (size_t i = 0; i < b->m; i++) {
        double n = b->n[i], z = b->z[i];
        gsl_sf_result r;
        double lc = gsl_sf_lnchoose_e((unsigned)n, (unsigned)z, &r) == GSL_SUCCESS ? r.val : DP_NAN;
        ll += lc + lnpoch(alpha, z) + lnpoch(beta, n - z) - lnpoch(alpha + beta, n);
    }
    return ll;
}

/* ---- posterior with a given prior ---- */

static void posterior_one(double z, double n, double mu, double s, double *mean, double *sd,
                          double *shr, size_t i)
{
    double xbar = z / n;
    double a, pm, v;
    if (isinf(s)) {
        a = 0.0;
        pm = mu;
        v = 0.0;
    } else {
        a = n / (s + n);
        pm = a * xbar + (1.0 - a) * mu;
        v = pm * (1.0 - pm) / (s + n + 1.0);
    }
    if (mean)
        mean[i] = pm;
    if (sd)
        sd[i] = sqrt(v > 0 ? v : 0.0);
    if (shr)
        shr[i] = 1.0 - a;
}

int eb_beta_posterior_prior(const eb_beta_data *b, const eb_beta_prior *p, double *mean, double *sd,
                            double *shrinkage, dp_err *err)
{
    int rc = eb_beta_data_check(b, err);
    if (rc != DP_OK)
        return rc;
    if (!(p->mu >= 0 && p->mu <= 1) || !(p->s >= 0))
        return dp_err_set(err, DP_EINVAL, "prior", "prior mean must be in [0, 1] and S >= 0");
    for (size_t i = 0; i < b->m; i++)
        posterior_one(b->z[i], b->n[i], p->mu, p->s, mean, sd, shrinkage, i);
    return DP_OK;
}

int eb_beta_posterior_known(const eb_beta_data *b, double alpha, double beta, double *mean,
                            double *sd, double *shrinkage, dp_err *err)
{
    int rc = eb_beta_data_check(b, err);
    if (rc != DP_OK)
        return rc;
    if (!isfinite(alpha) || alpha <= 0)
        return dp_err_set(err, DP_EINVAL, "prior.alpha", "alpha must be finite and > 0 (got %g)",
                          alpha);
    if (!isfinite(beta) || beta <= 0)
        return dp_err_set(err, DP_EINVAL, "prior.beta", "beta must be finite and > 0 (got %g)",
                          beta);
    double s = alpha + beta;
    for (size_t i = 0; i < b->m; i++)
        posterior_one(b->z[i], b->n[i], alpha / s, s, mean, sd, shrinkage, i);
    return DP_OK;
}

/* ---- moment estimators ---- */

/* Weight a = n/(S+n) from the moments, with the clamps of eb_beta.h. *s_out gets S (inf if pooled).
 */
static double weight_from_moments(double mu, double var, double n, bool minus1, eb_beta_counts *cnt,
                                  double *s_out)
{
    if (!(var > 0)) {
        if (cnt)
            cnt->pooled++;
        *s_out = DP_INF;
        return 0.0;
    }
    double s = mu * (1.0 - mu) / var - (minus1 ? 1.0 : 0.0);
    if (!(s > 0)) {
        if (cnt)
            cnt->local++;
        *s_out = 0.0;
        return 1.0;
    }
    *s_out = s;
    return n / (s + n);
}

static double clamp01(double x)
{
    return x < 0 ? 0 : (x > 1 ? 1 : x);
}

/* Beyond this many sd from both ends the truncation changes a normal's mean by less than
 * phi(8)/Phi(8) ~ 5e-15 sd: skipped (most clients of a large private run). */
#define EB_BETA_TRUNC_Z 8.0

/* Mean of N(est, se^2) truncated to [lo, hi]: the posterior mean of a quantity known to lie in
 * [lo, hi], under a flat prior there, given an estimate of it with normal error of sd se. When
 * (almost) all the mass lies beyond one end, that end. */
static double truncated_normal_mean(double est, double se, double lo, double hi)
{
    if (!(hi > lo))
        return lo;
    if (!(se > 0) || !isfinite(se))
        return est < lo ? lo : (est > hi ? hi : est);
    double a = (lo - est) / se, b = (hi - est) / se;
    if (a < -EB_BETA_TRUNC_Z && b > EB_BETA_TRUNC_Z)
        return est; /* both ends beyond 8 sd: the correction is below 1e-14 se */
    /* P(a < Z < b) from the tail on the side where it is not 1 - tiny (no cancellation) */
    double z = a > 0 ? gsl_cdf_ugaussian_Q(a) - gsl_cdf_ugaussian_Q(b)
                     : gsl_cdf_ugaussian_P(b) - gsl_cdf_ugaussian_P(a);
    if (!(z > 1e-300))
        return a > 0 ? lo : hi;
    double t = est + se * (gsl_ran_ugaussian_pdf(a) - gsl_ran_ugaussian_pdf(b)) / z;
    return t < lo ? lo : (t > hi ? hi : t);
}

/* The two-bit private weight of client i (eb_beta.h, "Private"): mu and var = m2 - mu^2 are the
 * (leave-one-out) moments of the messages, k how many messages they average, rr_c =
 * e^eps/(e^eps-1)^2 the noise constant of one randomized-response value (E[q^2 | x] = rr_c + x,
 * so Var q = rr_c + x(1-x), eq. 7). The client's estimate is a xbar + (1-a) mu with mu independent
 * of the client (leave-one-out), whose MSE a^2 s2 + (1-a)^2 (sigma^2 + V) is linear in the prior
 * variance sigma^2, so the weight that minimises its expectation over what we know of sigma^2 is
 * the one at the posterior mean of sigma^2:
 *   - the mean is projected onto [0, 1] (post-processing: free in privacy);
 *   - V = Var(mu) = (rr_c + mu(1-mu))/k, the noise of the pooled mean (Thm 2 adds sigma_q^2/(m-1)
 *     to the prior variance in the Gaussian weight for the same reason);
 *   - sigma^2 = E[sigma^2 | var]: var has sampling sd se, se^2 = (rr_c + m2(1-m2))/k + 4 mu^2 V
 *     (the second moment's and the squared mean's noise; their small covariance is left out), and
 *     sigma^2 lies in [0, mu(1-mu)] (a Beta's variance): the mean of N(var, se^2) truncated there.
 *     A noisy var <= 0 is therefore not "no heterogeneity" (full pooling) unless it is far below 0
 *     in units of its se;
 *   - a = (sigma^2 + V) / (sigma^2 + V + s2), s2 = (mu(1-mu) - sigma^2)/n = E p(1-p)/n; for V = 0
 *     and a known sigma^2 this is n/(S + n) with S = mu(1-mu)/sigma^2 - 1 (App C.1).
 * An uninformative mean or variance (few clients, small eps0) thus keeps the client near its own
 * estimate. Returns the weight; *s_out the matching S = n(1-a)/a (inf when a = 0); counts the
 * projections (pooled: var <= 0, local: var >= mu(1-mu), mean: mu outside [0, 1]). */
static double weight_two_bit(double *mu, double var, double k, double n, double rr_c,
                             eb_beta_counts *cnt, double *s_out)
{
    double m2 = clamp01(var + *mu * *mu);
    if (*mu < 0.0 || *mu > 1.0) {
        if (cnt)
            cnt->mean++;
        *mu = clamp01(*mu);
    }
    double pq = *mu * (1.0 - *mu);
    if (cnt && !(var > 0))
        cnt->pooled++;
    else if (cnt && var >= pq)
        cnt->local++;
    double v_mu = (rr_c + pq) / k;
    double se = sqrt((rr_c + m2 * (1.0 - m2)) / k + 4.0 * *mu * *mu * v_mu);
    double s2v = truncated_normal_mean(var, se, 0.0, pq);
    double t = s2v + v_mu, s2 = (pq - s2v) / n;
    double a = t + s2 > 0 ? t / (t + s2) : 1.0;
    *s_out = a > 0 ? n * (1.0 - a) / a : DP_INF;
    return a;
}

/* The shared moment core. x: first-moment messages (xbar or RR values); u: NULL (variance from x)
 * or second-moment messages. own: the clients' raw xbar. rr_c > 0: the two-bit private scheme
 * (weight_two_bit); 0: the paper's weight with its clamps. Returns the largest shrinkage. */
static double moments_core(const eb_beta_data *b, const double *x, const double *u, bool minus1,
                           bool loo, double rr_c, double *mean, double *sd, double *shr,
                           eb_beta_counts *cnt)
{
    size_t m = b->m;
    double c0 = 0.0, max_shr = 0.0;
    for (size_t i = 0; i < m; i++)
        c0 += x[i];
    c0 /= (double)m;
    double s1 = 0.0, s2 = 0.0, t = 0.0; /* centred sums (cancellation-free when all equal) */
    for (size_t i = 0; i < m; i++) {
        double c = x[i] - c0;
        s1 += c;
        s2 += c * c;
        if (u)
            t += u[i];
    }
    for (size_t i = 0; i < m; i++) {
        double mu, var;
        if (loo) {
            double k = (double)m - 1.0, ci = x[i] - c0;
            double muc = (s1 - ci) / k;
            mu = c0 + muc;
            if (u)
                var = (t - u[i]) / k - mu * mu;
            else
                var = (s2 - ci * ci - k * muc * muc) / (k - 1.0); /* eq. 6: divisor m - 2 */
        } else {
            mu = c0 + s1 / (double)m;
            var = u ? t / (double)m - mu * mu : (s2 - s1 * s1 / (double)m) / ((double)m - 1.0);
        }
        double s;
        if (rr_c > 0) {
            (void)weight_two_bit(&mu, var, loo ? (double)m - 1.0 : (double)m, b->n[i], rr_c, cnt,
                                 &s);
        } else {
            if (cnt && (mu < 0.0 || mu > 1.0))
                cnt->mean++;
            mu = clamp01(mu);
            (void)weight_from_moments(mu, var, b->n[i], minus1, cnt, &s);
        }
        posterior_one(b->z[i], b->n[i], mu, s, mean, sd, shr, i);
        double sh = isinf(s) ? 1.0 : s / (s + b->n[i]); /* 1 - a, as posterior_one */
        max_shr = sh > max_shr ? sh : max_shr;
    }
    return max_shr;
}

static double *xbar_alloc(const eb_beta_data *b, dp_err *err)
{
    double *x = dp_calloc(b->m, sizeof *x);
    if (x == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < b->m; i++)
        x[i] = b->z[i] / b->n[i];
    return x;
}

/* U_i = Z(Z-1)/(n(n-1)), unbiased for p_i^2 (a U-statistic); needs n >= 2. */
static double *u_alloc(const eb_beta_data *b, dp_err *err)
{
    char f[DP_ERR_FIELD_MAX];
    for (size_t i = 0; i < b->m; i++)
        if (b->n[i] < 2) {
            snprintf(f, sizeof f, "clients[%zu].trials", i);
            dp_err_set(err, DP_EINVAL, f, "this variant needs trials >= 2 (got %g)", b->n[i]);
            return NULL;
        }
    double *u = dp_calloc(b->m, sizeof *u);
    if (u == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < b->m; i++)
        u[i] = b->z[i] * (b->z[i] - 1.0) / (b->n[i] * (b->n[i] - 1.0));
    return u;
}

static int check_common(const eb_beta_data *b, eb_beta_variant v, size_t min_m, dp_err *err)
{
    int rc = eb_beta_data_check(b, err);
    if (rc != DP_OK)
        return rc;
    if (b->m < min_m)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "estimating the prior needs at least %zu clients (got %zu)", min_m, b->m);
    if (v != EB_BETA_PAPER && v != EB_BETA_PAPER_NO_MINUS1 && v != EB_BETA_UNBIASED)
        return dp_err_set(err, DP_EINVAL, "variant", "unknown variant");
    return DP_OK;
}

static void prior_from_moments(double mu, double var, bool minus1, eb_beta_prior *out)
{
    out->mu = mu;
    out->iterations = 0;
    out->loglik = DP_NAN;
    if (!(var > 0)) {
        out->s = DP_INF;
        out->status = EB_STATUS_BOUNDARY;
    } else {
        double s = mu * (1.0 - mu) / var - (minus1 ? 1.0 : 0.0);
        out->s = s > 0 ? s : 0.0;
        out->status = s > 0 ? EB_STATUS_CONVERGED : EB_STATUS_BOUNDARY;
    }
    out->alpha = mu * out->s;
    out->beta = (1.0 - mu) * out->s;
    if (isinf(out->s)) {
        out->alpha = DP_INF;
        out->beta = DP_INF;
    }
}

int eb_beta_fit_moments(const eb_beta_data *b, eb_beta_variant v, eb_beta_prior *out, dp_err *err)
{
    int rc = check_common(b, v, 2, err);
    if (rc != DP_OK)
        return rc;
    size_t m = b->m;
    double mu = 0.0, var = 0.0;
    for (size_t i = 0; i < m; i++)
        mu += b->z[i] / b->n[i];
    mu /= (double)m;
    if (v == EB_BETA_UNBIASED) {
        double *u = u_alloc(b, err);
        if (u == NULL)
            return err ? err->code : DP_EINVAL;
        double t = 0.0;
        for (size_t i = 0; i < m; i++)
            t += u[i];
        dp_free(u);
        var = t / (double)m - mu * mu;
    } else {
        for (size_t i = 0; i < m; i++) {
            double r = b->z[i] / b->n[i] - mu;
            var += r * r;
        }
        var /= (double)m - 1.0;
    }
    prior_from_moments(mu, var, v != EB_BETA_PAPER_NO_MINUS1, out);
    if (out->s > 0 && isfinite(out->s))
        out->loglik = eb_beta_loglik(b, out->alpha, out->beta);
    int all_same = 1;
    for (size_t i = 1; i < m; i++)
        if (b->z[i] / b->n[i] != b->z[0] / b->n[0])
            all_same = 0;
    if (all_same)
        out->status = EB_STATUS_UNIDENTIFIABLE;
    return DP_OK;
}

int eb_beta_posterior_moments(const eb_beta_data *b, eb_beta_variant v, bool leave_one_out,
                              double *mean, double *sd, double *shrinkage, eb_beta_counts *counts,
                              eb_status *status, dp_err *err)
{
    int rc = check_common(b, v, 2, err);
    if (rc != DP_OK)
        return rc;
    eb_beta_counts cnt = {0, 0, 0, 0};
    *status = EB_STATUS_CONVERGED;
    if (leave_one_out && b->m == 2) {
        /* Each client sees one other: no variance, so nothing identifies the prior. Stay local. */
        for (size_t i = 0; i < b->m; i++)
            posterior_one(b->z[i], b->n[i], 0.0, 0.0, mean, sd, shrinkage, i);
        cnt.local = b->m;
        *status = EB_STATUS_UNIDENTIFIABLE;
        if (counts)
            *counts = cnt;
        return DP_OK;
    }
    double *x = xbar_alloc(b, err), *u = NULL;
    if (x == NULL)
        return DP_ENOMEM;
    if (v == EB_BETA_UNBIASED) {
        u = u_alloc(b, err);
        if (u == NULL) {
            dp_free(x);
            return err ? err->code : DP_EINVAL;
        }
    }
    (void)moments_core(b, x, u, v != EB_BETA_PAPER_NO_MINUS1, leave_one_out, 0.0, mean, sd,
                       shrinkage, &cnt);
    if (cnt.pooled == b->m)
        *status = EB_STATUS_BOUNDARY;
    if (counts)
        *counts = cnt;
    dp_free(x);
    dp_free(u);
    return DP_OK;
}

/* ---- maximum likelihood ---- */

int eb_beta_fit_mle(const eb_beta_data *b, unsigned max_iter, eb_beta_prior *out, dp_err *err)
{
    return eb_beta_fit_mle_cancel(b, max_iter, NULL, out, err);
}

int eb_beta_fit_mle_cancel(const eb_beta_data *b, unsigned max_iter, const atomic_bool *cancel,
                           eb_beta_prior *out, dp_err *err)
{
    int rc = check_common(b, EB_BETA_PAPER, 2, err);
    if (rc != DP_OK)
        return rc;
    if (max_iter < 1 || max_iter > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in [1, %d] (got %u)",
                          EB_MAX_ITER_CAP, max_iter);
    size_t m = b->m;
    double mu = 0.0, var = 0.0, nbar = 0.0;
    for (size_t i = 0; i < m; i++) {
        mu += b->z[i] / b->n[i];
        nbar += b->n[i];
    }
    mu /= (double)m;
    nbar /= (double)m;
    for (size_t i = 0; i < m; i++) {
        double r = b->z[i] / b->n[i] - mu;
        var += r * r;
    }
    var /= (double)m - 1.0;
    out->iterations = 0;
    out->mu = mu;
    if (!(mu > 0 && mu < 1)) {
        /* All rates 0 (or all 1): the likelihood increases without bound towards a point mass. */
        out->s = DP_INF;
        out->alpha = out->beta = DP_INF;
        out->loglik = DP_NAN;
        out->status = EB_STATUS_UNIDENTIFIABLE;
        return DP_OK;
    }
    bb_pairs p;
    rc = pairs_build(b, &p, err);
    if (rc != DP_OK)
        return rc;
    /* Start: moment estimate corrected for binomial noise (Var xbar = s2 + (mu(1-mu)-s2)/n). */
    double s2 = (var - mu * (1.0 - mu) / nbar) / (1.0 - 1.0 / nbar + 1e-300);
    double s0 = s2 > 0 ? mu * (1.0 - mu) / s2 - 1.0 : 1e4;
    if (!(s0 > 0.5))
        s0 = 0.5;
    if (s0 > 1e6)
        s0 = 1e6;
    double t[2] = {log(mu * s0), log((1.0 - mu) * s0)};
    double ll = pairs_ll(&p, exp(t[0]), exp(t[1]));
    eb_status st = EB_STATUS_MAX_ITER;
    unsigned it = 0;
    while (it < max_iter) {
        if (cancel != NULL && atomic_load(cancel)) {
            pairs_free(&p);
            return dp_err_set(err, DP_EBUSY, NULL, "the fit was cancelled (iteration %u)", it + 1);
        }
        it++;
        double a = exp(t[0]), bb = exp(t[1]);
        double ga = 0, gb = 0, haa = 0, hbb = 0, hab = 0;
        double pab = psi(a + bb), p1ab = psi1(a + bb), pa = psi(a), pb = psi(bb), p1a = psi1(a),
               p1b = psi1(bb);
        for (size_t k = 0; k < p.k; k++) {
            double n = p.n[k], z = p.z[k], c = p.c[k];
            double dn = pab - psi(a + bb + n), d1n = p1ab - psi1(a + bb + n);
            ga += c * (psi(a + z) - pa + dn);
            gb += c * (psi(bb + n - z) - pb + dn);
            haa += c * (psi1(a + z) - p1a + d1n);
            hbb += c * (psi1(bb + n - z) - p1b + d1n);
            hab += c * d1n;
        }
        /* chain rule to log-parameters */
        double g0 = a * ga, g1 = bb * gb;
        double h00 = a * a * haa + g0, h11 = bb * bb * hbb + g1, h01 = a * bb * hab;
        double det = h00 * h11 - h01 * h01;
        double st0, st1;
        int newton = (h00 < 0 && det > 0);
        if (newton) {
            st0 = -(h11 * g0 - h01 * g1) / det;
            st1 = -(-h01 * g0 + h00 * g1) / det;
        } else {
            double gn = sqrt(g0 * g0 + g1 * g1);
            st0 = gn > 0 ? g0 / gn : 0;
            st1 = gn > 0 ? g1 / gn : 0;
        }
        double sm = fmax(fabs(st0), fabs(st1));
        if (sm > EB_BETA_MAX_STEP) {
            st0 *= EB_BETA_MAX_STEP / sm;
            st1 *= EB_BETA_MAX_STEP / sm;
            sm = EB_BETA_MAX_STEP;
        }
        if (newton && sm <= EB_BETA_STEP_TOL) {
            st = EB_STATUS_CONVERGED;
            break;
        }
        double lam = 1.0, nll = -DP_INF;
        int h;
        for (h = 0; h < EB_BETA_MAX_HALVINGS; h++) {
            nll = pairs_ll(&p, exp(t[0] + lam * st0), exp(t[1] + lam * st1));
            if (nll >= ll)
                break;
            lam *= 0.5;
        }
        if (h == EB_BETA_MAX_HALVINGS) {
            /* no ascent direction left at machine precision: we are at the maximum */
            st = newton ? EB_STATUS_CONVERGED : EB_STATUS_MAX_ITER;
            break;
        }
        t[0] += lam * st0;
        t[1] += lam * st1;
        ll = nll;
        if (exp(t[0]) + exp(t[1]) > EB_BETA_S_MAX) {
            st = EB_STATUS_BOUNDARY;
            break;
        }
        if (exp(t[0]) < EB_BETA_PARAM_MIN || exp(t[1]) < EB_BETA_PARAM_MIN) {
            st = EB_STATUS_BOUNDARY;
            break;
        }
    }
    out->alpha = exp(t[0]);
    out->beta = exp(t[1]);
    out->s = out->alpha + out->beta;
    out->mu = out->alpha / out->s;
    out->iterations = it;
    out->status = st;
    double lc = pairs_lnchoose(&p);
    out->loglik = ll + lc;
    /* The S = inf limit is the binomial model with one rate, p = sum z / sum n. If it is at least
     * as likely as the fitted point, the data show no over-dispersion: report the boundary
     * honestly. */
    double sz = 0.0, sn = 0.0;
    for (size_t k = 0; k < p.k; k++) {
        sz += p.c[k] * p.z[k];
        sn += p.c[k] * p.n[k];
    }
    double pr = sz / sn, llinf = lc;
    for (size_t k = 0; k < p.k; k++)
        llinf += p.c[k] * (p.z[k] * log(pr) + (p.n[k] - p.z[k]) * log1p(-pr));
    if (llinf >= out->loglik) {
        out->alpha = out->beta = out->s = DP_INF;
        out->mu = pr;
        out->loglik = llinf;
        out->status = EB_STATUS_BOUNDARY;
    }
    pairs_free(&p);
    return DP_OK;
}

/* ---- private ---- */

int eb_beta_private(const eb_beta_data *b, eb_beta_scheme scheme, eb_beta_variant v, double eps0,
                    bool leave_one_out, uint64_t seed, double *mean, double *sd, double *shrinkage,
                    eb_beta_prior *prior_out, eb_beta_counts *counts, eb_beta_private_info *info,
                    eb_status *status, dp_err *err)
{
    int rc = check_common(b, v, leave_one_out ? 3 : 2, err);
    if (rc != DP_OK)
        return rc;
    if (!isfinite(eps0) || eps0 <= 0)
        return dp_err_set(err, DP_EINVAL, "privacy.epsilon0",
                          "epsilon0 must be finite and > 0 (got %g)", eps0);
    if (scheme == EB_BETA_PRIV_PAPER_1BIT && v == EB_BETA_UNBIASED)
        return dp_err_set(err, DP_EINVAL, "variant",
                          "paper_1bit sends one bit: use variant paper or paper_no_minus1");
    if (scheme != EB_BETA_PRIV_PAPER_1BIT && scheme != EB_BETA_PRIV_TWO_BIT)
        return dp_err_set(err, DP_EINVAL, "privacy.scheme", "unknown scheme");
    size_t m = b->m;
    double *x = NULL, *q1 = NULL, *q2 = NULL, *u = NULL;
    gsl_rng *rng = NULL;
    rc = DP_OK;
    x = xbar_alloc(b, err);
    q1 = dp_calloc(m, sizeof *q1);
    if (x == NULL || q1 == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (scheme == EB_BETA_PRIV_TWO_BIT) {
        u = u_alloc(b, err);
        q2 = dp_calloc(m, sizeof *q2);
        if (u == NULL) {
            rc = err ? err->code : DP_EINVAL;
            goto out;
        }
        if (q2 == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            goto out;
        }
    }
    rng = dp_rng_alloc(seed, DP_RNG_STREAM_BETA_RESPONSES, err);
    if (rng == NULL) {
        rc = DP_ENOMEM;
        goto out;
    }
    double eb = scheme == EB_BETA_PRIV_TWO_BIT ? eps0 / 2.0 : eps0;
    for (size_t i = 0; i < m; i++) {
        q1[i] = eb_rr_bit(x[i], eb, rng);
        if (q2)
            q2[i] = eb_rr_bit(u[i], eb, rng);
    }
    eb_beta_counts cnt = {0, 0, 0, 0};
    bool minus1 = scheme == EB_BETA_PRIV_TWO_BIT || v != EB_BETA_PAPER_NO_MINUS1;
    double em1 = expm1(eb), rr_c = q2 ? (em1 + 1.0) / (em1 * em1) : 0.0;
    double max_shr =
        moments_core(b, q1, q2, minus1, leave_one_out, rr_c, mean, sd, shrinkage, &cnt);
    *status = cnt.pooled == m && !q2 ? EB_STATUS_BOUNDARY : EB_STATUS_CONVERGED;
    if (!q2 && cnt.mean > 0) /* a clamped pooled mean: point-mass prior, not a fit to trust */
        *status = eb_status_worst(*status, EB_STATUS_DEGENERATE);
    bool no_gain = max_shr < EB_NO_POOLING_GAIN;
    if (no_gain)
        *status = eb_status_worst(*status, EB_STATUS_NO_POOLING_GAIN);
    double mu = 0.0, var = 0.0;
    for (size_t i = 0; i < m; i++)
        mu += q1[i];
    mu /= (double)m;
    if (q2) {
        for (size_t i = 0; i < m; i++)
            var += q2[i];
        var = var / (double)m - mu * mu;
        /* the reported prior (all clients) with its mean outside [0, 1]: a point mass there */
        if (mu < 0.0 || mu > 1.0) { /* the reported prior is a point mass at 0 or 1 */
            cnt.prior_mean = 1;
            /* degenerate when a client was pooled toward it; when none was (two_bit keeps
             * every clamped client's own estimate), no_pooling_gain says what the answers are */
            *status = no_gain ? EB_STATUS_NO_POOLING_GAIN
                              : eb_status_worst(*status, EB_STATUS_DEGENERATE);
        }
    } else {
        for (size_t i = 0; i < m; i++)
            var += (q1[i] - mu) * (q1[i] - mu);
        var /= (double)m - 1.0;
    }
    if (!q2 && (mu < 0.0 || mu > 1.0))
        cnt.prior_mean = 1;
    if (counts)
        *counts = cnt;
    if (prior_out) {
        prior_from_moments(clamp01(mu), var, minus1, prior_out);
        if (prior_out->s > 0 && isfinite(prior_out->s) && prior_out->alpha > 0 &&
            prior_out->beta > 0)
            prior_out->loglik = eb_beta_loglik(b, prior_out->alpha, prior_out->beta);
    }
    if (info) {
        info->eps0 = eps0;
        info->eps_per_bit = eb;
        info->bits = q2 ? 2 : 1;
        info->rho = eps0 * eps0 / 2.0; /* Bun & Steinke 2016, Prop. 1.4 */
    }
out:
    if (rng)
        gsl_rng_free(rng);
    dp_free(x);
    dp_free(q1);
    dp_free(q2);
    dp_free(u);
    return rc;
}

/* ---- central DP (eb_beta.h) ---- */

int eb_beta_central_calibrate(const eb_beta_central_opts *o, eb_beta_central_info *info,
                              dp_err *err)
{
    if (!isfinite(o->z) || o->z < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.noise_multiplier",
                          "noise_multiplier must be finite and >= 0 (got %g)", o->z);
    memset(info, 0, sizeof *info);
    info->l2_sens = M_SQRT2;
    info->sens_sum = 1.0; /* xbar_i in [0, 1] */
    info->sens_sq = 1.0;  /* U_i in [0, 1] */
    info->sd_sum = o->z * info->l2_sens * info->sens_sum;
    info->sd_sq = o->z * info->l2_sens * info->sens_sq;
    info->rho = o->z > 0 ? 1.0 / (2.0 * o->z * o->z) : DP_INF;
    info->var_raw = info->sd_var = info->weight_extra = DP_NAN;
    if (!(info->sd_sum <= EB_LDP_MAX_SIGMA))
        return dp_err_set(err, DP_ENUMERIC, "privacy.noise_multiplier",
                          "the noise needed (sd %g) is beyond what the estimate can use",
                          info->sd_sum);
    return DP_OK;
}

int eb_beta_central_fit(const eb_beta_data *b, const eb_beta_central_opts *o, double *mean,
                        double *sd, double *shrinkage, eb_beta_prior *prior, eb_beta_counts *counts,
                        eb_beta_central_info *info, eb_status *status, dp_err *err)
{
    int rc = check_common(b, EB_BETA_UNBIASED, 2, err);
    if (rc != DP_OK)
        return rc;
    char f[DP_ERR_FIELD_MAX];
    for (size_t i = 0; i < b->m; i++)
        if (b->n[i] < 2) {
            snprintf(f, sizeof f, "clients[%zu].trials", i);
            return dp_err_set(err, DP_EINVAL, f,
                              "central DP needs trials >= 2 for each client's unbiased second "
                              "moment (got %g)",
                              b->n[i]);
        }
    if ((rc = eb_beta_central_calibrate(o, info, err)) != DP_OK)
        return rc;
    size_t m = b->m;
    double md = (double)m, s1 = 0.0, s2 = 0.0;
    for (size_t i = 0; i < m; i++) { /* each client's contribution, bounded before it is added */
        double z = b->z[i], n = b->n[i];
        s1 += clamp01(z / n);
        s2 += clamp01(z * (z - 1.0) / (n * (n - 1.0)));
    }
    if (o->z > 0) { /* noise once, on the aggregates */
        gsl_rng *rng = dp_rng_alloc(o->seed, DP_RNG_STREAM_BETA_CENTRAL, err);
        if (rng == NULL)
            return DP_ENOMEM;
        s1 += gsl_ran_gaussian_ziggurat(rng, info->sd_sum);
        s2 += gsl_ran_gaussian_ziggurat(rng, info->sd_sq);
        gsl_rng_free(rng);
    }
    /* the moments from the noisy sums, then post-processing onto valid Beta parameters */
    double mu_raw = s1 / md;
    double var = s2 / md - (s1 * s1 - info->sd_sum * info->sd_sum) / (md * md);
    double mu = clamp01(mu_raw), pq = mu * (1.0 - mu);
    info->var_raw = var;
    info->proj_mean = mu_raw < 0.0 || mu_raw > 1.0;
    info->proj_var_low = !(var > 0) || !(pq > 0);
    double s, sig2;
    if (info->proj_var_low) {
        s = DP_INF;
        sig2 = 0.0;
    } else {
        s = pq / var - 1.0;
        info->proj_var_high = !(s >= EB_BETA_CENTRAL_S_MIN);
        if (info->proj_var_high)
            s = EB_BETA_CENTRAL_S_MIN;
        sig2 = pq / (s + 1.0);
    }
    info->sd_var =
        sqrt(info->sd_sq * info->sd_sq + 4.0 * mu * mu * info->sd_sum * info->sd_sum) / md;
    info->weight_extra = info->sd_sum * info->sd_sum / (md * (md - 1.0)) + info->sd_var;
    prior->mu = mu;
    prior->s = s;
    prior->alpha = isinf(s) ? DP_INF : mu * s;
    prior->beta = isinf(s) ? DP_INF : (1.0 - mu) * s;
    prior->loglik = DP_NAN; /* a likelihood of the raw data would not be private */
    prior->iterations = 0;
    bool moved = info->proj_mean || info->proj_var_low || info->proj_var_high;
    prior->status = moved ? EB_STATUS_BOUNDARY : EB_STATUS_CONVERGED;
    /* every client's posterior: its own data with the private prior, the noise in the weight */
    double t = sig2 + info->weight_extra, max_shr = 0.0;
    for (size_t i = 0; i < m; i++) {
        double s2i = (pq - sig2) / b->n[i];
        double a = t + s2i > 0 ? t / (t + s2i) : 1.0;
        double si = a > 0 ? b->n[i] * (1.0 - a) / a : DP_INF;
        posterior_one(b->z[i], b->n[i], mu, si, mean, sd, shrinkage, i);
        double sh = isinf(si) ? 1.0 : si / (si + b->n[i]);
        max_shr = sh > max_shr ? sh : max_shr;
    }
    *status = prior->status;
    if (max_shr < EB_NO_POOLING_GAIN && o->z > 0)
        *status = eb_status_worst(*status, EB_STATUS_NO_POOLING_GAIN);
    if (counts) {
        *counts = (eb_beta_counts){0, 0, 0, 0};
        counts->pooled = info->proj_var_low ? m : 0;
        counts->local = info->proj_var_high ? m : 0;
        counts->mean = info->proj_mean ? m : 0;
        counts->prior_mean = info->proj_mean ? 1 : 0;
    }
    return DP_OK;
}
