/*
 * federated/fl_algo.c: the engine's core: the algorithm registry, the job configuration, one
 * round (selection, the pthread fan-out of the silos' local updates, the aggregation in silo
 * order, the evaluation of every silo) and the helpers the algorithm files share.
 *
 * THREADS. fl_round_run starts min(threads, K) workers and joins them before it returns; worker i
 * handles the silos k = i, i + n, i + 2n, ... with its own workspace and scratch. What a worker
 * writes (silo k's personal row, upload row, loss and metrics) belongs to silo k alone, and what
 * all read (the start-of-round global model, the federation, cfg) is not written during the
 * fan-out, so no lock is needed and the results do not depend on the split. The state, the
 * checkpoint format and the plan are in fl_algo_state.c and fl_algo_plan.c.
 */
#include "federated/fl_algo.h"
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"

/* Rows per workspace: batches and evaluations larger than this run in chunks of this many rows,
 * summed in order (fl_model.h). The workspace size must be a function of the federation alone,
 * because the chunking decides the float sums: every worker and every resumed run use the same. */
#define FL_WS_MAX_ROWS 1024

/* ---- registry ---- */

static const fl_algo_ops *const REGISTRY[] = {
    &fl_algo_local_ops,          &fl_algo_fedavg_ops,   &fl_algo_finetune_ops, &fl_algo_mrmtl_ops,
    &fl_algo_ditto_ops,          &fl_algo_dpfedavg_ops, &fl_algo_ppsgd_ops,    &fl_algo_fedhdp_ops,
    &fl_algo_adaped_ops,         &fl_algo_dpadaped_ops, &fl_algo_ifca_ops,     &fl_algo_adamix_ops,
    &fl_algo_gaussian_prior_ops, &fl_algo_altmin_ops,
};
#define N_REGISTRY (sizeof REGISTRY / sizeof REGISTRY[0])

static const char *const NAMES[N_REGISTRY] = {
    "local",  "fedavg", "finetune",  "mrmtl", "ditto",  "dp_fedavg",      "ppsgd",
    "fedhdp", "adaped", "dp_adaped", "ifca",  "adamix", "gaussian_prior", "altmin"};

const fl_algo_ops *fl_algo_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < N_REGISTRY; i++)
        if (strcmp(REGISTRY[i]->name, name) == 0)
            return REGISTRY[i];
    return NULL;
}

const char *const *fl_algo_names(size_t *n)
{
    *n = N_REGISTRY;
    return NAMES;
}

bool fl_algo_client_level(const char *algorithm)
{
    const fl_algo_ops *a = fl_algo_find(algorithm);
    return a != NULL && !a->record_level;
}

bool fl_algo_has_global(const char *algorithm)
{
    const fl_algo_ops *a = fl_algo_find(algorithm);
    return a != NULL && a->has_global;
}

/* ---- configuration ---- */

void fl_job_cfg_default(fl_job_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->local_epochs = 1;
    cfg->finetune_frac = 0.5;
    cfg->weighted = true;
    cfg->client_rate = 1.0;
    cfg->server_lr = 1.0;
    cfg->ppsgd_ratio = 1.0;
    cfg->ppsgd_mode = 3;   /* Bietti et al. 2022, Alg. 3 */
    cfg->hdp_n_groups = 0; /* fedhdp needs its groups */
    cfg->altmin_rank = 2;
    cfg->ap_tau = 10; /* adaped: Ozkara et al., App. K.1 */
    cfg->ap_psi_init = 3.5;
    cfg->ap_psi_floor = 0.5;
    cfg->ap_lr_mu = 0.1;
    cfg->ap_lr_psi = 0.05;
    cfg->ap_kd_psi = 1.0;
    cfg->ap_clip_psi = 1.0; /* |1/(2 psi)| <= 1 at the default floor */
    cfg->ifca_clusters = 2;
    cfg->ifca_select_rounds = FL_MAX_ROUNDS; /* every round */
    cfg->ifca_warm_rounds = FL_MAX_ROUNDS;   /* IFCA throughout */
    cfg->ifca_select_eps = DP_INF;           /* the exact argmin: set it for a private job */
    cfg->ifca_loss_bound = 1.0;
    cfg->pr_steps = 1; /* adamix, gaussian_prior (fl_algo_adamix.c) */
    cfg->pr_var_floor = 1e-4;
    cfg->pr_components = 2;
    cfg->pr_em_iters = 3;
    cfg->pr_noise_var = 1.0;
    cfg->pr_variant = FL_GP_GD;
    cfg->pr_sigma_theta2 = 1.0;
    cfg->pr_sigma_x2 = 1.0;
    cfg->pr_lr_mu = 1.0;
    cfg->pr_lr_var = 1.0;
}

static bool finite_ge0(double x)
{
    return isfinite(x) && x >= 0;
}

/* The parameters that do not depend on the federation. */
static int check_scalars(const fl_job_cfg *cfg, const fl_algo_ops *a, dp_err *err)
{
    if (fl_model_check(&cfg->model, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (cfg->rounds < 1 || cfg->rounds > FL_MAX_ROUNDS)
        return dp_err_set(err, DP_EINVAL, "rounds", "rounds must be in 1..%d (got %llu)",
                          FL_MAX_ROUNDS, (unsigned long long)cfg->rounds);
    if (cfg->local_epochs < 1 || cfg->local_epochs > FL_MAX_LOCAL_EPOCHS)
        return dp_err_set(err, DP_EINVAL, "local_epochs",
                          "local_epochs must be in 1..%d (got %llu)", FL_MAX_LOCAL_EPOCHS,
                          (unsigned long long)cfg->local_epochs);
    if (cfg->batch_size < 1)
        return dp_err_set(err, DP_EINVAL, "batch_size", "batch_size must be >= 1");
    if (!(isfinite(cfg->lr) && cfg->lr > 0))
        return dp_err_set(err, DP_EINVAL, "lr", "lr must be finite and > 0 (got %g)", cfg->lr);
    if (!finite_ge0(cfg->lambda))
        return dp_err_set(err, DP_EINVAL, "lambda", "lambda must be finite and >= 0 (got %g)",
                          cfg->lambda);
    if (!(cfg->finetune_frac >= 0 && cfg->finetune_frac <= 1))
        return dp_err_set(err, DP_EINVAL, "finetune_frac",
                          "finetune_frac must be in [0, 1] (got %g)", cfg->finetune_frac);
    if (!finite_ge0(cfg->clip))
        return dp_err_set(err, DP_EINVAL, "clip", "clip must be finite and >= 0 (got %g)",
                          cfg->clip);
    if (a->check != NULL && a->check(cfg, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    return DP_OK;
}

/* Silo k's training rows and noise multiplier. */
static int check_silo(const fl_job_cfg *cfg, const fl_algo_ops *a, const fl_federation *f, size_t k,
                      dp_err *err)
{
    char field[DP_ERR_FIELD_MAX];
    if (f->silo[k].n_train < 1) {
        snprintf(field, sizeof field, "silo[%zu]", k);
        return dp_err_set(err, DP_EINVAL, field, "silo %zu has no training row", k);
    }
    if (cfg->hdp_silo_group != NULL && strcmp(a->name, "fedhdp") == 0 &&
        cfg->hdp_silo_group[k] >= cfg->hdp_n_groups) {
        snprintf(field, sizeof field, "fedhdp.silo_group[%zu]", k);
        return dp_err_set(err, DP_EINVAL, field, "silo %zu's group %u is not one of the %zu groups",
                          k, (unsigned)cfg->hdp_silo_group[k], cfg->hdp_n_groups);
    }
    if (cfg->noise_multiplier == NULL)
        return DP_OK;
    double z = cfg->noise_multiplier[k];
    if (!a->record_level && z != 0)
        return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                          "%s is client-level DP: record-level noise_multiplier must be 0",
                          a->name);
    if (!finite_ge0(z) || (z > 0 && !(cfg->clip > 0))) {
        snprintf(field, sizeof field, "noise_multiplier[%zu]", k);
        return dp_err_set(err, DP_EINVAL, field,
                          "noise_multiplier[%zu] must be finite, >= 0, and > 0 only with clip > "
                          "0 (got %g)",
                          k, z);
    }
    return DP_OK;
}

int fl_job_cfg_check(const fl_job_cfg *cfg, const fl_federation *f, dp_err *err)
{
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    if (a == NULL)
        return dp_err_set(err, DP_EINVAL, "algorithm", "unknown algorithm \"%s\"",
                          cfg->algorithm != NULL ? cfg->algorithm : "(null)");
    if (check_scalars(cfg, a, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (f == NULL)
        return DP_OK;
    if (f->n_silos < 1 || f->silo == NULL)
        return dp_err_set(err, DP_EINVAL, "federation", "the federation has no silo");
    if (cfg->model.d_in != f->d)
        return dp_err_set(err, DP_EINVAL, "model.d_in",
                          "model.d_in (%zu) must equal the data's features (%zu)", cfg->model.d_in,
                          f->d);
    size_t p = fl_model_n_params(&cfg->model);
    if (p == 0 || (unsigned long long)f->n_silos + 2 > FL_MAX_STATE_FLOATS / p)
        return dp_err_set(err, DP_EINVAL, "model", "(silos + 2) x parameters exceeds %llu floats",
                          (unsigned long long)FL_MAX_STATE_FLOATS);
    size_t up = fl_upload_floats(cfg, p);
    if ((unsigned long long)f->n_silos > FL_MAX_STATE_FLOATS / up)
        return dp_err_set(err, DP_EINVAL, "silos", "silos x upload floats (%zu) exceeds %llu", up,
                          (unsigned long long)FL_MAX_STATE_FLOATS);
    for (size_t k = 0; k < f->n_silos; k++)
        if (check_silo(cfg, a, f, k, err) != DP_OK)
            return err != NULL ? err->code : DP_EINVAL;
    return DP_OK;
}

/* ---- helpers shared by the algorithms ---- */

size_t fl_upload_floats(const fl_job_cfg *cfg, size_t n_params)
{
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    size_t up = a != NULL && a->upload_floats != NULL ? a->upload_floats(cfg, n_params) : 0;
    return up > n_params ? up : n_params;
}

int fl_check_client_level(const fl_job_cfg *cfg, dp_err *err)
{
    if (!(cfg->client_rate > 0 && cfg->client_rate <= 1))
        return dp_err_set(err, DP_EINVAL, "client_rate", "client_rate must be in (0, 1] (got %g)",
                          cfg->client_rate);
    if (!(isfinite(cfg->update_clip) && cfg->update_clip > 0))
        return dp_err_set(err, DP_EINVAL, "update_clip",
                          "update_clip must be finite and > 0 (got %g)", cfg->update_clip);
    if (!(isfinite(cfg->server_noise) && cfg->server_noise >= 0))
        return dp_err_set(err, DP_EINVAL, "server_noise",
                          "server_noise must be finite and >= 0 (got %g)", cfg->server_noise);
    return DP_OK;
}

int fl_silo_clipped_delta(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    memcpy(c->scratch, c->global, c->n_params * sizeof(float));
    int rc = fl_silo_sgd(c, c->scratch, FL_SEED_PHASE_MAIN, 0.0, NULL, train_loss, err);
    if (rc != DP_OK)
        return rc;
    fl_vec_sub(c->upload, c->scratch, c->global, c->n_params);
    fl_clip_vec(c->upload, c->n_params, c->cfg->update_clip);
    return DP_OK;
}

double fl_clip_vec(float *u, size_t n, double s)
{
    double sq = 0;
    for (size_t j = 0; j < n; j++)
        sq += (double)u[j] * (double)u[j];
    double norm = sqrt(sq);
    if (norm > s) {
        double scale = s / norm;
        for (size_t j = 0; j < n; j++)
            u[j] = (float)((double)u[j] * scale);
    }
    return norm;
}

int fl_agg_noisy_sum(const fl_server_ctx *c, double scale, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    size_t p = c->state->n_params;
    double *acc = dp_calloc(p, sizeof(double));
    float *noise = dp_calloc(p, sizeof(float));
    if (acc == NULL || noise == NULL) {
        dp_free(noise);
        dp_free(acc);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t k = 0; k < c->state->n_silos; k++) {
        if (!c->took_part[k])
            continue;
        const float *u = c->uploads + k * p;
        for (size_t j = 0; j < p; j++)
            acc[j] += (double)u[j];
    }
    double sigma = cfg->server_noise * cfg->update_clip;
    if (sigma > 0)
        fl_gauss_fill(noise, p, sigma,
                      dp_rng_derive(fl_server_seed(cfg->seed, c->round), FL_SEED_NOISE));
    float *g = c->state->global;
    for (size_t j = 0; j < p; j++)
        g[j] = (float)((double)g[j] + scale * (acc[j] + (double)noise[j]));
    dp_free(noise);
    dp_free(acc);
    return DP_OK;
}

int fl_select_poisson(const fl_job_cfg *cfg, uint64_t round, size_t n_silos, const bool *trainable,
                      bool *take, dp_err *err)
{
    gsl_rng *r =
        dp_rng_alloc(fl_server_seed(cfg->seed, round), DP_RNG_STREAM_FL_CLIENT_SAMPLING, err);
    if (r == NULL)
        return DP_ENOMEM;
    for (size_t k = 0; k < n_silos; k++) {
        double u = gsl_rng_uniform(r); /* [0, 1): q = 1 takes every silo */
        take[k] = trainable[k] && u < cfg->client_rate;
    }
    gsl_rng_free(r);
    return DP_OK;
}

void fl_silo_seeds(uint64_t job_seed, size_t silo, uint64_t round, uint64_t phase,
                   uint64_t *sampling, uint64_t *noise)
{
    uint64_t base = dp_rng_derive(dp_rng_derive(job_seed, (uint64_t)silo), round);
    uint64_t ph = dp_rng_derive(base, phase);
    *sampling = dp_rng_derive(ph, FL_SEED_SAMPLING);
    *noise = dp_rng_derive(ph, FL_SEED_NOISE);
}

uint64_t fl_server_seed(uint64_t job_seed, uint64_t round)
{
    return dp_rng_derive(dp_rng_derive(job_seed, FL_SEED_SERVER), round);
}

int fl_silo_sgd(const fl_silo_ctx *c, float *w, uint64_t phase, double prox_lambda,
                const float *anchor, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    size_t n = c->data->n_train;
    size_t b = cfg->batch_size < n ? cfg->batch_size : n;
    double z = cfg->noise_multiplier != NULL ? cfg->noise_multiplier[c->silo] : 0.0;
    fl_sgd_cfg s = {
        .lr = cfg->lr,
        .steps = (size_t)cfg->local_epochs * (n / b),
        .q = (double)b / (double)n,
        .expected_batch = (double)b,
        .clip = cfg->clip,
        .noise_multiplier = z,
        .prox_lambda = prox_lambda,
        .anchor = prox_lambda > 0 ? anchor : NULL,
        .x_inv_s = c->data->x_train_inv_s,
    };
    uint64_t s_seed, n_seed;
    fl_silo_seeds(cfg->seed, c->silo, c->round, phase, &s_seed, &n_seed);
    return fl_sgd_run(c->model, w, c->data->x_train, c->data->y_train, n, &s, s_seed, n_seed, c->ws,
                      train_loss, err);
}

bool fl_agg_weights(const fl_server_ctx *c, double *w)
{
    size_t k_n = c->state->n_silos;
    double total = 0;
    for (size_t k = 0; k < k_n; k++) {
        w[k] = c->took_part[k] ? (c->cfg->weighted ? (double)c->fed->silo[k].n_train : 1.0) : 0.0;
        total += w[k];
    }
    if (!(total > 0))
        return false;
    for (size_t k = 0; k < k_n; k++)
        w[k] /= total;
    return true;
}

void fl_agg_add_weighted(const fl_server_ctx *c, const double *w, double *acc)
{
    size_t p = c->state->n_params;
    memset(acc, 0, p * sizeof *acc);
    for (size_t k = 0; k < c->state->n_silos; k++) {
        if (!c->took_part[k])
            continue;
        const float *u = c->uploads + k * p;
        for (size_t j = 0; j < p; j++)
            acc[j] += w[k] * (double)u[j];
    }
    float *g = c->state->global;
    for (size_t j = 0; j < p; j++)
        g[j] = (float)((double)g[j] + acc[j]);
}

int fl_agg_weighted_mean(const fl_server_ctx *c, dp_err *err)
{
    double *w = dp_calloc(c->state->n_silos, sizeof(double));
    double *acc = dp_calloc(c->state->n_params, sizeof(double));
    int rc = DP_OK;
    if (w == NULL || acc == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    else if (fl_agg_weights(c, w))
        fl_agg_add_weighted(c, w, acc);
    dp_free(acc);
    dp_free(w);
    return rc;
}

void fl_broadcast_global(fl_state *s)
{
    for (size_t k = 0; k < s->n_silos; k++)
        memcpy(s->personal + k * s->n_params, s->global, s->n_params * sizeof(float));
}

void fl_vec_sub(float *dst, const float *a, const float *b, size_t n)
{
    for (size_t j = 0; j < n; j++)
        dst[j] = a[j] - b[j];
}

/* ---- metrics ---- */

void fl_round_metrics_free(fl_round_metrics *m)
{
    if (m == NULL)
        return;
    dp_free(m->silo);
    memset(m, 0, sizeof *m);
}

/* fl_model_eval over n rows in chunks of the workspace's rows, in order. */
static void eval_rows(const fl_model_spec *m, const float *w, const float *x, const float *y,
                      size_t n, size_t d, size_t chunk, fl_ws *ws, fl_eval *e)
{
    for (size_t i = 0; i < n; i += chunk) {
        size_t len = n - i < chunk ? n - i : chunk;
        fl_model_eval(m, w, x + i * d, y + i, len, ws, e);
    }
}

/* Per-silo evaluation results, kept as sums so that the pooled figures are exact. */
typedef struct silo_eval {
    fl_eval train, test;
} silo_eval;

static double eval_metric(const fl_eval *e, bool regression)
{
    if (e->n == 0)
        return DP_NAN;
    return (regression ? e->sq_err : e->correct) / (double)e->n;
}

static void model_metrics_of(const silo_eval *s, bool regression, fl_model_metrics *out)
{
    out->train_loss = s->train.n > 0 ? s->train.loss_sum / (double)s->train.n : DP_NAN;
    out->test_loss = s->test.n > 0 ? s->test.loss_sum / (double)s->test.n : DP_NAN;
    out->test_metric = eval_metric(&s->test, regression);
}

static void agg_of(const silo_eval *ev, size_t k_n, bool regression, fl_agg_metrics *out)
{
    fl_eval train = {0}, test = {0};
    double sum = 0, lo = DP_INF, hi = -DP_INF;
    size_t n_with = 0, k_lo = 0, k_hi = 0;
    for (size_t k = 0; k < k_n; k++) {
        train.loss_sum += ev[k].train.loss_sum;
        train.n += ev[k].train.n;
        test.loss_sum += ev[k].test.loss_sum;
        test.sq_err += ev[k].test.sq_err;
        test.correct += ev[k].test.correct;
        test.n += ev[k].test.n;
        double v = eval_metric(&ev[k].test, regression);
        if (isnan(v))
            continue;
        n_with++;
        sum += v;
        k_lo = v < lo ? k : k_lo;
        k_hi = v > hi ? k : k_hi;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    out->pooled_test_metric = eval_metric(&test, regression);
    out->pooled_test_loss = test.n > 0 ? test.loss_sum / (double)test.n : DP_NAN;
    out->train_loss = train.n > 0 ? train.loss_sum / (double)train.n : DP_NAN;
    out->mean_test_metric = n_with > 0 ? sum / (double)n_with : DP_NAN;
    out->worst_test_metric = n_with == 0 ? DP_NAN : regression ? hi : lo;
    out->worst_silo = regression ? k_hi : k_lo;
    out->spread_test_metric = n_with > 0 ? hi - lo : DP_NAN;
}

static void agg_nan(fl_agg_metrics *a)
{
    a->pooled_test_metric = a->pooled_test_loss = a->train_loss = DP_NAN;
    a->mean_test_metric = a->worst_test_metric = a->spread_test_metric = DP_NAN;
}

/* ---- the round ---- */

/* One round's working set. Workers read cfg, fed, global0, take and the state; each writes only
 * the entries of its own silos k: state->personal row k, uploads row k, loss[k], ev_*[k]. */
typedef struct round_job {
    const fl_job_cfg *cfg;
    const fl_algo_ops *algo;
    const fl_federation *fed;
    fl_state *state;
    size_t n_threads;
    size_t ws_rows;         /* rows of every worker's workspace (ws_rows_of) */
    size_t stride;          /* floats per upload row (fl_upload_floats) */
    bool evaluate;          /* phase: false = local updates, true = evaluation */
    size_t n_trainable;     /* silos active and not stopped this round */
    bool *trainable;        /* K: active and not stopped */
    bool *take;             /* K: takes part this round (trainable and selected) */
    float *global0;         /* P: the start-of-round global model */
    float *uploads;         /* K x P */
    double *loss;           /* K: the silos' DP-SGD losses */
    silo_eval *ev_personal; /* K, or NULL without metrics */
    silo_eval *ev_global;   /* K, or NULL without metrics or without a global model */
    fl_silo_metrics *silo;  /* K metrics handed to the caller, or NULL */
    struct worker *wk;      /* n_threads */
    pthread_t *tid;         /* n_threads */
} round_job;

typedef struct worker {
    round_job *job;
    size_t index;
    int rc;
    dp_err err;
} worker;

/* Evaluates silo k's personal (and global) model on its training and test rows. */
static void eval_silo(const round_job *j, size_t k, fl_ws *ws)
{
    const fl_state *s = j->state;
    const fl_silo_data *sd = &j->fed->silo[k];
    const fl_model_spec *m = &j->cfg->model;
    size_t d = j->fed->d, r = j->ws_rows;
    const float *pers = s->personal + k * s->n_params;
    eval_rows(m, pers, sd->x_train, sd->y_train, sd->n_train, d, r, ws, &j->ev_personal[k].train);
    eval_rows(m, pers, sd->x_test, sd->y_test, sd->n_test, d, r, ws, &j->ev_personal[k].test);
    if (j->ev_global == NULL)
        return;
    eval_rows(m, s->global, sd->x_train, sd->y_train, sd->n_train, d, r, ws,
              &j->ev_global[k].train);
    eval_rows(m, s->global, sd->x_test, sd->y_test, sd->n_test, d, r, ws, &j->ev_global[k].test);
}

/* Silo k's update (take[k]) or, when the algorithm has one, its idle update (trainable, not
 * taken). */
static int update_silo(const round_job *j, size_t k, fl_ws *ws, float *scratch, dp_err *err)
{
    fl_state *s = j->state;
    size_t p = s->n_params;
    fl_silo_ctx c = {
        .cfg = j->cfg,
        .model = &j->cfg->model,
        .silo = k,
        .round = s->round,
        .n_params = p,
        .data = &j->fed->silo[k],
        .d = j->fed->d,
        .global = j->global0,
        .personal = s->personal + k * p,
        .upload = j->uploads + k * j->stride,
        .scratch = scratch,
        .own_extra = j->algo->extra_per_silo && s->extra != NULL
                         ? s->extra + k * (s->n_extra / s->n_silos)
                         : NULL,
        .shared_extra = !j->algo->extra_per_silo ? s->extra : NULL,
        .upload_floats = j->stride,
        .ws = ws,
        .fed = j->fed,
        .trainable = j->trainable,
    };
    if (!j->take[k])
        return j->algo->idle_update(&c, err);
    return j->algo->silo_update(&c, &j->loss[k], err);
}

static int work_silos(worker *wk)
{
    round_job *j = wk->job;
    size_t k_n = j->state->n_silos;
    fl_ws *ws = fl_ws_alloc(&j->cfg->model, j->ws_rows, &wk->err);
    float *scratch = ws != NULL ? dp_calloc(j->state->n_params, sizeof(float)) : NULL;
    if (ws == NULL || scratch == NULL) {
        fl_ws_free(ws);
        return dp_err_set(&wk->err, DP_ENOMEM, NULL, "out of memory");
    }
    int rc = DP_OK;
    for (size_t k = wk->index; k < k_n && rc == DP_OK; k += j->n_threads) {
        if (j->evaluate)
            eval_silo(j, k, ws);
        else if (j->take[k] || (j->trainable[k] && j->algo->idle_update != NULL))
            rc = update_silo(j, k, ws, scratch, &wk->err);
    }
    dp_free(scratch);
    fl_ws_free(ws);
    return rc;
}

static void *worker_main(void *arg)
{
    worker *wk = arg;
    wk->rc = work_silos(wk);
    return NULL;
}

/* Runs work_silos over n_threads workers (the calling thread is worker 0) and joins them. The
 * first failing worker's error (in worker order) is reported. */
static int fan_out(round_job *j, dp_err *err)
{
    worker *wk = j->wk;
    size_t started = 1;
    int rc = DP_OK;
    for (size_t i = 0; i < j->n_threads; i++) {
        wk[i].job = j;
        wk[i].index = i;
        wk[i].rc = DP_OK;
        dp_err_clear(&wk[i].err);
    }
    for (size_t i = 1; i < j->n_threads; i++) {
        if (pthread_create(&j->tid[i], NULL, worker_main, &wk[i]) != 0) {
            rc = dp_err_set(err, DP_EINTERNAL, NULL, "could not start a training thread");
            break;
        }
        started++;
    }
    if (rc == DP_OK)
        worker_main(&wk[0]);
    for (size_t i = 1; i < started; i++)
        if (pthread_join(j->tid[i], NULL) != 0 && rc == DP_OK)
            rc = dp_err_set(err, DP_EINTERNAL, NULL, "could not join a training thread");
    if (rc != DP_OK)
        return rc;
    for (size_t i = 0; i < j->n_threads; i++)
        if (wk[i].rc != DP_OK) {
            if (err != NULL && err->code == DP_OK)
                *err = wk[i].err;
            return wk[i].rc;
        }
    return DP_OK;
}

static size_t ws_rows_of(const fl_federation *f)
{
    size_t m = 1;
    for (size_t k = 0; k < f->n_silos; k++) {
        m = f->silo[k].n_train > m ? f->silo[k].n_train : m;
        m = f->silo[k].n_test > m ? f->silo[k].n_test : m;
    }
    return m < FL_WS_MAX_ROWS ? m : FL_WS_MAX_ROWS;
}

static int check_state(const fl_job_cfg *cfg, const fl_federation *f, const fl_state *s,
                       dp_err *err)
{
    if (s->n_silos != f->n_silos || s->n_params != fl_model_n_params(&cfg->model) ||
        s->global == NULL || s->personal == NULL || s->stopped == NULL)
        return dp_err_set(err, DP_EINVAL, "state", "the state does not match the job");
    if (s->round >= cfg->rounds)
        return dp_err_set(err, DP_EINVAL, "state", "the job has run all its %llu rounds",
                          (unsigned long long)cfg->rounds);
    return DP_OK;
}

static void round_free(round_job *j)
{
    dp_free(j->tid);
    dp_free(j->wk);
    dp_free(j->silo);
    dp_free(j->ev_global);
    dp_free(j->ev_personal);
    dp_free(j->loss);
    dp_free(j->uploads);
    dp_free(j->global0);
    dp_free(j->take);
    dp_free(j->trainable);
}

/* Allocates the round's buffers (the metrics' only when metrics are wanted). */
static int round_alloc(round_job *j, bool metrics, dp_err *err)
{
    size_t k_n = j->state->n_silos, p = j->state->n_params;
    j->trainable = dp_calloc(k_n, sizeof(bool));
    j->take = dp_calloc(k_n, sizeof(bool));
    j->global0 = dp_calloc(p, sizeof(float));
    j->uploads = dp_calloc(k_n, j->stride * sizeof(float));
    j->loss = dp_calloc(k_n, sizeof(double));
    j->wk = dp_calloc(j->n_threads, sizeof(worker));
    j->tid = dp_calloc(j->n_threads, sizeof(pthread_t));
    bool ok = j->trainable && j->take && j->global0 && j->uploads && j->loss && j->wk && j->tid;
    if (ok && metrics) {
        j->ev_personal = dp_calloc(k_n, sizeof(silo_eval));
        j->ev_global = j->algo->has_global ? dp_calloc(k_n, sizeof(silo_eval)) : NULL;
        j->silo = dp_calloc(k_n, sizeof(fl_silo_metrics));
        ok = j->ev_personal && j->silo && (!j->algo->has_global || j->ev_global);
    }
    return ok ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
}

/* The silos that may train (active, not stopped) and those that take part (the algorithm's
 * selection among them). */
static int round_select(round_job *j, const bool *active, dp_err *err)
{
    size_t k_n = j->state->n_silos;
    j->n_trainable = 0;
    for (size_t k = 0; k < k_n; k++) {
        j->trainable[k] = !j->state->stopped[k] && (active == NULL || active[k]);
        j->n_trainable += j->trainable[k];
    }
    if (j->algo->select == NULL) {
        memcpy(j->take, j->trainable, k_n * sizeof(bool));
        return DP_OK;
    }
    int rc = j->algo->select(j->cfg, j->state->round, k_n, j->trainable, j->take, err);
    for (size_t k = 0; k < k_n; k++)
        j->take[k] = j->take[k] && j->trainable[k];
    return rc;
}

/* Hands the evaluated round to out (its previous content freed). */
static void round_metrics(round_job *j, uint64_t ran, fl_round_metrics *out)
{
    const fl_state *s = j->state;
    bool regression = fl_model_is_regression(&j->cfg->model);
    fl_round_metrics_free(out);
    out->silo = j->silo;
    j->silo = NULL;
    out->round = ran;
    out->regression = regression;
    out->has_global = j->algo->has_global;
    out->n_silos = s->n_silos;
    out->n_trained = 0;
    for (size_t k = 0; k < s->n_silos; k++) {
        fl_silo_metrics *m = &out->silo[k];
        m->active = j->take[k];
        m->sgd_loss = j->take[k] ? j->loss[k] : DP_NAN;
        out->n_trained += j->take[k];
        m->n_train = j->fed->silo[k].n_train;
        m->n_test = j->fed->silo[k].n_test;
        model_metrics_of(&j->ev_personal[k], regression, &m->personal);
        m->cluster = j->algo->silo_cluster != NULL ? j->algo->silo_cluster(j->cfg, s, k) : -1;
        if (j->ev_global != NULL)
            model_metrics_of(&j->ev_global[k], regression, &m->global);
        else
            m->global.train_loss = m->global.test_loss = m->global.test_metric = DP_NAN;
    }
    agg_of(j->ev_personal, s->n_silos, regression, &out->personal);
    if (j->ev_global != NULL)
        agg_of(j->ev_global, s->n_silos, regression, &out->global);
    else
        agg_nan(&out->global);
}

int fl_round_run(const fl_job_cfg *cfg, const fl_federation *f, fl_state *state, const bool *active,
                 int threads, fl_round_metrics *out, dp_err *err)
{
    if (fl_job_cfg_check(cfg, f, err) != DP_OK || check_state(cfg, f, state, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (threads < 1)
        return dp_err_set(err, DP_EINVAL, "threads", "threads must be >= 1 (got %d)", threads);
    size_t n_threads = (size_t)threads < FL_MAX_THREADS ? (size_t)threads : FL_MAX_THREADS;
    round_job j = {
        .cfg = cfg,
        .algo = fl_algo_find(cfg->algorithm),
        .fed = f,
        .state = state,
        .n_threads = n_threads < f->n_silos ? n_threads : f->n_silos,
        .ws_rows = ws_rows_of(f),
        .stride = fl_upload_floats(cfg, state->n_params),
    };
    int rc = round_alloc(&j, out != NULL, err);
    if (rc == DP_OK)
        rc = round_select(&j, active, err);
    if (rc == DP_OK) {
        memcpy(j.global0, state->global, state->n_params * sizeof(float));
        rc = fan_out(&j, err);
    }
    fl_server_ctx sc = {cfg,           f,           state->round, state, j.take, j.uploads,
                        j.n_trainable, j.trainable, j.stride};
    if (rc == DP_OK)
        rc = j.algo->aggregate(&sc, err);
    if (rc == DP_OK) {
        /* Stopping is sticky: recorded with the round that first left the silo out. */
        for (size_t k = 0; active != NULL && k < f->n_silos; k++)
            state->stopped[k] = state->stopped[k] || !active[k];
        uint64_t ran = state->round++;
        j.evaluate = true;
        if (out != NULL && (rc = fan_out(&j, err)) == DP_OK)
            round_metrics(&j, ran, out);
    }
    round_free(&j);
    return rc;
}
