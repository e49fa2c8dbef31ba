/*
 * federated/fl_algo_dpfedavg.c: client-level DP-FedAvg (McMahan, Ramage, Talwar & Zhang,
 * "Learning Differentially Private Recurrent Language Models", ICLR 2018, Alg. 1).
 *
 * Round t: the server samples each trainable silo independently with probability client_rate = q
 * (Poisson sampling; one uniform draw per silo in silo order from the server's round seed, drawn
 * for stopped silos too so that a stop never shifts the others' draws). A sampled silo starts from
 * the global model, runs its local SGD (record-level noise must be 0 here) and uploads its model
 * delta clipped to L2 norm update_clip = S (the paper's per-model flat clipping). The server adds
 * N(0, (z S)^2 I) to the SUM of the clipped deltas and divides by the fixed denominator q K, K the
 * silos still trainable this round: the paper's unweighted estimator f~_f (§2, with every weight
 * w_k = 1 and W = K), whose sensitivity to adding or removing one silo is S / (q K). The noise is
 * added even when no silo is sampled. Then wbar += server_lr * that average and every silo
 * receives wbar. The round is one Poisson-subsampled Gaussian release of the silos with noise
 * multiplier z: the privacy unit is a whole silo (all of its records), not one record.
 * Aggregation weights by n_k are not used (cfg->weighted is ignored): with them the sensitivity
 * would depend on the silos' sizes.
 */
#include "federated/fl_algo_impl.h"

#include <math.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"

static int dpfedavg_check(const fl_job_cfg *cfg, dp_err *err)
{
    int rc = fl_check_client_level(cfg, err);
    if (rc == DP_OK && !(isfinite(cfg->server_lr) && cfg->server_lr > 0))
        rc = dp_err_set(err, DP_EINVAL, "server_lr", "server_lr must be finite and > 0 (got %g)",
                        cfg->server_lr);
    return rc;
}

static int dpfedavg_aggregate(const fl_server_ctx *c, dp_err *err)
{
    const fl_job_cfg *cfg = c->cfg;
    if (c->n_trainable == 0)
        return DP_OK; /* nobody left to protect or to learn from */
    int rc = fl_agg_noisy_sum(c, cfg->server_lr / (cfg->client_rate * (double)c->n_trainable), err);
    if (rc == DP_OK)
        fl_broadcast_global(c->state);
    return rc;
}

const fl_algo_ops fl_algo_dpfedavg_ops = {
    .name = "dp_fedavg",
    .steps_factor = 1,
    .has_global = true,
    .record_level = false,
    .check = dpfedavg_check,
    .select = fl_select_poisson,
    .silo_update = fl_silo_clipped_delta,
    .aggregate = dpfedavg_aggregate,
};
