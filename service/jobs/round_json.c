/*
 * jobs/round_json.c: a round's metrics as JSON. Contract in jobs/round_json.h.
 */
#include "service/jobs/round_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "service/codec/run_rows.h"

/* The text is written directly, not through a jansson tree: a round of the School job holds 139
 * silos, and building and printing their tree took ~1 ms of each round, on the database writer's
 * thread inside the round's charge (docs/BENCHMARKS.md). Numbers are written by
 * run_rows_fmt_double, whose text is jansson's for json_real, strings escaped as jansson escapes
 * them, members in the order the tree had: the text is the same byte for byte. */

static void put_s(run_text *t, const char *s)
{
    run_text_append(t, s, strlen(s));
}

/* A real, null when not finite (json_util_real). */
static void put_num(run_text *t, double x)
{
    if (run_text_reserve(t, RUN_ROWS_NUM_MAX) != 0)
        return;
    t->len += run_rows_fmt_double(t->s + t->len, x);
}

static void put_int(run_text *t, long long v)
{
    char b[24];
    int n = snprintf(b, sizeof b, "%lld", v);
    run_text_append(t, b, (size_t)n);
}

static void put_bool(run_text *t, bool b)
{
    put_s(t, b ? "true" : "false");
}

/* s as a JSON string, escaped as jansson does without flags: '"', '\\' and the control
 * characters; every other byte as it is (the names are UTF-8: jansson checked them when the
 * job's plan was written). */
static void put_str(run_text *t, const char *s)
{
    run_text_append(t, "\"", 1);
    const char *run = s;
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        run_text_append(t, run, (size_t)(p - run));
        run = p + 1;
        char esc[8];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                                    : NULL;
        if (e == NULL) {
            snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
            e = esc;
        }
        put_s(t, e);
    }
    run_text_append(t, run, strlen(run));
    run_text_append(t, "\"", 1);
}

/* ,"<sep><prefix><metric>": (sep: "," or "") */
static void put_metric_key(run_text *t, const char *sep, bool regression, const char *prefix)
{
    put_s(t, sep);
    run_text_append(t, "\"", 1);
    put_s(t, prefix);
    put_s(t, regression ? "test_mse\":" : "test_accuracy\":");
}

static void agg_json(run_text *t, const fl_agg_metrics *a, bool regression)
{
    put_metric_key(t, "{", regression, "");
    put_num(t, a->pooled_test_metric);
    put_s(t, ",\"test_loss\":");
    put_num(t, a->pooled_test_loss);
    put_s(t, ",\"train_loss\":");
    put_num(t, a->train_loss);
    put_metric_key(t, ",", regression, "mean_");
    put_num(t, a->mean_test_metric);
    put_metric_key(t, ",", regression, "worst_");
    put_num(t, a->worst_test_metric);
    put_metric_key(t, ",", regression, "spread_");
    put_num(t, a->spread_test_metric);
    run_text_append(t, "}", 1);
}

/* the metric, "test_loss" and "train_loss" of a model, each after a comma (sep for the first) */
static void model_fields(run_text *t, const char *sep, const fl_model_metrics *mm, bool regression)
{
    put_metric_key(t, sep, regression, "");
    put_num(t, mm->test_metric);
    put_s(t, ",\"test_loss\":");
    put_num(t, mm->test_loss);
    put_s(t, ",\"train_loss\":");
    put_num(t, mm->train_loss);
}

static void silo_json(run_text *t, const job_prepared *p, const fl_round_metrics *m, size_t k,
                      bool stopped, uint64_t trained, uint64_t charged, double eps,
                      double ledger_eps)
{
    const fl_silo_metrics *s = &m->silo[k];
    const job_silo_plan *sp = &p->silo[k];
    put_s(t, "{\"silo\":");
    put_str(t, p->fed.silo[k].name);
    put_s(t, ",\"silo_id\":");
    if (sp->ledger_silo)
        put_int(t, (long long)sp->ledger_silo);
    else
        put_s(t, "null");
    put_s(t, ",\"stopped\":");
    put_bool(t, stopped);
    put_s(t, ",\"trained\":");
    put_bool(t, s->active);
    put_s(t, ",\"rounds_trained\":");
    put_int(t, (long long)trained);
    put_s(t, ",\"rounds_charged\":");
    put_int(t, (long long)charged);
    put_s(t, ",\"n_train\":");
    put_int(t, (long long)s->n_train);
    put_s(t, ",\"n_test\":");
    put_int(t, (long long)s->n_test);
    put_s(t, ",\"epsilon\":");
    put_num(t, sp->round_event == NULL ? DP_NAN : !isnan(ledger_eps) ? ledger_eps : eps);
    put_s(t, ",\"job_epsilon\":");
    put_num(t, sp->round_event == NULL ? DP_NAN : eps);
    model_fields(t, ",", &s->personal, m->regression);
    put_s(t, ",\"sgd_loss\":");
    put_num(t, s->sgd_loss);
    if (s->cluster >= 0) { /* ifca: the cluster the silo belongs to after the round */
        put_s(t, ",\"cluster\":");
        put_int(t, (long long)s->cluster);
    }
    if (p->silo_group != NULL) {
        put_s(t, ",\"group\":");
        put_str(t, p->spec.hdp_groups[p->silo_group[k]].name);
    }
    put_s(t, ",\"global\":");
    if (m->has_global) {
        model_fields(t, "{", &s->global, m->regression);
        run_text_append(t, "}", 1);
    } else {
        put_s(t, "null");
    }
    run_text_append(t, "}", 1);
}

/* fedhdp's groups: [{"name", "private", "epsilon"}], a group's epsilon the largest job epsilon
 * of its silos (null when none has an event). */
static void groups_json(run_text *t, const job_prepared *p, const double *eps)
{
    run_text_append(t, "[", 1);
    for (size_t g = 0; g < p->spec.n_hdp_groups; g++) {
        double e = DP_NAN;
        for (size_t k = 0; k < p->fed.n_silos; k++)
            if (p->silo_group[k] == g && p->silo[k].round_event != NULL && !isnan(eps[k]))
                e = isnan(e) || eps[k] > e ? eps[k] : e;
        put_s(t, g ? ",{\"name\":" : "{\"name\":");
        put_str(t, p->spec.hdp_groups[g].name);
        put_s(t, ",\"private\":");
        put_bool(t, !p->spec.hdp[g].opt_out);
        put_s(t, ",\"epsilon\":");
        put_num(t, e);
        run_text_append(t, "}", 1);
    }
    run_text_append(t, "]", 1);
}

static void num_array(run_text *t, const double *v, size_t n)
{
    run_text_append(t, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            run_text_append(t, ",", 1);
        put_num(t, v[i]);
    }
    run_text_append(t, "]", 1);
}

/* adamix: ,"mixture": {"weights", "variances"} of the fitted prior (nothing before the first fit;
 * the means, k x P floats, are left out). false when out of memory. */
static bool mixture_json(run_text *t, const job_prepared *p, const fl_state *st)
{
    size_t k = p->cfg.pr_components;
    double *buf = dp_calloc(k * (2 + st->n_params), sizeof(double));
    if (buf == NULL)
        return false;
    if (fl_adamix_mixture(&p->cfg, st, buf, buf + k, buf + 2 * k) == DP_OK) {
        put_s(t, ",\"mixture\":{\"weights\":");
        num_array(t, buf, k);
        put_s(t, ",\"variances\":");
        num_array(t, buf + k, k);
        run_text_append(t, "}", 1);
    }
    dp_free(buf);
    return true;
}

char *job_round_json(const job_prepared *p, const fl_round_metrics *m, const bool *stopped,
                     const uint64_t *trained, const uint64_t *charged, const double *eps,
                     const double *ledger_eps, double clip, const fl_state *st, double wall_ms)
{
    run_text t = {0};
    /* ~400 bytes a silo */
    if (run_text_reserve(&t, 1024 + 512 * m->n_silos) != 0)
        return NULL;
    put_s(&t, "{\"round\":");
    put_int(&t, (long long)m->round + 1);
    put_s(&t, ",\"wall_ms\":");
    put_num(&t, wall_ms);
    put_s(&t, m->regression ? ",\"metric\":\"mse\"" : ",\"metric\":\"accuracy\"");
    put_s(&t, ",\"silos_trained\":");
    put_int(&t, (long long)m->n_trained);
    put_s(&t, ",\"global\":");
    if (m->has_global)
        agg_json(&t, &m->global, m->regression);
    else
        put_s(&t, "null");
    put_s(&t, ",\"personalized\":");
    agg_json(&t, &m->personal, m->regression);
    put_s(&t, ",\"silos\":[");
    for (size_t k = 0; k < m->n_silos; k++) {
        if (k)
            run_text_append(&t, ",", 1);
        silo_json(&t, p, m, k, stopped[k], trained[k], charged[k], eps[k], ledger_eps[k]);
    }
    run_text_append(&t, "]", 1);
    if (p->silo_group != NULL) {
        put_s(&t, ",\"groups\":");
        groups_json(&t, p, eps);
        put_s(&t, ",\"clip\":");
        put_num(&t, clip);
    }
    if (strcmp(p->cfg.algorithm, "adaped") == 0 || strcmp(p->cfg.algorithm, "dp_adaped") == 0) {
        put_s(&t, ",\"psi\":");
        put_num(&t, fl_adaped_psi(&p->cfg, st));
    }
    if (strcmp(p->cfg.algorithm, "gaussian_prior") == 0) {
        double s_theta, s_x;
        fl_gp_variances(&p->cfg, st, &s_theta, &s_x);
        put_s(&t, ",\"sigma_theta2\":");
        put_num(&t, s_theta);
        put_s(&t, ",\"sigma_x2\":");
        put_num(&t, s_x);
    }
    bool ok = strcmp(p->cfg.algorithm, "adamix") != 0 || mixture_json(&t, p, st);
    run_text_append(&t, "}", 1);
    if (!ok || t.failed) {
        free(t.s);
        return NULL;
    }
    return t.s;
}
