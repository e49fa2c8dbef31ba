/*
 * federated/fl_algo: the federated training engine: one round of an algorithm over a federation,
 * its checkpointable state, per-round metrics and the privacy plan of every silo.
 *
 * ALGORITHMS are plug-ins: each is one file (fl_algo_<name>.c) exporting a table of function
 * pointers (fl_algo_ops, federated/fl_algo_impl.h) that the registry in fl_algo.c lists. Built in:
 *   local      each silo trains its own model; no communication, no global model.
 *   fedavg     McMahan et al., AISTATS 2017: every silo starts the round from the global model,
 *              runs local DP-SGD and the server adds the weighted mean of the updates.
 *   finetune   fedavg for the rounds t < finetune_frac * T, then local training from the global
 *              model (Liu et al., "On Privacy and Personalization in Cross-Silo Federated
 *              Learning", NeurIPS 2022, §5 and App. C.3).
 *   mrmtl      mean-regularised multi-task learning, Liu et al., NeurIPS 2022, Alg. A1: silo k
 *              trains its own model on F_k(w) + lambda/2 ||w - wbar||^2, wbar the start-of-round
 *              global model; the server adds the weighted mean of the personal updates to wbar.
 *   ditto      Li, Hu, Beirami & Smith, "Ditto", ICML 2021, Alg. 1 with one FedAvg solver epoch
 *              block plus one personal epoch block per round (as Liu et al., NeurIPS 2022, App. C
 *              do): 2x the DP-SGD steps of the others.
 *   dp_fedavg  client-level DP-FedAvg, McMahan, Ramage, Talwar & Zhang, "Learning Differentially
 *              Private Recurrent Language Models", ICLR 2018, Alg. 1: Poisson sampling of silos at
 *              rate client_rate, each sampled silo's model delta clipped to update_clip, the
 *              server adds N(0, (server_noise * update_clip)^2) to the SUM and divides by the fixed
 *              denominator client_rate * K_active (the paper's unweighted estimator f~_f with all
 *              weights 1; weighted aggregation is ignored because weights by n_k would make the
 *              sensitivity depend on the data). The privacy unit is the whole silo.
 *   ppsgd      personalised-private SGD, Bietti, Wei, Dudik, Langford & Wu, "Personalization
 *              Improves Privacy-Accuracy Tradeoffs in Federated Learning", ICML 2022, Alg. 3 with
 *              its experiments' step split (fl_algo_ppsgd.c): silo i's model is w + theta_i; a
 *              sampled silo takes one minibatch gradient, steps theta_i unclipped and uploads the
 *              gradient clipped to update_clip; the server releases w with noise server_noise on
 *              the sum over the fixed denominator client_rate * K. User-level (silo) DP as
 *              dp_fedavg; ratio 0 releases nothing.
 *   fedhdp     Aldaghri, Mahdavifar & Beirami, "Federated Learning with Heterogeneous
 *              Differential Privacy", Alg. 2 with Ditto (fl_algo_fedhdp.c): dp_fedavg's sampling
 *              and clipped deltas, but each privacy group's mean gets its own noise z_g (none for
 *              a group that opted out of DP) and the means are combined with weights r_g K_g /
 *              sum_h r_h K_h; Ditto personal models with the group's lambda_g. Silo k's round
 *              event is its group's (fl_hdp_silo_noise).
 *   altmin     APriv-AltMin, Jain, Rush, Smith, Song & Thakurta, "Differentially Private Model
 *              Personalization", NeurIPS 2021, Algs. 1-3 (fl_algo_altmin.c): a shared orthonormal
 *              U (d x k, in state->extra) and each silo's head v_k fitted locally; every round
 *              each silo uploads the clipped sufficient statistics of the least-squares problem
 *              in U and the server releases U from their noisy sum (two Gaussian releases per
 *              round, noise multiplier server_noise); round 0 may be the private spectral
 *              initialisation (Alg. 3) instead. User-level (silo) DP, every silo every round.
 *   adaped     Ozkara, Acharya et al., "A Statistical Framework for Personalized Federated
 *              Learning and Estimation: Theory, Algorithms, and Privacy", Alg. 2 (AdaPeD,
 *              fl_algo_adaped.c): each sampled silo takes tau full-batch steps of its personal
 *              model on its loss + KL(global || personal) / (2 psi), of its copy of the global
 *              model towards the personal one, and of the adaptive psi (Eq. 11); the server
 *              averages the copies and the psi's. Non-private (no event).
 *   dp_adaped  the same with Sec. 3.3's clipped and noised mu and psi steps (C_1 = update_clip,
 *              C_2, per-step noise fl_adaped_step_noise); user-level DP, silo k's round event
 *              poisson(client_rate, gaussian(server_noise)) as dp_fedavg's (computed from first
 *              principles; Thm. 5's closed form is fl_adaped_paper_rho, never charged).
 *   ifca       clustered FL, Ghosh, Chung, Yin & Ramchandran, "An Efficient Framework for Clustered
 *              Federated Learning", NeurIPS 2020, Alg. 2 with model averaging, and its private
 *              version and MR-MTL warm start of Liu et al., NeurIPS 2022, App. A, C.3 and Alg. A2
 *              (fl_algo_ifca.c): ifca_clusters cluster models; in the rounds t < select_rounds
 *              each silo picks the one of least clipped loss on its training rows by report-noisy-
 *              min (the exponential mechanism, its own privacy event), trains it with DP-SGD and
 *              the server averages each cluster's members' updates; from warm_rounds on, MR-MTL
 *              towards the silo's cluster model.
 *   adamix     Ozkara, Acharya et al.'s Alg. 1 (AdaMix, fl_algo_adamix.c): a Gaussian-mixture prior
 * on the silos' models; each silo takes full-batch gradient steps on its negative log-likelihood
 * minus the log of the mixture density and uploads its model; the server fits the mixture by EM.
 * Non-private (no event). gaussian_prior  its App. E/F, Alg. 4 (linear) and Alg. 5 (logistic): a
 * Gaussian prior N(mu, sigma_theta^2 I) with mu (the global model) and the variances learnt by the
 *              paper's gradient descent (variant gd) or, linear only, by EM (variant em).
 *              Non-private (no event).
 *
 * ROUNDS. A job runs exactly cfg->rounds rounds t = 0 .. T-1 (not T+1); the plan (fl_plan_silo)
 * counts exactly the steps the trainer runs. In every round silo k runs local_epochs blocks of
 * floor(n_k / B_k) DP-SGD steps (B_k = min(batch_size, n_k)), each step a Poisson sample of its
 * training rows at rate q_k = B_k / n_k (true Poisson sampling, what the accountant assumes; the
 * noisy clipped sum is divided by the expected batch q_k n_k = B_k). The proximal term of mrmtl and
 * ditto is added after clipping and noise, never clipped (fl_model.h fl_sgd_run).
 *
 * DETERMINISM. A silo's local update is a function of (the start-of-round global model, its own
 * personal model, its rows, its seeds) alone. Its seeds are
 *     base  = dp_rng_derive(dp_rng_derive(seed, silo), round)
 *     phase = dp_rng_derive(base, FL_SEED_PHASE_*)          (ditto's global and personal blocks)
 *     sampling = dp_rng_derive(phase, FL_SEED_SAMPLING)
 *     noise = dp_rng_derive(phase, FL_SEED_NOISE)
 * and the server's draws (dp_fedavg's client sampling and noise) come from
 * dp_rng_derive(dp_rng_derive(seed, FL_SEED_SERVER), round). Aggregation sums the silos in index
 * order in double precision. So a round gives the same bytes for any number of threads, and a job
 * resumed from a checkpoint (fl_state_serialize) ends bit-identically where the uninterrupted job
 * ends.
 *
 * STOPPED SILOS. A silo whose budget is exhausted is passed as active[k] = false; the engine then
 * sets state->stopped[k], which is sticky (checkpointed; the silo never trains again in this job).
 * A stopped silo does not train and contributes nothing to any aggregate: the weights p_k are
 * renormalised over the silos that trained this round. It keeps receiving the global model (free
 * post-processing: for fedavg, finetune's fedavg phase and dp_fedavg its personal model is the
 * global one) and otherwise keeps its last personal model. It is still EVALUATED, on its train and
 * test rows, and counts in the aggregate metrics (the federation's quality is over all silos);
 * fl_silo_metrics.active says it did not train.
 *
 * METRICS AND PRIVACY. The per-round metrics evaluate every silo's models on its training and test
 * rows. They are for the operator of the simulation and are not released under DP: evaluation
 * queries are not charged (Liu et al., NeurIPS 2022, evaluate every round on the silos' test sets
 * without accounting for it either).
 *
 * PRIVACY UNIT. Record-level algorithms (all but dp_fedavg): silo k's records, add/remove
 * neighbouring, a per-silo (epsilon_k, delta_k) through its own noise multiplier z_k (the Poisson
 * subsampled Gaussian, Mironov, Talwar & Zhang 2019). Weighted aggregation by n_k treats the silo
 * sizes as public. dp_fedavg: one whole silo, add/remove, the same event for every silo; fedhdp:
 * one whole silo, the event of its privacy group (none for a group that opted out); dp_adaped:
 * one whole silo, dp_fedavg's event (fl_algo_adaped.c); adaped: no event (not private).
 *
 * Thread-safety: reentrant; fl_round_run starts and joins its own threads (pthreads) and shares
 * the federation and the start-of-round state read-only between them.
 */
#ifndef DP_FEDERATED_FL_ALGO_H
#define DP_FEDERATED_FL_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/event.h"
#include "accounting/rdp.h"
#include "common/dp_err.h"
#include "federated/fl_data.h"
#include "federated/fl_model.h"

#define FL_MAX_ROUNDS         100000       /* rounds per job */
#define FL_MAX_LOCAL_EPOCHS   100          /* local epochs per round */
#define FL_MAX_THREADS        256          /* fl_round_run's fan-out */
#define FL_MAX_STATE_FLOATS   (1ULL << 28) /* (n_silos + 2) * n_params: 1 GiB of floats */
#define FL_STATE_VERSION      1            /* checkpoint format version */
#define FL_MAX_HDP_GROUPS     16           /* fedhdp: privacy groups per job */
#define FL_MAX_AP_TAU         10000        /* adaped: local steps per round */
#define FL_MAX_PR_STEPS       10000        /* adamix, gaussian_prior: local steps per round */
#define FL_MAX_MIX_COMPONENTS 16           /* adamix: mixture components */
#define FL_MAX_PR_EM_ITERS    1000         /* adamix: EM iterations per round */
#define FL_MAX_GP_EM_PARAMS   2000 /* gaussian_prior em: parameters (a P x P solve per silo) */
#define FL_GP_GD              0    /* gaussian_prior variants */
#define FL_GP_EM              1
#define FL_MAX_IFCA_CLUSTERS  16 /* ifca: cluster models per job */

/* Seed labels (dp_rng_derive) for the purposes above: part of the reproducibility contract. */
#define FL_SEED_SERVER         0xffffffffffffffffULL /* in place of a silo index */
#define FL_SEED_INIT           0xfffffffffffffffeULL /* the initial model */
#define FL_SEED_PHASE_MAIN     0 /* a silo's (only or global) training block of a round */
#define FL_SEED_PHASE_PERSONAL 1 /* ditto's personal block */
#define FL_SEED_PHASE_SELECT   2 /* ifca's cluster selection (its Gumbel noise) */
#define FL_SEED_SAMPLING       0
#define FL_SEED_NOISE          1
#define FL_SEED_CLIP_COUNT     2 /* fedhdp's noisy count of unclipped updates (server) */

/* fedhdp: one privacy group (Aldaghri, Mahdavifar & Beirami, "Federated Learning with
 * Heterogeneous Differential Privacy", Alg. 2): its silos' updates are averaged together, the
 * group's mean gets its own Gaussian noise and the group's weight ratio r_g. */
typedef struct fl_hdp_group_cfg {
    bool opt_out;  /* the group opted out of DP: no noise on its mean, never charged */
    double noise;  /* z_g >= 0: std z_g * update_clip on the group's sum (0 when opt_out) */
    double r;      /* r_g >= 0: weight ratio (a silo's weight is r_g / sum_h r_h K_h); 0 = the
                      group's silos do not train and nothing of theirs is released */
    double lambda; /* lambda_g >= 0: the Ditto proximal weight of the group's personal models */
} fl_hdp_group_cfg;

/* The job's configuration. A plain parameter bundle, checked by fl_job_cfg_check. */
typedef struct fl_job_cfg {
    const char *algorithm; /* "local", "fedavg", ... (fl_algo_names); borrowed */
    fl_model_spec model;   /* model.d_in must equal the federation's d */
    uint64_t rounds;       /* T: 1..FL_MAX_ROUNDS */
    uint64_t local_epochs; /* E: 1..FL_MAX_LOCAL_EPOCHS (ditto runs E global + E personal) */
    size_t batch_size;     /* B >= 1; silo k uses B_k = min(B, n_k) */
    double lr;             /* SGD step size, finite > 0 */
    double lambda;         /* mrmtl, ditto: proximal weight >= 0 (0 elsewhere) */
    double finetune_frac;  /* finetune: fedavg while t < finetune_frac * T; in [0, 1] */
    uint64_t seed;         /* the job's seed */
    bool weighted;         /* aggregation weights n_k / sum n_j (true) or 1/K (false) */
    /* record-level DP-SGD (all algorithms but dp_fedavg) */
    double clip;                    /* per-example L2 clip c; 0 = none (then no noise) */
    const double *noise_multiplier; /* z_k per silo (n_silos entries; borrowed), std z_k * c on
                                       the clipped sum; NULL = 0 for every silo (non-private) */
    /* client-level DP-FedAvg (dp_fedavg only) */
    double client_rate;  /* Poisson rate of silo sampling per round, in (0, 1] */
    double update_clip;  /* L2 clip S of a silo's model delta, > 0 */
    double server_noise; /* noise multiplier z: std z * S on the sum of deltas; >= 0 */
    double server_lr;    /* the server's step on the averaged delta; > 0 (1 = FedAvg) */
    /* ppsgd (client_rate, update_clip = C and server_noise as above) */
    double ppsgd_ratio;  /* r = alpha Q >= 0 or +inf: global step / personal step (default 1) */
    unsigned ppsgd_mode; /* Bietti et al. 2022's Alg. 1, 2 or 3 (default 3; fl_algo_ppsgd.c) */
    /* fedhdp (client_rate, update_clip and server_lr as dp_fedavg; server_noise unused) */
    size_t hdp_n_groups;                /* 1..FL_MAX_HDP_GROUPS */
    const fl_hdp_group_cfg *hdp_groups; /* hdp_n_groups (borrowed) */
    const uint32_t *hdp_silo_group;     /* n_silos: silo k's group (borrowed); NULL = all in 0 */
    /* fedhdp's adaptive clipping (Alg. 2, Andrew et al.'s geometric rule): update_clip is S^0 */
    bool hdp_adaptive;        /* S follows the clip_quantile of the update norms */
    double hdp_clip_quantile; /* kappa in (0, 1): target share of unclipped updates */
    double hdp_clip_lr;       /* eta_b > 0: S^{t+1} = S^t exp(-eta_b (b_bar - kappa)) */
    double hdp_count_noise;   /* sigma_b > 0: std of the noise on the count of unclipped updates */
    /* altmin (client_rate 1; update_clip = both clips eta and zeta; server_noise = sigma) */
    size_t altmin_rank;   /* k: 1..min(d, FL_ALTMIN_MAX_K) with d k <= FL_ALTMIN_JOB_MAX_DK */
    bool altmin_spectral; /* round 0 runs APriv-init (Alg. 3) instead of an AltMin step */
    /* adaped, dp_adaped (Ozkara, Acharya et al., "A Statistical Framework for Personalized
     * Federated Learning and Estimation: Theory, Algorithms, and Privacy", Alg. 2 and Sec. 3.3):
     * lr is eta_1 (the personal model's step), client_rate is K/m (Poisson sampling) */
    uint64_t ap_tau;     /* local steps per round (the sync gap tau), 1..FL_MAX_AP_TAU */
    double ap_psi_init;  /* psi^0 > 0 (App. K.1: 3.5) */
    double ap_psi_floor; /* psi is kept >= this > 0 after every step (App. K.1: 0.5) */
    double ap_lr_mu;     /* eta_2 > 0: the local copy of the global model's step */
    double ap_lr_psi;    /* eta_3 >= 0: psi's step (0 keeps psi at psi_init) */
    double ap_kd_psi;    /* c > 0: k = 1/(2 psi) - c f_KD / (2 psi^2) (Eq. 11: 1; App. K.1: 5) */
    /* Alg. 7 (App. H.2): an unsampled silo takes tau theta steps toward the mu, psi it last
     * received, for at most this many consecutive unsampled rounds; 0 = it idles (Alg. 2) */
    uint64_t ap_unsampled_rounds;
    /* dp_adaped (Sec. 3.3): update_clip is C_1 (the mu gradient's clip), server_noise the
     * multiplier z of the round event poisson(client_rate, gaussian(z)) every silo is charged;
     * each of the 2 tau clipped gradients of a round gets the per-step multiplier
     * z sqrt(2 tau): sigma_q1 = z sqrt(2 tau) C_1, sigma_q2 = z sqrt(2 tau) C_2 */
    double ap_clip_psi; /* C_2 > 0: the psi gradient's clip */
    /* ifca (Ghosh, Chung, Yin & Ramchandran, "An Efficient Framework for Clustered Federated
     * Learning", NeurIPS 2020, Alg. 2, with the private selection and the warm-started MR-MTL of
     * Liu et al., NeurIPS 2022, App. A, C.3 and Alg. A2; fl_algo_ifca.c) */
    size_t ifca_clusters;        /* G: 1..FL_MAX_IFCA_CLUSTERS cluster models */
    uint64_t ifca_select_rounds; /* rounds t < this (and < warm_rounds) run the selection; >= 1 */
    uint64_t ifca_warm_rounds;   /* rounds t < this are IFCA, then MR-MTL (lambda) towards the
                                    silo's cluster model; 1..rounds (rounds: IFCA throughout) */
    double ifca_select_eps;      /* epsilon > 0 of one selection (the exponential mechanism), or
                                    DP_INF: the exact argmin (a non-private job only) */
    double ifca_loss_bound;      /* B > 0: each record's loss is clipped to [0, B] in the score */
    /* adamix, gaussian_prior (Ozkara, Acharya et al., Alg. 1, Alg. 4 and Alg. 5; fl_algo_adamix.c):
     * non-private; every trainable silo takes part every round; gradients are full batch
     * (batch_size unused); lr is each step as a fraction of the silo's stability bound 1 / L_k */
    uint64_t pr_steps;      /* local gradient steps of theta per round, 1..FL_MAX_PR_STEPS */
    double pr_var_floor;    /* > 0: every fitted variance is kept >= this */
    size_t pr_components;   /* adamix: k, 1..FL_MAX_MIX_COMPONENTS */
    uint64_t pr_em_iters;   /* adamix: EM iterations of the server's fit per round, >= 1 */
    double pr_noise_var;    /* adamix, linear model: the known noise variance sigma_w^2 > 0 */
    unsigned pr_variant;    /* gaussian_prior: FL_GP_GD (Alg. 4/5) or FL_GP_EM (linear) */
    double pr_sigma_theta2; /* gaussian_prior: sigma_theta^2 before the first round, > 0 */
    double pr_sigma_x2;     /* gaussian_prior, linear: sigma_x^2 before the first round, > 0 */
    double pr_lr_mu;        /* gaussian_prior gd: mu's step as a fraction of s_theta, >= 0 */
    double pr_lr_var;       /* gaussian_prior gd: the variances' steps (fractions), >= 0 */
} fl_job_cfg;

/* Fills cfg with the defaults (local_epochs 1, weighted, server_lr 1, finetune_frac 0.5, ...);
 * algorithm, model, rounds, batch_size and lr are left for the caller. */
void fl_job_cfg_default(fl_job_cfg *cfg);

/* Validates cfg against the federation f (may be NULL: then only what does not depend on it).
 * DP_EINVAL naming the field ("algorithm", "lambda", "noise_multiplier[3]", ...). */
int fl_job_cfg_check(const fl_job_cfg *cfg, const fl_federation *f, dp_err *err);

/* The registered algorithms' names, in registry order (static storage); *n receives the count. */
const char *const *fl_algo_names(size_t *n);
/* true when the algorithm keeps a global model that is evaluated (false for local and for an
 * unknown name). */
bool fl_algo_has_global(const char *algorithm);
/* true for client-level DP algorithms (dp_fedavg, ppsgd, fedhdp, dp_adaped: the privacy unit is a
 * silo; one noise multiplier server_noise for all, or fedhdp's per privacy group) and for adaped
 * (silo-level in form, but it releases nothing and has no event), false for record-level ones and
 * unknown names. */
bool fl_algo_client_level(const char *algorithm);

/* ppsgd's step sizes from cfg->lr and cfg->ppsgd_ratio r (Bietti et al. 2022, §6): r = inf gives
 * (lr, 0), r <= 1 gives (r lr, lr), r > 1 gives (lr, lr / r); eta_w / eta_theta = r. */
void fl_ppsgd_steps(const fl_job_cfg *cfg, double *eta_w, double *eta_theta);
/* true when a ppsgd job releases w (r > 0): only then does it spend privacy. */
bool fl_ppsgd_releases(const fl_job_cfg *cfg);

/* fedhdp: the group of silo k (0 when cfg->hdp_silo_group is NULL). */
size_t fl_hdp_silo_group(const fl_job_cfg *cfg, size_t silo);
/* fedhdp: the noise multiplier of the event silo k is charged each round: its group's z_g, or 0
 * when the group opted out or has r_g = 0 (nothing of it is released); with adaptive clipping the
 * combined multiplier of the group's mean and the count of unclipped updates (released on the same
 * sample), fl_hdp_combined_noise(z_g, sigma_b). */
double fl_hdp_silo_noise(const fl_job_cfg *cfg, size_t silo);
/* (z^-2 + sigma_b^-2)^(-1/2): two Gaussian queries on one Poisson sample, of L2 sensitivities S
 * (noise z S) and 1 (noise sigma_b), are one Gaussian query of noise multiplier this (scale each
 * coordinate by its noise; Andrew, Thakkar, McMahan & Ramaswamy, "Differentially Private Learning
 * with Adaptive Clipping", NeurIPS 2021, §3). z > 0, sigma_b > 0. */
double fl_hdp_combined_noise(double z, double sigma_b);

/* dp_adaped: the per-step noise multiplier sigma_q / C of each clipped mu and psi gradient,
 * server_noise sqrt(2 tau): 2 tau Gaussian queries of multiplier z_s compose to one of multiplier
 * z_s / sqrt(2 tau) (fl_algo_adaped.c). */
double fl_adaped_step_noise(const fl_job_cfg *cfg);
/* dp_adaped: Thm. 5's closed form (Ozkara, Acharya et al., Sec. 3.3), the zCDP rho =
 * 6 q^2 T/tau (C_1^2 / (K sigma_q1^2) + C_2^2 / (K sigma_q2^2)) with q = client_rate, T/tau =
 * rounds, K = q n_silos and C / sigma_q = 1 / fl_adaped_step_noise for both: reported as the
 * paper's bound, never charged. */
double fl_adaped_paper_rho(const fl_job_cfg *cfg, size_t n_silos);

/* ifca's report-noisy-min: argmin_g (score[g] - scale Gumbel_g) over n_clusters scores, one
 * uniform U in (0, 1) per cluster in cluster order from seed, Gumbel_g = -log(-log U); scale 0
 * is the exact argmin (ties to the lower index). With scale = 2 B / eps and scores of sensitivity
 * B it samples the exponential mechanism of epsilon eps (fl_algo_ifca.c). */
size_t fl_ifca_select(const double *score, size_t n_clusters, double scale, uint64_t seed);

/* ---- state: the whole checkpoint ---- */
typedef struct fl_state {
    uint64_t round;  /* rounds completed, 0..cfg->rounds */
    size_t n_silos;  /* K */
    size_t n_params; /* P = fl_model_n_params(&cfg->model) */
    float *global;   /* P: the global model (kept, but not evaluated, for local); owned */
    float *personal; /* K x P row-major: silo k's personal model; owned */
    bool *stopped;   /* K: silo k is stopped (sticky); owned */
    size_t n_extra;  /* floats the algorithm keeps besides (0 for the built-in ones) */
    float *extra;    /* n_extra, or NULL; owned */
} fl_state;

/* fedhdp: the clip norm S^t the next round uses (update_clip when not adaptive). */
double fl_hdp_clip(const fl_job_cfg *cfg, const fl_state *s);

/* adaped, dp_adaped: psi^t, the psi the next round broadcasts (psi_init before the first). */
double fl_adaped_psi(const fl_job_cfg *cfg, const fl_state *s);
/* The synthetic softmax setting of AdaPeD's RT10 (Ozkara, Acharya et al., §4): 10 silos of 10-30
 * rows, 10 features, 4 classes, heterogeneity tau 1, noise 0.2; shared by its reproduction, its
 * unit test and bench/jobs. */
fl_synth_spec fl_adaped_rt10_spec(uint64_t seed);
/* adamix (Ozkara, Acharya et al., Alg. 1; fl_algo_adamix.c): the mixture the last round fitted,
 * w (k weights), var (k variances per coordinate), mu (k x P means, row-major), all caller-
 * allocated for k = cfg->pr_components; DP_ENOTFOUND before the first round. */
int fl_adamix_mixture(const fl_job_cfg *cfg, const fl_state *s, double *w, double *var, double *mu);
/* adamix: g (p) = the gradient of -log sum_l w_l N(theta; mu_l, var_l I_p) at theta, i.e.
 * sum_l r_l (theta - mu_l) / var_l, with resp (k) the responsibilities r_l (computed in the log
 * domain; a component of weight 0 has r_l = 0). */
void fl_adamix_prior_grad(const double *theta, size_t p, size_t k, const double *w,
                          const double *mu, const double *var, double *resp, double *g);
/* One EM iteration of the spherical Gaussian mixture (w, mu, var; k components) on the m points x
 * (m x p, row-major): responsibilities into resp (m x k), then the closed-form M-step with every
 * variance kept >= var_floor (a component that gets no responsibility keeps its mean and
 * variance, weight 0). Returns the log-likelihood of x under the parameters before the step; the
 * step never decreases it (fl_gmm_loglik). */
double fl_gmm_em_step(const double *x, size_t m, size_t p, size_t k, double var_floor, double *w,
                      double *mu, double *var, double *resp);
/* sum_i log sum_l w_l N(x_i; mu_l, var_l I_p); lr: k doubles of scratch. */
double fl_gmm_loglik(const double *x, size_t m, size_t p, size_t k, const double *w,
                     const double *mu, const double *var, double *lr);
/* gaussian_prior (Alg. 4, Alg. 5): the prior variance sigma_theta^2 and noise variance sigma_x^2
 * the next round broadcasts (the configured initial values before the first; sigma_x^2 = 1 for the
 * logistic model); the prior mean is s->global. */
void fl_gp_variances(const fl_job_cfg *cfg, const fl_state *s, double *s_theta, double *s_x);

/* The synthetic linear regressions of Ozkara, Acharya et al.'s experiments: silo k's theta_k (dim
 * entries) is mu + N(0, sigma_theta2 I) (components 1, mu_j ~ N(0, mu_scale^2): App. K's
 * Gaussian-prior setting) or +-mu + N(0, sigma_theta2 I) with probability 1/2 each and mu =
 * mu_scale 1 (components 2: Table 3's AdaMix setting); rows x ~ N(0, x_var I), y = theta_k . x +
 * N(0, noise_var), no intercept. */
typedef struct fl_prior_synth {
    size_t silos, dim, n_train, n_test; /* silos 1..FL_MAX_SILOS, rows per silo */
    size_t components;                  /* 1 or 2 (above) */
    double mu_scale, sigma_theta2, x_var, noise_var;
    uint64_t seed; /* everything draws from (seed, DP_RNG_STREAM_DATA) */
} fl_prior_synth;
/* *out (fl_federation_free) and, when theta is not NULL, the true models (silos x dim, caller-
 * allocated). DP_EINVAL ("spec"), DP_ENOMEM. */
int fl_prior_synth_generate(const fl_prior_synth *s, fl_federation *out, double *theta,
                            dp_err *err);
/* RT8, App. K (Jain et al. 2021a's setting): n = 10 rows, mu_j ~ N(0, 0.1^2), sigma_theta^2 =
 * 0.01, x ~ N(0, 0.05 I), noise variance 0.05; the paper uses 10000 silos and dim 50 or 100. */
fl_prior_synth fl_prior_rt8_spec(size_t silos, size_t dim, uint64_t seed);
/* RT7, Table 3: dim 50, theta ~ 1/2 N(1_d, 0.001 I) + 1/2 N(-1_d, 0.001 I), x ~ N(0, I), noise
 * variance 0.1, n rows per silo (10, 20 or 30), 1000 silos in the paper. */
fl_prior_synth fl_prior_rt7_spec(size_t silos, size_t n, uint64_t seed);

/* Initial state: round 0, every model fl_model_init(model, dp_rng_derive(seed, FL_SEED_INIT))
 * (all personal models share the global initialisation, Liu et al. 2022 App. C), none stopped. */
int fl_state_init(const fl_job_cfg *cfg, const fl_federation *f, fl_state *out, dp_err *err);
/* Frees what s owns and zeroes it. NULL is a no-op. */
void fl_state_free(fl_state *s);

/* Checkpoint bytes: "DPFLSTAT", the format version, the algorithm name, K, P, round, n_extra,
 * the floats as their IEEE-754 bits (little-endian), the stopped flags, and a SHA-256 of all the
 * preceding bytes. *buf is dp_malloc'd, owned by the caller (dp_free). */
int fl_state_serialize(const fl_state *s, const fl_job_cfg *cfg, uint8_t **buf, size_t *len,
                       dp_err *err);
/* Parses a checkpoint for (cfg, f) (of f only n_silos is read: a reader without the data passes a
 * federation with just its silo count): the version, the algorithm name, K, P, n_extra and the
 * total size must match, the round be <= cfg->rounds and the digest agree; else DP_EINVAL (field
 * "checkpoint") and *out untouched. buf is borrowed. */
int fl_state_deserialize(const uint8_t *buf, size_t len, const fl_job_cfg *cfg,
                         const fl_federation *f, fl_state *out, dp_err *err);

/* ---- per-round metrics ---- */
typedef struct fl_model_metrics {
    double train_loss;  /* mean loss over the silo's training rows */
    double test_loss;   /* mean loss over its test rows (DP_NAN when it has none) */
    double test_metric; /* regression: test MSE; classifiers: test accuracy (DP_NAN: no rows) */
} fl_model_metrics;

typedef struct fl_silo_metrics {
    bool active;     /* trained this round */
    double sgd_loss; /* mean loss over the rows of this round's DP-SGD batches (the
                        silo's view while training; DP_NAN when it did not train) */
    size_t n_train, n_test;
    fl_model_metrics global;   /* the global model on this silo (all DP_NAN for local) */
    fl_model_metrics personal; /* the silo's personal model */
    long cluster;              /* ifca: the cluster model the silo belongs to after the round
                                  (the one it chose or kept); -1 for the other algorithms */
} fl_silo_metrics;

typedef struct fl_agg_metrics {
    double pooled_test_metric; /* MSE or accuracy over all silos' test rows pooled (= weighted by
                                  n_test, Liu et al. 2022 App. C.4) */
    double pooled_test_loss;   /* mean loss over all test rows */
    double train_loss;         /* training loss weighted by n_train (= over all training rows) */
    double mean_test_metric;   /* plain mean over silos with test rows */
    double worst_test_metric;  /* the worst silo: largest MSE or smallest accuracy */
    size_t worst_silo;         /* its index (the first such silo; 0 when no silo has test rows) */
    double spread_test_metric; /* max - min over silos */
} fl_agg_metrics;

typedef struct fl_round_metrics {
    uint64_t round;  /* the round just run (0-based) */
    bool regression; /* metric = MSE (true) or accuracy (false) */
    bool has_global; /* false for local: global holds DP_NAN */
    size_t n_silos;
    size_t n_trained;      /* silos that trained this round */
    fl_silo_metrics *silo; /* n_silos, owned (fl_round_metrics_free) */
    fl_agg_metrics global;
    fl_agg_metrics personal;
} fl_round_metrics;

void fl_round_metrics_free(fl_round_metrics *m);

/* Runs round state->round for the silos with active[k] (NULL = all) that are not stopped:
 * active[k] = false stops silo k from now on (state->stopped[k], sticky). threads >= 1 (capped at
 * FL_MAX_THREADS and at K) share the silos' local updates, then the server aggregates in silo
 * order, state->round advances, and every silo is evaluated (out, may be NULL: no evaluation; its
 * previous content is freed, so zero-initialise it before the first call). Errors: DP_EINVAL (cfg,
 * state mismatch, state->round == cfg->rounds), DP_ENOMEM, DP_EINTERNAL (threads). On an error
 * before the fan-out the state is unchanged; after it (a silo's update, or the evaluation's
 * workspace) the state may hold part of the round or the whole round (state->round advanced, no
 * metrics): resume from the last checkpoint. */
int fl_round_run(const fl_job_cfg *cfg, const fl_federation *f, fl_state *state, const bool *active,
                 int threads, fl_round_metrics *out, dp_err *err);

/* ---- privacy plan ---- */
typedef struct fl_silo_plan {
    bool record_level;        /* the event protects silo k's records (false: dp_fedavg, silos) */
    bool is_private;          /* a noise multiplier > 0 is in force (else no event) */
    size_t batch;             /* record level: B_k = min(B, n_k) */
    double q;                 /* record level: B_k / n_k; dp_fedavg: client_rate */
    double noise_multiplier;  /* z_k (record level) or server_noise (dp_fedavg) */
    uint64_t steps_per_round; /* DP-SGD steps of silo k in a round it trains (dp_fedavg: 1
                                 release per round) */
    uint64_t steps_total;     /* steps_per_round * rounds */
    uint64_t select_rounds;   /* ifca: the rounds t < select_rounds in which a silo that trains
                                 also runs the private cluster selection (0: none, or not
                                 private); each such round's charge is fl_plan_silo_select's */
    double select_epsilon;    /* ifca: epsilon of one selection (DP_NAN when select_rounds 0) */
} fl_silo_plan;

/* Plan of silo `silo` with n_k training rows (>= 1). round_event (may be NULL) receives the
 * accounting event of ONE round (owned by the caller, acct_event_free), NULL when !is_private:
 *   record level: self_composed(steps_per_round, poisson(q_k, gaussian(z_k)))
 *   dp_fedavg:    poisson(client_rate, gaussian(server_noise))
 *   altmin:       self_composed(2, gaussian(server_noise)) (fl_algo_altmin.c)
 *   ifca:         the record-level event; its selection rounds charge fl_plan_silo_select's
 * The job's total is the rounds-fold composition of it. Charging: record level, each silo that
 * trains in a round is charged the round's event (a stopped silo is no longer charged); dp_fedavg,
 * every silo still trainable in a round is charged whether the server sampled it or not (the
 * Poisson sampling is part of the event). silo indexes cfg->noise_multiplier: the caller keeps it
 * below the federation's n_silos. */
int fl_plan_silo(const fl_job_cfg *cfg, size_t silo, size_t n_k, fl_silo_plan *out,
                 acct_event **round_event, dp_err *err);

/* ifca: the event of a round in which silo k also runs the private cluster selection,
 * composed(round_event, zcdp(eps^2 / 8)) (the exponential mechanism of epsilon eps is eps-bounded
 * range, Durfee & Rogers 2019, hence eps^2/8-zCDP, Cesar & Rogers, ALT 2021), charged in
 * place of round_event in the rounds t < plan->select_rounds; *select_event (owned by the caller)
 * is NULL when plan->select_rounds is 0. round_event is fl_plan_silo's (borrowed, cloned). */
int fl_plan_silo_select(const fl_job_cfg *cfg, const fl_silo_plan *plan,
                        const acct_event *round_event, acct_event **select_event, dp_err *err);

/* The accountant a silo's budget uses (the ledger's: RDP on its order grid, the silo's conversion,
 * add/remove neighbouring). For an (epsilon, delta) silo whose ledger accountant is "rdp" or "pld"
 * (the ledger's RDP figure); a "zcdp" silo cannot account the Poisson-subsampled Gaussian. */
typedef struct fl_accountant {
    double delta;         /* in (0, 1) */
    acct_conversion conv; /* the silo's budget conversion */
    const double *orders; /* the ledger's order grid (ledger_orders), NULL = the default grid */
    size_t n_orders;
} fl_accountant;

/* epsilon of `rounds` rounds of event round_ev as the ledger computes it after charging it once per
 * round: the round's RDP curve summed rounds times rounding upward (dp_sum_up), converted at each
 * order of the grid with acct->conv and minimised over the grid. The ledger's figure (the grid
 * minimum, or the continuous-order refinement when that is smaller) never exceeds it. */
int fl_plan_epsilon(const acct_event *round_ev, uint64_t rounds, const fl_accountant *acct,
                    double *eps, dp_err *err);

/* fl_plan_epsilon of rounds charges of which the first n_sel (<= rounds) are select_ev and the
 * others round_ev (ifca's selection rounds; select_ev may be NULL when n_sel is 0): the sum of
 * the curves bounded from above as the ledger adds them, converted on the grid. */
int fl_plan_epsilon_select(const acct_event *round_ev, const acct_event *select_ev, uint64_t rounds,
                           uint64_t n_sel, const fl_accountant *acct, double *eps, dp_err *err);

/* The one-round RDP curve of round_ev (not NULL) on acct's order grid: *curve (dp_malloc'd, *n
 * entries), for fl_plan_epsilon_curve. */
int fl_plan_round_curve(const acct_event *round_ev, const fl_accountant *acct, double **curve,
                        size_t *n, dp_err *err);
/* fl_plan_epsilon of `rounds` rounds from the round's curve (fl_plan_round_curve): the same figure,
 * bit for bit, without evaluating the event again (a job reports every silo's epsilon each round).
 */
int fl_plan_epsilon_curve(const double *round_curve, size_t n_orders, uint64_t rounds,
                          const fl_accountant *acct, double *eps, dp_err *err);

/* fl_plan_epsilon_select from the two curves (fl_plan_round_curve of each; select_curve may be
 * NULL when n_sel is 0): the same figure, bit for bit. */
int fl_plan_epsilon_curves(const double *round_curve, const double *select_curve, size_t n_orders,
                           uint64_t rounds, uint64_t n_sel, const fl_accountant *acct, double *eps,
                           dp_err *err);

/* The smallest noise multiplier (to relative ACCT_CALIB_RTOL) for which fl_plan_epsilon of silo
 * k's round event over cfg->rounds rounds is <= target_eps: z_k for record-level algorithms
 * (n_k its training rows; cfg->noise_multiplier is ignored), server_noise for dp_fedavg (n_k
 * unused); for ifca the figure is fl_plan_epsilon_select's, the selection rounds included (their
 * cost is fixed, so the DP-SGD noise covers what they leave of the target). The answer z is
 * certified on the whole grid: fl_plan_epsilon(z) <= target_eps (so the ledger's epsilon never
 * exceeds the target), and fl_plan_epsilon exceeds the target at a noise multiplier within the
 * tolerance below z (so z is the minimal one to that tolerance), each without evaluating every
 * order (fl_algo_plan.c, calibration). *eps receives fl_plan_epsilon's figure at z over the orders
 * around the grid minimum (<= target_eps; never below fl_plan_epsilon(z), and equal to it when its
 * minimum lies there, as it does but for ties). DP_ENUMERIC when no noise up to
 * ACCT_CALIB_SIGMA_MAX meets the target. */
int fl_calibrate_noise(const fl_job_cfg *cfg, size_t n_k, double target_eps,
                       const fl_accountant *acct, double *noise_multiplier, double *eps,
                       dp_err *err);

/* fl_calibrate_noise for n_silos silos at once (n_k[k] training rows, accountant acct[k]; the
 * same target): noise_multiplier[k] and eps[k] carry each silo's answer with the same guarantee.
 * Silos with the same n_k and an identical accountant share one calibration (the same event), and
 * each calibration starts from the answer of the silo of next smaller n_k. On an error (the first
 * silo's, in n_k order) the outputs are partly filled. */
int fl_calibrate_noise_many(const fl_job_cfg *cfg, size_t n_silos, const size_t *n_k,
                            double target_eps, const fl_accountant *const *acct,
                            double *noise_multiplier, double *eps, dp_err *err);

#endif
