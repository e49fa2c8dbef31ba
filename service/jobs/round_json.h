/*
 * jobs/round_json: one round's metrics as the JSON text that GET /v1/jobs/{id}/metrics serves
 * (docs/TRAINING.md "Metrics"):
 *
 *   {"round": r, "wall_ms": ms,
 *    "global": {"test_mse" | "test_accuracy", "test_loss", "train_loss", "mean_test_*",
 *               "worst_test_*", "spread_test_*"} or null (local),
 *    "personalized": {... the same ...},
 *    "silos": [{"silo", "silo_id", "epsilon", "job_epsilon", "stopped", "trained",
 * "rounds_trained", "rounds_charged", "n_train", "n_test", "test_mse" | "test_accuracy",
 * "test_loss", "train_loss", "sgd_loss", "global": {"test_mse" | "test_accuracy", "test_loss",
 * "train_loss"} or null}]}
 *
 * A silo's top-level figures are its personalised model's (for fedavg, the global model it
 * received). "epsilon" is the silo's spent epsilon as the ledger states it for a bound silo (its
 * cumulative figure after its last charge, which includes what it spent before this job; before
 * its first charge in the job, its spent at the job's start), and for an unbound silo what this
 * job has spent, as the accountant computes it from the job's events. "job_epsilon" is always the
 * latter: the accountant's epsilon of this job's rounds for that silo, over its "rounds_charged"
 * (the rounds it trained in for record-level algorithms; for dp_fedavg, ppsgd and fedhdp every
 * round it was trainable in and its event was released, since the silo sampling is part of each
 * round's event). Both are null for a non-private job. Non-finite figures are null. fedhdp adds
 * each silo's privacy "group" (its name) and a top-level "groups": [{"name", "private",
 * "epsilon"}], the group's epsilon the largest job_epsilon of its silos (null for a group that
 * opted out or releases nothing), and "clip": the update clip S^t the round used (privacy.clip,
 * or the adaptive clip's current value). adaped and dp_adaped add "psi": the server's psi after
 * the round (Ozkara, Acharya et al., Alg. 2: the mean of the sampled silos' psi_i).
 * gaussian_prior adds "sigma_theta2" and "sigma_x2", the prior's variances after the round (Alg. 4
 * and 5); adamix adds "mixture": {"weights", "variances"}, the fitted components (Alg. 1).
 */
#ifndef DP_SERVICE_JOBS_ROUND_JSON_H
#define DP_SERVICE_JOBS_ROUND_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "federated/fl_algo.h"
#include "service/jobs/prepare.h"

/* The text (malloc'd; free()), or NULL when out of memory. stopped, trained, charged, eps,
 * ledger_eps: one entry per silo; ledger_eps[k] NAN when silo k was not charged this round. clip:
 * fedhdp's S^t (ignored for the other algorithms). st: the state after the round (borrowed), read
 * for adaped's psi^{t+1} and the prior of gaussian_prior and adamix. */
char *job_round_json(const job_prepared *p, const fl_round_metrics *m, const bool *stopped,
                     const uint64_t *trained, const uint64_t *charged, const double *eps,
                     const double *ledger_eps, double clip, const fl_state *st, double wall_ms);

#endif
