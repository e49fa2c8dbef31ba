/*
 * codec/job_spec.c: POST /v1/jobs bodies. Contract in codec/job_spec.h.
 *
 * Each object is read by a small reader that knows its path ("privacy", "dataset"), so that every
 * error names the field in full. Numbers must be finite; integers must be JSON integers (or reals
 * with an integral value, as 1e3); booleans must be booleans.
 */
#include "service/codec/job_spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "federated/fl_algo.h"
#include "federated/fl_altmin.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* An object being read, with its path for the error messages ("" at the top). */
typedef struct reader {
    const json_t *obj;
    const char *path;
    dp_err *err;
} reader;

/* The full name of key in r: "key" or "path.key". */
static const char *field(const reader *r, const char *key, char *buf, size_t cap)
{
    if (r->path[0] == '\0')
        snprintf(buf, cap, "%s", key);
    else
        snprintf(buf, cap, "%s.%s", r->path, key);
    return buf;
}

/* "<field> is required (<what>)" or "<field> must be <what>". */
static int fail(const reader *r, const char *key, bool required, const char *what)
{
    char f[DP_ERR_FIELD_MAX];
    field(r, key, f, sizeof f);
    if (required)
        return dp_err_set(r->err, DP_EINVAL, f, "%s is required (%s)", f, what);
    return dp_err_set(r->err, DP_EINVAL, f, "%s must be %s", f, what);
}

static int check_keys(const reader *r, const char *const *allowed, size_t n)
{
    if (!json_is_object(r->obj))
        return dp_err_set(r->err, DP_EINVAL, r->path[0] ? r->path : "body", "%s must be an object",
                          r->path[0] ? r->path : "the body");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)r->obj, key, v)
    {
        (void)v;
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char f[DP_ERR_FIELD_MAX];
            field(r, key, f, sizeof f);
            return dp_err_set(r->err, DP_EINVAL, f, "unknown field \"%.40s\"", f);
        }
    }
    return DP_OK;
}

/* A number in [lo, hi] (absent or null: def, or a 400 when required). */
static int num(const reader *r, const char *key, bool required, double def, double lo, double hi,
               double *out)
{
    const json_t *v = json_object_get(r->obj, key);
    if (v == NULL || json_is_null(v)) {
        if (required)
            return fail(r, key, true, "a number");
        *out = def;
        return DP_OK;
    }
    if (!json_is_number(v))
        return fail(r, key, false, json_is_string(v) ? "a number, not a string" : "a number");
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) {
        char f[DP_ERR_FIELD_MAX];
        field(r, key, f, sizeof f);
        return dp_err_set(r->err, DP_EINVAL, f, "%s must be in [%g, %g] (got %g)", f, lo, hi, x);
    }
    *out = x;
    return DP_OK;
}

/* A number in (lo, hi]: lo excluded. */
static int num_pos(const reader *r, const char *key, bool required, double def, double lo,
                   double hi, double *out)
{
    int rc = num(r, key, required, def, lo, hi, out);
    if (rc == DP_OK && !(*out > lo) && json_object_get(r->obj, key) != NULL) {
        char f[DP_ERR_FIELD_MAX];
        field(r, key, f, sizeof f);
        return dp_err_set(r->err, DP_EINVAL, f, "%s must be greater than %g (got %g)", f, lo, *out);
    }
    return rc;
}

static int integer(const reader *r, const char *key, bool required, int64_t def, int64_t lo,
                   int64_t hi, int64_t *out)
{
    double x;
    int rc = num(r, key, required, (double)def, (double)lo, (double)hi, &x);
    if (rc != DP_OK)
        return rc;
    if (x != floor(x)) {
        char f[DP_ERR_FIELD_MAX];
        field(r, key, f, sizeof f);
        return dp_err_set(r->err, DP_EINVAL, f, "%s must be an integer (got %g)", f, x);
    }
    *out = (int64_t)x;
    return DP_OK;
}

static int string(const reader *r, const char *key, bool required, const char *def,
                  const char **out)
{
    const json_t *v = json_object_get(r->obj, key);
    if (v == NULL || json_is_null(v)) {
        if (required)
            return fail(r, key, true, "a string");
        *out = def;
        return DP_OK;
    }
    if (!json_is_string(v))
        return fail(r, key, false, "a string");
    *out = json_string_value(v);
    return DP_OK;
}

static int boolean(const reader *r, const char *key, bool def, bool *out)
{
    const json_t *v = json_object_get(r->obj, key);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return DP_OK;
    }
    if (!json_is_boolean(v))
        return fail(r, key, false, "true or false");
    *out = json_is_true(v);
    return DP_OK;
}

/* One of names[] (absent: def, or required); *idx its index. */
static int choice(const reader *r, const char *key, const char *const *names, size_t n,
                  const char *def, size_t *idx)
{
    const char *s;
    int rc = string(r, key, def == NULL, def, &s);
    if (rc != DP_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *idx = i;
            return DP_OK;
        }
    char list[160] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    char f[DP_ERR_FIELD_MAX];
    field(r, key, f, sizeof f);
    return dp_err_set(r->err, DP_EINVAL, f, "%s must be one of %s (got \"%.40s\")", f, list, s);
}

/* ---- the parts ---- */

static const char *const ALGORITHMS[] = {
    "local",  "fedavg", "finetune", "mrmtl",     "ditto", "dp_fedavg", "ppsgd",
    "fedhdp", "altmin", "adaped",   "dp_adaped", "ifca",  "adamix",    "gaussian_prior"};
#define ALGO_FEDHDP 7 /* indices in ALGORITHMS */
#define ALGO_ALTMIN 8
#define ALGO_IFCA   11

/* ppsgd's ratio: a number >= 0, or "inf" (global learning only). */
static int parse_ratio(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "ratio");
    s->ratio = 1.0;
    if (v == NULL)
        return DP_OK;
    if (strcmp(s->algorithm, "ppsgd") != 0)
        return dp_err_set(err, DP_EINVAL, "ratio", "ratio applies to ppsgd only");
    if (json_is_string(v) && strcmp(json_string_value(v), "inf") == 0) {
        s->ratio = DP_INF;
        return DP_OK;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
        json_number_value(v) > 1e12)
        return dp_err_set(err, DP_EINVAL, "ratio",
                          "ratio must be a number in [0, 1e12] or \"inf\" (the global step over "
                          "the personal step; 0: local learning only, \"inf\": global only)");
    s->ratio = json_number_value(v);
    return DP_OK;
}

/* fedhdp's silo list of group gi: data-set silo names, none listed by an earlier group. */
static int parse_group_silos(const json_t *v, const char *path, job_spec *s, size_t gi, dp_err *err)
{
    job_hdp_group *g = &s->hdp_groups[gi];
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 1 || n > JOB_MAX_BINDINGS)
        return dp_err_set(err, DP_EINVAL, path,
                          "%s must list 1..%d data-set silo names (leave it out in the one group "
                          "that takes every silo no other group lists)",
                          path, JOB_MAX_BINDINGS);
    g->silos = dp_calloc(n, sizeof *g->silos);
    if (g->silos == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < n; j++) {
        const json_t *e = json_array_get(v, j);
        char f[DP_ERR_FIELD_MAX];
        snprintf(f, sizeof f, "%.24s[%zu]", path, j);
        if (!json_is_string(e) || json_string_length(e) < 1 ||
            json_string_length(e) >= JOB_NAME_MAX)
            return dp_err_set(err, DP_EINVAL, f, "%s must be a silo name of 1..%d bytes", f,
                              JOB_NAME_MAX - 1);
        const char *name = json_string_value(e);
        for (size_t h = 0; h <= gi; h++)
            for (size_t i = 0; i < (h == gi ? g->n_silos : s->hdp_groups[h].n_silos); i++)
                if (strcmp(s->hdp_groups[h].silos[i], name) == 0)
                    return dp_err_set(err, DP_EINVAL, f,
                                      "%s: silo \"%.40s\" is listed twice (a silo belongs to one "
                                      "privacy group)",
                                      f, name);
        snprintf(g->silos[g->n_silos++], JOB_NAME_MAX, "%s", name);
    }
    return DP_OK;
}

/* fedhdp's group gi at path ("fedhdp.groups[gi]"). */
static int parse_group(const json_t *v, const char *path, job_spec *s, size_t gi, dp_err *err)
{
    reader r = {v, path, err};
    static const char *const KEYS[] = {
        "name", "silos", "private", "target_epsilon", "noise_multiplier", "r", "lambda"};
    job_hdp_group *g = &s->hdp_groups[gi];
    fl_hdp_group_cfg *e = &s->hdp[gi];
    char f[DP_ERR_FIELD_MAX];
    const char *name = NULL;
    bool priv = true;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = string(&r, "name", false, NULL, &name);
    if (rc == DP_OK && name != NULL && (name[0] == '\0' || strlen(name) >= sizeof g->name))
        rc = dp_err_set(err, DP_EINVAL, field(&r, "name", f, sizeof f), "%s must be 1..%zu bytes",
                        f, sizeof g->name - 1);
    if (rc == DP_OK && name != NULL)
        snprintf(g->name, sizeof g->name, "%s", name);
    else if (rc == DP_OK)
        snprintf(g->name, sizeof g->name, "group%zu", gi);
    for (size_t h = 0; rc == DP_OK && h < gi; h++)
        if (strcmp(s->hdp_groups[h].name, g->name) == 0)
            rc = dp_err_set(err, DP_EINVAL, field(&r, "name", f, sizeof f),
                            "%s: another group is called \"%s\"", f, g->name);
    if (rc == DP_OK)
        rc = boolean(&r, "private", true, &priv);
    bool has_t = json_object_get(v, "target_epsilon") != NULL;
    bool has_z = json_object_get(v, "noise_multiplier") != NULL;
    if (rc == DP_OK && !priv && (has_t || has_z))
        rc = dp_err_set(err, DP_EINVAL,
                        field(&r, has_t ? "target_epsilon" : "noise_multiplier", f, sizeof f),
                        "%s applies to private groups only (this one has \"private\": false)", f);
    if (rc == DP_OK && has_t && has_z)
        rc = dp_err_set(err, DP_EINVAL, path,
                        "%s takes at most one of target_epsilon and noise_multiplier", path);
    e->opt_out = !priv;
    e->noise = 0.0;
    g->privacy = !priv   ? JOB_PRIVACY_NONE
                 : has_t ? JOB_PRIVACY_TARGET
                 : has_z ? JOB_PRIVACY_NOISE
                         : s->privacy;
    g->target_epsilon = s->target_epsilon;
    if (rc == DP_OK && has_t)
        rc = num_pos(&r, "target_epsilon", true, 0, 0, 1000, &g->target_epsilon);
    if (rc == DP_OK && has_z)
        rc = num_pos(&r, "noise_multiplier", true, 0, 0, 1e6, &e->noise);
    else if (rc == DP_OK && g->privacy == JOB_PRIVACY_NOISE)
        e->noise = s->noise_multiplier;
    if (rc == DP_OK)
        rc = num(&r, "r", false, 1.0, 0, 1e6, &e->r);
    if (rc == DP_OK)
        rc = num(&r, "lambda", false, s->lambda, 0, 1e6, &e->lambda);
    const json_t *sv = json_object_get(v, "silos");
    g->rest = sv == NULL || json_is_null(sv);
    for (size_t h = 0; rc == DP_OK && g->rest && h < gi; h++)
        if (s->hdp_groups[h].rest)
            rc = dp_err_set(err, DP_EINVAL, field(&r, "silos", f, sizeof f),
                            "%s is required: only one group may leave it out (that group takes "
                            "every silo no other group lists; here groups[%zu] does)",
                            f, h);
    char sf[32];
    if (rc == DP_OK && !g->rest)
        rc = parse_group_silos(sv, field(&r, "silos", sf, sizeof sf), s, gi, err);
    return rc;
}

/* fedhdp.adaptive_clip: {"quantile" (0.5), "lr" (0.2), "count_noise" (required)}: the defaults
 * are Andrew et al.'s, which Aldaghri et al. use (their Table 7). v may be NULL (fixed clip). */
static int parse_adaptive_clip(const json_t *v, job_spec *s, dp_err *err)
{
    if (v == NULL || json_is_null(v))
        return DP_OK;
    reader r = {v, "fedhdp.adaptive_clip", err};
    static const char *const KEYS[] = {"quantile", "lr", "count_noise"};
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = num_pos(&r, "quantile", false, 0.5, 0, 1, &s->hdp_clip_quantile);
    if (rc == DP_OK && !(s->hdp_clip_quantile < 1))
        rc = dp_err_set(err, DP_EINVAL, "fedhdp.adaptive_clip.quantile",
                        "fedhdp.adaptive_clip.quantile must be below 1 (got %g)",
                        s->hdp_clip_quantile);
    if (rc == DP_OK)
        rc = num_pos(&r, "lr", false, 0.2, 0, 100, &s->hdp_clip_lr);
    if (rc == DP_OK)
        rc = num_pos(&r, "count_noise", true, 0, 0, 1e6, &s->hdp_count_noise);
    s->hdp_adaptive = rc == DP_OK;
    return rc;
}

static bool is_adaped(const job_spec *s)
{
    return strcmp(s->algorithm, "adaped") == 0 || strcmp(s->algorithm, "dp_adaped") == 0;
}

/* The "adaped" block (Ozkara, Acharya et al., Alg. 2; docs/TRAINING.md "adaped and dp_adaped"):
 * {"tau" (10), "psi_init" (3.5), "psi_floor" (0.5), "lr_mu" (0.1), "lr_psi" (0.05), "kd_psi" (1),
 * "clip_psi" (1, dp_adaped only), "unsampled_rounds" (0: Alg. 2; > 0: Alg. 7)}; the defaults are
 * the paper's App. K.1 settings. Absent: all defaults. */
static int parse_adaped(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "adaped");
    bool is = is_adaped(s), dp = strcmp(s->algorithm, "dp_adaped") == 0;
    if (v != NULL && !json_is_null(v) && !is)
        return dp_err_set(err, DP_EINVAL, "adaped",
                          "adaped applies to the adaped and dp_adaped algorithms only");
    s->ap_tau = 10;
    s->ap_psi_init = 3.5;
    s->ap_psi_floor = 0.5;
    s->ap_lr_mu = 0.1;
    s->ap_lr_psi = 0.05;
    s->ap_kd_psi = 1.0;
    s->ap_clip_psi = 1.0;
    s->ap_unsampled_rounds = 0;
    if (!dp && is)
        s->client_rate = 1.0; /* adaped has no privacy block */
    if (v == NULL || json_is_null(v))
        return DP_OK;
    reader r = {v, "adaped", err};
    static const char *const KEYS[] = {"tau",      "psi_init",    "psi_floor",
                                       "lr_mu",    "lr_psi",      "kd_psi",
                                       "clip_psi", "client_rate", "unsampled_rounds"};
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = integer(&r, "tau", false, 10, 1, FL_MAX_AP_TAU, &s->ap_tau);
    if (rc == DP_OK)
        rc = num_pos(&r, "psi_init", false, 3.5, 0, 1e6, &s->ap_psi_init);
    if (rc == DP_OK)
        rc = num_pos(&r, "psi_floor", false, 0.5, 0, 1e6, &s->ap_psi_floor);
    if (rc == DP_OK && s->ap_psi_init < s->ap_psi_floor)
        rc = dp_err_set(err, DP_EINVAL, "adaped.psi_init",
                        "adaped.psi_init (%g) must be >= adaped.psi_floor (%g)", s->ap_psi_init,
                        s->ap_psi_floor);
    if (rc == DP_OK)
        rc = num_pos(&r, "lr_mu", false, 0.1, 0, 1e3, &s->ap_lr_mu);
    if (rc == DP_OK)
        rc = num(&r, "lr_psi", false, 0.05, 0, 1e3, &s->ap_lr_psi);
    if (rc == DP_OK)
        rc = num_pos(&r, "kd_psi", false, 1.0, 0, 1e3, &s->ap_kd_psi);
    if (rc == DP_OK)
        rc = integer(&r, "unsampled_rounds", false, 0, 0, JOB_MAX_ROUNDS, &s->ap_unsampled_rounds);
    if (rc == DP_OK && !dp && json_object_get(v, "clip_psi") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "adaped.clip_psi",
                        "adaped.clip_psi applies to dp_adaped only (adaped clips nothing)");
    if (rc == DP_OK)
        rc = num_pos(&r, "clip_psi", false, 1.0, 0, 1e6, &s->ap_clip_psi);
    if (rc == DP_OK && dp && json_object_get(v, "client_rate") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "adaped.client_rate",
                        "dp_adaped samples silos at privacy.client_rate (part of its privacy)");
    if (rc == DP_OK && !dp) /* Alg. 2's K/m for the non-private version */
        rc = num_pos(&r, "client_rate", false, 1, 0, 1, &s->client_rate);
    return rc;
}

static bool is_prior(const job_spec *s)
{
    return strcmp(s->algorithm, "adamix") == 0 || strcmp(s->algorithm, "gaussian_prior") == 0;
}

/* The "adamix" block (Ozkara, Acharya et al., Alg. 1; docs/TRAINING.md "adamix and
 * gaussian_prior"): {"components" (2), "steps" (20), "em_iters" (3), "noise_var" (1),
 * "var_floor" (1e-4)}; the "gaussian_prior" block (Alg. 4 and 5): {"variant": "gd" (default) |
 * "em", "steps" (1), "sigma_theta2" (1), "sigma_x2" (1), "lr_mu" (1), "lr_var" (1), "var_floor"
 * (1e-4)}. Each applies to its algorithm only; absent: all defaults. */
static int parse_prior(const json_t *body, job_spec *s, dp_err *err)
{
    bool mix = strcmp(s->algorithm, "adamix") == 0,
         gp = strcmp(s->algorithm, "gaussian_prior") == 0;
    static const char *const BLOCKS[] = {"adamix", "gaussian_prior"};
    for (size_t i = 0; i < N_ELEMS(BLOCKS); i++) {
        const json_t *b = json_object_get(body, BLOCKS[i]);
        if (b != NULL && !json_is_null(b) && strcmp(s->algorithm, BLOCKS[i]) != 0)
            return dp_err_set(err, DP_EINVAL, BLOCKS[i], "%s applies to the %s algorithm only",
                              BLOCKS[i], BLOCKS[i]);
    }
    s->pr_steps = mix ? 20 : 1;
    s->pr_components = 2;
    s->pr_em_iters = 3;
    s->pr_variant = FL_GP_GD;
    s->pr_var_floor = 1e-4;
    s->pr_noise_var = 1.0;
    s->pr_sigma_theta2 = 1.0;
    s->pr_sigma_x2 = 1.0;
    s->pr_lr_mu = 1.0;
    s->pr_lr_var = 1.0;
    if (!mix && !gp)
        return DP_OK;
    const json_t *v = json_object_get(body, s->algorithm);
    if (v == NULL || json_is_null(v))
        return DP_OK;
    reader r = {v, s->algorithm, err};
    static const char *const MIX_KEYS[] = {"components", "steps", "em_iters", "noise_var",
                                           "var_floor"};
    static const char *const GP_KEYS[] = {"variant", "steps",  "sigma_theta2", "sigma_x2",
                                          "lr_mu",   "lr_var", "var_floor"};
    static const char *const VARIANTS[] = {"gd", "em"}; /* FL_GP_GD, FL_GP_EM */
    int rc = mix ? check_keys(&r, MIX_KEYS, N_ELEMS(MIX_KEYS))
                 : check_keys(&r, GP_KEYS, N_ELEMS(GP_KEYS));
    if (rc == DP_OK)
        rc = integer(&r, "steps", false, s->pr_steps, 1, FL_MAX_PR_STEPS, &s->pr_steps);
    if (rc == DP_OK)
        rc = num_pos(&r, "var_floor", false, 1e-4, 0, 1e6, &s->pr_var_floor);
    if (rc == DP_OK && mix)
        rc = integer(&r, "components", false, 2, 1, FL_MAX_MIX_COMPONENTS, &s->pr_components);
    if (rc == DP_OK && mix)
        rc = integer(&r, "em_iters", false, 3, 1, FL_MAX_PR_EM_ITERS, &s->pr_em_iters);
    if (rc == DP_OK && mix)
        rc = num_pos(&r, "noise_var", false, 1.0, 0, 1e6, &s->pr_noise_var);
    if (!gp || rc != DP_OK)
        return rc;
    size_t vi = 0;
    rc = choice(&r, "variant", VARIANTS, N_ELEMS(VARIANTS), "gd", &vi);
    s->pr_variant = vi == 1 ? FL_GP_EM : FL_GP_GD;
    if (rc == DP_OK)
        rc = num_pos(&r, "sigma_theta2", false, 1.0, 0, 1e12, &s->pr_sigma_theta2);
    if (rc == DP_OK)
        rc = num_pos(&r, "sigma_x2", false, 1.0, 0, 1e12, &s->pr_sigma_x2);
    if (rc == DP_OK)
        rc = num(&r, "lr_mu", false, 1.0, 0, 2, &s->pr_lr_mu);
    if (rc == DP_OK)
        rc = num(&r, "lr_var", false, 1.0, 0, 1, &s->pr_lr_var);
    return rc;
}

/* The "fedhdp" block: its privacy groups (Aldaghri, Mahdavifar & Beirami, Alg. 2). Without it,
 * one private group of every silo at the privacy block's level (DP-FedAvg+Ditto). */
static int parse_fedhdp(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "fedhdp");
    bool is = strcmp(s->algorithm, "fedhdp") == 0;
    if (v != NULL && !is)
        return dp_err_set(err, DP_EINVAL, "fedhdp", "fedhdp applies to the fedhdp algorithm only");
    if (!is)
        return DP_OK;
    if (v == NULL || json_is_null(v)) {
        s->n_hdp_groups = 1;
        snprintf(s->hdp_groups[0].name, sizeof s->hdp_groups[0].name, "private");
        s->hdp_groups[0].privacy = s->privacy;
        s->hdp_groups[0].target_epsilon = s->target_epsilon;
        s->hdp_groups[0].rest = true;
        s->hdp[0] = (fl_hdp_group_cfg){
            false, s->privacy == JOB_PRIVACY_NOISE ? s->noise_multiplier : 0.0, 1.0, s->lambda};
        return DP_OK;
    }
    reader r = {v, "fedhdp", err};
    static const char *const KEYS[] = {"groups", "adaptive_clip"};
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = parse_adaptive_clip(json_object_get(v, "adaptive_clip"), s, err);
    if (rc != DP_OK)
        return rc;
    const json_t *gs = json_object_get(v, "groups");
    if (!json_is_array(gs) || json_array_size(gs) < 1 || json_array_size(gs) > JOB_MAX_HDP_GROUPS)
        return dp_err_set(err, DP_EINVAL, "fedhdp.groups",
                          "fedhdp.groups must list 1..%d privacy groups, e.g. [{\"silos\": "
                          "[\"s0\"], \"private\": false}, {\"r\": 0.1}]",
                          JOB_MAX_HDP_GROUPS);
    s->hdp_given = true;
    bool any = false;
    for (size_t i = 0; i < json_array_size(gs); i++) {
        char path[24]; /* "fedhdp.groups[15]": the fields below it fit DP_ERR_FIELD_MAX */
        snprintf(path, sizeof path, "fedhdp.groups[%zu]", i % 100);
        s->n_hdp_groups = i + 1;
        rc = parse_group(json_array_get(gs, i), path, s, i, err);
        if (rc != DP_OK)
            return rc;
        any = any || s->hdp[i].r > 0;
    }
    if (!any)
        return dp_err_set(err, DP_EINVAL, "fedhdp.groups",
                          "at least one group needs r > 0 (with r = 0 everywhere nothing trains)");
    return DP_OK;
}

/* The "ifca" block (after rounds, lambda and privacy): {"clusters" (2), "select_rounds" (every
 * IFCA round), "warm_rounds" (rounds: IFCA throughout; fewer: MR-MTL with lambda afterwards, Liu
 * et al.'s Alg. A2), "selection_epsilon" (a private job: per selection, default 0.03 x
 * target_epsilon, the heuristic of Liu et al.'s code; required with a noise_multiplier; refused
 * without privacy, whose selection is the exact argmin), "loss_bound" (1: each record's loss is
 * clipped to [0, bound] in the selection score, its sensitivity)}. */
static int parse_ifca(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "ifca");
    bool is = strcmp(s->algorithm, "ifca") == 0;
    if (v != NULL && !json_is_null(v) && !is)
        return dp_err_set(err, DP_EINVAL, "ifca", "the ifca block applies to ifca only");
    s->ifca_clusters = 2;
    s->ifca_warm_rounds = s->rounds;
    s->ifca_select_rounds = s->rounds;
    s->ifca_select_eps = DP_INF;
    s->ifca_loss_bound = 1.0;
    if (!is)
        return DP_OK;
    if (v != NULL && !json_is_null(v) && !json_is_object(v))
        return dp_err_set(err, DP_EINVAL, "ifca",
                          "ifca must be an object: {\"clusters\": 2, \"select_rounds\": 5, "
                          "\"selection_epsilon\": 0.05}");
    json_t *empty = json_object();
    if (empty == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    reader r = {v != NULL && !json_is_null(v) ? v : empty, "ifca", err};
    static const char *const KEYS[] = {"clusters", "select_rounds", "warm_rounds",
                                       "selection_epsilon", "loss_bound"};
    bool has_eps = json_object_get(r.obj, "selection_epsilon") != NULL;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = integer(&r, "clusters", false, 2, 1, FL_MAX_IFCA_CLUSTERS, &s->ifca_clusters);
    if (rc == DP_OK)
        rc = integer(&r, "warm_rounds", false, s->rounds, 1, s->rounds, &s->ifca_warm_rounds);
    if (rc == DP_OK)
        rc = integer(&r, "select_rounds", false, s->ifca_warm_rounds, 1, s->ifca_warm_rounds,
                     &s->ifca_select_rounds);
    if (rc == DP_OK)
        rc = num_pos(&r, "loss_bound", false, 1.0, 0, 1e6, &s->ifca_loss_bound);
    if (rc == DP_OK && has_eps && s->privacy == JOB_PRIVACY_NONE)
        rc = dp_err_set(err, DP_EINVAL, "ifca.selection_epsilon",
                        "ifca.selection_epsilon applies to a private job (without privacy the "
                        "selection is the exact argmin)");
    if (rc == DP_OK && !has_eps && s->privacy == JOB_PRIVACY_NOISE && s->ifca_clusters > 1)
        rc = fail(&r, "selection_epsilon", true,
                  "a private job's cluster selection is private: its epsilon per selection");
    if (rc == DP_OK && (has_eps || s->privacy == JOB_PRIVACY_TARGET))
        rc = num_pos(&r, "selection_epsilon", false, 0.03 * s->target_epsilon, 0, 1000,
                     &s->ifca_select_eps);
    json_decref(empty);
    return rc;
}

/* altmin's own block: {"rank": k (default 2), "init": "random" (default) | "spectral"}. */
static int parse_altmin(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "altmin");
    s->altmin_rank = 2;
    s->altmin_spectral = false;
    if (v == NULL || json_is_null(v))
        return DP_OK;
    if (strcmp(s->algorithm, "altmin") != 0)
        return dp_err_set(err, DP_EINVAL, "altmin", "the altmin block applies to altmin only");
    if (!json_is_object(v))
        return dp_err_set(err, DP_EINVAL, "altmin",
                          "altmin must be an object: {\"rank\": 2, \"init\": \"random\"}");
    reader r = {v, "altmin", err};
    static const char *const KEYS[] = {"rank", "init"};
    static const char *const INITS[] = {"random", "spectral"};
    size_t in = 0;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = integer(&r, "rank", false, 2, 1, FL_ALTMIN_MAX_K, &s->altmin_rank);
    if (rc == DP_OK)
        rc = choice(&r, "init", INITS, N_ELEMS(INITS), "random", &in);
    s->altmin_spectral = in == 1;
    return rc;
}

/* altmin has no SGD: lr, batch_size and local_epochs do not apply; the model is linear (default)
 * and the features are used as they are (per-silo standardisation would scale each user's x
 * differently and break the shared subspace). */
static int check_altmin_common(const json_t *body, job_spec *s, dp_err *err)
{
    static const char *const NOT_ALTMIN[] = {"lr", "batch_size", "local_epochs"};
    for (size_t i = 0; i < N_ELEMS(NOT_ALTMIN); i++)
        if (json_object_get(body, NOT_ALTMIN[i]) != NULL)
            return dp_err_set(err, DP_EINVAL, NOT_ALTMIN[i],
                              "%s does not apply to altmin (no SGD: each round is one exact "
                              "alternating-minimisation step)",
                              NOT_ALTMIN[i]);
    const json_t *st = json_object_get(body, "standardize");
    if (json_is_string(st) && strcmp(json_string_value(st), "silo") == 0)
        return dp_err_set(err, DP_EINVAL, "standardize",
                          "altmin needs standardize \"none\": per-silo scaling changes each "
                          "user's features differently and breaks the shared subspace");
    s->batch_size = 1; /* unused; keeps fl_job_cfg_check's domain */
    s->lr = 1.0;
    s->local_epochs = 1;
    return DP_OK;
}

static int parse_dataset(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "dataset");
    if (v == NULL || json_is_null(v))
        return dp_err_set(err, DP_EINVAL, "dataset",
                          "dataset is required: an uploaded data set's id, \"fashion-mnist\", or "
                          "{\"generator\": \"synthetic-linreg\", ...}");
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 1)
            return dp_err_set(err, DP_EINVAL, "dataset", "dataset must be a positive id");
        s->data = JOB_DATA_UPLOAD;
        s->dataset_id = (int64_t)json_integer_value(v);
        return DP_OK;
    }
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "fashion-mnist") == 0) {
            s->data = JOB_DATA_FASHION_MNIST;
            return DP_OK;
        }
        return dp_err_set(err, DP_EINVAL, "dataset",
                          "dataset \"%.40s\" is not a built-in data set (fashion-mnist); a "
                          "generator is given as {\"generator\": \"%.40s\", ...}",
                          json_string_value(v), json_string_value(v));
    }
    reader r = {v, "dataset", err};
    static const char *const KEYS[] = {"generator", "silos", "dim",     "n_min", "n_max",
                                       "tau",       "noise", "classes", "seed",  "rank"};
    static const char *const GENS[] = {"synthetic-linreg", "synthetic-classification",
                                       "synthetic-lowrank"};
    size_t g = 0;
    int64_t silos, dim, n_min, n_max, classes = 0, seed, rank = 0;
    double tau, noise;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = choice(&r, "generator", GENS, N_ELEMS(GENS), NULL, &g);
    /* synthetic-lowrank (Jain et al., NeurIPS 2021, §6): n_min rows per user, rank k */
    static const char *const NOT_LOWRANK[] = {"n_max", "tau", "classes"};
    for (size_t i = 0; rc == DP_OK && g == 2 && i < N_ELEMS(NOT_LOWRANK); i++)
        if (json_object_get(v, NOT_LOWRANK[i]) != NULL) {
            char f[48];
            snprintf(f, sizeof f, "dataset.%s", NOT_LOWRANK[i]);
            rc = dp_err_set(err, DP_EINVAL, f, "%s does not apply to synthetic-lowrank", f);
        }
    if (rc == DP_OK && g != 2 && json_object_get(v, "rank") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "dataset.rank",
                        "dataset.rank applies to synthetic-lowrank only");
    if (rc == DP_OK && g == 2)
        rc = integer(&r, "rank", false, 2, 1, FL_ALTMIN_MAX_K, &rank);
    if (rc == DP_OK)
        rc = integer(&r, "silos", false, 20, 1, FL_MAX_SILOS, &silos);
    if (rc == DP_OK)
        rc = integer(&r, "dim", false, 10, 1, 100000, &dim);
    if (rc == DP_OK)
        rc = integer(&r, "n_min", false, 100, 1, 10000000, &n_min);
    if (rc == DP_OK)
        rc = integer(&r, "n_max", false, n_min > 200 ? n_min : 200, 1, 10000000, &n_max);
    if (rc == DP_OK && n_max < n_min)
        rc = dp_err_set(err, DP_EINVAL, "dataset.n_max", "dataset.n_max must be >= n_min");
    if (rc == DP_OK)
        rc = num(&r, "tau", false, 0.1, 0, 1e6, &tau);
    if (rc == DP_OK)
        rc = num(&r, "noise", false, 0.1, 0, 1e6, &noise);
    if (rc == DP_OK && g == 1)
        rc = integer(&r, "classes", false, 2, 2, FL_MAX_CLASSES, &classes);
    else if (rc == DP_OK && json_object_get(v, "classes") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "dataset.classes",
                        "dataset.classes applies to synthetic-classification only");
    if (rc == DP_OK)
        rc = integer(&r, "seed", false, 1, 0, INT64_C(9007199254740991), &seed);
    if (rc != DP_OK)
        return rc;
    if (g == 2 && rank > dim)
        return dp_err_set(err, DP_EINVAL, "dataset.rank", "dataset.rank must be <= dim (%lld)",
                          (long long)dim);
    s->data = JOB_DATA_SYNTHETIC;
    s->synth = (fl_synth_spec){(size_t)silos, (size_t)dim,     (size_t)n_min,  (size_t)n_max, tau,
                               noise,         (size_t)classes, (uint64_t)seed, (size_t)rank};
    return DP_OK;
}

static int parse_partition(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "partition");
    if (v == NULL || json_is_null(v))
        return DP_OK;
    reader r = {v, "partition", err};
    static const char *const KEYS[] = {"kind", "silos",        "alpha", "classes_per_silo",
                                       "seed", "rows_per_silo"};
    static const char *const KINDS[] = {"natural", "iid", "dirichlet", "classes"};
    size_t k = 0;
    int64_t silos = 0, cps = 0, seed = 0, rps = 0;
    double alpha = 0;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = choice(&r, "kind", KINDS, N_ELEMS(KINDS), NULL, &k);
    if (rc == DP_OK && k != 0)
        rc = integer(&r, "silos", true, 0, 1, FL_MAX_SILOS, &silos);
    if (rc == DP_OK && k == 2)
        rc = num_pos(&r, "alpha", true, 0, 0, 1e6, &alpha);
    if (rc == DP_OK && k == 3)
        rc = integer(&r, "classes_per_silo", true, 0, 1, FL_MAX_CLASSES, &cps);
    if (rc == DP_OK)
        rc = integer(&r, "seed", false, (int64_t)(s->seed & INT64_C(0x1fffffffffffff)), 0,
                     INT64_C(9007199254740991), &seed);
    if (rc == DP_OK) /* absent: every row (0) */
        rc = integer(&r, "rows_per_silo", false, 0, 1, FL_MAX_ROWS_PER_SILO, &rps);
    if (rc != DP_OK)
        return rc;
    s->has_partition = true;
    s->partition = (fl_partition_spec){(fl_partition_kind)k, (size_t)silos,  alpha,
                                       (size_t)cps,          (uint64_t)seed, (size_t)rps};
    return DP_OK;
}

static int parse_model(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "model");
    if (v == NULL || json_is_null(v))
        return dp_err_set(err, DP_EINVAL, "model",
                          "model is required, e.g. {\"type\": \"linear\"} or {\"type\": \"mlp\", "
                          "\"hidden\": [64]}");
    reader r = {v, "model", err};
    static const char *const KEYS[] = {"type", "hidden"};
    static const char *const TYPES[] = {"linear", "logistic", "svm", "softmax", "mlp"};
    size_t t = 0;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = choice(&r, "type", TYPES, N_ELEMS(TYPES), NULL, &t);
    if (rc != DP_OK)
        return rc;
    memset(&s->model, 0, sizeof s->model);
    s->model.type = (fl_model_type)t; /* TYPES is in fl_model_type order */
    const json_t *h = json_object_get(v, "hidden");
    if (h != NULL && !json_is_null(h) && s->model.type != FL_MODEL_MLP)
        return dp_err_set(err, DP_EINVAL, "model.hidden", "model.hidden applies to mlp only");
    if (s->model.type != FL_MODEL_MLP)
        return DP_OK;
    if (h == NULL || !json_is_array(h) || json_array_size(h) < 1 ||
        json_array_size(h) > FL_MAX_HIDDEN)
        return dp_err_set(err, DP_EINVAL, "model.hidden",
                          "model.hidden must list 1..%d hidden-layer widths, e.g. [64]",
                          FL_MAX_HIDDEN);
    for (size_t i = 0; i < json_array_size(h); i++) {
        const json_t *w = json_array_get(h, i);
        if (!json_is_integer(w) || json_integer_value(w) < 1 ||
            json_integer_value(w) > JOB_MAX_HIDDEN_WIDTH)
            return dp_err_set(err, DP_EINVAL, "model.hidden",
                              "model.hidden[%zu] must be an integer in 1..%d", i,
                              JOB_MAX_HIDDEN_WIDTH);
        s->model.hidden[i] = (size_t)json_integer_value(w);
    }
    s->model.n_hidden = json_array_size(h);
    return DP_OK;
}

static int parse_privacy(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "privacy");
    if (strcmp(s->algorithm, "adaped") == 0) { /* client-level in form, but releases nothing */
        s->privacy = JOB_PRIVACY_NONE;
        if (v == NULL || json_is_null(v))
            return DP_OK;
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "adaped is not private: its private version is dp_adaped");
    }
    if (is_prior(s)) { /* silos upload their models or prior statistics in the clear */
        s->privacy = JOB_PRIVACY_NONE;
        if (v == NULL || json_is_null(v))
            return DP_OK;
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "%s is not private (its silos send their models or prior statistics "
                          "in the clear) and takes no privacy block",
                          s->algorithm);
    }
    if (v == NULL || json_is_null(v)) {
        if (fl_algo_client_level(s->algorithm))
            return dp_err_set(err, DP_EINVAL, "privacy",
                              "%s needs privacy: {\"target_epsilon\" or "
                              "\"noise_multiplier\", \"delta\", \"clip\"}",
                              s->algorithm);
        s->privacy = JOB_PRIVACY_NONE;
        return DP_OK;
    }
    reader r = {v, "privacy", err};
    static const char *const KEYS[] = {"target_epsilon", "noise_multiplier", "delta", "clip",
                                       "client_rate"};
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc != DP_OK)
        return rc;
    bool has_t = json_object_get(v, "target_epsilon") != NULL;
    bool has_z = json_object_get(v, "noise_multiplier") != NULL;
    if (has_t == has_z)
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "privacy takes exactly one of target_epsilon (calibrated per silo) and "
                          "noise_multiplier");
    s->privacy = has_t ? JOB_PRIVACY_TARGET : JOB_PRIVACY_NOISE;
    if (has_t)
        rc = num_pos(&r, "target_epsilon", true, 0, 0, 1000, &s->target_epsilon);
    else
        rc = num_pos(&r, "noise_multiplier", true, 0, 0, 1e6, &s->noise_multiplier);
    if (rc == DP_OK)
        rc = num_pos(&r, "delta", true, 0, 0, 0.5, &s->delta);
    if (rc == DP_OK)
        rc = num_pos(&r, "clip", true, 0, 0, 1e6, &s->clip);
    if (rc == DP_OK && !fl_algo_client_level(s->algorithm) &&
        json_object_get(v, "client_rate") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "privacy.client_rate",
                        "privacy.client_rate applies to dp_fedavg, ppsgd, fedhdp and dp_adaped "
                        "only");
    if (rc == DP_OK)
        rc = num_pos(&r, "client_rate", false, 1, 0, 1, &s->client_rate);
    return rc;
}

/* ppsgd's mode (after the privacy block: mode 1 reads client_rate): 1, 2 or 3, the algorithms of
 * Bietti et al., ICML 2022 (Alg. 1: full participation, one sample per user; Alg. 2: the
 * sample-weighted objective, minibatch sums; Alg. 3, the default: minibatch means). */
static int parse_ppsgd_mode(const json_t *body, job_spec *s, dp_err *err)
{
    reader r = {body, "", err};
    s->ppsgd_mode = 3;
    if (json_object_get(body, "ppsgd_mode") == NULL)
        return DP_OK;
    if (strcmp(s->algorithm, "ppsgd") != 0)
        return dp_err_set(err, DP_EINVAL, "ppsgd_mode", "ppsgd_mode applies to ppsgd only");
    int rc = integer(&r, "ppsgd_mode", true, 3, 1, 3, &s->ppsgd_mode);
    if (rc == DP_OK && s->ppsgd_mode == 1 && s->client_rate != 1.0)
        rc = dp_err_set(err, DP_EINVAL, "privacy.client_rate",
                        "ppsgd_mode 1 (Alg. 1) takes every user in every round: "
                        "privacy.client_rate must be 1");
    if (rc == DP_OK && s->ppsgd_mode == 1 && s->batch_size != 1)
        rc = dp_err_set(err, DP_EINVAL, "batch_size",
                        "ppsgd_mode 1 (Alg. 1) takes one sample per user per round: batch_size "
                        "must be 1");
    return rc;
}

static int parse_silos(const json_t *body, job_spec *s, dp_err *err)
{
    const json_t *v = json_object_get(body, "silos");
    if (v == NULL || json_is_null(v))
        return DP_OK;
    if (!json_is_object(v))
        return dp_err_set(err, DP_EINVAL, "silos",
                          "silos must map the data set's silo names to ledger silo ids, e.g. "
                          "{\"north\": 1}");
    size_t n = json_object_size(v);
    if (n > JOB_MAX_BINDINGS)
        return dp_err_set(err, DP_EINVAL, "silos", "silos binds at most %d silos",
                          JOB_MAX_BINDINGS);
    if (n == 0)
        return DP_OK;
    s->bindings = dp_calloc(n, sizeof *s->bindings);
    if (s->bindings == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const char *key;
    json_t *id;
    json_object_foreach((json_t *)v, key, id)
    {
        char f[DP_ERR_FIELD_MAX];
        snprintf(f, sizeof f, "silos.%s", key);
        if (key[0] == '\0' || strlen(key) >= JOB_NAME_MAX)
            return dp_err_set(err, DP_EINVAL, "silos", "a silo name must be 1..%d bytes",
                              JOB_NAME_MAX - 1);
        if (!json_is_integer(id) || json_integer_value(id) < 1)
            return dp_err_set(err, DP_EINVAL, f, "%s must be a ledger silo id (a positive integer)",
                              f);
        for (size_t j = 0; j < s->n_bindings; j++)
            if (s->bindings[j].silo_id == (int64_t)json_integer_value(id))
                return dp_err_set(
                    err, DP_EINVAL, f,
                    "%s: ledger silo %lld is bound twice (to \"%s\" too); each data-set "
                    "silo spends from its own budget",
                    f, (long long)json_integer_value(id), s->bindings[j].name);
        job_binding *b = &s->bindings[s->n_bindings++];
        snprintf(b->name, sizeof b->name, "%s", key);
        b->silo_id = (int64_t)json_integer_value(id);
    }
    return DP_OK;
}

int job_spec_parse(const json_t *body, job_spec *s, dp_err *err)
{
    memset(s, 0, sizeof *s);
    reader r = {body, "", err};
    static const char *const KEYS[] = {
        "algorithm",    "dataset",       "partition", "model",      "rounds",
        "local_epochs", "batch_size",    "lr",        "lambda",     "finetune_fraction",
        "seed",         "test_fraction", "privacy",   "silos",      "on_budget_exhausted",
        "standardize",  "weighted",      "resume",    "name",       "ratio",
        "fedhdp",       "altmin",        "adaped",    "ppsgd_mode", "ifca",
        "adamix",       "gaussian_prior"};
    static const char *const BUDGET[] = {"refuse", "stop_silo", "stop_job"};
    static const char *const STD[] = {"silo", "none"};
    size_t a = 0, b = 0, st = 0;
    int64_t seed = 0;
    int rc = check_keys(&r, KEYS, N_ELEMS(KEYS));
    if (rc == DP_OK)
        rc = choice(&r, "algorithm", ALGORITHMS, N_ELEMS(ALGORITHMS), NULL, &a);
    if (rc == DP_OK)
        snprintf(s->algorithm, sizeof s->algorithm, "%s", ALGORITHMS[a]);
    if (rc == DP_OK)
        rc = integer(&r, "seed", false, 0, 0, INT64_C(9007199254740991), &seed);
    s->seed = (uint64_t)seed;
    if (rc == DP_OK)
        rc = parse_dataset(body, s, err);
    if (rc == DP_OK)
        rc = parse_partition(body, s, err);
    bool altmin = a == ALGO_ALTMIN;
    if (rc == DP_OK && altmin && json_object_get(body, "model") == NULL)
        s->model = (fl_model_spec){.type = FL_MODEL_LINEAR}; /* altmin: linear by default */
    else if (rc == DP_OK)
        rc = parse_model(body, s, err);
    if (rc == DP_OK && altmin && s->model.type != FL_MODEL_LINEAR)
        rc = dp_err_set(err, DP_EINVAL, "model.type",
                        "altmin fits linear regression: model.type must be linear");
    if (rc == DP_OK)
        rc = integer(&r, "rounds", true, 0, 1, JOB_MAX_ROUNDS, &s->rounds);
    if (rc == DP_OK && altmin)
        rc = check_altmin_common(body, s, err);
    if (rc == DP_OK && !altmin)
        rc = integer(&r, "local_epochs", false, 1, 1, JOB_MAX_LOCAL_EPOCHS, &s->local_epochs);
    if (rc == DP_OK && !altmin)
        rc = integer(&r, "batch_size", true, 0, 1, JOB_MAX_BATCH, &s->batch_size);
    if (rc == DP_OK && !altmin)
        rc = num_pos(&r, "lr", true, 0, 0, 1e3, &s->lr);
    if (rc == DP_OK)
        rc = parse_altmin(body, s, err);
    bool uses_lambda = a == 3 || a == 4 || a == ALGO_FEDHDP || a == ALGO_IFCA;
    if (rc == DP_OK && !uses_lambda && json_object_get(body, "lambda") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "lambda",
                        "lambda applies to mrmtl, ditto, fedhdp and ifca only");
    if (rc == DP_OK && uses_lambda) /* ifca: the MR-MTL rounds' (after ifca.warm_rounds) */
        rc = num(&r, "lambda", a != ALGO_IFCA, 0, 0, 1e6, &s->lambda);
    if (rc == DP_OK && a != 2 && json_object_get(body, "finetune_fraction") != NULL)
        rc = dp_err_set(err, DP_EINVAL, "finetune_fraction",
                        "finetune_fraction applies to finetune only");
    if (rc == DP_OK)
        rc = num(&r, "finetune_fraction", false, 0.5, 0, 1, &s->finetune_fraction);
    if (rc == DP_OK)
        rc = num(&r, "test_fraction", false, 0.2, 0, 0.9, &s->test_fraction);
    if (rc == DP_OK)
        rc = parse_ratio(body, s, err);
    if (rc == DP_OK)
        rc = parse_privacy(body, s, err);
    if (rc == DP_OK && altmin && s->client_rate != 1.0)
        rc = dp_err_set(err, DP_EINVAL, "privacy.client_rate",
                        "altmin takes every user in every round: privacy.client_rate must be 1");
    if (rc == DP_OK)
        rc = parse_ppsgd_mode(body, s, err);
    if (rc == DP_OK)
        rc = parse_fedhdp(body, s, err);
    if (rc == DP_OK)
        rc = parse_adaped(body, s, err);
    if (rc == DP_OK)
        rc = parse_ifca(body, s, err);
    if (rc == DP_OK)
        rc = parse_prior(body, s, err);
    const json_t *stv = json_object_get(body, "standardize");
    if (rc == DP_OK && is_prior(s) && json_is_string(stv) &&
        strcmp(json_string_value(stv), "silo") == 0)
        rc = dp_err_set(err, DP_EINVAL, "standardize",
                        "%s needs standardize \"none\": per-silo scaling changes each silo's "
                        "features differently, and the prior ties the silos' parameters together",
                        s->algorithm);
    if (rc == DP_OK)
        rc = parse_silos(body, s, err);
    if (rc == DP_OK)
        rc = choice(&r, "on_budget_exhausted", BUDGET, N_ELEMS(BUDGET), "refuse", &b);
    if (rc == DP_OK)
        rc = choice(&r, "standardize", STD, N_ELEMS(STD), altmin || is_prior(s) ? "none" : "silo",
                    &st);
    if (rc == DP_OK)
        rc = boolean(&r, "weighted", true, &s->weighted);
    if (rc == DP_OK)
        rc = boolean(&r, "resume", true, &s->resume);
    const char *name;
    if (rc == DP_OK)
        rc = string(&r, "name", false, NULL, &name);
    if (rc == DP_OK && name != NULL && (name[0] == '\0' || strlen(name) >= sizeof s->name))
        rc = dp_err_set(err, DP_EINVAL, "name", "name must be 1..%zu bytes", sizeof s->name - 1);
    if (rc == DP_OK && name != NULL)
        snprintf(s->name, sizeof s->name, "%s", name);
    if (rc == DP_OK && s->n_bindings > 0 && s->privacy == JOB_PRIVACY_NONE)
        rc = dp_err_set(err, DP_EINVAL, "silos",
                        "silos binds budgets, but the job has no privacy: a non-private job "
                        "spends no budget; give privacy or drop silos");
    if (rc != DP_OK) {
        job_spec_clear(s);
        return rc;
    }
    s->on_budget = (job_on_budget)b;
    s->standardize = st == 0;
    return DP_OK;
}

void job_spec_clear(job_spec *s)
{
    if (s == NULL)
        return;
    for (size_t g = 0; g < JOB_MAX_HDP_GROUPS; g++)
        dp_free(s->hdp_groups[g].silos);
    dp_free(s->bindings);
    memset(s, 0, sizeof *s);
}

const char *job_on_budget_name(job_on_budget b)
{
    switch (b) {
        case JOB_BUDGET_REFUSE:
            return "refuse";
        case JOB_BUDGET_STOP_SILO:
            return "stop_silo";
        case JOB_BUDGET_STOP_JOB:
            return "stop_job";
    }
    return "?";
}
