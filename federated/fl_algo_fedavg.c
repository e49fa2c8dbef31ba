/*
 * federated/fl_algo_fedavg.c: FedAvg (McMahan, Moore, Ramage, Hampson & Agüera y Arcas,
 * "Communication-Efficient Learning of Deep Networks from Decentralized Data", AISTATS 2017,
 * Alg. 1, with every silo in every round) and FedAvg followed by local fine-tuning (Liu et al.,
 * "On Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS 2022, App. C.3).
 *
 * fedavg: silo k starts from the global model wbar, runs its DP-SGD block and uploads
 * Delta_k = w - wbar; the server sets wbar += sum_k p_k Delta_k over the silos that trained. Every
 * silo's personal model is the global one (a broadcast, free post-processing).
 *
 * finetune: round t is a fedavg round while t < finetune_frac * T (the comparison of Liu et al.'s
 * code: a switch at round index >= frac * T), then each silo trains its personal model (the last
 * global model it received) locally; the global model stays where the fedavg phase left it and is
 * still evaluated. The steps per round do not change, nor the privacy cost.
 */
#include "federated/fl_algo_impl.h"

#include <string.h>

static int fedavg_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    memcpy(c->scratch, c->global, c->n_params * sizeof(float));
    int rc = fl_silo_sgd(c, c->scratch, FL_SEED_PHASE_MAIN, 0.0, NULL, train_loss, err);
    if (rc != DP_OK)
        return rc;
    fl_vec_sub(c->upload, c->scratch, c->global, c->n_params);
    return DP_OK;
}

static int fedavg_aggregate(const fl_server_ctx *c, dp_err *err)
{
    int rc = fl_agg_weighted_mean(c, err);
    if (rc == DP_OK)
        fl_broadcast_global(c->state);
    return rc;
}

const fl_algo_ops fl_algo_fedavg_ops = {
    .name = "fedavg",
    .steps_factor = 1,
    .has_global = true,
    .record_level = true,
    .check = NULL,
    .select = NULL,
    .silo_update = fedavg_update,
    .aggregate = fedavg_aggregate,
};

/* Round t is a fedavg round while t < frac * T (exact in double for T <= FL_MAX_ROUNDS). */
static bool finetune_is_fedavg(const fl_job_cfg *cfg, uint64_t round)
{
    return (double)round < cfg->finetune_frac * (double)cfg->rounds;
}

static int finetune_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    if (finetune_is_fedavg(c->cfg, c->round))
        return fedavg_update(c, train_loss, err);
    return fl_silo_sgd(c, c->personal, FL_SEED_PHASE_MAIN, 0.0, NULL, train_loss, err);
}

static int finetune_aggregate(const fl_server_ctx *c, dp_err *err)
{
    if (finetune_is_fedavg(c->cfg, c->round))
        return fedavg_aggregate(c, err);
    return DP_OK;
}

const fl_algo_ops fl_algo_finetune_ops = {
    .name = "finetune",
    .steps_factor = 1,
    .has_global = true,
    .record_level = true,
    .check = NULL,
    .select = NULL,
    .silo_update = finetune_update,
    .aggregate = finetune_aggregate,
};
