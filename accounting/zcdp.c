/*
 * zcdp.c: rho of event trees and zCDP -> (epsilon, delta). See zcdp.h for formulas and papers.
 *
 * The CKS 2020 conversion is minimised over alpha by golden-section search on x = log(alpha - 1):
 * the objective (alpha rho + log(1/delta) - log alpha + (alpha-1) log(1 - 1/alpha)) / (alpha - 1)
 * has a convex numerator over a positive linear denominator, so it is quasi-convex and the search
 * finds the global minimum of the bracket.
 */
#include "accounting/zcdp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accounting/logmath.h"
#include "common/dp_math.h"

/* Search bracket for the CKS order, in log(alpha - 1): alpha from 1 + 1e-9 to 1 + 1e12. */
#define ZCDP_LOG_AM1_LO (-20.7)
#define ZCDP_LOG_AM1_HI 27.7
/* Golden iterations: the bracket (width 48) shrinks by 0.618^120 ~ 1e-25. */
#define ZCDP_SEARCH_ITERS 120

static int node_rho(const acct_event *ev, double *rho, dp_err *err)
{
    int rc;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN: /* 1 / (2 sigma^2), Bun & Steinke 2016 Prop. 1.6 */
        case ACCT_EV_LAPLACE:  /* 1 / (2 b^2): (1/b)-DP, then Prop. 1.4 (zcdp.h) */
            *rho = 1.0 / (2.0 * ev->noise_multiplier * ev->noise_multiplier);
            return DP_OK;
        case ACCT_EV_ZCDP:
            *rho = ev->rho;
            return DP_OK;
        case ACCT_EV_PURE:
            *rho = ev->epsilon * ev->epsilon / 2.0;
            return DP_OK;
        case ACCT_EV_SELF_COMPOSED: {
            double r;
            if ((rc = node_rho(ev->child, &r, err)) != DP_OK) {
                dp_err_prefix_field(err, "event");
                return rc;
            }
            *rho = r == 0.0 ? 0.0 : (double)ev->count * r;
            return DP_OK;
        }
        case ACCT_EV_COMPOSED: {
            double s = 0.0;
            for (size_t i = 0; i < ev->n_children; i++) {
                double r;
                if ((rc = node_rho(ev->children[i], &r, err)) != DP_OK) {
                    char idx[32];
                    snprintf(idx, sizeof idx, "[%zu]", i);
                    dp_err_prefix_field(err, idx);
                    dp_err_prefix_field(err, "events");
                    return rc;
                }
                s += r;
            }
            *rho = s;
            return DP_OK;
        }
        case ACCT_EV_POISSON:
        case ACCT_EV_SWOR:
            return dp_err_set(err, DP_EINVAL, "type",
                              "the zcdp accountant has no amplification by subsampling for %s; use "
                              "accountant rdp or pld",
                              acct_event_type_name(ev->type));
        case ACCT_EV_REPEAT_SELECT:
            /* No zCDP bound: Papernot & Steinke 2022 bound tuning in RDP; use accountant rdp. */
            return dp_err_set(err, DP_EINVAL, "type",
                              "repeat_and_select is not supported by the zcdp accountant");
    }
    return dp_err_set(err, DP_EINVAL, "type", "unknown event type");
}

int acct_zcdp_eval(const acct_event *ev, double *rho, dp_err *err)
{
    int rc = acct_event_check(ev, false, err);
    if (rc != DP_OK)
        return rc;
    return node_rho(ev, rho, err);
}

const char *acct_zcdp_conversion_name(acct_zcdp_conversion c)
{
    return c == ACCT_ZCDP_BS2016    ? "bun_steinke2016"
           : c == ACCT_ZCDP_CKS2020 ? "cks2020"
                                    : "unknown";
}

int acct_zcdp_conversion_parse(const char *s, acct_zcdp_conversion *out, dp_err *err)
{
    if (s && strcmp(s, "bun_steinke2016") == 0) {
        *out = ACCT_ZCDP_BS2016;
        return DP_OK;
    }
    if (s && strcmp(s, "cks2020") == 0) {
        *out = ACCT_ZCDP_CKS2020;
        return DP_OK;
    }
    return dp_err_set(err, DP_EINVAL, "conversion",
                      "zcdp conversion must be \"bun_steinke2016\" or \"cks2020\"");
}

/* objective at x = log(alpha - 1): eps (want_delta = 0) or log delta */
static double cks_obj(double x, double rho, double target, int want_delta)
{
    double am1 = exp(x), a = 1.0 + am1;
    double l1 = log1p(-1.0 / a); /* log(1 - 1/alpha) */
    if (want_delta) {
        /* log delta = (alpha-1)(alpha rho - eps) + (alpha-1) log(1-1/alpha) - log alpha */
        return am1 * (a * rho - target + l1) - log(a);
    }
    return a * rho + l1 - (log(target) + log(a)) / am1;
}

static double cks_min(double rho, double target, int want_delta, double *opt)
{
    static const double G = 0.6180339887498949;
    double xa = ZCDP_LOG_AM1_LO, xb = ZCDP_LOG_AM1_HI;
    double x1 = xb - G * (xb - xa), x2 = xa + G * (xb - xa);
    double f1 = cks_obj(x1, rho, target, want_delta), f2 = cks_obj(x2, rho, target, want_delta);
    for (int i = 0; i < ZCDP_SEARCH_ITERS; i++) {
        if (f1 < f2) {
            xb = x2;
            x2 = x1;
            f2 = f1;
            x1 = xb - G * (xb - xa);
            f1 = cks_obj(x1, rho, target, want_delta);
        } else {
            xa = x1;
            x1 = x2;
            f1 = f2;
            x2 = xa + G * (xb - xa);
            f2 = cks_obj(x2, rho, target, want_delta);
        }
    }
    double x = f1 < f2 ? x1 : x2;
    *opt = 1.0 + exp(x);
    return f1 < f2 ? f1 : f2;
}

static int check_rho(double rho, dp_err *err)
{
    if (!isfinite(rho) || rho < 0.0)
        return dp_err_set(err, DP_EINVAL, "rho", "rho must be finite and >= 0, got %g", rho);
    return DP_OK;
}

int acct_zcdp_to_epsilon(double rho, double delta, acct_zcdp_conversion conv, double *eps,
                         double *opt_order, dp_err *err)
{
    if (check_rho(rho, err) != DP_OK)
        return DP_EINVAL;
    if (!isfinite(delta) || delta <= 0.0 || delta >= 1.0)
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1), got %g", delta);
    double opt = DP_NAN;
    if (rho == 0.0) {
        *eps = 0.0;
    } else if (conv == ACCT_ZCDP_BS2016 || conv == ACCT_ZCDP_CKS2020) {
        double bs = rho + 2.0 * sqrt(rho * log(1.0 / delta)); /* Bun & Steinke 2016, Prop. 1.3 */
        *eps = bs;
        if (conv == ACCT_ZCDP_CKS2020) { /* never above BS, never below 0 */
            double e = cks_min(rho, delta, 0, &opt);
            *eps = e < 0.0 ? 0.0 : (e < bs ? e : bs);
        }
    } else {
        return dp_err_set(err, DP_EINVAL, "conversion", "unknown zcdp conversion");
    }
    if (opt_order)
        *opt_order = opt;
    return DP_OK;
}

int acct_zcdp_to_delta(double rho, double eps, acct_zcdp_conversion conv, double *delta,
                       double *opt_order, dp_err *err)
{
    if (check_rho(rho, err) != DP_OK)
        return DP_EINVAL;
    if (!isfinite(eps) || eps < 0.0)
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and >= 0, got %g",
                          eps);
    double opt = DP_NAN;
    if (rho == 0.0) {
        *delta = 0.0;
    } else if (conv == ACCT_ZCDP_BS2016 || conv == ACCT_ZCDP_CKS2020) {
        double bs = eps >= rho ? -(eps - rho) * (eps - rho) / (4.0 * rho) : 0.0;
        double l = bs;
        if (conv == ACCT_ZCDP_CKS2020) {
            double c = cks_min(rho, eps, 1, &opt);
            if (c < l)
                l = c;
        }
        *delta = dp_exp_prob_up(l);
    } else {
        return dp_err_set(err, DP_EINVAL, "conversion", "unknown zcdp conversion");
    }
    if (opt_order)
        *opt_order = opt;
    return DP_OK;
}
