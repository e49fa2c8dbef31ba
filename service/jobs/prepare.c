/*
 * jobs/prepare.c: a job's data, federation and privacy plan. Contract in jobs/prepare.h.
 */
#include "service/jobs/prepare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "accounting/zcdp.h"
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
                           int64_t silo_id, job_silo_plan *sp, bool *opted_out, dp_err *err)
{
    *opted_out = false;
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
    if (v.budget.kind == LEDGER_BUDGET_NONE && strcmp(s->algorithm, "fedhdp") == 0) {
        *opted_out = true; /* fedhdp puts it in an opted-out group (bind_silos) */
        return DP_OK;
    }
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

/* fedhdp: silo k's privacy group from the spec's lists (the group without a list takes the rest).
 * DP_EINVAL naming the group's field when a listed name is not a silo of the data set, or when a
 * silo is in no group. */
static int hdp_assign(job_prepared *p, dp_err *err)
{
    job_spec *s = &p->spec;
    size_t K = p->fed.n_silos, rest = s->n_hdp_groups;
    p->silo_group = dp_calloc(K ? K : 1, sizeof *p->silo_group);
    if (p->silo_group == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t g = 0; g < s->n_hdp_groups; g++) {
        const job_hdp_group *gr = &s->hdp_groups[g];
        rest = gr->rest ? g : rest;
        for (size_t i = 0; i < gr->n_silos; i++) {
            size_t k = 0;
            while (k < K && strcmp(p->fed.silo[k].name, gr->silos[i]) != 0)
                k++;
            if (k == K) {
                char f[DP_ERR_FIELD_MAX];
                snprintf(f, sizeof f, "fedhdp.groups[%zu].silos[%zu]", g % 100, i % 100000);
                return dp_err_set(err, DP_EINVAL, f,
                                  "%s: the data set has no silo named \"%.40s\" (its silos are "
                                  "\"%.40s\"%s)",
                                  f, gr->silos[i], p->fed.silo[0].name, K > 1 ? ", ..." : "");
            }
            p->silo_group[k] = (uint32_t)g + 1; /* 0 = not listed, for now */
        }
    }
    for (size_t k = 0; k < K; k++) {
        if (p->silo_group[k] > 0) {
            p->silo_group[k]--;
            continue;
        }
        if (rest == s->n_hdp_groups)
            return dp_err_set(err, DP_EINVAL, "fedhdp.groups",
                              "silo \"%.40s\" is in no privacy group: list it, or leave \"silos\" "
                              "out of one group (it then takes every silo no other group lists)",
                              p->fed.silo[k].name);
        p->silo_group[k] = (uint32_t)rest;
    }
    return DP_OK;
}

/* fedhdp: checks silo k's ledger binding against its group. A silo bound to an opted-out ledger
 * silo ({"private": false}) must be in an opted-out group; without a "fedhdp" block it is moved to
 * one (the group "opted_out", r 1, the job's lambda, added on first use). A silo bound to an
 * (epsilon, delta) budget cannot be in an opted-out group: its updates would be released without
 * noise. */
static int hdp_bind(job_prepared *p, size_t k, int64_t silo_id, bool opted_out, dp_err *err)
{
    job_spec *s = &p->spec;
    size_t g = p->silo_group[k];
    bool group_out = s->hdp[g].opt_out;
    if (silo_id == 0 || opted_out == group_out)
        return DP_OK;
    char f[DP_ERR_FIELD_MAX];
    snprintf(f, sizeof f, "silos.%.41s", p->fed.silo[k].name);
    if (!opted_out)
        return dp_err_set(err, DP_EINVAL, f,
                          "%s: ledger silo %lld keeps an (epsilon, delta) budget, but its silo is "
                          "in the group \"%s\", which opted out of DP (its updates are released "
                          "without noise)",
                          f, (long long)silo_id, s->hdp_groups[g].name);
    if (s->hdp_given)
        return dp_err_set(err, DP_EINVAL, f,
                          "%s: ledger silo %lld opted out of DP, but its silo is in the private "
                          "group \"%s\": put it in a group with \"private\": false",
                          f, (long long)silo_id, s->hdp_groups[g].name);
    size_t out = s->n_hdp_groups;
    for (size_t h = 0; h < s->n_hdp_groups; h++)
        out = s->hdp[h].opt_out ? h : out;
    if (out == s->n_hdp_groups) {
        if (out >= JOB_MAX_HDP_GROUPS) /* unreachable: the default has one group */
            return dp_err_set(err, DP_EINTERNAL, NULL, "too many privacy groups");
        job_hdp_group *gr = &s->hdp_groups[out];
        memset(gr, 0, sizeof *gr);
        snprintf(gr->name, sizeof gr->name, "opted_out");
        gr->privacy = JOB_PRIVACY_NONE;
        s->hdp[out] = (fl_hdp_group_cfg){true, 0.0, 1.0, s->lambda};
        s->n_hdp_groups++;
        p->cfg.hdp_n_groups = s->n_hdp_groups;
    }
    p->silo_group[k] = (uint32_t)out;
    return DP_OK;
}

/* fedhdp with adaptive clipping: the calibrated multiplier of group g's round event is the
 * combined one, z_c; its model noise is z_g = (z_c^-2 - sigma_b^-2)^(-1/2) (the inverse of
 * fl_hdp_combined_noise), rounded up until the combination is >= z_c. DP_EINVAL (count_noise) when
 * sigma_b <= z_c leaves nothing for the model's noise. */
static int hdp_split(job_spec *s, size_t g, double zc, dp_err *err)
{
    double sb = s->hdp_count_noise;
    if (!(sb > zc))
        return dp_err_set(err, DP_EINVAL, "fedhdp.adaptive_clip.count_noise",
                          "fedhdp.adaptive_clip.count_noise (%g) must exceed the noise multiplier "
                          "%g that group \"%.40s\"'s target epsilon needs in all (the count's "
                          "noise takes part of the budget)",
                          sb, zc, s->hdp_groups[g].name);
    double z = 1.0 / sqrt(1.0 / (zc * zc) - 1.0 / (sb * sb));
    for (int i = 0; i < 64 && fl_hdp_combined_noise(z, sb) < zc; i++)
        z = nextafter(z, DP_INF);
    if (fl_hdp_combined_noise(z, sb) < zc)
        return dp_err_set(err, DP_ENUMERIC, "fedhdp.adaptive_clip.count_noise",
                          "could not split the noise of group \"%.40s\"", s->hdp_groups[g].name);
    s->hdp[g].noise = z;
    return DP_OK;
}

/* fedhdp: each private group's noise multiplier for its target epsilon: the largest of its silos'
 * calibrations (silos bound to budgets with different deltas need different noise; the group's
 * mean has one), so that every silo of the group meets the target. */
static int hdp_calibrate(job_prepared *p, dp_err *err)
{
    job_spec *s = &p->spec;
    size_t K = p->fed.n_silos;
    size_t *n = dp_calloc(K ? K : 1, sizeof *n);
    const fl_accountant **acct = dp_calloc(K ? K : 1, sizeof *acct);
    double *z = dp_calloc(K ? K : 1, sizeof *z), *eps = dp_calloc(K ? K : 1, sizeof *eps);
    int rc = DP_OK;
    if (n == NULL || acct == NULL || z == NULL || eps == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t g = 0; rc == DP_OK && g < s->n_hdp_groups; g++) {
        const job_hdp_group *gr = &s->hdp_groups[g];
        if (gr->privacy != JOB_PRIVACY_TARGET || s->hdp[g].opt_out || !(s->hdp[g].r > 0))
            continue;
        size_t m = 0;
        for (size_t k = 0; k < K; k++)
            if (p->silo_group[k] == g) {
                n[m] = p->fed.silo[k].n_train;
                acct[m++] = &p->silo[k].acct;
            }
        if (m == 0)
            continue;
        rc = fl_calibrate_noise_many(&p->cfg, m, n, gr->target_epsilon, acct, z, eps, err);
        double zg = 0;
        for (size_t i = 0; rc == DP_OK && i < m; i++)
            zg = z[i] > zg ? z[i] : zg;
        s->hdp[g].noise = zg;
        if (rc == DP_OK && s->hdp_adaptive)
            rc = hdp_split(s, g, zg, err);
    }
    dp_free(n);
    dp_free(acct);
    dp_free(z);
    dp_free(eps);
    return rc;
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
        bool opted_out = false;
        int rc = silo_accountant(s, l, c, p->fed.silo[k].name, id, &p->silo[k], &opted_out, err);
        if (rc == DP_OK && p->silo_group != NULL)
            rc = hdp_bind(p, k, id, opted_out, err);
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
        c->ppsgd_mode = (unsigned)s->ppsgd_mode;
        c->altmin_rank = (size_t)s->altmin_rank;
        c->altmin_spectral = s->altmin_spectral;
    }
    c->ap_tau = (uint64_t)s->ap_tau;
    c->ap_psi_init = s->ap_psi_init;
    c->ap_psi_floor = s->ap_psi_floor;
    c->ap_lr_mu = s->ap_lr_mu;
    c->ap_lr_psi = s->ap_lr_psi;
    c->ap_kd_psi = s->ap_kd_psi;
    c->ap_unsampled_rounds = (uint64_t)s->ap_unsampled_rounds;
    c->ap_clip_psi = s->ap_clip_psi;
    c->ifca_clusters = (size_t)s->ifca_clusters;
    c->ifca_select_rounds = (uint64_t)s->ifca_select_rounds;
    c->ifca_warm_rounds = (uint64_t)s->ifca_warm_rounds;
    c->ifca_select_eps = s->ifca_select_eps;
    c->ifca_loss_bound = s->ifca_loss_bound;
    c->pr_steps = (uint64_t)s->pr_steps;
    c->pr_var_floor = s->pr_var_floor;
    c->pr_components = (size_t)s->pr_components;
    c->pr_em_iters = (uint64_t)s->pr_em_iters;
    c->pr_noise_var = s->pr_noise_var;
    c->pr_variant = s->pr_variant;
    c->pr_sigma_theta2 = s->pr_sigma_theta2;
    c->pr_sigma_x2 = s->pr_sigma_x2;
    c->pr_lr_mu = s->pr_lr_mu;
    c->pr_lr_var = s->pr_lr_var;
    if (strcmp(s->algorithm, "fedhdp") == 0) {
        c->hdp_n_groups = s->n_hdp_groups;
        c->hdp_groups = s->hdp;
        c->hdp_adaptive = s->hdp_adaptive;
        c->hdp_clip_quantile = s->hdp_clip_quantile;
        c->hdp_clip_lr = s->hdp_clip_lr;
        c->hdp_count_noise = s->hdp_count_noise;
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
    bool hdp = p->silo_group != NULL;
    if (hdp) {
        int rc = hdp_calibrate(p, err);
        if (rc != DP_OK)
            return rc;
    }
    if (s->privacy == JOB_PRIVACY_TARGET && K > 0 && !hdp) {
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
        if (rc == DP_OK)
            rc = fl_plan_silo_select(&p->cfg, &sp->plan, sp->round_event, &sp->select_event, err);
        if (rc != DP_OK)
            return rc;
        if (sp->round_event != NULL)
            rc = fl_plan_epsilon_select(sp->round_event, sp->select_event, p->cfg.rounds,
                                        sp->plan.select_rounds, &sp->acct, &sp->planned_eps, err);
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
        fl_partition_spec natural = {FL_PARTITION_NATURAL, 0, 0, 0, s->seed, 0};
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
    if (rc == DP_OK && strcmp(s->algorithm, "fedhdp") == 0)
        rc = hdp_assign(out, err);
    if (rc == DP_OK)
        job_cfg_fill(&out->spec, out->z, &out->cfg);
    if (rc == DP_OK)
        rc = bind_silos(s, out, l, c, err); /* fedhdp: may add the opted-out group */
    if (rc == DP_OK) {
        out->cfg.hdp_silo_group = out->silo_group;
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
    for (size_t k = 0; p->silo != NULL && k < p->fed.n_silos; k++) {
        acct_event_free(p->silo[k].round_event);
        acct_event_free(p->silo[k].select_event);
    }
    dp_free(p->silo);
    dp_free(p->z);
    dp_free(p->silo_group);
    fl_federation_free(&p->fed);
    job_spec_clear(&p->spec);
    memset(p, 0, sizeof *p);
}

/* fedhdp's groups in the plan: [{"name", "private", "r", "lambda", "noise_multiplier",
 * "target_epsilon", "silos", "epsilon"}], epsilon the largest planned epsilon of its silos. */
/* adaped, dp_adaped: the "adaped" block as run; dp_adaped adds the per-step noise multiplier
 * sigma_q / C, sigma_mu = sigma_q1, sigma_psi = sigma_q2, and "paper_bound": Thm. 5's zCDP rho
 * (Ozkara, Acharya et al., Sec. 3.3) and its epsilon at the job's delta (Lemma 1, the conversion
 * of Canonne, Kamath & Steinke 2020), reported beside the charged cost, never charged. */
static json_t *adaped_plan_json(const job_prepared *p)
{
    const fl_job_cfg *c = &p->cfg;
    json_t *o = json_pack(
        "{s:I, s:o, s:o, s:o, s:o, s:o, s:I}", "tau", (json_int_t)c->ap_tau, "psi_init",
        json_util_real(c->ap_psi_init), "psi_floor", json_util_real(c->ap_psi_floor), "lr_mu",
        json_util_real(c->ap_lr_mu), "lr_psi", json_util_real(c->ap_lr_psi), "kd_psi",
        json_util_real(c->ap_kd_psi), "unsampled_rounds", (json_int_t)c->ap_unsampled_rounds);
    if (o == NULL || strcmp(c->algorithm, "dp_adaped") != 0)
        return o;
    double zs = fl_adaped_step_noise(c), rho = fl_adaped_paper_rho(c, p->fed.n_silos), eps = DP_NAN;
    double opt;
    dp_err e = {0};
    if (!(isfinite(rho) &&
          acct_zcdp_to_epsilon(rho, p->spec.delta, ACCT_ZCDP_CKS2020, &eps, &opt, &e) == DP_OK))
        eps = DP_NAN; /* server_noise 0: no bound */
    json_t *pb = json_pack("{s:o, s:o, s:o}", "rho", json_util_real(rho), "epsilon",
                           json_util_real(eps), "delta", json_util_real(p->spec.delta));
    if (pb == NULL || json_object_set_new(o, "paper_bound", pb) != 0 ||
        json_object_set_new(o, "clip_psi", json_util_real(c->ap_clip_psi)) != 0 ||
        json_object_set_new(o, "step_noise_multiplier", json_util_real(zs)) != 0 ||
        json_object_set_new(o, "sigma_mu", json_util_real(zs * c->update_clip)) != 0 ||
        json_object_set_new(o, "sigma_psi", json_util_real(zs * c->ap_clip_psi)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* adamix, gaussian_prior: their block as run (fl_algo_adamix.c), with "private": false: neither
 * is private, nothing is charged (their silos' event is none). */
static json_t *prior_plan_json(const job_prepared *p)
{
    const fl_job_cfg *c = &p->cfg;
    if (strcmp(c->algorithm, "adamix") == 0)
        return json_pack("{s:b, s:I, s:I, s:I, s:o, s:o}", "private", 0, "components",
                         (json_int_t)c->pr_components, "steps", (json_int_t)c->pr_steps, "em_iters",
                         (json_int_t)c->pr_em_iters, "noise_var", json_util_real(c->pr_noise_var),
                         "var_floor", json_util_real(c->pr_var_floor));
    return json_pack("{s:b, s:s, s:I, s:o, s:o, s:o, s:o, s:o}", "private", 0, "variant",
                     c->pr_variant == FL_GP_EM ? "em" : "gd", "steps", (json_int_t)c->pr_steps,
                     "sigma_theta2", json_util_real(c->pr_sigma_theta2), "sigma_x2",
                     json_util_real(c->pr_sigma_x2), "lr_mu", json_util_real(c->pr_lr_mu), "lr_var",
                     json_util_real(c->pr_lr_var), "var_floor", json_util_real(c->pr_var_floor));
}

static json_t *hdp_plan_json(const job_prepared *p)
{
    json_t *a = json_array();
    for (size_t g = 0; a != NULL && g < p->spec.n_hdp_groups; g++) {
        const job_hdp_group *gr = &p->spec.hdp_groups[g];
        const fl_hdp_group_cfg *e = &p->spec.hdp[g];
        double eps = DP_NAN;
        json_int_t n = 0;
        for (size_t k = 0; k < p->fed.n_silos; k++) {
            if (p->silo_group[k] != g)
                continue;
            n++;
            double x = p->silo[k].planned_eps;
            eps = !isnan(x) && (isnan(eps) || x > eps) ? x : eps;
        }
        bool releases = !e->opt_out && e->r > 0;
        json_t *o = json_pack(
            "{s:s, s:b, s:o, s:o, s:o, s:o, s:I, s:o}", "name", gr->name, "private", !e->opt_out,
            "r", json_util_real(e->r), "lambda", json_util_real(e->lambda), "noise_multiplier",
            releases ? json_util_real(e->noise) : json_null(), "target_epsilon",
            gr->privacy == JOB_PRIVACY_TARGET ? json_util_real(gr->target_epsilon) : json_null(),
            "silos", n, "epsilon", json_util_real(eps));
        if (o == NULL || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
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
        if (o != NULL && sp->select_event != NULL &&
            (json_object_set_new(o, "select_rounds", json_integer((json_int_t)pl->select_rounds)) !=
                 0 ||
             json_object_set_new(o, "select_epsilon", json_util_real(pl->select_epsilon)) != 0 ||
             json_object_set_new(o, "select_event", event_json_encode(sp->select_event)) != 0)) {
            json_decref(o);
            o = NULL;
        }
        if (o != NULL && p->silo_group != NULL &&
            json_object_set_new(o, "group",
                                json_string(p->spec.hdp_groups[p->silo_group[k]].name)) != 0) {
            json_decref(o);
            o = NULL;
        }
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
                         p->silo_group != NULL ? json_null() /* per group */
                                               : json_util_real(p->cfg.server_noise));
    json_t *groups = ok && root != NULL && p->silo_group != NULL ? hdp_plan_json(p) : NULL;
    if (groups != NULL && json_object_set_new(root, "groups", groups) != 0) {
        json_decref(root);
        root = NULL;
    }
    if (p->silo_group != NULL && groups == NULL) {
        json_decref(root);
        root = NULL;
    }
    bool ap = strcmp(p->cfg.algorithm, "adaped") == 0 || strcmp(p->cfg.algorithm, "dp_adaped") == 0;
    if (ap && root != NULL) {
        json_t *a = adaped_plan_json(p);
        if (a == NULL || json_object_set_new(root, "adaped", a) != 0) {
            json_decref(root);
            root = NULL;
        }
    }
    if (strcmp(p->cfg.algorithm, "ifca") == 0 && root != NULL) {
        const fl_job_cfg *c = &p->cfg;
        json_t *a = json_pack(
            "{s:I, s:I, s:I, s:o, s:o, s:o}", "clusters", (json_int_t)c->ifca_clusters,
            "select_rounds", (json_int_t)c->ifca_select_rounds, "warm_rounds",
            (json_int_t)c->ifca_warm_rounds, "selection_epsilon",
            isfinite(c->ifca_select_eps) ? json_util_real(c->ifca_select_eps) : json_null(),
            "loss_bound", json_util_real(c->ifca_loss_bound), "lambda", json_util_real(c->lambda));
        if (a == NULL || json_object_set_new(root, "ifca", a) != 0) {
            json_decref(root);
            root = NULL;
        }
    }
    bool pr =
        strcmp(p->cfg.algorithm, "adamix") == 0 || strcmp(p->cfg.algorithm, "gaussian_prior") == 0;
    if (pr && root != NULL) {
        json_t *a = prior_plan_json(p);
        if (a == NULL || json_object_set_new(root, p->cfg.algorithm, a) != 0) {
            json_decref(root);
            root = NULL;
        }
    }
    json_decref(arr);
    json_decref(hidden);
    json_decref(model);
    char *text = root ? json_util_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}
