/*
 * federated/fl_algo_local.c: local training. Each silo runs its DP-SGD on its own model and never
 * communicates (Liu et al., "On Privacy and Personalization in Cross-Silo Federated Learning",
 * NeurIPS 2022, §2 "local training"). Same steps per round as fedavg and mrmtl, hence the same
 * privacy cost (ibid., §3). The global model stays at its initial value and is not evaluated.
 */
#include "federated/fl_algo_impl.h"

static int local_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    return fl_silo_sgd(c, c->personal, FL_SEED_PHASE_MAIN, 0.0, NULL, train_loss, err);
}

static int local_aggregate(const fl_server_ctx *c, dp_err *err)
{
    (void)c;
    (void)err;
    return DP_OK;
}

const fl_algo_ops fl_algo_local_ops = {
    .name = "local",
    .steps_factor = 1,
    .has_global = false,
    .record_level = true,
    .check = NULL,
    .select = NULL,
    .silo_update = local_update,
    .aggregate = local_aggregate,
};
