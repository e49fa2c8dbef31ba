/*
 * codec/job_spec: the body of POST /v1/jobs, checked as a whole and turned into a C struct for the
 * job runner (docs/TRAINING.md "The job spec", field by field).
 *
 * Every field is checked before anything runs: the first bad one is a DP_EINVAL naming it with
 * its full path ("batch_size", "privacy.target_epsilon", "model.hidden[1]", "silos.north"). An
 * unknown key is refused the same way, so a typo never silently falls back to a default. What
 * needs the data (that the silo names exist, that the labels suit the model, the budgets) is
 * checked later, when the job is planned.
 *
 * Ownership: job_spec_parse fills a caller-owned struct; job_spec_clear frees what it allocated.
 * Thread-safety: reentrant.
 */
#ifndef DP_SERVICE_CODEC_JOB_SPEC_H
#define DP_SERVICE_CODEC_JOB_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/dp_err.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "federated/fl_model.h"

/* Documented upper limits (docs/TRAINING.md "Limits"). */
#define JOB_MAX_ROUNDS       100000
#define JOB_MAX_LOCAL_EPOCHS 100
#define JOB_MAX_BATCH        65536
#define JOB_MAX_HIDDEN_WIDTH 4096
#define JOB_MAX_BINDINGS     FL_MAX_SILOS
#define JOB_NAME_MAX         129 /* a data-set silo name, NUL included */
#define JOB_ALGO_MAX         24
#define JOB_MAX_HDP_GROUPS   FL_MAX_HDP_GROUPS

typedef enum job_data_kind {
    JOB_DATA_UPLOAD = 0,    /* an uploaded CSV (its id) */
    JOB_DATA_FASHION_MNIST, /* the built-in Fashion-MNIST */
    JOB_DATA_SYNTHETIC      /* a generator with its parameters */
} job_data_kind;

typedef enum job_on_budget {
    JOB_BUDGET_REFUSE = 0, /* refuse the job at submission if a bound silo cannot afford it */
    JOB_BUDGET_STOP_SILO,  /* a silo that cannot afford its next round stops; the job goes on */
    JOB_BUDGET_STOP_JOB    /* the job stops at the first silo that cannot afford a round */
} job_on_budget;

typedef enum job_privacy_kind {
    JOB_PRIVACY_NONE = 0,
    JOB_PRIVACY_TARGET, /* target_epsilon at delta: each silo's noise is calibrated */
    JOB_PRIVACY_NOISE   /* a given noise multiplier */
} job_privacy_kind;

typedef struct job_binding {
    char name[JOB_NAME_MAX]; /* the data set's silo name */
    int64_t silo_id;         /* the ledger silo it spends from */
} job_binding;

/* fedhdp: one privacy group of the "fedhdp" block (docs/TRAINING.md "fedhdp"). */
typedef struct job_hdp_group {
    char name[JOB_NAME_MAX];     /* the group's label ("group<i>" when not given) */
    job_privacy_kind privacy;    /* NONE: opted out of DP; TARGET: target_epsilon, calibrated;
                                    NOISE: engine.noise as given */
    double target_epsilon;       /* TARGET */
    bool rest;                   /* no "silos": takes every silo no other group lists */
    char (*silos)[JOB_NAME_MAX]; /* n_silos data-set silo names (owned); NULL with rest */
    size_t n_silos;
} job_hdp_group;

typedef struct job_spec {
    char name[JOB_NAME_MAX];      /* the client's label for the job ("" = none) */
    char algorithm[JOB_ALGO_MAX]; /* local, fedavg, finetune, mrmtl, ditto, dp_fedavg, ppsgd,
                                     fedhdp, altmin, adaped, dp_adaped, ifca, adamix,
                                     gaussian_prior */
    job_data_kind data;
    int64_t dataset_id;  /* UPLOAD */
    fl_synth_spec synth; /* SYNTHETIC (regression when classes == 0) */
    bool has_partition;  /* absent: the data set's own silos */
    fl_partition_spec partition;
    fl_model_spec model; /* d_in and n_classes are filled when the data is known */
    int64_t rounds, local_epochs, batch_size;
    double lr, lambda, finetune_fraction, test_fraction;
    double ratio;         /* ppsgd: r = alpha Q, >= 0 or +inf ("inf"); 1 by default */
    int64_t ppsgd_mode;   /* ppsgd: Bietti et al. 2022's Alg. 1, 2 or 3 (default 3) */
    int64_t altmin_rank;  /* altmin: k (the "altmin" block; default 2) */
    bool altmin_spectral; /* altmin: round 0 is the private spectral initialisation */
    uint64_t seed;
    bool standardize; /* "silo" (default) or "none" */
    bool weighted;    /* aggregation weights n_k (default) or 1/K */
    bool resume;      /* after a restart, resume from the last checkpoint (default) */
    /* privacy */
    job_privacy_kind privacy;
    double target_epsilon, noise_multiplier, delta, clip;
    double client_rate; /* client-level algorithms and adaped: the share of silos sampled each round
                           (default 1) */
    /* fedhdp: its privacy groups; without a "fedhdp" block one private group of every silo at the
     * privacy block's level (and, when planned, the silos bound to opted-out ledger silos in a
     * second, opted-out group: hdp_given false) */
    size_t n_hdp_groups;
    bool hdp_given; /* the spec listed its groups */
    job_hdp_group hdp_groups[JOB_MAX_HDP_GROUPS];
    fl_hdp_group_cfg hdp[JOB_MAX_HDP_GROUPS]; /* the engine's view (noise set when planned) */
    bool hdp_adaptive; /* fedhdp.adaptive_clip given: Alg. 2's adaptive clipping */
    double hdp_clip_quantile, hdp_clip_lr, hdp_count_noise; /* kappa, eta_b, sigma_b */
    /* adaped, dp_adaped: the "adaped" block (fl_job_cfg's ap_* fields) */
    int64_t ap_tau;
    double ap_psi_init, ap_psi_floor, ap_lr_mu, ap_lr_psi, ap_kd_psi, ap_clip_psi;
    int64_t ap_unsampled_rounds; /* Alg. 7; 0 = unsampled silos idle (Alg. 2) */
    /* ifca: the "ifca" block (fl_job_cfg's ifca_* fields; docs/TRAINING.md "ifca") */
    int64_t ifca_clusters, ifca_select_rounds, ifca_warm_rounds;
    double ifca_select_eps; /* per selection; DP_INF for a non-private job (the exact argmin) */
    double ifca_loss_bound;
    /* adamix, gaussian_prior: the "adamix" or "gaussian_prior" block (fl_job_cfg's pr_* fields) */
    int64_t pr_steps, pr_components, pr_em_iters;
    unsigned pr_variant; /* FL_GP_GD or FL_GP_EM */
    double pr_var_floor, pr_noise_var, pr_sigma_theta2, pr_sigma_x2, pr_lr_mu, pr_lr_var;
    /* budgets */
    job_on_budget on_budget;
    job_binding *bindings; /* n_bindings, owned */
    size_t n_bindings;
} job_spec;

/* Parses body (a JSON object) into s. DP_OK, or DP_EINVAL naming the field (s cleared). */
int job_spec_parse(const json_t *body, job_spec *s, dp_err *err);
void job_spec_clear(job_spec *s);

const char *job_on_budget_name(job_on_budget b);

#endif
