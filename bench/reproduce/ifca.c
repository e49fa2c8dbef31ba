/*
 * ifca.c: the "ifca" part of build/bench/reproduce (`make reproduce PART=ifca`): trend (vii) of
 * Liu, Hu, Wu & Smith, "On Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS
 * 2022 (§5.3, Figs. 3 and 4, App. A and C.3): IFCA selecting its cluster privately in every round,
 * at 0.03 epsilon per selection, is infeasible or collapses; selecting in the first 10% of the
 * rounds only ("IFCA (10%)") is usable. Run through the library's ifca (federated/fl_algo_ifca.c).
 *
 * Part 1, accounting (the paper's Vehicle silo): n = 872, B = 64 (q = 0.0734, 13 steps a round),
 * 401 rounds (their T + 1), delta = 1e-7, epsilon 0.5 and 1: the calibrated DP-SGD noise
 * multiplier with no selection, with 40 selection rounds and with 401, beside the values computed
 * from the authors' accountant (TF-Privacy's order grid and their step counting).
 * Part 2, utility: the Vehicle-like synthetic linear SVM of the "synth" part (fl_synth_generate,
 * K = 20, d = 50, n_k in [400, 1000], label noise 0.5, tau 0.1, 80/20 split standardised per silo;
 * T = 100, B = 64, c = 1, lr 0.01, delta 1e-5; 3 seeds), 4 clusters as the authors' Vehicle runs:
 * final-round pooled test accuracy of FedAvg, IFCA (10%: selection in rounds 0-9), IFCA (every
 * round) and the IFCA-warm-started MR-MTL (IFCA for 5 rounds, then MR-MTL, lambda 0.1), every
 * silo's noise calibrated to the target with the selections included; "infeasible" when no noise
 * meets it. A minute or two on one core.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"
#include "common/dp_math.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"

int part_ifca(int threads);

#define IF_K      20
#define IF_D      50
#define IF_NMIN   400
#define IF_NMAX   1000
#define IF_NOISE  0.5
#define IF_TAU    0.1
#define IF_ROUNDS 100
#define IF_B      64
#define IF_CLIP   1.0
#define IF_LR     0.01
#define IF_DELTA  1e-5
#define IF_SEEDS  3
#define IF_G      4
#define IF_RATIO  0.03 /* selection epsilon per selection round / the target (the authors' code) */

/* Part 1: the calibration of the paper's Vehicle silo (n = 872, 401 rounds, delta 1e-7). */
static int accounting(void)
{
    static const struct {
        double eps;
        uint64_t sel;
        const char *theirs; /* the authors' accountant's figure (selections alone: their epsilon) */
    } rows[] = {{0.5, 0, "50.90"},
                {0.5, 40, "57.16 (selections alone: eps 0.225)"},
                {0.5, 401, "infeasible (selections alone: eps 0.735)"},
                {1.0, 0, "26.41"},
                {1.0, 40, "- (selections alone: eps 0.453)"},
                {1.0, 401, "infeasible (selections alone: eps 1.533)"}};
    printf("\n== IFCA selection overhead, the paper's Vehicle silo: n=872 B=64 (13 steps a round), "
           "401 rounds, delta=1e-7, selection epsilon 0.03 x target per selection\n");
    printf("target  selections  z (ours)   z (authors' accountant)\n");
    fl_accountant acct = {.delta = 1e-7, .conv = ACCT_CONV_OPTIMAL};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fl_job_cfg c;
        fl_job_cfg_default(&c);
        c.algorithm = "ifca";
        c.model.type = FL_MODEL_SVM;
        c.model.d_in = 100;
        c.rounds = 401;
        c.batch_size = 64;
        c.lr = 0.01;
        c.clip = 6;
        c.ifca_clusters = rows[i].sel > 0 ? 4 : 1;
        c.ifca_select_rounds = rows[i].sel > 0 ? rows[i].sel : 1;
        c.ifca_select_eps = IF_RATIO * rows[i].eps;
        double z = DP_NAN, e = DP_NAN;
        dp_err err;
        dp_err_clear(&err);
        int rc = fl_calibrate_noise(&c, 872, rows[i].eps, &acct, &z, &e, &err);
        if (rc != DP_OK && rc != DP_ENUMERIC) {
            fprintf(stderr, "reproduce: ifca accounting: %s\n", err.msg);
            return rc;
        }
        char ours[32];
        if (rc == DP_OK)
            snprintf(ours, sizeof ours, "%.2f", z);
        else
            snprintf(ours, sizeof ours, "infeasible");
        printf("%-7g %-11llu %-10s %s\n", rows[i].eps, (unsigned long long)rows[i].sel, ours,
               rows[i].theirs);
    }
    return DP_OK;
}

static int make_fed(uint64_t seed, fl_federation *f, dp_err *err)
{
    fl_synth_spec sp = {.silos = IF_K,
                        .dim = IF_D,
                        .n_min = IF_NMIN,
                        .n_max = IF_NMAX,
                        .tau = IF_TAU,
                        .noise = IF_NOISE,
                        .classes = 2,
                        .seed = seed};
    fl_dataset ds = {0};
    size_t k = 0;
    int rc = fl_synth_generate(&sp, &ds, err);
    uint32_t *assign = rc == DP_OK ? dp_calloc(ds.n, sizeof *assign) : NULL;
    if (rc == DP_OK && assign == NULL)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    fl_partition_spec p = {.kind = FL_PARTITION_NATURAL};
    if (rc == DP_OK)
        rc = fl_partition(&ds, &p, assign, &k, err);
    if (rc == DP_OK)
        rc = fl_federate(&ds, assign, k, 0.2, seed, true, f, err);
    dp_free(assign);
    fl_dataset_free(&ds);
    return rc;
}

typedef struct method {
    const char *name;
    size_t clusters;
    uint64_t select_rounds; /* 0: every IFCA round */
    uint64_t warm_rounds;   /* 0: IFCA throughout */
    double lambda;
} method;

static const method METHODS[] = {
    {"FedAvg (ifca, 1 cluster)", 1, 1, 0, 0.0},
    {"IFCA (10%)", IF_G, IF_ROUNDS / 10, 0, 0.0},
    {"IFCA (every round)", IF_G, 0, 0, 0.0},
    {"IFCA (5%) + MR-MTL 0.1", IF_G, 0, IF_ROUNDS / 20, 0.1},
};
#define N_METHODS (sizeof METHODS / sizeof METHODS[0])

static void cfg_of(const method *m, double eps, uint64_t seed, const double *z, fl_job_cfg *c)
{
    fl_job_cfg_default(c);
    c->algorithm = "ifca";
    c->model.type = FL_MODEL_SVM;
    c->model.d_in = IF_D;
    c->rounds = IF_ROUNDS;
    c->batch_size = IF_B;
    c->lr = IF_LR;
    c->seed = seed;
    c->lambda = m->lambda;
    c->ifca_clusters = m->clusters;
    c->ifca_warm_rounds = m->warm_rounds > 0 ? m->warm_rounds : IF_ROUNDS;
    c->ifca_select_rounds = m->select_rounds > 0 ? m->select_rounds : IF_ROUNDS;
    if (eps > 0) {
        c->clip = IF_CLIP;
        c->noise_multiplier = z;
        c->ifca_select_eps = IF_RATIO * eps;
    }
}

/* Final-round pooled test accuracy of the silos' models; *feasible false when no noise meets eps
 * (nothing is run). */
static int run_one(const method *m, double eps, uint64_t seed, const fl_federation *f, int threads,
                   double *acc, bool *feasible, dp_err *err)
{
    double z[IF_K] = {0};
    fl_job_cfg c;
    cfg_of(m, eps, seed, z, &c);
    *feasible = true;
    if (eps > 0) {
        fl_accountant acct = {.delta = IF_DELTA, .conv = ACCT_CONV_OPTIMAL};
        const fl_accountant *ap[IF_K];
        size_t n[IF_K];
        double e[IF_K];
        for (size_t k = 0; k < f->n_silos; k++) {
            ap[k] = &acct;
            n[k] = f->silo[k].n_train;
        }
        int rc = fl_calibrate_noise_many(&c, f->n_silos, n, eps, ap, z, e, err);
        if (rc == DP_ENUMERIC) {
            *feasible = false;
            dp_err_clear(err);
            return DP_OK;
        }
        if (rc != DP_OK)
            return rc;
    }
    fl_state st = {0};
    fl_round_metrics mm = {0};
    int rc = fl_state_init(&c, f, &st, err);
    while (rc == DP_OK && st.round < c.rounds)
        rc = fl_round_run(&c, f, &st, NULL, threads, st.round + 1 == c.rounds ? &mm : NULL, err);
    if (rc == DP_OK)
        *acc = mm.personal.pooled_test_metric;
    fl_round_metrics_free(&mm);
    fl_state_free(&st);
    return rc;
}

int part_ifca(int threads)
{
    int rc = accounting();
    if (rc != DP_OK)
        return rc;
    static const double epss[] = {-1, 4, 1, 0.5};
    printf("\n== IFCA on the Vehicle-like synthetic SVM: K=%d d=%d n_k in [%d, %d] (80/20 split), "
           "label noise %g, tau %g, T=%d B=%d c=%g lr=%g delta=%g, %d clusters, selection epsilon "
           "%g x target per selection, %d seeds; pooled test accuracy (mean over seeds)\n",
           IF_K, IF_D, IF_NMIN, IF_NMAX, IF_NOISE, IF_TAU, IF_ROUNDS, IF_B, IF_CLIP, IF_LR,
           IF_DELTA, IF_G, IF_RATIO, IF_SEEDS);
    printf("%-8s", "epsilon");
    for (size_t m = 0; m < N_METHODS; m++)
        printf(" | %-24s", METHODS[m].name);
    printf("\n");
    for (size_t i = 0; i < sizeof epss / sizeof epss[0]; i++) {
        double sum[N_METHODS] = {0};
        bool feasible[N_METHODS];
        for (size_t m = 0; m < N_METHODS; m++)
            feasible[m] = true;
        for (int s = 0; s < IF_SEEDS; s++) {
            fl_federation f = {0};
            dp_err err;
            dp_err_clear(&err);
            rc = make_fed((uint64_t)s + 1, &f, &err);
            for (size_t m = 0; rc == DP_OK && m < N_METHODS; m++) {
                double acc = DP_NAN;
                bool ok = true;
                rc = run_one(&METHODS[m], epss[i], (uint64_t)s + 1, &f, threads, &acc, &ok, &err);
                feasible[m] = feasible[m] && ok;
                sum[m] += ok ? acc / IF_SEEDS : 0.0;
            }
            fl_federation_free(&f);
            if (rc != DP_OK) {
                fprintf(stderr, "reproduce: ifca: %s (%s)\n", err.msg, err.field);
                return rc;
            }
        }
        char e[16] = "inf";
        if (epss[i] > 0)
            snprintf(e, sizeof e, "%g", epss[i]);
        printf("%-8s", e);
        for (size_t m = 0; m < N_METHODS; m++) {
            if (feasible[m])
                printf(" | %-24.4f", sum[m]);
            else
                printf(" | %-24s", "infeasible");
        }
        printf("\n");
        fflush(stdout);
    }
    return DP_OK;
}
