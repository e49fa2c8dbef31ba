/*
 * federated/fl_algo_impl.h: what an algorithm file plugs into the engine (fl_algo.c), and the
 * helpers the algorithm files share. Not part of the library's public interface.
 *
 * AN ALGORITHM is one file defining one `const fl_algo_ops fl_algo_<name>_ops` and listed in the
 * registry of fl_algo.c. A round runs as:
 *   1. select (optional, main thread): which of the trainable silos (active, not stopped) take
 *      part this round; default: all of them (dp_fedavg samples).
 *   2. silo_update (worker threads, one call per participating silo, any order, any thread):
 *      reads the start-of-round global model, updates ONLY its own personal row and writes its
 *      upload (n_params floats) and its loss; it must depend on nothing but its arguments.
 *      idle_update (optional), likewise, for the trainable silos select left out.
 *   3. aggregate (main thread): reads the uploads of the participants in silo order and updates
 *      the global model (and state->personal rows it broadcasts to, state->extra).
 * Privacy: steps_factor is the number of local-epoch blocks a silo runs per round (ditto: 2), the
 * plan's steps per round are steps_factor * local_epochs * floor(n_k / B_k).
 */
#ifndef DP_FEDERATED_FL_ALGO_IMPL_H
#define DP_FEDERATED_FL_ALGO_IMPL_H

#include "federated/fl_algo.h"

/* Everything a silo's local update may read, and where it writes. */
typedef struct fl_silo_ctx {
    const fl_job_cfg *cfg;
    const fl_model_spec *model;
    size_t silo;    /* k */
    uint64_t round; /* t */
    size_t n_params;
    const fl_silo_data *data;  /* silo k's rows (borrowed) */
    size_t d;                  /* features */
    const float *global;       /* start-of-round global model (shared, read-only) */
    float *personal;           /* silo k's personal row (this thread only) */
    float *upload;             /* n_params floats for the server (this thread only) */
    float *scratch;            /* n_params floats of scratch (this thread only) */
    float *own_extra;          /* silo k's row of state->extra (n_extra / K floats) when the
                                  algorithm sets extra_per_silo; NULL otherwise (this thread) */
    const float *shared_extra; /* the whole start-of-round state->extra when the algorithm does
                                  not set extra_per_silo (shared, read-only); NULL otherwise */
    size_t upload_floats;      /* floats in upload: n_params unless the algorithm's
                                  upload_floats says more */
    fl_ws *ws;                 /* this thread's workspace */
    const fl_federation *fed;  /* every silo's data (read-only): only public sizes may be read,
                                  e.g. ppsgd's Alg. 2 total M of the minibatch sizes */
    const bool *trainable;     /* n_silos: silo j was active and not stopped this round */
} fl_silo_ctx;

/* What the server's aggregation reads and updates. */
typedef struct fl_server_ctx {
    const fl_job_cfg *cfg;
    const fl_federation *fed;
    uint64_t round;
    fl_state *state;
    const bool *took_part; /* n_silos: silo k ran silo_update this round */
    const float *uploads;  /* n_silos x n_params: row k valid where took_part[k] */
    size_t n_trainable;    /* silos that were active and not stopped this round */
    const bool *trainable; /* n_silos: silo k was active and not stopped this round */
    size_t upload_stride;  /* floats per upload row (n_params unless upload_floats says more) */
} fl_server_ctx;

typedef struct fl_algo_ops {
    const char *name;
    unsigned steps_factor; /* local-epoch blocks per round (privacy plan) */
    bool has_global;       /* the global model is a model of the federation, evaluated */
    bool record_level;     /* record-level DP-SGD (false: client-level DP, dp_fedavg, ppsgd,
                              fedhdp) */
    bool extra_per_silo;   /* state->extra is K equal rows, row k handed to silo k's update */
    /* Floats the algorithm keeps in state->extra for K silos and P parameters (NULL = none); the
     * state starts them at 0. */
    size_t (*extra_floats)(const fl_job_cfg *cfg, size_t n_silos, size_t n_params);
    /* Checks the algorithm's own parameters (may be NULL). */
    int (*check)(const fl_job_cfg *cfg, dp_err *err);
    /* Sets take[k] for the trainable silos (trainable[k]) that take part; NULL = all of them. */
    int (*select)(const fl_job_cfg *cfg, uint64_t round, size_t n_silos, const bool *trainable,
                  bool *take, dp_err *err);
    int (*silo_update)(const fl_silo_ctx *c, double *train_loss, dp_err *err);
    /* Optional: called like silo_update (worker threads) for each trainable silo that select did
     * not take this round; it may update only the silo's personal row and own_extra, and its
     * upload is never read (AdaPeD's Alg. 7: unsampled silos keep training). NULL = they idle. */
    int (*idle_update)(const fl_silo_ctx *c, dp_err *err);
    int (*aggregate)(const fl_server_ctx *c, dp_err *err);
    /* Client-level algorithms: false when cfg releases nothing (ppsgd with ratio 0), so that the
     * plan has no event and the calibration answers 0; NULL = always releases. */
    bool (*releases)(const fl_job_cfg *cfg);
    /* Client-level algorithms whose silos get different events (fedhdp's privacy groups): the
     * noise multiplier of silo k's round event, 0 = no event; NULL = cfg->server_noise for all. */
    double (*silo_noise)(const fl_job_cfg *cfg, size_t silo);
    /* Floats a silo uploads when they exceed n_params (altmin's sufficient statistics); NULL = the
     * n_params of a model update. */
    size_t (*upload_floats)(const fl_job_cfg *cfg, size_t n_params);
    /* Client-level algorithms whose round is not one Poisson-subsampled Gaussian release: the
     * event of one round at noise multiplier z (NAN: open, for calibration), owned by the caller;
     * NULL = poisson(client_rate, gaussian(z)). */
    acct_event *(*round_event)(const fl_job_cfg *cfg, double z);
    /* Record-level algorithms with a private step besides DP-SGD (ifca's cluster selection): the
     * rounds t < pick_rounds(cfg) in which a silo that trains also runs it (0: none), and the
     * event of one run (owned by the caller; its cost does not depend on the noise multiplier).
     * NULL = none. The plan charges composed(round event, pick event) in those rounds. */
    uint64_t (*pick_rounds)(const fl_job_cfg *cfg);
    acct_event *(*pick_event)(const fl_job_cfg *cfg);
    /* Metrics: the cluster silo k belongs to in state s (-1: none); NULL = -1 for all. */
    long (*silo_cluster)(const fl_job_cfg *cfg, const fl_state *s, size_t silo);
} fl_algo_ops;

extern const fl_algo_ops fl_algo_local_ops;
extern const fl_algo_ops fl_algo_fedavg_ops;
extern const fl_algo_ops fl_algo_finetune_ops;
extern const fl_algo_ops fl_algo_mrmtl_ops;
extern const fl_algo_ops fl_algo_ditto_ops;
extern const fl_algo_ops fl_algo_dpfedavg_ops;
extern const fl_algo_ops fl_algo_ppsgd_ops;
extern const fl_algo_ops fl_algo_fedhdp_ops;
extern const fl_algo_ops fl_algo_altmin_ops;
extern const fl_algo_ops fl_algo_adaped_ops;
extern const fl_algo_ops fl_algo_dpadaped_ops;
extern const fl_algo_ops fl_algo_ifca_ops;
extern const fl_algo_ops fl_algo_adamix_ops;
extern const fl_algo_ops fl_algo_gaussian_prior_ops;

/* The registered algorithm called name, or NULL. */
const fl_algo_ops *fl_algo_find(const char *name);

/* ---- shared helpers (fl_algo.c) ---- */

/* Floats per upload row: the algorithm's upload_floats when larger than n_params, else n_params. */
size_t fl_upload_floats(const fl_job_cfg *cfg, size_t n_params);

/* Client-level algorithms (dp_fedavg, ppsgd, fedhdp, altmin): checks client_rate in (0, 1],
 * update_clip finite > 0 and server_noise finite >= 0, naming the field. */
int fl_check_client_level(const fl_job_cfg *cfg, dp_err *err);
/* Their select: each trainable silo independently with probability client_rate (Poisson
 * sampling), one uniform per silo in silo order from the server's round seed, drawn for stopped
 * silos too so that a stop never shifts the others' draws. */
int fl_select_poisson(const fl_job_cfg *cfg, uint64_t round, size_t n_silos, const bool *trainable,
                      bool *take, dp_err *err);

/* Their server release: global += scale * (sum of the participants' uploads, added in silo order
 * in double, + N(0, (server_noise * update_clip)^2 I) from the server's round seed). dp_fedavg
 * passes scale = server_lr / (q K), ppsgd -eta_w / (q K). DP_ENOMEM. */
int fl_agg_noisy_sum(const fl_server_ctx *c, double scale, dp_err *err);

/* The clipped model delta of dp_fedavg: from the global model, local_epochs blocks of the silo's
 * SGD (FL_SEED_PHASE_MAIN), upload = w - global scaled to L2 norm <= update_clip (fl_clip_vec). */
int fl_silo_clipped_delta(const fl_silo_ctx *c, double *train_loss, dp_err *err);
/* Scales u (n floats) to L2 norm <= s: u * s / ||u|| when ||u|| > s (norm summed in double over
 * the floats, each coordinate rounded once). Returns ||u|| before the scaling. */
double fl_clip_vec(float *u, size_t n, double s);

/* Seeds of silo k's block `phase` in round t (fl_algo.h, DETERMINISM). */
void fl_silo_seeds(uint64_t job_seed, size_t silo, uint64_t round, uint64_t phase,
                   uint64_t *sampling, uint64_t *noise);
/* The server's seed of round t (its draws pick a dp_rng stream id per purpose). */
uint64_t fl_server_seed(uint64_t job_seed, uint64_t round);

/* Runs local_epochs blocks of DP-SGD of the record-level configuration on w (in place) over silo
 * k's training rows with the seeds of `phase`; prox_lambda > 0 adds lambda (w - anchor).
 * *train_loss: mean loss over the rows drawn (fl_sgd_run). */
int fl_silo_sgd(const fl_silo_ctx *c, float *w, uint64_t phase, double prox_lambda,
                const float *anchor, double *train_loss, dp_err *err);

/* Ditto's block of silo k (Li et al. 2021, Alg. 1): local_epochs of (DP-)SGD from the global model
 * uploaded as a delta (phase MAIN), then the personal model's block on F_k(v) + lambda/2
 * ||v - global||^2 (phase PERSONAL); *train_loss is the personal block's. ditto and fedhdp. */
int fl_silo_ditto(const fl_silo_ctx *c, double lambda, double *train_loss, dp_err *err);

/* Weights of the participants (took_part) in silo order: n_train or 1, normalised to sum 1;
 * w[k] = 0 elsewhere. Returns false when no silo took part (nothing to aggregate). */
bool fl_agg_weights(const fl_server_ctx *c, double *w);

/* global += sum_k w[k] * uploads[k] (double accumulation in silo order, one rounding per
 * coordinate). acc: n_params doubles of scratch. */
void fl_agg_add_weighted(const fl_server_ctx *c, const double *w, double *acc);

/* global += sum_k p_k uploads[k] with the weights of fl_agg_weights (nothing when no silo took
 * part): the aggregation of fedavg, mrmtl and ditto. DP_ENOMEM. */
int fl_agg_weighted_mean(const fl_server_ctx *c, dp_err *err);

/* Copies the global model into the personal rows of every silo (a broadcast). */
void fl_broadcast_global(fl_state *s);

/* adamix, gaussian_prior: *lmax = lambda_max(Xt^T Xt), Xt = [x, 1] (n rows of d features and
 * the intercept's column), from the eigenvalues of the smaller Gram matrix (in double), or its
 * trace (an upper bound) when both sides exceed 256. DP_ENOMEM, DP_ENUMERIC. */
int fl_pr_gram_lmax(const float *x, size_t n, size_t d, double *lmax, dp_err *err);

/* dst = a - b over n floats. */
void fl_vec_sub(float *dst, const float *a, const float *b, size_t n);

#endif
