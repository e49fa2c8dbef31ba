/*
 * jobs/prepare: from an accepted spec to everything a training job needs before its first round:
 * the data (an upload read back and parsed again, Fashion-MNIST, or a generator), the partition
 * into silos and their train/test split, the engine's configuration, each silo's privacy plan
 * (noise multiplier calibrated with the accountant its ledger silo uses) and the binding of the
 * data set's silos to ledger silos.
 *
 * The same spec and seed always prepare the same federation and plan (every step is seeded), so
 * the submission (which plans to check budgets and answer) and the worker (which plans again to
 * train, also after a restart) agree exactly.
 *
 * Errors: DP_EINVAL naming the spec's field (the data do not suit the model, an unknown silo name
 * in "silos", a partition the data cannot have), DP_ENOTFOUND ("dataset"; "silos.<name>" for a
 * ledger silo that does not exist), DP_ENUMERIC (no noise meets the target), DP_ENOMEM, DP_EBUSY,
 * DP_EINTERNAL.
 * Thread-safety: job_prepare runs on one thread with its own connection; the result is owned by it.
 */
#ifndef DP_SERVICE_JOBS_PREPARE_H
#define DP_SERVICE_JOBS_PREPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/event.h"
#include "common/dp_err.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "service/codec/job_spec.h"
#include "service/db/datasets.h"
#include "service/db/store.h"

struct ledger;

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define JOB_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct job_silo_plan {
    fl_silo_plan plan;
    acct_event *round_event;  /* one round's event (owned), NULL when not private */
    acct_event *select_event; /* ifca: the event of a round t < plan.select_rounds, the round's
                                 composed with the cluster selection's (owned); NULL = none */
    int64_t ledger_silo;      /* the bound ledger silo, 0 = none */
    double delta;             /* the delta its epsilon is reported at */
    fl_accountant acct;       /* the accountant its epsilon is computed with */
    double planned_eps;       /* epsilon of all its rounds (DP_NAN when not private) */
} job_silo_plan;

typedef struct job_prepared {
    job_spec spec;        /* owned copy semantics: parsed by the caller, moved in */
    fl_federation fed;    /* the silos' train/test rows */
    fl_job_cfg cfg;       /* the engine's configuration (borrows algorithm and z below) */
    double *z;            /* per silo noise multiplier (record level), owned */
    uint32_t *silo_group; /* fedhdp: silo k's privacy group (spec.hdp_groups), owned; else NULL */
    job_silo_plan *silo;  /* fed.n_silos, owned */
    int64_t dataset_id;   /* the upload used, 0 = none */
} job_prepared;

/* Prepares spec (moved into out: the caller must not clear it afterwards) with connection c (to
 * read an upload and the ledger silos; who: the submitter's view of the upload, NULL = any).
 * l may be NULL only for a job without bindings. */
int job_prepare(job_spec *spec, store_conn *c, struct ledger *l, const dataset_viewer *who,
                job_prepared *out, const char *req_id, dp_err *err);

void job_prepared_free(job_prepared *p);

/* The engine's configuration of spec s (model as in s: the caller fills d_in and n_classes), with
 * z the per-silo noise multipliers (borrowed; NULL for a non-private job). s->algorithm is
 * borrowed. */
void job_cfg_fill(const job_spec *s, const double *z, fl_job_cfg *c);

/* The plan as JSON text (dp_malloc'd): {"silos": [{"name", "silo_id", "n_train", "n_test",
 * "batch", "q", "steps_per_round", "steps", "noise_multiplier", "sigma", "delta", "epsilon",
 * "round_event"}], ...}; fedhdp adds each silo's "group" and "groups": [{"name", "private", "r",
 * "lambda", "noise_multiplier", "target_epsilon", "silos", "epsilon"}]; adaped and dp_adaped add
 * "adaped": {"tau", "psi_init", "psi_floor", "lr_mu", "lr_psi", "kd_psi"}, dp_adaped also
 * "clip_psi", "step_noise_multiplier", "sigma_mu", "sigma_psi" and "paper_bound": {"rho",
 * "epsilon", "delta"} (Thm. 5's closed form, never charged); ifca adds each private silo's
 * "select_rounds", "select_epsilon" and "select_event" (the event charged in place of round_event
 * in the rounds t < select_rounds) and "ifca": {"clusters", "select_rounds", "warm_rounds",
 * "selection_epsilon" (null: the exact argmin), "loss_bound", "lambda"}. NULL when out of memory.
 */
char *job_plan_json(const job_prepared *p);

#endif
