/*
 * codec/tuning_json.c: reading and writing repeat_and_select distributions. See
 * codec/tuning_json.h.
 */
#include "service/codec/tuning_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accounting/tuning.h"
#include "service/codec/json_util.h"
#include "common/dp_math.h"

/* Rewrites "distribution.truncated_negative_binomial..." into "distribution.<alias>..." so that
 * errors name what the client wrote. */
static void rename_field(dp_err *err, const char *alias)
{
    static const char tnb[] = "distribution.truncated_negative_binomial";
    static const char tnb_name[] = "truncated_negative_binomial";
    if (err == NULL || alias == NULL || strncmp(err->field, tnb, sizeof tnb - 1) != 0)
        return;
    /* A geometric or logarithmic distribution is given by its mean: "needs gamma or mean" names
     * the mean there, and the message says the name the client used. */
    bool needs_mean = strstr(err->msg, "needs gamma or mean") != NULL;
    char buf[DP_ERR_FIELD_MAX];
    int n = snprintf(buf, sizeof buf, "distribution.%s%s", alias,
                     needs_mean ? ".mean" : err->field + sizeof tnb - 1);
    if (n > 0 && (size_t)n < sizeof buf)
        memcpy(err->field, buf, sizeof buf);
    const char *at = strstr(err->msg, tnb_name);
    if (at != NULL) {
        char msg[sizeof err->msg];
        n = snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - err->msg), err->msg, alias,
                     at + sizeof tnb_name - 1);
        if (n > 0 && (size_t)n < sizeof msg)
            memcpy(err->msg, msg, sizeof msg);
    }
}

static int not_object(dp_err *err, const char *kind, const json_t *v)
{
    char f[DP_ERR_FIELD_MAX];
    snprintf(f, sizeof f, "distribution.%s", kind);
    return dp_err_set(err, DP_EINVAL, f, "%s must be a JSON object (got %s)", f,
                      json_util_type_name(v));
}

/* The truncated negative binomial and its named special cases (Papernot & Steinke 2022):
 * geometric is eta = 1, logarithmic is eta = 0; only the general form takes eta. */
static const struct {
    const char *name;
    double eta; /* NAN: given by the request */
} TNB_FAMILY[] = {
    {"truncated_negative_binomial", DP_NAN},
    {"geometric", 1.0},
    {"logarithmic", 0.0},
};

/* The TNB_FAMILY entry called key, or -1. */
static int tnb_member(const char *key)
{
    for (int i = 0; i < (int)(sizeof TNB_FAMILY / sizeof TNB_FAMILY[0]); i++)
        if (strcmp(key, TNB_FAMILY[i].name) == 0)
            return i;
    return -1;
}

static int fail_in(dp_err *err, const char *kind)
{
    dp_err_prefix_field(err, kind);
    dp_err_prefix_field(err, "distribution");
    return err ? err->code : DP_EINVAL;
}

int tuning_json_parse_dist(const json_t *j, bool mean_optional, acct_tuning_dist *out, dp_err *err)
{
    if (!json_is_object(j) || json_object_size(j) != 1)
        return dp_err_set(err, DP_EINVAL, "distribution",
                          "distribution must be an object with exactly one of fixed, poisson, "
                          "truncated_negative_binomial, geometric, logarithmic");
    const char *key = json_object_iter_key(json_object_iter((json_t *)j));
    const json_t *v = json_object_iter_value(json_object_iter((json_t *)j));
    acct_tuning_dist d = {ACCT_TUNE_FIXED, 0, DP_NAN, DP_NAN, DP_NAN};
    const char *alias = NULL;
    if (strcmp(key, "fixed") == 0) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > ACCT_TUNING_MAX_K)
            return dp_err_set(err, DP_EINVAL, "distribution.fixed",
                              "distribution.fixed must be an integer number of runs in [1, %d]",
                              ACCT_TUNING_MAX_K);
        d.k = (uint64_t)json_integer_value(v);
    } else if (strcmp(key, "poisson") == 0) {
        static const char *const keys[] = {"mean"};
        d.kind = ACCT_TUNE_POISSON;
        if (!json_is_object(v))
            return not_object(err, key, v);
        if (json_util_check_keys(v, keys, 1, err) != DP_OK ||
            (mean_optional ? json_util_opt_number(v, "mean", DP_NAN, &d.mean, err)
                           : json_util_req_number(v, "mean", &d.mean, err)) != DP_OK)
            return fail_in(err, "poisson");
    } else if (tnb_member(key) >= 0) {
        static const char *const keys_tnb[] = {"eta", "gamma", "mean"};
        static const char *const keys_alias[] = {"gamma", "mean"};
        double eta = TNB_FAMILY[tnb_member(key)].eta;
        bool is_tnb = isnan(eta);
        alias = is_tnb ? NULL : key;
        d.kind = ACCT_TUNE_TRUNC_NEGBIN;
        d.eta = is_tnb ? 0.0 : eta;
        if (!json_is_object(v))
            return not_object(err, key, v);
        if (json_util_check_keys(v, is_tnb ? keys_tnb : keys_alias, is_tnb ? 3 : 2, err) != DP_OK ||
            (is_tnb && json_util_req_number(v, "eta", &d.eta, err) != DP_OK) ||
            json_util_opt_number(v, "gamma", DP_NAN, &d.gamma, err) != DP_OK ||
            json_util_opt_number(v, "mean", DP_NAN, &d.mean, err) != DP_OK)
            return fail_in(err, key);
        if (!isnan(d.gamma) && !isnan(d.mean)) {
            char f[DP_ERR_FIELD_MAX];
            snprintf(f, sizeof f, "distribution.%s.mean", key);
            return dp_err_set(err, DP_EINVAL, f, "give either gamma or mean for %s, not both", key);
        }
    } else {
        char f[DP_ERR_FIELD_MAX];
        snprintf(f, sizeof f, "distribution.%s", key);
        return dp_err_set(err, DP_EINVAL, f,
                          "unknown distribution '%.40s': use fixed, poisson, "
                          "truncated_negative_binomial, geometric or logarithmic",
                          key);
    }
    if (!mean_optional || d.kind == ACCT_TUNE_FIXED || !(isnan(d.mean) && isnan(d.gamma))) {
        int rc = acct_tuning_dist_check(&d, err);
        if (rc != DP_OK) {
            rename_field(err, alias);
            return rc;
        }
    } else if (d.kind == ACCT_TUNE_TRUNC_NEGBIN &&
               !(isfinite(d.eta) && d.eta > -1.0 && d.eta <= ACCT_TUNING_MAX_ETA)) {
        /* mean left for the caller: still check eta now */
        acct_tuning_dist probe = d;
        probe.mean = 2.0;
        int rc = acct_tuning_dist_check(&probe, err);
        rename_field(err, alias);
        return rc;
    }
    *out = d;
    return DP_OK;
}

json_t *tuning_json_dist(const acct_tuning_dist *d)
{
    switch (d->kind) {
        case ACCT_TUNE_FIXED:
            return json_pack("{s:I}", "fixed", (json_int_t)d->k);
        case ACCT_TUNE_POISSON:
            return json_pack("{s:{s:o}}", "poisson", "mean", json_util_real(d->mean));
        case ACCT_TUNE_TRUNC_NEGBIN:
            return json_pack("{s:{s:o, s:o, s:o}}", "truncated_negative_binomial", "eta",
                             json_util_real(d->eta), "gamma", json_util_real(d->gamma), "mean",
                             json_util_real(d->mean));
    }
    return NULL;
}
