/*
 * jobs/round_json: one round's metrics as the JSON text that GET /v1/jobs/{id}/metrics serves
 * (docs/TRAINING.md "Metrics"):
 *
 *   {"round": r, "wall_ms": ms,
 *    "global": {"test_mse" | "test_accuracy", "test_loss", "train_loss", "mean_test_*",
 *               "worst_test_*", "spread_test_*"} or null (local),
 *    "personalized": {... the same ...},
 *    "silos": [{"silo", "silo_id", "epsilon", "stopped", "trained", "rounds_trained", "n_train",
 *               "n_test", "test_mse" | "test_accuracy", "test_loss", "train_loss", "sgd_loss",
 *               "global": {"test_mse" | "test_accuracy", "test_loss", "train_loss"} or null}]}
 *
 * A silo's top-level figures are its personalised model's (for fedavg, the global model it
 * received). "epsilon" is what the silo has spent in this job so far: the ledger's figure after
 * the round's charge for a bound silo, the accountant's for its recorded events otherwise; null
 * for a non-private job. Non-finite figures are null.
 */
#ifndef DP_SERVICE_JOBS_ROUND_JSON_H
#define DP_SERVICE_JOBS_ROUND_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "federated/fl_algo.h"
#include "service/jobs/prepare.h"

/* The text (dp_malloc'd; free()), or NULL when out of memory. stopped, trained, eps, ledger_eps:
 * one entry per silo; ledger_eps[k] NAN when silo k was not charged this round. */
char *job_round_json(const job_prepared *p, const fl_round_metrics *m, const bool *stopped,
                     const uint64_t *trained, const double *eps, const double *ledger_eps,
                     double wall_ms);

#endif
