/*
 * jobs/prepare.c: a job's data, federation and privacy plan. Contract in jobs/prepare.h.
 */
#include "service/jobs/prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "service/codec/event_json.h"
#include "service/codec/json_util.h"
#include "service/ledger/ledger.h"

/* Reads the data of s into d. */
static int load_data(const job_spec *s, store_conn *c, const dataset_viewer *who, fl_dataset *d,
                     int64_t *dataset_id, const char *req_id, dp_err *err)
{
    *dataset_id = 0;
    if (s->data == JOB_DATA_SYNTHETIC)
        return fl_synth_generate(&s->synth, d, err);
    if (s->data == JOB_DATA_FASHION_MNIST) {
        int rc = fl_idx_load(JOB_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz",
                             JOB_FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz", 0, d, err);
        if (rc == DP_ENOTFOUND)
            return dp_err_set(err, DP_ENOTFOUND, "dataset",
                              "fashion-mnist is not installed on this machine (Debian package "
                              "dataset-fashion-mnist; `make deps` installs it)");
        return rc;
    }
    dataset_viewer any = {true, 0, 0};
    dataset_row row;
    bool found = false;
    int rc = datasets_get(c, s->dataset_id, who ? who : &any, &row, &found, req_id, err);
    if (rc != DP_OK)
        return rc;
    if (!found)
        return dp_err_set(err, DP_ENOTFOUND, "dataset", "data set %lld does not exist",
                          (long long)s->dataset_id);
    char *text = NULL;
    size_t len = 0;
    rc = datasets_read_csv(store_conn_db(c), s->dataset_id, &text, &len, req_id, err);
    size_t line = 0, col = 0;
    if (rc == DP_OK)
        rc = fl_csv_parse(text, len, row.label_column, row.silo_column[0] ? row.silo_column : NULL,
                          d, &line, &col, err);
    dp_free(text);
    dataset_row_clear(&row);
    if (rc == DP_EINVAL) /* it parsed when it was uploaded: the stored text is damaged */
        return dp_err_set(err, DP_EINTERNAL, NULL, "stored data set %lld no longer parses",
                          (long long)s->dataset_id);
    *dataset_id = s->dataset_id;
    return rc;
}

/* The model's outputs from the labels; DP_EINVAL ("model.type") when they do not suit it. */
static int fit_model(job_spec *s, const fl_dataset *d, dp_err *err)
{
    s->model.d_in = d->d;
    if (s->model.type == FL_MODEL_LINEAR)
        return DP_OK;
    if (d->n_classes < 2)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "model %s classifies, but the labels are %s: use model linear "
                          "(regression), or labels 0..K-1",
                          fl_model_type_name(s->model.type),
                          d->n_classes == 1 ? "all 0" : "not class indices 0..K-1");
    if ((s->model.type == FL_MODEL_LOGISTIC || s->model.type == FL_MODEL_SVM) && d->n_classes > 2)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "model %s is binary, but the labels have %zu classes: use softmax or "
                          "mlp",
                          fl_model_type_name(s->model.type), d->n_classes);
    s->model.n_classes = d->n_classes;
    return fl_model_check(&s->model, err);
}

/* The accountant of a bound silo (its budget's delta and conversion, the ledger's orders) or of
 * the spec (delta, the default conversion). */
static int silo_accountant(const job_spec *s, struct ledger *l, store_conn *c, const char *name,
                           int64_t silo_id, job_silo_plan *sp, dp_err *err)
{
    sp->ledger_silo = silo_id;
    sp->delta = s->delta;
    sp->acct = (fl_accountant){s->delta, ACCT_CONV_OPTIMAL, NULL, 0};
    if (silo_id == 0)
        return DP_OK;
    char f[DP_ERR_FIELD_MAX];
    snprintf(f, sizeof f, "silos.%.41s", name);
    ledger_silo_view v;
    dp_err le;
    dp_err_clear(&le);
    int rc = ledger_silo_get(l, c, silo_id, &v, &le);
    if (rc == DP_ENOTFOUND)
        return dp_err_set(err, DP_ENOTFOUND, f, "%s: ledger silo %lld does not exist", f,
                          (long long)silo_id);
    if (rc != DP_OK) {
        *err = le;
        return rc;
    }
    if (v.archived_at_ms != 0)
        return dp_err_set(err, DP_EINVAL, f, "%s: ledger silo %lld is archived", f,
                          (long long)silo_id);
    if (v.budget.kind != LEDGER_BUDGET_EPS_DELTA || v.budget.accountant != LEDGER_ACCT_RDP)
        return dp_err_set(err, DP_EINVAL, f,
                          "%s: ledger silo %lld keeps %s budget; a training job spends from "
                          "(epsilon, delta) budgets accounted with RDP",
                          f, (long long)silo_id,
                          v.budget.kind != LEDGER_BUDGET_EPS_DELTA ? "a non-(epsilon, delta)"
                                                                   : "a non-RDP");
    sp->delta = v.budget.delta;
    size_t n_orders = 0;
    const double *orders = ledger_orders(l, &n_orders);
    sp->acct = (fl_accountant){v.budget.delta, v.budget.conversion, orders, n_orders};
    return DP_OK;
}

/* Binds the spec's silo names to federation silos. */
static int bind_silos(const job_spec *s, job_prepared *p, struct ledger *l, store_conn *c,
                      dp_err *err)
{
    for (size_t k = 0; k < p->fed.n_silos; k++) {
        int64_t id = 0;
        for (size_t b = 0; b < s->n_bindings; b++)
            if (strcmp(s->bindings[b].name, p->fed.silo[k].name) == 0)
                id = s->bindings[b].silo_id;
        int rc = silo_accountant(s, l, c, p->fed.silo[k].name, id, &p->silo[k], err);
        if (rc != DP_OK)
            return rc;
    }
    for (size_t b = 0; b < s->n_bindings; b++) {
        bool known = false;
        for (size_t k = 0; k < p->fed.n_silos && !known; k++)
            known = strcmp(s->bindings[b].name, p->fed.silo[k].name) == 0;
        if (!known) {
            char f[DP_ERR_FIELD_MAX];
            snprintf(f, sizeof f, "silos.%.41s", s->bindings[b].name);
            return dp_err_set(err, DP_EINVAL, f,
                              "%s: the data set has no silo named \"%s\" (its silos are "
                              "\"%s\"%s)",
                              f, s->bindings[b].name, p->fed.silo[0].name,
                              p->fed.n_silos > 1 ? ", ..." : "");
        }
    }
    return DP_OK;
}

void job_cfg_fill(const job_spec *s, const double *z, fl_job_cfg *c)
{
    fl_job_cfg_default(c);
    c->algorithm = s->algorithm;
    c->model = s->model;
    c->rounds = (uint64_t)s->rounds;
    c->local_epochs = (uint64_t)s->local_epochs;
    c->batch_size = (size_t)s->batch_size;
    c->lr = s->lr;
    c->lambda = s->lambda;
    c->finetune_frac = s->finetune_fraction;
    c->seed = s->seed;
    c->weighted = s->weighted;
    bool dpf = fl_algo_client_level(s->algorithm);
    if (s->privacy != JOB_PRIVACY_NONE && !dpf) {
        c->clip = s->clip;
        c->noise_multiplier = z;
    }
    if (dpf) {
        c->client_rate = s->client_rate;
        c->update_clip = s->clip;
        c->server_noise = s->privacy == JOB_PRIVACY_NOISE ? s->noise_multiplier : 0;
        c->ppsgd_ratio = s->ratio;
        c->altmin_rank = (size_t)s->altmin_rank;
        c->altmin_spectral = s->altmin_spectral;
    }
}

/* Calibrates (target) or sets (noise) every silo's noise, then plans each silo. */
static int plan_privacy(job_prepared *p, dp_err *err)
{
    const job_spec *s = &p->spec;
    bool dpf = fl_algo_client_level(s->algorithm);
    size_t K = p->fed.n_silos;
    for (size_t k = 0; k < K; k++) {
        p->silo[k].planned_eps = DP_NAN;
        if (s->privacy == JOB_PRIVACY_NOISE && !dpf)
            p->z[k] = s->noise_multiplier;
    }
    if (s->privacy == JOB_PRIVACY_TARGET && K > 0) {
        /* all silos at once: equal sizes and accountants share one calibration */
        size_t *n = dp_calloc(K, sizeof *n);
        const fl_accountant **acct = dp_calloc(K, sizeof *acct);
        double *z = dp_calloc(K, sizeof *z), *eps = dp_calloc(K, sizeof *eps);
        int rc = DP_OK;
        if (n == NULL || acct == NULL || z == NULL || eps == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        for (size_t k = 0; rc == DP_OK && k < K; k++) {
            n[k] = p->fed.silo[k].n_train;
            acct[k] = &p->silo[k].acct;
        }
        if (rc == DP_OK)
            rc = fl_calibrate_noise_many(&p->cfg, K, n, s->target_epsilon, acct, z, eps, err);
        for (size_t k = 0; rc == DP_OK && k < K; k++) {
            if (dpf) /* one event for every silo: the smallest delta's calibration covers all */
                p->cfg.server_noise = z[k] > p->cfg.server_noise ? z[k] : p->cfg.server_noise;
            else
                p->z[k] = z[k];
        }
        dp_free(n);
        dp_free(acct);
        dp_free(z);
        dp_free(eps);
        if (rc != DP_OK)
            return rc;
    }
    for (size_t k = 0; k < K; k++) {
        job_silo_plan *sp = &p->silo[k];
        int rc = fl_plan_silo(&p->cfg, k, p->fed.silo[k].n_train, &sp->plan, &sp->round_event, err);
        if (rc != DP_OK)
            return rc;
        if (sp->round_event != NULL)
            rc = fl_plan_epsilon(sp->round_event, p->cfg.rounds, &sp->acct, &sp->planned_eps, err);
        if (rc != DP_OK)
            return rc;
    }
    return DP_OK;
}

int job_prepare(job_spec *spec, store_conn *c, struct ledger *l, const dataset_viewer *who,
                job_prepared *out, const char *req_id, dp_err *err)
{
    memset(out, 0, sizeof *out);
    out->spec = *spec; /* moved */
    memset(spec, 0, sizeof *spec);
    job_spec *s = &out->spec;
    fl_dataset d = {0};
    uint32_t *assign = NULL;
    size_t K = 0;
    int rc = load_data(s, c, who, &d, &out->dataset_id, req_id, err);
    if (rc == DP_OK)
        rc = fit_model(s, &d, err);
    if (rc == DP_OK && !s->has_partition && d.silo == NULL)
        rc = dp_err_set(err, DP_EINVAL, "partition",
                        "the data set has no silos of its own: give a partition, e.g. "
                        "{\"kind\": \"iid\", \"silos\": 10}");
    if (rc == DP_OK && (assign = dp_calloc(d.n ? d.n : 1, sizeof *assign)) == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK) {
        fl_partition_spec natural = {FL_PARTITION_NATURAL, 0, 0, 0, s->seed};
        rc = fl_partition(&d, s->has_partition ? &s->partition : &natural, assign, &K, err);
    }
    if (rc == DP_OK)
        rc = fl_federate(&d, assign, K, s->test_fraction, s->seed, s->standardize, &out->fed, err);
    dp_free(assign);
    fl_dataset_free(&d);
    if (rc == DP_OK) {
        out->z = dp_calloc(K, sizeof *out->z);
        out->silo = dp_calloc(K, sizeof *out->silo);
        if (out->z == NULL || out->silo == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK && s->n_bindings > 0 && l == NULL)
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "no ledger to bind the silos to");
    if (rc == DP_OK)
        rc = bind_silos(s, out, l, c, err);
    if (rc == DP_OK) {
        job_cfg_fill(&out->spec, out->z, &out->cfg);
        rc = fl_job_cfg_check(&out->cfg, &out->fed, err);
    }
    if (rc == DP_OK)
        rc = plan_privacy(out, err);
    if (rc != DP_OK)
        job_prepared_free(out);
    return rc;
}

void job_prepared_free(job_prepared *p)
{
    if (p == NULL)
        return;
    for (size_t k = 0; p->silo != NULL && k < p->fed.n_silos; k++)
        acct_event_free(p->silo[k].round_event);
    dp_free(p->silo);
    dp_free(p->z);
    fl_federation_free(&p->fed);
    job_spec_clear(&p->spec);
    memset(p, 0, sizeof *p);
}

char *job_plan_json(const job_prepared *p)
{
    json_t *arr = json_array();
    bool ok = arr != NULL;
    double clip = p->spec.clip;
    for (size_t k = 0; ok && k < p->fed.n_silos; k++) {
        const job_silo_plan *sp = &p->silo[k];
        const fl_silo_plan *pl = &sp->plan;
        json_t *ev = sp->round_event ? event_json_encode(sp->round_event) : json_null();
        json_t *o = json_pack(
            "{s:s, s:o, s:I, s:I, s:I, s:o, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "name",
            p->fed.silo[k].name, "silo_id",
            sp->ledger_silo ? json_integer((json_int_t)sp->ledger_silo) : json_null(), "n_train",
            (json_int_t)p->fed.silo[k].n_train, "n_test", (json_int_t)p->fed.silo[k].n_test,
            "batch", (json_int_t)pl->batch, "q", json_util_real(pl->q), "steps_per_round",
            (json_int_t)pl->steps_per_round, "steps", (json_int_t)pl->steps_total,
            "noise_multiplier", pl->is_private ? json_util_real(pl->noise_multiplier) : json_null(),
            "sigma", pl->is_private ? json_util_real(pl->noise_multiplier * clip) : json_null(),
            "delta", pl->is_private ? json_util_real(sp->delta) : json_null(), "epsilon",
            json_util_real(sp->planned_eps), "round_event", ev);
        ok = o != NULL && json_array_append_new(arr, o) == 0;
    }
    /* every temporary is held here and released below ("O" borrows): no path leaks one */
    const fl_model_spec *ms = &p->cfg.model;
    json_t *hidden = json_array(), *model = NULL, *root = NULL;
    for (size_t i = 0; ok && i < ms->n_hidden; i++)
        ok = hidden != NULL &&
             json_array_append_new(hidden, json_integer((json_int_t)ms->hidden[i])) == 0;
    if (ok && hidden != NULL)
        model = json_pack("{s:s, s:I, s:I, s:O, s:I}", "type", fl_model_type_name(ms->type), "d_in",
                          (json_int_t)ms->d_in, "n_classes", (json_int_t)ms->n_classes, "hidden",
                          hidden, "n_params", (json_int_t)fl_model_n_params(ms));
    if (ok && model != NULL)
        root = json_pack("{s:O, s:O, s:s, s:I, s:o}", "silos", arr, "model", model, "privacy_unit",
                         fl_algo_client_level(p->spec.algorithm) ? "silo" : "record", "rounds",
                         (json_int_t)p->cfg.rounds, "server_noise",
                         json_util_real(p->cfg.server_noise));
    json_decref(arr);
    json_decref(hidden);
    json_decref(model);
    char *text = root ? json_util_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}
