/*
 * federated/fl_algo_ppsgd.c: PPSGD, personalised-private SGD (Bietti, Wei, Dudik, Langford & Wu,
 * "Personalization Improves Privacy-Accuracy Tradeoffs in Federated Learning", ICML 2022, §3, Alg.
 * 3 with the step split of its experiments, §6).
 *
 * Each silo i is a user with a personal parameter theta_i; the model of user i is the additive
 * u_i = w + theta_i (the paper's Eq. 3 for linear models; for an MLP the sum is taken over every
 * parameter). w is shared and released under user-level DP; theta_i never leaves the silo.
 *
 * Round t:
 *   1. The server samples each trainable silo with probability client_rate = q (Poisson sampling,
 *      the draws of dp_fedavg's select: one uniform per silo in silo order from the server's seed).
 *   2. A sampled silo draws a minibatch of B_i = min(batch_size, n_i) distinct training rows
 *      (Floyd's sampling from its round seed; all its rows, in order, when B_i = n_i), takes the
 * mean loss gradient g_i at u_i = w + theta_i (the pre-update point for both parameters), updates
 *          theta_i <- theta_i - eta_theta g_i            (unclipped, not noised)
 *      and uploads g_i clipped to L2 norm C = update_clip (clip_C, over all parameters).
 *   3. If eta_w > 0 the server releases
 *          w <- w - eta_w (sum_i clip_C(g_i) + N(0, (z C)^2 I)) / (q K)
 *      with z = server_noise and K the silos still trainable this round: the fixed denominator q K
 *      keeps the sensitivity to one user at C / (q K) (the paper divides by the realised count,
 *      whose value depends on who is sampled; its accountant assumes the fixed one).
 *   4. Every silo's personal model becomes w + theta_i (post-processing of the released w: the
 *      billboard lemma, the paper's Lemma B.1).
 * Step sizes from the ratio r = alpha Q of the paper's experiments (global step / local step):
 *   r = inf: eta_w = lr, eta_theta = 0 (global learning only);
 *   r <= 1:  eta_w = r lr, eta_theta = lr (r = 0: local learning only, nothing released);
 *   r > 1:   eta_w = lr, eta_theta = lr / r.
 * Privacy: each round with eta_w > 0 is one Poisson-subsampled Gaussian release with noise
 * multiplier z over users (joint DP at the user level, the paper's Def. 3.2): the same event as
 * dp_fedavg, charged to every trainable silo. With r = 0 nothing is released and epsilon is 0.
 * theta_i lives in state->extra (K x P floats, checkpointed), so a resumed job ends where an
 * uninterrupted one ends; w and theta start at the model's initialisation and 0.
 *
 * Modes (cfg->ppsgd_mode, the paper's algorithms; the steps above are Alg. 3's):
 *   3 (default) Alg. 3 (App. B.6): minibatch MEANs, the average-user objective f = (1/N) sum_i f_i
 *     (Eq. 1); lr's eta_theta is Alg. 3's local step eta/(qN) and eta_w its alpha eta.
 *   2 Alg. 2 (§5): the sample-weighted objective f_m = sum_i (m_i/M) f_i (Eq. 11) with m_i = B_i
 * and M = sum_i m_i over the K trainable silos. A sampled silo takes the minibatch SUM g_i (not the
 *     mean), updates theta_i <- theta_i - (eta/(qM)) g_i and uploads clip_C(g_i) (the clip of the
 *     sum: C plays the paper's G m_max); the server releases
 *          w <- w - alpha eta (sum_i clip_C(g_i) + N(0, (z C)^2 I)) / (q M).
 *     The same eta and alpha as mode 3 (eta/(qN) = eta_theta, alpha eta = eta_w with N = K) give
 * the personal step eta_theta K / M and the global scale eta_w / (q M); with equal B_i = m (M = K
 * m) and no clipping this is mode 3 exactly. M, like K, depends only on the silos' sizes. 1 Alg. 1
 * (§4): every user in every round, one sample each: client_rate must be 1 and batch_size 1, and it
 * then is Alg. 3 with q = 1 and m = 1 (the mode-3 code runs). Privacy is the same in every mode:
 * one silo's contribution to the released sum is clip_C of something, so the sensitivity is C and
 * the noise z C: the round event does not depend on the mode.
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_rng.h"

void fl_ppsgd_steps(const fl_job_cfg *cfg, double *eta_w, double *eta_theta)
{
    double r = cfg->ppsgd_ratio, lr = cfg->lr;
    if (isinf(r)) {
        *eta_w = lr;
        *eta_theta = 0.0;
    } else if (r <= 1.0) {
        *eta_w = r * lr;
        *eta_theta = lr;
    } else {
        *eta_w = lr;
        *eta_theta = lr / r;
    }
}

bool fl_ppsgd_releases(const fl_job_cfg *cfg)
{
    return cfg->ppsgd_ratio > 0.0;
}

static size_t ppsgd_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    (void)cfg;
    return n_silos * n_params;
}

static int ppsgd_check(const fl_job_cfg *cfg, dp_err *err)
{
    if (cfg->ppsgd_mode < 1 || cfg->ppsgd_mode > 3)
        return dp_err_set(err, DP_EINVAL, "ppsgd_mode", "ppsgd_mode must be 1, 2 or 3 (got %u)",
                          cfg->ppsgd_mode);
    if (cfg->ppsgd_mode == 1 && cfg->client_rate != 1.0)
        return dp_err_set(err, DP_EINVAL, "client_rate",
                          "ppsgd_mode 1 (Alg. 1) takes every user: client_rate must be 1 (got %g)",
                          cfg->client_rate);
    if (cfg->ppsgd_mode == 1 && cfg->batch_size != 1)
        return dp_err_set(err, DP_EINVAL, "batch_size",
                          "ppsgd_mode 1 (Alg. 1) takes one sample per user: batch_size must be 1 "
                          "(got %zu)",
                          cfg->batch_size);
    if (!(cfg->ppsgd_ratio >= 0.0))
        return dp_err_set(err, DP_EINVAL, "ratio", "ratio must be >= 0 or inf (got %g)",
                          cfg->ppsgd_ratio);
    return fl_check_client_level(cfg, err);
}

/* idx[0..m-1] = m distinct row indices of 0..n-1 (m <= n), by Floyd's algorithm (Bentley & Floyd,
 * "Programming Pearls: A Sample of Brilliance", CACM 30(9), 1987): for j = n-m .. n-1 draw t
 * uniform in [0, j] and take t unless already taken, else j. In increasing draw order; the rows
 * are then sorted so that the gradient sums them in row order. */
static void floyd_sample(fl_rng *r, size_t n, size_t m, size_t *idx)
{
    size_t got = 0;
    for (size_t j = n - m; j < n; j++) {
        /* uniform in [0, j] by rejection on 64 bits: no modulo bias */
        uint64_t range = (uint64_t)j + 1, lim = UINT64_MAX - UINT64_MAX % range, v;
        do
            v = fl_rng_next(r);
        while (v >= lim);
        size_t t = (size_t)(v % range);
        bool seen = false;
        for (size_t a = 0; a < got && !seen; a++)
            seen = idx[a] == t;
        idx[got++] = seen ? j : t;
    }
    for (size_t a = 1; a < m; a++) /* insertion sort: m is a batch */
        for (size_t b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
            size_t tmp = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = tmp;
        }
}

/* Alg. 2's M = sum of m_i = min(batch_size, n_i) over the trainable silos (public sizes), and
 * their count K. */
static double ppsgd_batch_total(const fl_job_cfg *cfg, const fl_federation *fed,
                                const bool *trainable, size_t *k_out)
{
    double total = 0.0;
    size_t k_n = 0;
    for (size_t k = 0; k < fed->n_silos; k++) {
        if (!trainable[k])
            continue;
        size_t n = fed->silo[k].n_train;
        total += (double)(cfg->batch_size < n ? cfg->batch_size : n);
        k_n++;
    }
    *k_out = k_n;
    return total;
}

static int ppsgd_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    const fl_silo_data *sd = c->data;
    size_t p = c->n_params, d = c->d, n = sd->n_train;
    size_t m = cfg->batch_size < n ? cfg->batch_size : n;
    float *theta = c->own_extra;
    size_t *idx = NULL;
    float *xb = NULL, *yb = NULL;
    const float *bx = sd->x_train, *by = sd->y_train; /* m == n: every row, in order */
    if (m < n) {
        idx = dp_malloc(m * sizeof *idx);
        xb = dp_malloc(m * d * sizeof *xb);
        yb = dp_malloc(m * sizeof *yb);
        if (idx == NULL || xb == NULL || yb == NULL) {
            dp_free(idx);
            dp_free(xb);
            dp_free(yb);
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        }
        uint64_t s_seed, n_seed;
        fl_silo_seeds(cfg->seed, c->silo, c->round, FL_SEED_PHASE_MAIN, &s_seed, &n_seed);
        fl_rng r;
        fl_rng_seed(&r, s_seed, DP_RNG_STREAM_FL_SGD_SAMPLING);
        floyd_sample(&r, n, m, idx);
        for (size_t a = 0; a < m; a++) {
            memcpy(xb + a * d, sd->x_train + idx[a] * d, d * sizeof *xb);
            yb[a] = sd->y_train[idx[a]];
        }
        bx = xb;
        by = yb;
    }
    /* u = w + theta at the pre-update point */
    for (size_t j = 0; j < p; j++)
        c->scratch[j] = c->global[j] + theta[j];
    double loss = fl_model_grad_sum(c->model, c->scratch, bx, by, m, c->ws, c->upload);
    *train_loss = loss / (double)m;
    double eta_w, eta_theta, sq = 0.0;
    fl_ppsgd_steps(cfg, &eta_w, &eta_theta);
    if (cfg->ppsgd_mode == 2) { /* Alg. 2: the minibatch SUM, personal step eta/(qM) */
        size_t k_n;
        double big_m = ppsgd_batch_total(cfg, c->fed, c->trainable, &k_n);
        double step = eta_theta * (double)k_n / big_m;
        for (size_t j = 0; j < p; j++) {
            double g = (double)c->upload[j];
            sq += g * g;
            theta[j] = (float)((double)theta[j] - step * g);
        }
    } else {
        for (size_t j = 0; j < p; j++) {
            float g = (float)((double)c->upload[j] / (double)m); /* the minibatch mean */
            c->upload[j] = g;
            sq += (double)g * (double)g;
            theta[j] = (float)((double)theta[j] - eta_theta * (double)g);
        }
    }
    double norm = sqrt(sq), cl = cfg->update_clip;
    if (norm > cl) {
        double scale = cl / norm;
        for (size_t j = 0; j < p; j++)
            c->upload[j] = (float)((double)c->upload[j] * scale);
    }
    dp_free(idx);
    dp_free(xb);
    dp_free(yb);
    return DP_OK;
}

static int ppsgd_aggregate(const fl_server_ctx *c, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    fl_state *s = c->state;
    size_t p = s->n_params;
    double eta_w, eta_theta;
    fl_ppsgd_steps(cfg, &eta_w, &eta_theta);
    /* -eta_w: w moves against the noisy clipped mean; negating the scale is exact, so this is
     * w - step (sum + noise) bit for bit */
    /* the released sum's divisor: q K (Alg. 3, 1) or q M (Alg. 2); data-independent either way */
    double denom = (double)c->n_trainable;
    if (cfg->ppsgd_mode == 2 && c->n_trainable > 0) {
        size_t k_n;
        denom = ppsgd_batch_total(cfg, c->fed, c->trainable, &k_n);
    }
    int rc = eta_w > 0 && c->n_trainable > 0
                 ? fl_agg_noisy_sum(c, -eta_w / (cfg->client_rate * denom), err)
                 : DP_OK;
    if (rc != DP_OK)
        return rc;
    for (size_t k = 0; k < s->n_silos; k++) {
        float *pers = s->personal + k * p;
        const float *theta = s->extra + k * p;
        for (size_t j = 0; j < p; j++)
            pers[j] = s->global[j] + theta[j];
    }
    return DP_OK;
}

const fl_algo_ops fl_algo_ppsgd_ops = {
    .name = "ppsgd",
    .steps_factor = 1,
    .has_global = true,
    .record_level = false,
    .extra_per_silo = true,
    .extra_floats = ppsgd_extra,
    .check = ppsgd_check,
    .select = fl_select_poisson,
    .silo_update = ppsgd_update,
    .aggregate = ppsgd_aggregate,
    .releases = fl_ppsgd_releases,
};
