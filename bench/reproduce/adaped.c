/*
 * adaped.c: the "adaped" part of build/bench/reproduce (`make reproduce PART=adaped`): reproduction
 * target RT10 for AdaPeD (Ozkara, Acharya et al., "A Statistical Framework for Personalized
 * Federated Learning and Estimation: Theory, Algorithms, and Privacy", Alg. 2 and §3.3; the paper
 * reports these trends on CNNs, its Table 1 and §4's remarks on psi, without numbers we could
 * match), run through the library's adaped and dp_adaped (federated/fl_algo_adaped.c).
 *
 * Setting (the unit test rt10_adaped_beats_fedavg_and_psi_follows_the_noise, docs/REPRODUCTION.md
 * "AdaPeD"): fl_synth_generate with 10 silos of 10-30 rows (half held out), 10 features, 4 classes,
 * heterogeneity tau 1, label noise 0.2; softmax; full-batch steps, lr 0.3, 10 local steps a round
 * for every algorithm; AdaPeD's App. K.1 defaults (psi^0 3.5, floor 0.5, lr_psi 0.05), lr_mu 0.3;
 * dp_adaped with C_1 = 0.5, C_2 = 1 and round multipliers z in {0.5, 1, 2}.
 * Prints, per seed (101, 202, 303), the pooled test accuracy after 30 rounds of AdaPeD (personal
 * models), FedAvg (global model) and local training, then psi every 5 rounds over 60 rounds without
 * DP and at each z. Under a second.
 */
#include <stdio.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"

int part_adaped(int threads);

static int make_fed(fl_federation *f, uint64_t seed, dp_err *err)
{
    fl_synth_spec sp = fl_adaped_rt10_spec(seed);
    fl_dataset ds = {0};
    int rc = fl_synth_generate(&sp, &ds, err);
    uint32_t *assign = rc == DP_OK ? dp_calloc(ds.n, sizeof(uint32_t)) : NULL;
    if (rc == DP_OK && assign == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    size_t k_n = 0;
    fl_partition_spec ps = {.kind = FL_PARTITION_NATURAL, .seed = seed + 1};
    if (rc == DP_OK)
        rc = fl_partition(&ds, &ps, assign, &k_n, err);
    if (rc == DP_OK)
        rc = fl_federate(&ds, assign, k_n, 0.5, seed + 2, true, f, err);
    dp_free(assign);
    fl_dataset_free(&ds);
    return rc;
}

/* Runs algo for `rounds` rounds; *acc: the pooled test accuracy (personal models; global for
 * fedavg); psi_every > 0 prints psi every psi_every rounds. */
static int run(const char *algo, const fl_federation *f, uint64_t rounds, double z, int threads,
               int psi_every, double *acc, dp_err *err)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = algo;
    c.model.type = FL_MODEL_SOFTMAX;
    c.model.d_in = f->d;
    c.model.n_classes = 4;
    c.rounds = rounds;
    c.batch_size = 100000;
    c.local_epochs = 10;
    c.lr = 0.3;
    c.seed = 5;
    c.ap_tau = 10;
    c.ap_lr_mu = 0.3;
    c.update_clip = 0.5;
    c.server_noise = z;
    fl_state s;
    int rc = fl_state_init(&c, f, &s, err);
    if (rc != DP_OK)
        return rc;
    fl_round_metrics m = {0};
    while (rc == DP_OK && s.round < c.rounds) {
        rc = fl_round_run(&c, f, &s, NULL, threads, &m, err);
        if (rc == DP_OK && psi_every > 0 && s.round % (uint64_t)psi_every == 0)
            printf(" %.2f", fl_adaped_psi(&c, &s));
    }
    if (rc == DP_OK)
        *acc = strcmp(algo, "fedavg") == 0 ? m.global.pooled_test_metric
                                           : m.personal.pooled_test_metric;
    fl_round_metrics_free(&m);
    fl_state_free(&s);
    return rc;
}

int part_adaped(int threads)
{
    dp_err err = {0};
    int rc = DP_OK;
    printf("== adaped: RT10 (pooled test accuracy after 30 rounds; psi every 5 rounds of 60)\n");
    for (uint64_t seed = 101; rc == DP_OK && seed <= 303; seed += 101) {
        fl_federation f;
        rc = make_fed(&f, seed, &err);
        if (rc != DP_OK)
            break;
        double a = 0, fa = 0, lo = 0, unused;
        rc = run("adaped", &f, 30, 0, threads, 0, &a, &err);
        if (rc == DP_OK)
            rc = run("fedavg", &f, 30, 0, threads, 0, &fa, &err);
        if (rc == DP_OK)
            rc = run("local", &f, 30, 0, threads, 0, &lo, &err);
        if (rc == DP_OK)
            printf("seed %llu: adaped %.3f  fedavg %.3f  local %.3f\n", (unsigned long long)seed, a,
                   fa, lo);
        const double zs[4] = {0, 0.5, 1, 2};
        for (size_t i = 0; rc == DP_OK && i < 4; i++) {
            printf("  psi, %s z = %.1f:", zs[i] > 0 ? "dp_adaped" : "adaped", zs[i]);
            rc = run(zs[i] > 0 ? "dp_adaped" : "adaped", &f, 60, zs[i], threads, 5, &unused, &err);
            printf("\n");
        }
        fl_federation_free(&f);
    }
    if (rc != DP_OK)
        fprintf(stderr, "adaped: %s\n", err.msg);
    return rc;
}
