/*
 * jobs/round_json.c: a round's metrics as JSON. Contract in jobs/round_json.h.
 */
#include "service/jobs/round_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "service/codec/json_util.h"

/* Sets key to x (null when not finite); false when out of memory. */
static bool put(json_t *o, const char *key, double x)
{
    return json_object_set_new(o, key, json_util_real(x)) == 0;
}

static bool put_metric(json_t *o, bool regression, const char *prefix, double x)
{
    char key[48];
    snprintf(key, sizeof key, "%s%s", prefix, regression ? "test_mse" : "test_accuracy");
    return put(o, key, x);
}

static json_t *agg_json(const fl_agg_metrics *a, bool regression)
{
    json_t *o = json_object();
    bool ok = o && put_metric(o, regression, "", a->pooled_test_metric) &&
              put(o, "test_loss", a->pooled_test_loss) && put(o, "train_loss", a->train_loss) &&
              put_metric(o, regression, "mean_", a->mean_test_metric) &&
              put_metric(o, regression, "worst_", a->worst_test_metric) &&
              put_metric(o, regression, "spread_", a->spread_test_metric);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static bool model_fields(json_t *o, const fl_model_metrics *mm, bool regression)
{
    return put_metric(o, regression, "", mm->test_metric) && put(o, "test_loss", mm->test_loss) &&
           put(o, "train_loss", mm->train_loss);
}

static json_t *silo_json(const job_prepared *p, const fl_round_metrics *m, size_t k, bool stopped,
                         uint64_t trained, uint64_t charged, double eps, double ledger_eps)
{
    const fl_silo_metrics *s = &m->silo[k];
    const job_silo_plan *sp = &p->silo[k];
    json_t *o = json_pack(
        "{s:s, s:o, s:b, s:b, s:I, s:I, s:I, s:I}", "silo", p->fed.silo[k].name, "silo_id",
        sp->ledger_silo ? json_integer((json_int_t)sp->ledger_silo) : json_null(), "stopped",
        stopped, "trained", s->active, "rounds_trained", (json_int_t)trained, "rounds_charged",
        (json_int_t)charged, "n_train", (json_int_t)s->n_train, "n_test", (json_int_t)s->n_test);
    double e = sp->round_event == NULL ? DP_NAN : !isnan(ledger_eps) ? ledger_eps : eps;
    json_t *g = m->has_global ? json_object() : json_null();
    bool ok = o && g && put(o, "epsilon", e) &&
              put(o, "job_epsilon", sp->round_event == NULL ? DP_NAN : eps) &&
              model_fields(o, &s->personal, m->regression) && put(o, "sgd_loss", s->sgd_loss) &&
              (!m->has_global || model_fields(g, &s->global, m->regression));
    if (ok && s->cluster >= 0) /* ifca: the cluster the silo belongs to after the round */
        ok = json_object_set_new(o, "cluster", json_integer((json_int_t)s->cluster)) == 0;
    if (ok && p->silo_group != NULL)
        ok = json_object_set_new(o, "group",
                                 json_string(p->spec.hdp_groups[p->silo_group[k]].name)) == 0;
    if (ok && json_object_set_new(o, "global", g) == 0)
        return o;
    if (!ok)
        json_decref(g);
    json_decref(o);
    return NULL;
}

/* fedhdp's groups: [{"name", "private", "epsilon"}], a group's epsilon the largest job epsilon
 * of its silos (NAN when none has an event). */
static json_t *groups_json(const job_prepared *p, const double *eps)
{
    json_t *a = json_array();
    for (size_t g = 0; a != NULL && g < p->spec.n_hdp_groups; g++) {
        double e = DP_NAN;
        for (size_t k = 0; k < p->fed.n_silos; k++)
            if (p->silo_group[k] == g && p->silo[k].round_event != NULL && !isnan(eps[k]))
                e = isnan(e) || eps[k] > e ? eps[k] : e;
        json_t *o = json_pack("{s:s, s:b, s:o}", "name", p->spec.hdp_groups[g].name, "private",
                              !p->spec.hdp[g].opt_out, "epsilon", json_util_real(e));
        if (o == NULL || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* adamix: root's "mixture": {"weights", "variances"} of the fitted prior (omitted before the first
 * fit; the means, k x P floats, are left out). false when out of memory. */
static bool mixture_json(json_t *root, const job_prepared *p, const fl_state *st)
{
    size_t k = p->cfg.pr_components;
    double *buf = dp_calloc(k * (2 + st->n_params), sizeof(double));
    if (buf == NULL)
        return false;
    bool ok = true;
    if (fl_adamix_mixture(&p->cfg, st, buf, buf + k, buf + 2 * k) == DP_OK) {
        json_t *w = json_array(), *v = json_array(), *o = json_object();
        ok = w && v && o;
        for (size_t l = 0; ok && l < k; l++)
            ok = json_array_append_new(w, json_util_real(buf[l])) == 0 &&
                 json_array_append_new(v, json_util_real(buf[k + l])) == 0;
        ok = ok && json_object_set_new(o, "weights", w) == 0;
        w = NULL;
        ok = ok && json_object_set_new(o, "variances", v) == 0;
        v = NULL;
        ok = ok && json_object_set_new(root, "mixture", o) == 0;
        o = NULL;
        json_decref(w);
        json_decref(v);
        json_decref(o);
    }
    dp_free(buf);
    return ok;
}

char *job_round_json(const job_prepared *p, const fl_round_metrics *m, const bool *stopped,
                     const uint64_t *trained, const uint64_t *charged, const double *eps,
                     const double *ledger_eps, double clip, const fl_state *st, double wall_ms)
{
    json_t *silos = json_array();
    bool ok = silos != NULL;
    for (size_t k = 0; ok && k < m->n_silos; k++) {
        json_t *s = silo_json(p, m, k, stopped[k], trained[k], charged[k], eps[k], ledger_eps[k]);
        ok = s != NULL && json_array_append_new(silos, s) == 0;
    }
    json_t *g = m->has_global ? agg_json(&m->global, m->regression) : json_null();
    json_t *pers = agg_json(&m->personal, m->regression);
    json_t *root = ok && g && pers ? json_object() : NULL;
    ok =
        root && json_object_set_new(root, "round", json_integer((json_int_t)m->round + 1)) == 0 &&
        put(root, "wall_ms", wall_ms) &&
        json_object_set_new(root, "metric", json_string(m->regression ? "mse" : "accuracy")) == 0 &&
        json_object_set_new(root, "silos_trained", json_integer((json_int_t)m->n_trained)) == 0;
    if (ok) {
        ok = json_object_set_new(root, "global", g) == 0;
        g = NULL;
    }
    if (ok) {
        ok = json_object_set_new(root, "personalized", pers) == 0;
        pers = NULL;
    }
    if (ok) {
        ok = json_object_set_new(root, "silos", silos) == 0;
        silos = NULL;
    }
    if (ok && p->silo_group != NULL) {
        json_t *gs = groups_json(p, eps);
        ok = gs != NULL && json_object_set_new(root, "groups", gs) == 0 && put(root, "clip", clip);
    }
    if (ok &&
        (strcmp(p->cfg.algorithm, "adaped") == 0 || strcmp(p->cfg.algorithm, "dp_adaped") == 0))
        ok = put(root, "psi", fl_adaped_psi(&p->cfg, st));
    if (ok && strcmp(p->cfg.algorithm, "gaussian_prior") == 0) {
        double s_theta, s_x;
        fl_gp_variances(&p->cfg, st, &s_theta, &s_x);
        ok = put(root, "sigma_theta2", s_theta) && put(root, "sigma_x2", s_x);
    }
    if (ok && strcmp(p->cfg.algorithm, "adamix") == 0)
        ok = mixture_json(root, p, st);
    char *text = ok ? json_util_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    json_decref(g);
    json_decref(pers);
    json_decref(silos);
    return text;
}
