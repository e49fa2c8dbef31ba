/*
 * federated/fl_algo_ifca.c: clustered federated learning with private cluster selection (IFCA,
 * Ghosh, Chung, Yin & Ramchandran, "An Efficient Framework for Clustered Federated Learning",
 * NeurIPS 2020, Alg. 2 with model averaging) as Liu, Hu, Wu & Smith run it under silo-specific
 * record-level DP ("On Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS 2022,
 * App. A and C.3), and their IFCA-warm-started MR-MTL (Alg. A2).
 *
 * STATE. state->extra holds the G = ifca_clusters cluster models (G x P floats, row g = model g)
 * followed by each silo's cluster index (K floats, small integers, exact in float). Cluster 0
 * starts at the engine's initial model (so that G = 1 is FedAvg bit for bit); cluster g >= 1 at
 * that model plus N(0, IFCA_INIT_STD^2) per parameter from dp_rng_derive(init seed, g): the
 * clusters must differ or no silo could ever tell them apart (Liu et al.'s code initialises the
 * cluster models randomly even for linear models). Before round 0's aggregation the extra is
 * still zero, so both sides compute the start from the seed (cluster_models). state->global is
 * unused (has_global false): each silo's model is its personal row.
 *
 * ROUND t < warm_rounds (IFCA). Silo k:
 *   1. if t < select_rounds: scores s_g = sum_i min(loss_i(w_g), B) over its training rows (B =
 *      ifca_loss_bound) and g*(k) = argmin_g (s_g - (2 B / eps) Gumbel_g), the report-noisy-min
 *      form of the exponential mechanism Pr[g] ~ exp(-eps s_g / (2 B)) (McSherry & Talwar 2007;
 *      the Gumbel-max trick; Liu et al., App. A "IFCA"). Clipping each record's loss to [0, B]
 *      makes the sensitivity of every s_g B under add/remove of one record (Liu et al.'s code
 *      clips the mean loss at 0.1 and takes sensitivity 0.1 for regression; clipping each
 *      record is tighter, B / n_k on the mean). eps = DP_INF is the exact argmin (non-private; ties
 *      to the lower index). Otherwise it keeps its cluster from the previous round.
 *   2. w = w_{g*}; local_epochs blocks of DP-SGD (fl_silo_sgd, phase MAIN: the seeds of fedavg);
 *      uploads Delta_k = w - w_{g*} and g* (the upload's float P).
 * The server adds to each cluster model the weighted mean (n_k or 1, normalised over the
 * cluster's members that trained, in silo order, in double) of its members' Delta_k: G = 1 is
 * fl_agg_weighted_mean's arithmetic exactly; a cluster no silo picked is kept. Every silo's
 * personal row becomes its cluster's model (a broadcast, as fedavg's).
 * ROUND t >= warm_rounds (MR-MTL, Alg. A2 phase 2). The assignment is frozen; silo k continues its
 * personal row w_k with DP-SGD on F_k(w) + lambda/2 ||w - w_{g(k)}||^2, the anchor its cluster's
 * start-of-round model (proximal term after clipping and noise, as mrmtl), and uploads w_k(t) -
 * w_k(t-1) (Liu et al.'s code; equal to Alg. A2 line 22's when the cluster model is its members'
 * mean, as at the switch); the server averages per cluster as above.
 *
 * PRIVACY. Record level, each silo its own noise multiplier (fl_algo.h). A selection reads the
 * silo's records: in the rounds t < pick_rounds = min(select_rounds, warm_rounds, rounds) (when G
 * > 1) a silo that trains is charged the selection's event too, an exponential mechanism of
 * epsilon eps: eps-bounded range (Durfee & Rogers, "Practical Differentially Private Top-k
 * Selection with Pay-what-you-get Composition", NeurIPS 2019), hence eps^2/8-zCDP (Cesar & Rogers,
 * "Bounding, Concentrating, and Truncating", ALT 2021: bounded range implies that zCDP),
 * RDP alpha eps^2 / 8 (Liu et al., App. A). The plan composes it with the round's DP-SGD event
 * (fl_plan_silo_select). G = 1 selects nothing and costs what fedavg costs.
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_rng.h"

/* std of the clusters' random start around the engine's initial model */
#define IFCA_INIT_STD 0.1

static size_t n_clusters(const fl_job_cfg *cfg)
{
    return cfg->ifca_clusters;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The rounds t < this run the selection (0 with one cluster: there is nothing to select). */
static uint64_t ifca_pick_rounds(const fl_job_cfg *cfg)
{
    if (n_clusters(cfg) < 2)
        return 0;
    return min_u64(min_u64(cfg->ifca_select_rounds, cfg->ifca_warm_rounds), cfg->rounds);
}

static acct_event *ifca_pick_event(const fl_job_cfg *cfg)
{
    double e = cfg->ifca_select_eps;
    return acct_event_zcdp(e * e / 8.0);
}

static size_t ifca_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    return n_clusters(cfg) * n_params + n_silos;
}

static size_t ifca_upload(const fl_job_cfg *cfg, size_t n_params)
{
    (void)cfg;
    return n_params + 1; /* Delta_k and the chosen cluster */
}

static int ifca_check(const fl_job_cfg *cfg, dp_err *err)
{
    if (cfg->ifca_clusters < 1 || cfg->ifca_clusters > FL_MAX_IFCA_CLUSTERS)
        return dp_err_set(err, DP_EINVAL, "ifca.clusters",
                          "ifca.clusters must be in 1..%d (got %zu)", FL_MAX_IFCA_CLUSTERS,
                          cfg->ifca_clusters);
    if (cfg->ifca_select_rounds < 1)
        return dp_err_set(err, DP_EINVAL, "ifca.select_rounds",
                          "ifca.select_rounds must be >= 1 (round 0 must choose the clusters)");
    if (cfg->ifca_warm_rounds < 1)
        return dp_err_set(err, DP_EINVAL, "ifca.warm_rounds",
                          "ifca.warm_rounds must be >= 1 (the IFCA rounds before MR-MTL)");
    if (!(cfg->ifca_select_eps > 0)) /* DP_INF: the exact argmin */
        return dp_err_set(err, DP_EINVAL, "ifca.selection_epsilon",
                          "ifca.selection_epsilon must be > 0 (got %g)", cfg->ifca_select_eps);
    if (!(isfinite(cfg->ifca_loss_bound) && cfg->ifca_loss_bound > 0))
        return dp_err_set(err, DP_EINVAL, "ifca.loss_bound",
                          "ifca.loss_bound must be finite and > 0 (got %g)", cfg->ifca_loss_bound);
    return DP_OK;
}

/* The start of every cluster model (G x P floats into out). */
static void cluster_init(const fl_job_cfg *cfg, size_t n_params, float *out)
{
    uint64_t init = dp_rng_derive(cfg->seed, FL_SEED_INIT);
    fl_model_init(&cfg->model, init, out);
    for (size_t g = 1; g < n_clusters(cfg); g++) {
        float *w = out + g * n_params;
        fl_gauss_fill(w, n_params, IFCA_INIT_STD, dp_rng_derive(init, (uint64_t)g));
        for (size_t j = 0; j < n_params; j++)
            w[j] = (float)((double)out[j] + (double)w[j]);
    }
}

/* The start-of-round cluster models: the state's, or their start before round 0 aggregated. */
static void cluster_models(const fl_job_cfg *cfg, uint64_t round, const float *extra,
                           size_t n_params, float *out)
{
    if (round == 0)
        cluster_init(cfg, n_params, out);
    else
        memcpy(out, extra, n_clusters(cfg) * n_params * sizeof(float));
}

/* Silo k's cluster as stored (0 before any selection). */
static size_t stored_cluster(const fl_job_cfg *cfg, const float *extra, size_t n_params, size_t k)
{
    double g = (double)extra[n_clusters(cfg) * n_params + k];
    return g >= 0 && g < (double)n_clusters(cfg) ? (size_t)g : 0;
}

size_t fl_ifca_select(const double *score, size_t n_clusters, double scale, uint64_t seed)
{
    fl_rng r;
    fl_rng_seed(&r, seed, DP_RNG_STREAM_FL_DP_NOISE);
    size_t best = 0;
    double best_v = DP_INF;
    for (size_t g = 0; g < n_clusters; g++) {
        double u = ((double)(fl_rng_next(&r) >> 11) + 0.5) * 0x1.0p-53; /* (0, 1) */
        double v = score[g];
        if (scale > 0)
            v -= scale * -log(-log(u));
        if (v < best_v) {
            best_v = v;
            best = g;
        }
    }
    return best;
}

/* Silo k's selection: the scores of every cluster model on its training rows, then the noisy
 * argmin. */
static size_t select_cluster(const fl_silo_ctx *c, const float *models)
{
    const fl_job_cfg *cfg = c->cfg;
    const fl_silo_data *sd = c->data;
    double score[FL_MAX_IFCA_CLUSTERS], b = cfg->ifca_loss_bound;
    for (size_t g = 0; g < n_clusters(cfg); g++) {
        const float *w = models + g * c->n_params;
        double s = 0;
        for (size_t i = 0; i < sd->n_train; i++) {
            fl_eval e = {0};
            fl_model_eval(c->model, w, sd->x_train + i * c->d, sd->y_train + i, 1, c->ws, &e);
            double l = e.loss_sum;
            s += l > b ? b : l > 0 ? l : 0.0; /* NaN counts as 0: never above the bound */
        }
        score[g] = s;
    }
    double eps = cfg->ifca_select_eps;
    double scale = isfinite(eps) ? 2.0 * b / eps : 0.0;
    uint64_t s_seed, n_seed;
    fl_silo_seeds(cfg->seed, c->silo, c->round, FL_SEED_PHASE_SELECT, &s_seed, &n_seed);
    return fl_ifca_select(score, n_clusters(cfg), scale, n_seed);
}

static bool is_warm(const fl_job_cfg *cfg, uint64_t round)
{
    return round < cfg->ifca_warm_rounds;
}

static int ifca_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    size_t p = c->n_params, gn = n_clusters(cfg);
    float *models = dp_malloc(gn * p * sizeof(float));
    if (models == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    cluster_models(cfg, c->round, c->shared_extra, p, models);
    size_t g = c->round < ifca_pick_rounds(cfg) ? select_cluster(c, models)
                                                : stored_cluster(cfg, c->shared_extra, p, c->silo);
    const float *wg = models + g * p;
    int rc;
    if (is_warm(cfg, c->round)) {
        memcpy(c->scratch, wg, p * sizeof(float));
        rc = fl_silo_sgd(c, c->scratch, FL_SEED_PHASE_MAIN, 0.0, NULL, train_loss, err);
        if (rc == DP_OK)
            fl_vec_sub(c->upload, c->scratch, wg, p);
    } else {
        memcpy(c->scratch, c->personal, p * sizeof(float));
        rc = fl_silo_sgd(c, c->personal, FL_SEED_PHASE_MAIN, cfg->lambda, wg, train_loss, err);
        if (rc == DP_OK)
            fl_vec_sub(c->upload, c->personal, c->scratch, p);
    }
    c->upload[p] = (float)g;
    dp_free(models);
    return rc;
}

static int ifca_aggregate(const fl_server_ctx *c, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    fl_state *s = c->state;
    size_t p = s->n_params, k_n = s->n_silos, gn = n_clusters(cfg);
    float *assign = s->extra + gn * p;
    if (c->round == 0)
        cluster_init(cfg, p, s->extra);
    for (size_t k = 0; k < k_n; k++)
        if (c->took_part[k])
            assign[k] = c->uploads[k * c->upload_stride + p];
    double *w = dp_calloc(k_n, sizeof(double));
    double *acc = dp_calloc(p, sizeof(double));
    if (w == NULL || acc == NULL) {
        dp_free(acc);
        dp_free(w);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t g = 0; g < gn; g++) {
        /* fl_agg_weights and fl_agg_add_weighted over the cluster's members */
        double total = 0;
        for (size_t k = 0; k < k_n; k++) {
            bool member = c->took_part[k] && stored_cluster(cfg, s->extra, p, k) == g;
            w[k] = member ? (cfg->weighted ? (double)c->fed->silo[k].n_train : 1.0) : 0.0;
            total += w[k];
        }
        if (!(total > 0))
            continue; /* no member trained: the cluster model stays */
        for (size_t k = 0; k < k_n; k++)
            w[k] /= total;
        memset(acc, 0, p * sizeof *acc);
        for (size_t k = 0; k < k_n; k++) {
            if (w[k] == 0.0)
                continue;
            const float *u = c->uploads + k * c->upload_stride;
            for (size_t j = 0; j < p; j++)
                acc[j] += w[k] * (double)u[j];
        }
        float *m = s->extra + g * p;
        for (size_t j = 0; j < p; j++)
            m[j] = (float)((double)m[j] + acc[j]);
    }
    dp_free(acc);
    dp_free(w);
    if (is_warm(cfg, c->round)) /* IFCA: each silo's model is its cluster's (a broadcast) */
        for (size_t k = 0; k < k_n; k++)
            memcpy(s->personal + k * p, s->extra + stored_cluster(cfg, s->extra, p, k) * p,
                   p * sizeof(float));
    return DP_OK;
}

static long ifca_silo_cluster(const fl_job_cfg *cfg, const fl_state *s, size_t silo)
{
    if (s->extra == NULL)
        return -1;
    return (long)stored_cluster(cfg, s->extra, s->n_params, silo);
}

const fl_algo_ops fl_algo_ifca_ops = {
    .name = "ifca",
    .steps_factor = 1,
    .has_global = false,
    .record_level = true,
    .extra_per_silo = false,
    .extra_floats = ifca_extra,
    .check = ifca_check,
    .select = NULL,
    .silo_update = ifca_update,
    .aggregate = ifca_aggregate,
    .upload_floats = ifca_upload,
    .pick_rounds = ifca_pick_rounds,
    .pick_event = ifca_pick_event,
    .silo_cluster = ifca_silo_cluster,
};
