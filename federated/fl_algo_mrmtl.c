/*
 * federated/fl_algo_mrmtl.c: mean-regularised multi-task learning (Liu, Hu, Wu & Smith, "On
 * Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS 2022, Alg. A1).
 *
 * Silo k continues its own model w_k with DP-SGD on F_k(w) + lambda/2 ||w - wbar||^2, the anchor
 * wbar being the start-of-round global model, fixed for the round. The proximal gradient
 * lambda (w - wbar) is added after clipping and noise (their §5 update; it is data-independent, so
 * it costs no privacy). The silo uploads Delta_k = w_k(t) - w_k(t-1) and the server sets
 * wbar += sum_k p_k Delta_k (= sum_k p_k w_k when every silo trains, since all models start from
 * the same initialisation). lambda = 0 is local training bit for bit (the same seeds and steps);
 * for a large lambda keep lr * lambda < 1 or the proximal step overshoots (their §7 remark).
 */
#include "federated/fl_algo_impl.h"

#include <string.h>

static int mrmtl_update(const fl_silo_ctx *c, double *train_loss, dp_err *err)
{
    memcpy(c->scratch, c->personal, c->n_params * sizeof(float));
    int rc =
        fl_silo_sgd(c, c->personal, FL_SEED_PHASE_MAIN, c->cfg->lambda, c->global, train_loss, err);
    if (rc != DP_OK)
        return rc;
    fl_vec_sub(c->upload, c->personal, c->scratch, c->n_params);
    return DP_OK;
}

const fl_algo_ops fl_algo_mrmtl_ops = {
    .name = "mrmtl",
    .steps_factor = 1,
    .has_global = true,
    .record_level = true,
    .check = NULL,
    .select = NULL,
    .silo_update = mrmtl_update,
    .aggregate = fl_agg_weighted_mean,
};
