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
 *   2. A sampled silo runs dp_fedavg's global block from the received global model; its model
 *      delta is clipped to L2 norm S (update_clip, or S^t below; Alg. 2 clips every client,
 *      opted-out ones too; the server clips the uploaded delta with dp_fedavg's arithmetic), then
 * Ditto's personal block: its personal model continues with local_epochs epochs on F_k(v) +
 * lambda_g/2 ||v - wbar||^2, anchored at the received wbar (Alg. 2's ClientUpdate; lambda_g is the
 * group's, the paper's lambda_p and lambda_np). Seeds FL_SEED_PHASE_MAIN and
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
 * Adaptive clipping (Alg. 2's S^t, the geometric rule of Andrew, Thakkar, McMahan & Ramaswamy,
 * "Differentially Private Learning with Adaptive Clipping", NeurIPS 2021), when cfg->hdp_adaptive:
 * S^0 = update_clip; in round t the server clips each upload to S^t (silos upload their unclipped
 * delta and the server clips it with the same arithmetic as dp_fedavg's silos, so the bits are the
 * same), counts the sampled silos whose delta was not clipped, b_k = 1[||Delta_k|| <= S^t] (every
 * group that takes part, opted-out ones too, as Alg. 2 averages over all sampled clients), releases
 * b_bar = (sum_k b_k + N(0, sigma_b^2)) / (q K) with K the trainable silos of groups with r_g > 0
 * (the expected count again, where Alg. 2 has N^t), and sets S^{t+1} = S^t exp(-eta_b (b_bar -
 * kappa)), kept in state->extra[0] (a float, clamped to [FL_HDP_CLIP_MIN, FL_HDP_CLIP_MAX]; 0
 * before the first round). The count is a second Gaussian query on the same sample (sensitivity 1,
 * noise sigma_b): a private silo's round event becomes the subsampled Gaussian of the combined
 * multiplier (z_g^-2 + sigma_b^-2)^(-1/2) (fl_hdp_combined_noise; Andrew et al. §3 compose the two
 * the same way). The paper gives neither sigma_b nor whether opted-out clients' bits count: sigma_b
 * is the caller's (Andrew et al. suggest the expected number of clients per round / 20).
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"

#define FL_HDP_CLIP_MIN 1e-30 /* adaptive S stays a positive normal float ... */
#define FL_HDP_CLIP_MAX 1e30  /* ... and finite, however long the count pushes it one way */

double fl_hdp_combined_noise(double z, double sigma_b)
{
    return 1.0 / sqrt(1.0 / (z * z) + 1.0 / (sigma_b * sigma_b));
}

double fl_hdp_clip(const fl_job_cfg *cfg, const fl_state *s)
{
    if (!cfg->hdp_adaptive || s->n_extra < 1 || !(s->extra[0] > 0))
        return cfg->update_clip;
    return (double)s->extra[0];
}

static size_t fedhdp_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    (void)n_silos;
    (void)n_params;
    return cfg->hdp_adaptive ? 1 : 0;
}

size_t fl_hdp_silo_group(const fl_job_cfg *cfg, size_t silo)
{
    return cfg->hdp_silo_group != NULL ? cfg->hdp_silo_group[silo] : 0;
}

double fl_hdp_silo_noise(const fl_job_cfg *cfg, size_t silo)
{
    const fl_hdp_group_cfg *g = &cfg->hdp_groups[fl_hdp_silo_group(cfg, silo)];
    if (g->opt_out || !(g->r > 0) || !(g->noise > 0))
        return 0.0;
    return cfg->hdp_adaptive ? fl_hdp_combined_noise(g->noise, cfg->hdp_count_noise) : g->noise;
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
        unsigned gi = (unsigned)(i % 100); /* i < FL_MAX_HDP_GROUPS; the bound lets the compiler
                                              see that the field names fit */
        if (!(isfinite(g->noise) && g->noise >= 0) || (g->opt_out && g->noise != 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%u].noise_multiplier", gi);
            return dp_err_set(err, DP_EINVAL, f,
                              "%s must be finite and >= 0, and 0 for a group that opted out "
                              "(got %g)",
                              f, g->noise);
        }
        if (!(isfinite(g->r) && g->r >= 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%u].r", gi);
            return dp_err_set(err, DP_EINVAL, f, "%s must be finite and >= 0 (got %g)", f, g->r);
        }
        if (!(isfinite(g->lambda) && g->lambda >= 0)) {
            snprintf(f, sizeof f, "fedhdp.groups[%u].lambda", gi);
            return dp_err_set(err, DP_EINVAL, f, "%s must be finite and >= 0 (got %g)", f,
                              g->lambda);
        }
        any = any || g->r > 0;
    }
    if (!any)
        return dp_err_set(err, DP_EINVAL, "fedhdp.groups",
                          "at least one group needs r > 0 (with r = 0 everywhere nothing trains)");
    if (!cfg->hdp_adaptive)
        return DP_OK;
    if (!(cfg->hdp_clip_quantile > 0 && cfg->hdp_clip_quantile < 1))
        return dp_err_set(err, DP_EINVAL, "fedhdp.adaptive_clip.quantile",
                          "fedhdp.adaptive_clip.quantile must be in (0, 1) (got %g)",
                          cfg->hdp_clip_quantile);
    if (!(isfinite(cfg->hdp_clip_lr) && cfg->hdp_clip_lr > 0))
        return dp_err_set(err, DP_EINVAL, "fedhdp.adaptive_clip.lr",
                          "fedhdp.adaptive_clip.lr must be finite and > 0 (got %g)",
                          cfg->hdp_clip_lr);
    if (!(isfinite(cfg->hdp_count_noise) && cfg->hdp_count_noise > 0))
        return dp_err_set(err, DP_EINVAL, "fedhdp.adaptive_clip.count_noise",
                          "fedhdp.adaptive_clip.count_noise must be finite and > 0 (got %g)",
                          cfg->hdp_count_noise);
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

/* Ditto's silo block (fl_silo_ditto) with the group's lambda; the upload is unclipped: the server
 * clips it to S^t (fedhdp_aggregate), as dp_fedavg's silos' would be. */
static int fedhdp_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    double lambda = c->cfg->hdp_groups[fl_hdp_silo_group(c->cfg, c->silo)].lambda;
    return fl_silo_ditto(c, lambda, train_loss, err);
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
    size_t k_tot = 0; /* trainable silos of the groups that take part */
    for (size_t g = 0; g < n_g; g++) {
        total += cfg->hdp_groups[g].r * (double)kg[g];
        k_tot += cfg->hdp_groups[g].r > 0 ? kg[g] : 0;
    }
    double clip = fl_hdp_clip(cfg, s), unclipped = 0;
    if (total > 0) {
        double *acc = dp_calloc(n_g * p, sizeof(double)); /* group g's sum, row g */
        double *step = dp_calloc(p, sizeof(double));
        float *noise = dp_calloc(p, sizeof(float)); /* also the clipped copy of an upload */
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
            memcpy(noise, c->uploads + k * p, p * sizeof(float));
            unclipped += fl_clip_vec(noise, p, clip) <= clip;
            for (size_t j = 0; j < p; j++)
                a[j] += (double)noise[j];
        }
        for (size_t g = 0; g < n_g; g++) {
            const fl_hdp_group_cfg *gr = &cfg->hdp_groups[g];
            if (!(gr->r > 0) || kg[g] == 0)
                continue; /* weight 0: nothing of the group is released */
            double w = gr->r * (double)kg[g] / total;
            double scale = cfg->server_lr * w / (cfg->client_rate * (double)kg[g]);
            double sigma = gr->opt_out ? 0.0 : gr->noise * clip;
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
    if (cfg->hdp_adaptive && k_tot > 0) {
        float z = 0.0f; /* the count's noise, one draw from the round's own seed */
        fl_gauss_fill(&z, 1, cfg->hdp_count_noise,
                      dp_rng_derive(fl_server_seed(cfg->seed, c->round), FL_SEED_CLIP_COUNT));
        double b_bar = (unclipped + (double)z) / (cfg->client_rate * (double)k_tot);
        double next = clip * exp(-cfg->hdp_clip_lr * (b_bar - cfg->hdp_clip_quantile));
        s->extra[0] = (float)fmin(fmax(next, FL_HDP_CLIP_MIN), FL_HDP_CLIP_MAX);
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
    .extra_floats = fedhdp_extra,
    .check = fedhdp_check,
    .select = fedhdp_select,
    .silo_update = fedhdp_update,
    .aggregate = fedhdp_aggregate,
    .silo_noise = fl_hdp_silo_noise,
};
