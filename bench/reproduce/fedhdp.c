/*
 * fedhdp.c: the "fedhdp_r6" part of build/bench/reproduce (`make reproduce PART=fedhdp_r6`): a
 * small version of the neural-network experiments of Aldaghri, Mahdavifar & Beirami, "Federated
 * Learning with Heterogeneous Differential Privacy" (§4, Tables 2 and 8-9, Alg. 2 with Ditto),
 * through the library's fedhdp (federated/fl_algo_fedhdp.c).
 *
 * Setting (the paper's non-IID MNIST set-up at a tenth of its size, on Fashion-MNIST because MNIST
 * is not packaged): the 60,000 Fashion-MNIST training images (pixels in [0, 1], not standardised),
 * partitioned into K clients (200; REPRO_FEDHDP_CLIENTS, a multiple of 10 up to FH_K_MAX) holding
 * one class each (partition "classes", one class per silo: silo k holds the class at ring position
 * k mod 10) and FH_ROWS images each (rows_per_silo), 80/20 train/test per client; MLP 784-50-10
 * (the paper's Table 6 FC NN); q = 0.1 Poisson client sampling, T = 200 rounds
 * (REPRO_FEDHDP_ROUNDS), E = FH_EPOCHS local epochs, batch 20, eta = eta_p = FH_LR; adaptive
 * clipping S^0 = 0.5, eta_b = 0.2, kappa = 0.5 (Table 7), count noise sigma_b = FH_SIGMA_B; the
 * private group's multiplier z_g is set so that the combined multiplier (z_g^-2 +
 * sigma_b^-2)^(-1/2) is the "effective" z = 1.5 of the paper's MNIST runs; Ditto lambda = FH_LAMBDA
 * for both groups. K / 10 clients (10%) opted out:
 *   uniform: clients 0..K/10-1, so each class has K/100 opted-out clients (Table 2's set-up);
 *   skewed:  clients 0, 10, 20, ..., all holding the same class (Table 9's "all non-private clients
 *            hold the same digit").
 * Methods: Non-Private+Ditto (every client opted out, for reference), DP-FedAvg+Ditto (every client
 * private, one group), HDP-FedAvg+Ditto (r = 1), FedHDP with r in {0.1, 0.01, 0} (and the skewed
 * variant at r in {0, 0.01, 0.1, 1}); Acc_g,p and Acc_g,np of the one-group methods split the
 * clients as the uniform variant does. Reported per method, the
 * mean over the seeds (seed s re-partitions, re-splits and re-trains) after the last round:
 * Acc_g (the global model on every client's test rows, pooled), Acc_g,p and Acc_g,np (on the
 * private and the opted-out clients' rows), Delta_g = Acc_g,np - Acc_g,p, and Acc_l,p, Acc_l,np
 * (each client's personalised model on its own test rows, pooled over the group), as the paper's
 * tables. Also the accountant's epsilon for q = 0.1, z = 1.5, T = 200 at delta = 1e-4 (expected:
 * 4.84) and for this run's T. Environment: FMNIST_DIR, REPRO_FEDHDP_SEEDS (default 3),
 * REPRO_FEDHDP_ROUNDS (200), REPRO_FEDHDP_CLIENTS (200), REPRO_FEDHDP_VERBOSE (set: every run's
 * figures on stderr). About 50 s of CPU on one core (docs/REPRODUCTION.md, "R6").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_alloc.h"
#include "common/dp_err.h"
#include "common/dp_math.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "bench/reproduce/repro_util.h"

int part_fedhdp_r6(int threads, int seeds, int rounds, int clients);

#define FH_K_MAX   1000 /* clients: REPRO_FEDHDP_CLIENTS, default FH_K */
#define FH_K       200
#define FH_ROWS    30   /* images per client (24 train, 6 test) */
#define FH_EPOCHS  1    /* E */
#define FH_BATCH   20   /* B */
#define FH_LR      0.1  /* eta = eta_p */
#define FH_LAMBDA  0.05 /* Ditto's lambda, both groups (one of the paper's grid values) */
#define FH_Q       0.1  /* client rate */
#define FH_Z       1.5  /* the effective noise multiplier */
#define FH_SIGMA_B 10.0 /* the count's noise */
#define FH_CLIP0   0.5  /* S^0 */
#define FH_DELTA   1e-4

typedef struct method {
    const char *name;
    bool skewed; /* the opted-out clients all hold one class */
    bool dp_all; /* DP-FedAvg+Ditto: one private group of every client */
    double r;    /* the private group's weight ratio */
    bool np_all; /* Non-Private+Ditto: one opted-out group of every client */
} method;

static const method METHODS[] = {
    {"Non-Private+Ditto", false, true, 1.0, true},
    {"DP-FedAvg+Ditto", false, true, 1.0, false},
    {"HDP-FedAvg+Ditto (r=1)", false, false, 1.0, false},
    {"FedHDP r=0.1", false, false, 0.1, false},
    {"FedHDP r=0.01", false, false, 0.01, false},
    {"FedHDP r=0", false, false, 0.0, false},
    {"skewed HDP-FedAvg (r=1)", true, false, 1.0, false},
    {"skewed FedHDP r=0.1", true, false, 0.1, false},
    {"skewed FedHDP r=0.01", true, false, 0.01, false},
    {"skewed FedHDP r=0", true, false, 0.0, false},
};
#define N_METHODS (sizeof METHODS / sizeof METHODS[0])

enum { ACC_G, ACC_GP, ACC_GNP, DELTA_G, ACC_LP, ACC_LNP, N_COLS };

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The accountant's epsilon of a private client: poisson(q, gaussian(z)) for T rounds. */
static int epsilon_of(double q, double z, uint64_t T, double delta, double *eps, dp_err *err)
{
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "dp_fedavg";
    c.model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = 1};
    c.rounds = T;
    c.batch_size = 1;
    c.lr = 0.1;
    c.client_rate = q;
    c.update_clip = 1;
    c.server_noise = z;
    fl_silo_plan plan;
    acct_event *ev = NULL;
    int rc = fl_plan_silo(&c, 0, 10, &plan, &ev, err);
    fl_accountant acct = {.delta = delta, .conv = ACCT_CONV_OPTIMAL};
    if (rc == DP_OK)
        rc = fl_plan_epsilon(ev, T, &acct, eps, err);
    acct_event_free(ev);
    return rc;
}

static size_t g_k = FH_K, g_opt = FH_K / 10; /* clients, opted-out clients (10%) */

static int make_fed(const fl_dataset *ds, uint64_t seed, fl_federation *f, dp_err *err)
{
    uint32_t *assign = dp_calloc(ds->n, sizeof *assign);
    if (assign == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    fl_partition_spec p = {.kind = FL_PARTITION_CLASSES,
                           .silos = g_k,
                           .classes_per_silo = 1,
                           .seed = seed,
                           .rows_per_silo = FH_ROWS};
    size_t k = 0;
    int rc = fl_partition(ds, &p, assign, &k, err);
    if (rc == DP_OK) /* pixels stay in [0, 1]: one input scale for all clients */
        rc = fl_federate(ds, assign, k, 0.2, seed, false, f, err);
    dp_free(assign);
    return rc;
}

static bool opted_out(const method *m, size_t k)
{
    return m->skewed ? k % 10 == 0 && k / 10 < g_opt : k < g_opt;
}

/* One run; col receives the method's N_COLS figures. */
static int run_one(const method *m, const fl_federation *f, uint64_t seed, uint64_t rounds,
                   int threads, double *col, double *cpu, dp_err *err)
{
    double zg = 1.0 / sqrt(1.0 / (FH_Z * FH_Z) - 1.0 / (FH_SIGMA_B * FH_SIGMA_B));
    fl_hdp_group_cfg g[2] = {{.opt_out = true, .noise = 0, .r = 1, .lambda = FH_LAMBDA},
                             {.opt_out = false, .noise = zg, .r = m->r, .lambda = FH_LAMBDA}};
    uint32_t group[FH_K_MAX];
    for (size_t k = 0; k < g_k; k++)
        group[k] = m->dp_all || !opted_out(m, k) ? 1 : 0;
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "fedhdp";
    c.model = (fl_model_spec){.type = FL_MODEL_MLP, .d_in = f->d, .n_classes = 10, .n_hidden = 1};
    c.model.hidden[0] = 50;
    c.rounds = rounds;
    c.local_epochs = FH_EPOCHS;
    c.batch_size = FH_BATCH;
    c.lr = FH_LR;
    c.lambda = FH_LAMBDA;
    c.seed = seed;
    c.client_rate = FH_Q;
    c.update_clip = FH_CLIP0;
    c.server_lr = 1;
    c.hdp_n_groups = m->dp_all ? 1 : 2;
    c.hdp_groups = m->np_all ? &g[0] : m->dp_all ? &g[1] : g;
    c.hdp_silo_group = m->dp_all ? NULL : group;
    c.hdp_adaptive = true;
    c.hdp_clip_quantile = 0.5;
    c.hdp_clip_lr = 0.2;
    c.hdp_count_noise = FH_SIGMA_B;
    fl_state st = {0};
    fl_round_metrics mm = {0};
    double c0 = repro_cpu_s();
    int rc = fl_job_cfg_check(&c, f, err);
    if (rc == DP_OK)
        rc = fl_state_init(&c, f, &st, err);
    while (rc == DP_OK && st.round < c.rounds)
        rc = fl_round_run(&c, f, &st, NULL, threads, st.round + 1 == c.rounds ? &mm : NULL, err);
    *cpu = repro_cpu_s() - c0;
    if (rc == DP_OK) {
        double hit[2][2] = {{0}}, n[2] = {0}; /* [np=0 / p=1][global / personal] */
        for (size_t k = 0; k < f->n_silos; k++) {
            size_t p = m->dp_all ? !opted_out(m, k) : group[k];
            double nt = (double)mm.silo[k].n_test;
            hit[p][0] += nt * mm.silo[k].global.test_metric;
            hit[p][1] += nt * mm.silo[k].personal.test_metric;
            n[p] += nt;
        }
        col[ACC_G] = mm.global.pooled_test_metric;
        col[ACC_GP] = hit[1][0] / n[1];
        col[ACC_GNP] = hit[0][0] / n[0];
        col[DELTA_G] = col[ACC_GNP] - col[ACC_GP];
        col[ACC_LP] = hit[1][1] / n[1];
        col[ACC_LNP] = hit[0][1] / n[0];
    }
    fl_round_metrics_free(&mm);
    fl_state_free(&st);
    return rc;
}

int part_fedhdp_r6(int threads, int seeds, int rounds, int clients)
{
    if (clients < 10 || clients > FH_K_MAX || clients % 10 != 0)
        return DP_EINVAL;
    g_k = (size_t)clients;
    g_opt = g_k / 10;
    dp_err err;
    dp_err_clear(&err);
    double e200 = DP_NAN, eT = DP_NAN;
    int rc = epsilon_of(FH_Q, FH_Z, 200, FH_DELTA, &e200, &err);
    if (rc == DP_OK)
        rc = epsilon_of(FH_Q, FH_Z, (uint64_t)rounds, FH_DELTA, &eT, &err);
    if (rc != DP_OK) {
        fprintf(stderr, "reproduce: fedhdp_r6 accounting: %s\n", err.msg);
        return rc;
    }
    printf("\n== FedHDP R6: accountant, poisson(q=%g, gaussian(z=%g)), delta=%g: epsilon %.3f at "
           "T=200 (expected 4.84), %.3f at T=%d\n",
           FH_Q, FH_Z, FH_DELTA, e200, eT, rounds);
    const char *dir = getenv("FMNIST_DIR");
    if (dir == NULL || *dir == '\0')
        dir = "/usr/share/datasets/fashion-mnist";
    char img[512], lab[512];
    if (snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir) >= (int)sizeof img ||
        snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir) >= (int)sizeof lab)
        return DP_EINVAL;
    fl_dataset ds = {0};
    if ((rc = fl_idx_load(img, lab, 0, &ds, &err)) != DP_OK) {
        fprintf(stderr, "reproduce: fedhdp_r6: %s (make deps installs Fashion-MNIST)\n", err.msg);
        return rc;
    }
    printf("== FedHDP R6: Fashion-MNIST, %d clients x %d images (one class each, 80/20 split), "
           "%d opted out (10%%), MLP 784-50-10, q=%g T=%d E=%d B=%d eta=eta_p=%g lambda=%g, "
           "adaptive clip S0=%g eta_b=0.2 kappa=0.5 sigma_b=%g, effective z=%g; mean over %d "
           "seeds (accuracy, %%)\n",
           clients, FH_ROWS, clients / 10, FH_Q, rounds, FH_EPOCHS, FH_BATCH, FH_LR, FH_LAMBDA,
           FH_CLIP0, FH_SIGMA_B, FH_Z, seeds);
    printf("%-26s %7s %7s %7s %7s %7s %7s   per-seed Acc_g                CPU s/run\n", "method",
           "Acc_g", "Acc_g,p", "Acc_gnp", "Delta_g", "Acc_l,p", "Acc_lnp");
    fflush(stdout);
    double sum[N_METHODS][N_COLS] = {{0}}, per[N_METHODS][8] = {{0}}, cpu[N_METHODS] = {0};
    double w0 = wall_s();
    for (int s = 0; s < seeds && rc == DP_OK; s++) {
        fl_federation f = {0};
        rc = make_fed(&ds, (uint64_t)s + 1, &f, &err);
        for (size_t m = 0; rc == DP_OK && m < N_METHODS; m++) {
            double col[N_COLS] = {0}, c = 0;
            rc =
                run_one(&METHODS[m], &f, (uint64_t)s + 1, (uint64_t)rounds, threads, col, &c, &err);
            for (int j = 0; rc == DP_OK && j < N_COLS; j++)
                sum[m][j] += col[j] / seeds;
            if (s < 8)
                per[m][s] = col[ACC_G];
            cpu[m] += c / seeds;
            if (rc == DP_OK && getenv("REPRO_FEDHDP_VERBOSE") != NULL)
                fprintf(stderr,
                        "seed %d %-26s Acc_g %.4f Acc_g,p %.4f Acc_g,np %.4f Acc_l,p %.4f "
                        "Acc_l,np %.4f (%.1f s)\n",
                        s + 1, METHODS[m].name, col[ACC_G], col[ACC_GP], col[ACC_GNP], col[ACC_LP],
                        col[ACC_LNP], c);
        }
        fl_federation_free(&f);
    }
    fl_dataset_free(&ds);
    if (rc != DP_OK) {
        fprintf(stderr, "reproduce: fedhdp_r6: %s (%s)\n", err.msg, err.field);
        return rc;
    }
    for (size_t m = 0; m < N_METHODS; m++) {
        printf("%-26s", METHODS[m].name);
        for (int j = 0; j < N_COLS; j++)
            printf(" %7.2f", 100 * sum[m][j]);
        printf("   ");
        for (int s = 0; s < seeds && s < 8; s++)
            printf("%s%.2f", s ? " / " : "", 100 * per[m][s]);
        printf("   %.1f\n", cpu[m]);
    }
    printf("(whole part: %.0f s wall)\n", wall_s() - w0);
    return DP_OK;
}
