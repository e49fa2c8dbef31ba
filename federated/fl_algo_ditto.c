/*
 * federated/fl_algo_ditto.c: Ditto (Li, Hu, Beirami & Smith, "Ditto: Fair and Robust Federated
 * Learning Through Personalization", ICML 2021, Alg. 1), with FedAvg as the global solver and
 * one block of local epochs for each of the two objectives per round, as Liu et al. ("On Privacy
 * and Personalization in Cross-Silo Federated Learning", NeurIPS 2022, App. C) run it.
 *
 * Round t at silo k: (1) global block: w = wbar, local_epochs epochs of DP-SGD on F_k, upload
 * Delta_k = w - wbar; (2) personal block: v_k continues with DP-SGD on F_k(v) + lambda/2
 * ||v - wbar||^2, anchored at the start-of-round wbar (proximal term after clipping and noise).
 * Each block draws its own seeds (FL_SEED_PHASE_MAIN, FL_SEED_PHASE_PERSONAL). The server sets
 * wbar += sum_k p_k Delta_k. Both blocks touch the data: 2x the steps (steps_factor 2) of fedavg,
 * so about sqrt(2) more noise at the same epsilon.
 */
#include "federated/fl_algo_impl.h"

#include <string.h>

int fl_silo_ditto(const fl_silo_ctx *c, double lambda, double *train_loss, dp_err *err)
{
    double l_global = 0, l_personal = 0;
    memcpy(c->scratch, c->global, c->n_params * sizeof(float));
    int rc = fl_silo_sgd(c, c->scratch, FL_SEED_PHASE_MAIN, 0.0, NULL, &l_global, err);
    if (rc != DP_OK)
        return rc;
    fl_vec_sub(c->upload, c->scratch, c->global, c->n_params);
    rc = fl_silo_sgd(c, c->personal, FL_SEED_PHASE_PERSONAL, lambda, c->global, &l_personal, err);
    if (rc != DP_OK)
        return rc;
    /* The personal block's loss: the personal model is what this silo keeps. */
    *train_loss = l_personal;
    return DP_OK;
}

static int ditto_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    return fl_silo_ditto(c, c->cfg->lambda, train_loss, err);
}

const fl_algo_ops fl_algo_ditto_ops = {
    .name = "ditto",
    .steps_factor = 2,
    .has_global = true,
    .record_level = true,
    .check = NULL,
    .select = NULL,
    .silo_update = ditto_update,
    .aggregate = fl_agg_weighted_mean,
};
