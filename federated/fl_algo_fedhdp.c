/*
 * federated/fl_algo_fedhdp.c: FedHDP, federated learning with heterogeneous differential privacy
 * (Aldaghri, Mahdavifar & Beirami, "Federated Learning with Heterogeneous Differential Privacy",
 * Alg. 2, with the Ditto personalisation of its experiments, §4).
 *
 * Every silo belongs to one privacy group g (cfg->hdp_silo_group): a private group with noise
 * multiplier z_g, or a group that opted out of DP (the paper's non-private clients, z = 0). Round
 * t:
 *   1. The server samples each trainable silo independently with probability q = client_rate
 *      (Poisson sampling, dp_fedavg's draws: one uniform per silo in silo order from the server's
 *      round seed); silos of a group with r_g = 0 never take part (the paper's r = 0 rows: the
 *      server "only communicates with" the other groups).
 *   2. A sampled silo runs dp_fedavg's global block from the received global model and uploads its
 *      model delta clipped to L2 norm S = update_clip (Alg. 2 clips every client, opted-out ones
 *      too), then Ditto's personal block: its personal model continues with local_epochs epochs on
 *      F_k(v) + lambda_g/2 ||v - wbar||^2, anchored at the received wbar (Alg. 2's ClientUpdate;
 *      lambda_g is the group's, the paper's lambda_p and lambda_np). Seeds FL_SEED_PHASE_MAIN and
 *      FL_SEED_PHASE_PERSONAL, as ditto's.
 *   3. Per group g with K_g trainable silos, the server releases the group mean
 *          D_g = (sum_{k in g, sampled} clip_S(Delta_k) + N(0, (z_g S)^2 I)) / (q K_g)
 *      (no noise for an opted-out group), and
 *          wbar <- wbar + server_lr * sum_g w_g D_g,   w_g = r_g K_g / sum_h r_h K_h.
 * Deviations from Alg. 2, each because its accountant assumes it: the denominator is the expected
 * count q K_g, not the realised N_g^t (the paper's §2 DP-FedAvg uses the fixed denominator; with
 * the realised count the sensitivity depends on who was sampled), and the weights use the expected
 * counts K_g instead of N_g^t for the same reason (two groups: w_np = K_np / (K_np + r K_p), Alg.
 * 2's weights with N^t replaced by its expectation). A group with no silo sampled still releases
 * its noise (the event is charged every round), as dp_fedavg does.
 * Silos of a group with r_g = 0 receive the global model as their personal model (Acc_l,p =
 * Acc_g,p in the paper's r = 0 rows): post-processing, free.
 *
 * Privacy (the paper's Eq. 2-3, parallel composition over disjoint groups): group g's release is a
 * Poisson-subsampled Gaussian mechanism with noise multiplier z_g over its silos (sensitivity
 * S / (q K_g) of one silo's presence), and the other groups' releases do not read its data; so a
 * silo of group g is charged poisson(q, gaussian(z_g)) every round it is trainable, sampled or not,
 * and a silo of an opted-out group or of a group with r_g = 0 is charged nothing.
 * Special cases (the paper's baselines, §4): one private group with r = 1 is DP-FedAvg+Ditto (the
 * global model is then dp_fedavg's, bit for bit); r_g = 1 for every group is HDP-FedAvg+Ditto.
 * Not implemented: Alg. 2's adaptive clipping (S is fixed).
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"

size_t fl_hdp_silo_group(const fl_job_cfg *cfg, size_t silo)
{
    return cfg->hdp_silo_group != NULL ? cfg->hdp_silo_group[silo] : 0;
}

double fl_hdp_silo_noise(const fl_job_cfg *cfg, size_t silo)
{
    const fl_hdp_group_cfg *g = &cfg->hdp_groups[fl_hdp_silo_group(cfg, silo)];
    return g->opt_out || !(g->r > 0) ? 0.0 : g->noise;
}

static int fedhdp_check(const fl_job_cfg *cfg, dp_err *err)
{
    int rc = fl_check_client_level(cfg, err);
    if (rc != DP_OK)
        return rc;
    if (!(isfinite(cfg->server_lr) && cfg->server_lr > 0))
        return dp_err_set(err, DP_EINVAL, "server_lr", "server_lr must be finite and > 0 (got %g)",
                          cfg->server_lr);
    if (cfg->hdp_n_groups < 1 || cfg->hdp_n_groups > FL_MAX_HDP_GROUPS || cfg->hdp_groups == NULL)
        return dp_err_set(err, DP_EINVAL, "fedhdp.groups", "fedhdp needs 1..%d privacy groups",
                          FL_MAX_HDP_GROUPS);
    bool any = false;
    for (size_t i = 0; i < cfg->hdp_n_groups; i++) {
        const fl_hdp_group_cfg *g = &cfg->hdp_groups[i];
        char f[DP_ERR_FIELD_MAX];
        if (!(isfinite(g->noise) && g->noise >= 0) || (g->opt_out && g->noise != 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%zu].noise_multiplier", i);
            return dp_err_set(err, DP_EINVAL, f,
                              "%s must be finite and >= 0, and 0 for a group that opted out "
                              "(got %g)",
                              f, g->noise);
        }
        if (!(isfinite(g->r) && g->r >= 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%zu].r", i);
            return dp_err_set(err, DP_EINVAL, f, "%s must be finite and >= 0 (got %g)", f, g->r);
        }
        if (!(isfinite(g->lambda) && g->lambda >= 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%zu].lambda", i);
            return dp_err_set(err, DP_EINVAL, f, "%s must be finite and >= 0 (got %g)", f,
                              g->lambda);
        }
        any = any || g->r > 0;
    }
    if (!any)
        return dp_err_set(err, DP_EINVAL, "fedhdp.groups",
                          "at least one group needs r > 0 (with r = 0 everywhere nothing trains)");
    return DP_OK;
}

static int fedhdp_select(const fl_job_cfg *cfg, uint64_t round, size_t n_silos,
                         const bool *trainable, bool *take, dp_err *err)
{
    int rc = fl_select_poisson(cfg, round, n_silos, trainable, take, err);
    for (size_t k = 0; rc == DP_OK && k < n_silos; k++)
        take[k] = take[k] && cfg->hdp_groups[fl_hdp_silo_group(cfg, k)].r > 0;
    return rc;
}

static int fedhdp_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    double l_global = 0, l_personal = 0;
    int rc = fl_silo_clipped_delta(c, &l_global, err);
    if (rc != DP_OK)
        return rc;
    double lambda = c->cfg->hdp_groups[fl_hdp_silo_group(c->cfg, c->silo)].lambda;
    rc = fl_silo_sgd(c, c->personal, FL_SEED_PHASE_PERSONAL, lambda, c->global, &l_personal, err);
    if (rc == DP_OK)
        *train_loss = l_personal; /* the personal model is what the silo keeps (as ditto) */
    return rc;
}

/* Group g's noise seed in round t: dp_fedavg's noise seed for group 0 (so that one group gives
 * dp_fedavg's bits), derived from it with the group's index for the others. */
static uint64_t group_noise_seed(const fl_job_cfg *cfg, uint64_t round, size_t g)
{
    uint64_t base = dp_rng_derive(fl_server_seed(cfg->seed, round), FL_SEED_NOISE);
    return g == 0 ? base : dp_rng_derive(base, (uint64_t)g);
}

static int fedhdp_aggregate(const fl_server_ctx *c, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    fl_state *s = c->state;
    size_t p = s->n_params, n_g = cfg->hdp_n_groups;
    size_t kg[FL_MAX_HDP_GROUPS] = {0};
    for (size_t k = 0; k < s->n_silos; k++)
        kg[fl_hdp_silo_group(cfg, k)] += c->trainable[k];
    double total = 0; /* sum_h r_h K_h */
    for (size_t g = 0; g < n_g; g++)
        total += cfg->hdp_groups[g].r * (double)kg[g];
    if (total > 0) {
        double *acc = dp_calloc(n_g * p, sizeof(double)); /* group g's sum, row g */
        double *step = dp_calloc(p, sizeof(double));
        float *noise = dp_calloc(p, sizeof(float));
        if (acc == NULL || step == NULL || noise == NULL) {
            dp_free(acc);
            dp_free(step);
            dp_free(noise);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
        for (size_t k = 0; k < s->n_silos; k++) {
            if (!c->took_part[k])
                continue;
            double *a = acc + fl_hdp_silo_group(cfg, k) * p;
            const float *u = c->uploads + k * p;
            for (size_t j = 0; j < p; j++)
                a[j] += (double)u[j];
        }
        for (size_t g = 0; g < n_g; g++) {
            const fl_hdp_group_cfg *gr = &cfg->hdp_groups[g];
            if (!(gr->r > 0) || kg[g] == 0)
                continue; /* weight 0: nothing of the group is released */
            double w = gr->r * (double)kg[g] / total;
            double scale = cfg->server_lr * w / (cfg->client_rate * (double)kg[g]);
            double sigma = gr->opt_out ? 0.0 : gr->noise * cfg->update_clip;
            if (sigma > 0)
                fl_gauss_fill(noise, p, sigma, group_noise_seed(cfg, c->round, g));
            else
                memset(noise, 0, p * sizeof *noise);
            const double *a = acc + g * p;
            for (size_t j = 0; j < p; j++)
                step[j] += scale * (a[j] + (double)noise[j]);
        }
        for (size_t j = 0; j < p; j++)
            s->global[j] = (float)((double)s->global[j] + step[j]);
        dp_free(acc);
        dp_free(step);
        dp_free(noise);
    }
    for (size_t k = 0; k < s->n_silos; k++) /* r_g = 0: the personal model is the global one */
        if (!(cfg->hdp_groups[fl_hdp_silo_group(cfg, k)].r > 0))
            memcpy(s->personal + k * p, s->global, p * sizeof(float));
    return DP_OK;
}

const fl_algo_ops fl_algo_fedhdp_ops = {
    .name = "fedhdp",
    .steps_factor = 2,
    .has_global = true,
    .record_level = false,
    .check = fedhdp_check,
    .select = fedhdp_select,
    .silo_update = fedhdp_update,
    .aggregate = fedhdp_aggregate,
    .silo_noise = fl_hdp_silo_noise,
};
