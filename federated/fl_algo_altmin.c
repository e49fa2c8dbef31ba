/*
 * federated/fl_algo_altmin.c: APriv-AltMin as a federated algorithm (Jain, Rush, Smith, Song &
 * Thakurta, "Differentially Private Model Personalization", NeurIPS 2021, §4: Alg. 1 with the
 * sufficient statistics of Alg. 2 for linear regression, and the spectral initialisation of Alg.
 * 3). Each silo is one user; the steps themselves are federated/fl_altmin.c's.
 *
 * State: state->extra holds U (d x k floats, column-major; not per silo, so checkpointed with the
 * state); state->global is unused (has_global false: the paper's models are personal); silo k's
 * personal row is the linear model (U v_k, intercept 0).
 *
 * Round t (every trainable silo takes part: Alg. 1 in the full-batch mode of the paper's §6):
 *   U(t) = state->extra, or for t = 0 a data-free U from the job's seed (fl_altmin_random_u).
 *   silo k: v_k = the least-squares head of its training rows given U(t) (local, not released);
 *           uploads the upper triangle (diagonal included) of A_k = mean_i W_i W_i^T and b_k =
 *           mean_i clip(y_i; zeta) W_i with W_i = clip(v_k (x) x_i; eta), eta = zeta = update_clip.
 *   server: U(t+1) = Q of QR(solution of (sum_k A_k + N_sym) u = sum_k b_k + N), the noise std
 *           server_noise eta^2 on A and server_noise eta zeta on b (fl_altmin_ustep; a singular
 *           noisy system keeps U(t)); then every silo's personal row becomes U(t+1) v_k with v_k
 *           refitted on its training rows (post-processing of the broadcast U: billboard model).
 * With altmin_spectral, round 0 is instead Alg. 3: silo k uploads the mean over its row pairs of
 * sym(x x'^T / (||x|| ||x'||)) clip(y) clip(y'), the server adds Wigner noise of std
 * (server_noise / sqrt 2) zeta^2 and takes the top-k eigenvectors.
 *
 * PRIVACY. Unit: one silo (user), add/remove neighbouring like the service's other events (the
 * paper uses replacement, which doubles the sensitivities; the reproduction uses the paper's).
 * The per-user means make the sensitivities eta^2 (A, whose released upper triangle has L2 norm
 * <= ||W W^T||_F <= eta^2) and eta zeta (b), and zeta^2 for Alg. 3, whatever the silo's rows. An
 * AltMin round is two Gaussian mechanisms of multiplier z = server_noise: the round event is
 * self_composed(2, gaussian(z)), rho = 1/z^2 (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3). Alg.
 * 3's single release at multiplier z / sqrt 2 has the same RDP curve alpha / z^2, so a spectral
 * round 0 is charged exactly the same event and the plan stays one event per round. Every
 * trainable silo is charged every round (it always takes part).
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_altmin.h"

#define ALTMIN_U0_LABEL 0x616c746d /* "altm": the data-free initial U under FL_SEED_INIT */

static size_t dk_of(const fl_job_cfg *cfg)
{
    return cfg->model.d_in * cfg->altmin_rank;
}

static size_t altmin_extra(const fl_job_cfg *cfg, size_t n_silos, size_t n_params)
{
    (void)n_silos;
    (void)n_params;
    return dk_of(cfg);
}

static size_t altmin_upload(const fl_job_cfg *cfg, size_t n_params)
{
    (void)n_params;
    size_t n = dk_of(cfg); /* >= d, so Alg. 3's d(d+1)/2 fits too */
    return n * (n + 1) / 2 + n;
}

static int altmin_check(const fl_job_cfg *cfg, dp_err *err)
{
    if (cfg->model.type != FL_MODEL_LINEAR)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "altmin fits linear regression (model linear), got %s",
                          fl_model_type_name(cfg->model.type));
    size_t d = cfg->model.d_in, k = cfg->altmin_rank;
    if (k < 1 || k > FL_ALTMIN_MAX_K || (d > 0 && (k > d || d * k > FL_ALTMIN_JOB_MAX_DK)))
        return dp_err_set(err, DP_EINVAL, "altmin.rank",
                          "altmin.rank must be in 1..min(d, %d) with d x rank <= %d (got rank %zu, "
                          "d %zu)",
                          FL_ALTMIN_MAX_K, FL_ALTMIN_JOB_MAX_DK, k, d);
    if (cfg->client_rate != 1.0)
        return dp_err_set(err, DP_EINVAL, "client_rate",
                          "altmin takes every user in every round: client_rate must be 1 (got %g)",
                          cfg->client_rate);
    return fl_check_client_level(cfg, err);
}

static acct_event *altmin_round_event(const fl_job_cfg *cfg, double z)
{
    (void)cfg;
    return acct_event_self_composed(2, acct_event_gaussian(z));
}

/* U(t) as doubles: the state's, or the data-free start in round 0. */
static void current_u(const fl_job_cfg *cfg, uint64_t round, const float *extra, double *u)
{
    size_t d = cfg->model.d_in, k = cfg->altmin_rank;
    if (round == 0) {
        fl_altmin_random_u(
            d, k, dp_rng_derive(dp_rng_derive(cfg->seed, FL_SEED_INIT), ALTMIN_U0_LABEL), u);
        return;
    }
    for (size_t i = 0; i < d * k; i++)
        u[i] = (double)extra[i];
}

/* A silo's training rows as doubles. */
static void rows_of(const fl_silo_data *sd, size_t d, double *x, double *y)
{
    for (size_t i = 0; i < sd->n_train; i++) {
        for (size_t q = 0; q < d; q++)
            x[i * d + q] = (double)sd->x_train[i * d + q];
        y[i] = (double)sd->y_train[i];
    }
}

static int altmin_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    size_t d = c->d, k = cfg->altmin_rank, dk = d * k, m = c->data->n_train;
    bool spectral = cfg->altmin_spectral && c->round == 0;
    size_t n = spectral ? d : dk; /* the uploaded matrix's order */
    double *x = dp_malloc(m * d * sizeof *x), *y = dp_malloc(m * sizeof *y);
    double *u = dp_malloc(dk * sizeof *u), *a = dp_calloc(n * n, sizeof *a);
    double *b = dp_calloc(dk, sizeof *b), v[FL_ALTMIN_MAX_K];
    if (!x || !y || !u || !a || !b) {
        dp_free(x), dp_free(y), dp_free(u), dp_free(a), dp_free(b);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    rows_of(c->data, d, x, y);
    double clip = cfg->update_clip, loss = 0;
    if (spectral) {
        fl_altmin_init_add(x, y, m, d, clip, a);
        for (size_t i = 0; i < m; i++)
            loss += y[i] * y[i]; /* no U yet: the zero model's loss */
    } else {
        current_u(cfg, c->round, c->shared_extra, u);
        fl_altmin_vfit(u, d, k, x, y, m, v);
        fl_altmin_ustats_add(x, y, m, d, k, v, clip, clip, a, b);
        for (size_t i = 0; i < m; i++) {
            double p = 0;
            for (size_t cc = 0; cc < k; cc++)
                for (size_t q = 0; q < d; q++)
                    p += u[cc * d + q] * v[cc] * x[i * d + q];
            loss += (y[i] - p) * (y[i] - p);
        }
    }
    *train_loss = 0.5 * loss / (double)m; /* the linear model's loss: half the squared error */
    size_t idx = 0;
    for (size_t q = 0; q < n; q++)
        for (size_t p = 0; p <= q; p++)
            c->upload[idx++] = (float)a[p + q * n];
    for (size_t i = 0; i < dk && !spectral; i++)
        c->upload[idx++] = (float)b[i];
    dp_free(x), dp_free(y), dp_free(u), dp_free(a), dp_free(b);
    return DP_OK;
}

/* Every silo's personal row: (U v_k, 0) with v_k its least-squares head given U. */
static int personalise(const fl_server_ctx *c, const double *u, dp_err *err)
{
    const fl_federation *f = c->fed;
    size_t d = f->d, k = c->cfg->altmin_rank, p = c->state->n_params, mx = 1;
    for (size_t s = 0; s < f->n_silos; s++)
        mx = f->silo[s].n_train > mx ? f->silo[s].n_train : mx;
    double *x = dp_malloc(mx * d * sizeof *x), *y = dp_malloc(mx * sizeof *y), v[FL_ALTMIN_MAX_K];
    if (!x || !y) {
        dp_free(x), dp_free(y);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t s = 0; s < f->n_silos; s++) {
        rows_of(&f->silo[s], d, x, y);
        fl_altmin_vfit(u, d, k, x, y, f->silo[s].n_train, v);
        float *row = c->state->personal + s * p;
        for (size_t q = 0; q < d; q++) {
            double t = 0;
            for (size_t cc = 0; cc < k; cc++)
                t += u[cc * d + q] * v[cc];
            row[q] = (float)t;
        }
        row[d] = 0.0f; /* the intercept: the paper's model has none */
    }
    dp_free(x), dp_free(y);
    return DP_OK;
}

static int altmin_aggregate(const fl_server_ctx *c, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    fl_state *s = c->state;
    size_t d = cfg->model.d_in, k = cfg->altmin_rank, dk = d * k;
    bool spectral = cfg->altmin_spectral && c->round == 0;
    size_t n = spectral ? d : dk, len = n * (n + 1) / 2 + (spectral ? 0 : dk);
    double *acc = dp_calloc(len, sizeof *acc), *a = dp_malloc(n * n * sizeof *a);
    double *u = dp_malloc(dk * sizeof *u);
    if (!acc || !a || !u) {
        dp_free(acc), dp_free(a), dp_free(u);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    size_t took = 0;
    for (size_t q = 0; q < s->n_silos; q++) {
        if (!c->took_part[q])
            continue;
        took++;
        const float *up = c->uploads + q * c->upload_stride;
        for (size_t i = 0; i < len; i++)
            acc[i] += (double)up[i];
    }
    current_u(cfg, c->round, s->extra, u);
    int rc = DP_OK;
    uint64_t seed = dp_rng_derive(fl_server_seed(cfg->seed, c->round), FL_SEED_NOISE);
    double z = cfg->server_noise, clip = cfg->update_clip;
    if (took > 0) { /* nobody took part: nothing is released, U stays */
        size_t idx = 0;
        for (size_t q = 0; q < n; q++)
            for (size_t p = 0; p <= q; p++)
                a[p + q * n] = acc[idx++];
        if (spectral) {
            rc = fl_altmin_init_finish(a, d, k, z / sqrt(2.0) * clip * clip, seed, u, err);
        } else {
            bool kept = false;
            rc = fl_altmin_ustep(a, acc + idx, d, k, z * clip * clip, z * clip * clip, seed, u,
                                 &kept, err);
        }
    }
    if (rc == DP_OK) {
        for (size_t i = 0; i < dk; i++)
            s->extra[i] = (float)u[i];
        /* the personal rows use U as stored (rounded to float), as the next round does */
        for (size_t i = 0; i < dk; i++)
            u[i] = (double)s->extra[i];
        rc = personalise(c, u, err);
    }
    dp_free(acc), dp_free(a), dp_free(u);
    return rc;
}

const fl_algo_ops fl_algo_altmin_ops = {
    .name = "altmin",
    .steps_factor = 1,
    .has_global = false,
    .record_level = false,
    .extra_per_silo = false,
    .extra_floats = altmin_extra,
    .check = altmin_check,
    .select = NULL,
    .silo_update = altmin_update,
    .aggregate = altmin_aggregate,
    .releases = NULL,
    .upload_floats = altmin_upload,
    .round_event = altmin_round_event,
};
