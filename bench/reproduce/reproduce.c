/*
 * reproduce.c: reproduction of Liu, Hu, Wu & Smith, "On Privacy and Personalization in
 * Cross-Silo Federated Learning", NeurIPS 2022, with the federated/ library used directly
 * (build/bench/reproduce; `make reproduce` builds and runs it; docs/REPRODUCTION.md records the
 * figures and every decision).
 *
 * Parts (first argument; "all" runs the three):
 *   school   the School data set (139 schools) at epsilon = 6, delta = 1e-3, T = 200, B = 32,
 *            clip 1, lr 0.01, 5 seeds: final-round pooled test MSE of MR-MTL (lambda = 1), FedAvg
 *            and Local (the authors' repository README numbers, Fig. 3 key regime), the wall time
 *            of each whole run and of the calibration of all 139 silos' noise multipliers.
 *   synth    Vehicle-like synthetic linear SVM federations (fl_synth_generate), swept over tau and
 *            epsilon, for the qualitative trends (i)-(vi) of Secs. 5.3 and 6 (Figs. 2-5, A3).
 *   fmnist   a Fashion-MNIST MLP trained with record-level DP FedAvg over 10 IID silos.
 *   ppsgd    Bietti et al., ICML 2022, Fig. 1a: PPSGD on the synthetic personalised regression
 *            (ppsgd.c; not part of "all", several minutes).
 *   altmin   Jain et al., NeurIPS 2021, Fig. 2: APriv-AltMin on the synthetic low-rank regression
 *            (altmin.c; not part of "all"; REPRO_ALTMIN_USERS, REPRO_ALTMIN_SEEDS).
 *   altmin-alg1     the same paper's Alg. 1 as written: quarter splits, disjoint batches, Thm.
 *            4.2's sigma, T in {0, 1, 2, 5} (altmin_alg1.c; REPRO_ALTMIN_USERS, _SEEDS).
 *   altmin-scaling  its scaling checks in n (Thm. 4.2) and d (Lemma 4.6) (altmin_alg1.c;
 *            REPRO_ALTMIN_SEEDS).
 *   adaped   Ozkara, Acharya et al., AdaPeD's RT10 trends on synthetic softmax data (adaped.c;
 *            not part of "all", under a second).
 *   ifca     Liu et al.'s trend (vii): IFCA's private selection overhead, every round vs 10% of
 *            the rounds (ifca.c; not part of "all", a minute or two).
 *   adamix   Ozkara, Acharya et al., RT8 (App. K, Gaussian-prior linear regression) and RT7
 *            (Table 3, AdaMix) through gaussian_prior and adamix (adamix.c; not part of "all";
 *            REPRO_ADAMIX_SILOS, REPRO_ADAMIX_ROUNDS).
 *   fedhdp_r6  Aldaghri, Mahdavifar & Beirami's FedHDP on a small Fashion-MNIST MLP job: one
 *            class per client, 10% opted out, uniform and skewed (fedhdp.c; not part of "all";
 *            REPRO_FEDHDP_SEEDS, REPRO_FEDHDP_ROUNDS).
 *
 * Environment: DPSILO_SCHOOL_CSV (the School CSV; default ../shared/data/school/school.csv,
 * relative to the working directory, which `make reproduce` sets to the repository root; the second
 * argument overrides both), REPRO_THREADS (fl_round_run's threads, default 1), REPRO_SEEDS (School
 * seeds, default 5), FMNIST_DIR (default /usr/share/datasets/fashion-mnist). Investigation knobs
 * for the School part (docs/REPRODUCTION.md says what they showed): REPRO_ROUNDS (T, default 200;
 * 201 is the authors' T + 1), REPRO_SEED_BASE (first seed, default 1), REPRO_PROBE=1 (also train
 * Local and FedAvg with the authors' shuffled fixed-size batches instead of Poisson sampling).
 *
 * Seeds: run s of a part uses seed s for the train/test split (fl_federate) and for training
 * (fl_job_cfg.seed), like the authors' runs, which re-split the data at every repeat. Results are
 * bit-identical for any REPRO_THREADS (fl_algo.h, DETERMINISM). Not part of make test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common/dp_rng.h"

#include "common/dp_err.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"
#include "federated/fl_model.h"

#define SCHOOL_DEFAULT_CSV "../shared/data/school/school.csv"
#define SCHOOL_MAX_BYTES   ((long)64 << 20) /* the file is ~1 MB */
#define MAX_SEEDS          20
#define MAX_SILOS_SYNTH    64

int part_ppsgd(int threads, int users, int rounds);                  /* ppsgd.c */
int part_altmin(int users, int seeds);                               /* altmin.c */
int part_altmin_alg1(int users, int seeds);                          /* altmin_alg1.c */
int part_altmin_scaling(int seeds);                                  /* altmin_alg1.c */
int part_adaped(int threads);                                        /* adaped.c */
int part_ifca(int threads);                                          /* ifca.c */
int part_adamix(int silos, int rounds, int threads);                 /* adamix.c */
int part_fedhdp_r6(int threads, int seeds, int rounds, int clients); /* fedhdp.c */

static int g_threads = 1;
static int g_school_rounds = 200; /* REPRO_ROUNDS: investigation only */
static int g_seed_base = 1;       /* REPRO_SEED_BASE: first seed */
static int g_probe = 0;           /* REPRO_PROBE=1: the batching probe (investigation) */

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static double now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

/* CPU time of the whole process (all threads): the cores are shared, so wall time is noisy. */
static double cpu_ms(void)
{
    return clock_ms(CLOCK_PROCESS_CPUTIME_ID);
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "reproduce: %s=%s ignored (expected %d..%d)\n", name, s, lo, hi);
        return def;
    }
    return (int)v;
}

static void mean_std(const double *v, size_t n, double *mean, double *std)
{
    double m = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++)
        m += v[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    *mean = m;
    *std = n > 1 ? sqrt(s / (double)(n - 1)) : 0.0; /* sample std (n - 1) */
}

/* The figure the paper reports for a method: each silo evaluated with its personalised model, or
 * with the global model for FedAvg (Liu et al. 2022, App. C.4). */
static double final_metric(const char *algorithm, const fl_round_metrics *m)
{
    if (strcmp(algorithm, "fedavg") == 0)
        return m->global.pooled_test_metric;
    return m->personal.pooled_test_metric;
}

/* Runs cfg over f for cfg->rounds rounds, evaluating only after the last one; *metric receives
 * final_metric, *ms the wall time of the whole run (state set-up, rounds, final evaluation) and
 * *cpu (may be NULL) its CPU time. */
static int run_job(const fl_job_cfg *cfg, const fl_federation *f, double *metric, double *ms,
                   double *cpu)
{
    fl_state st;
    fl_round_metrics m;
    memset(&st, 0, sizeof st);
    memset(&m, 0, sizeof m);
    dp_err e;
    dp_err_clear(&e);
    int rc = DP_OK;
    double t0 = now_ms(), c0 = cpu_ms();
    if ((rc = fl_state_init(cfg, f, &st, &e)) != DP_OK)
        goto out;
    for (uint64_t t = 0; t < cfg->rounds; t++) {
        fl_round_metrics *out = (t + 1 == cfg->rounds) ? &m : NULL;
        if ((rc = fl_round_run(cfg, f, &st, NULL, g_threads, out, &e)) != DP_OK)
            goto out;
    }
    *ms = now_ms() - t0;
    if (cpu != NULL)
        *cpu = cpu_ms() - c0;
    *metric = final_metric(cfg->algorithm, &m);
out:
    if (rc != DP_OK)
        fprintf(stderr, "reproduce: %s: %s (%s)\n", cfg->algorithm, e.msg, e.field);
    fl_round_metrics_free(&m);
    fl_state_free(&st);
    return rc;
}

/* z_k for every silo of f so that cfg's job spends target_eps at acct (fl_calibrate_noise_many;
 * REPRO_CALIB_SINGLE=1: one fl_calibrate_noise call per silo, for comparison). */
static int calibrate_all(const fl_job_cfg *cfg, const fl_federation *f, double target_eps,
                         const fl_accountant *acct, double *z)
{
    dp_err e;
    dp_err_clear(&e);
    const char *single = getenv("REPRO_CALIB_SINGLE");
    if (single != NULL && strcmp(single, "1") == 0) {
        for (size_t k = 0; k < f->n_silos; k++) {
            double eps;
            if (fl_calibrate_noise(cfg, f->silo[k].n_train, target_eps, acct, &z[k], &eps, &e) !=
                DP_OK) {
                fprintf(stderr, "reproduce: calibration of silo %zu: %s\n", k, e.msg);
                return e.code;
            }
        }
        return DP_OK;
    }
    size_t K = f->n_silos;
    size_t *n = calloc(K, sizeof *n);
    const fl_accountant **accts = calloc(K, sizeof *accts);
    double *eps = calloc(K, sizeof *eps);
    int rc = DP_ENOMEM;
    if (n != NULL && accts != NULL && eps != NULL) {
        for (size_t k = 0; k < K; k++) {
            n[k] = f->silo[k].n_train;
            accts[k] = acct;
        }
        rc = fl_calibrate_noise_many(cfg, K, n, target_eps, accts, z, eps, &e);
        if (rc != DP_OK)
            fprintf(stderr, "reproduce: calibration: %s\n", e.msg);
    }
    free(n);
    free(accts);
    free(eps);
    return rc;
}

/* ============================================================== School */

/* Reads the School CSV into *ds with y scaled to (y - 1) / 69 (scores 1..70 to [0, 1], the
 * authors' min-max scaling with the data set's fixed range). */
static int school_load(const char *path, fl_dataset *ds)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "reproduce: cannot open the School CSV %s (set DPSILO_SCHOOL_CSV)\n", path);
        return DP_ENOTFOUND;
    }
    char *text = NULL;
    int rc = DP_EINTERNAL;
    if (fseek(fp, 0, SEEK_END) != 0)
        goto out;
    long len = ftell(fp);
    if (len <= 0 || len > SCHOOL_MAX_BYTES || fseek(fp, 0, SEEK_SET) != 0)
        goto out;
    text = malloc((size_t)len);
    if (text == NULL || fread(text, 1, (size_t)len, fp) != (size_t)len)
        goto out;
    dp_err e;
    dp_err_clear(&e);
    size_t line = 0, col = 0;
    rc = fl_csv_parse(text, (size_t)len, "score", "school", ds, &line, &col, &e);
    if (rc != DP_OK) {
        fprintf(stderr, "reproduce: %s: %s\n", path, e.msg);
        goto out;
    }
    for (size_t i = 0; i < ds->n; i++)
        ds->y[i] = (ds->y[i] - 1.0f) / 69.0f;
    ds->n_classes = fl_labels_n_classes(ds->y, ds->n); /* 0: real labels now */
out:
    free(text);
    fclose(fp);
    return rc;
}

/* Builds the School federation for seed: natural silos, 80/20 split, per-silo standardisation. */
static int school_federate(const fl_dataset *ds, uint64_t seed, fl_federation *f)
{
    uint32_t *assign = calloc(ds->n, sizeof *assign);
    size_t k = 0;
    dp_err e;
    dp_err_clear(&e);
    fl_partition_spec p = {.kind = FL_PARTITION_NATURAL, .seed = seed};
    int rc = DP_ENOMEM;
    if (assign == NULL)
        goto out;
    if ((rc = fl_partition(ds, &p, assign, &k, &e)) != DP_OK)
        goto out;
    rc = fl_federate(ds, assign, k, 0.2, seed, true, f, &e);
out:
    if (rc != DP_OK)
        fprintf(stderr, "reproduce: school federation: %s\n", e.msg);
    free(assign);
    return rc;
}

static void school_cfg(fl_job_cfg *cfg, const char *algorithm, uint64_t seed, const double *z)
{
    fl_job_cfg_default(cfg);
    cfg->algorithm = algorithm;
    cfg->model.type = FL_MODEL_LINEAR;
    cfg->model.d_in = 28;
    cfg->rounds = (uint64_t)g_school_rounds;
    cfg->local_epochs = 1;
    cfg->batch_size = 32;
    cfg->lr = 0.01;
    cfg->lambda = strcmp(algorithm, "mrmtl") == 0 ? 1.0 : 0.0;
    cfg->seed = seed;
    cfg->weighted = true;
    cfg->clip = 1.0;
    cfg->noise_multiplier = z;
}

/* ---- probe: the authors' batching instead of Poisson sampling (REPRO_PROBE=1) ----
 * Liu et al.'s code shuffles each silo's training rows every epoch and takes floor(n_k / B_k)
 * fixed-size batches of B_k rows (dropping the rest), with T + 1 rounds; the library samples each
 * step's batch by Poisson sampling at q_k = B_k / n_k (what the accountant assumes) and runs T
 * rounds. This probe trains Local and FedAvg (weighted by n_train, zero initialisation, clip and
 * noise exactly as fl_sgd_run: N(0, (z_k c)^2) on the clipped sum, divided by B_k) with shuffled
 * fixed-size batches, to tell whether the batching explains a gap. Investigation only: its privacy
 * accounting would not be what the calibration assumed (sampling without replacement). */
static void probe_silo_epoch(const fl_model_spec *m, const fl_silo_data *s, size_t d, double z,
                             gsl_rng *r, uint64_t noise_seed, float *w, size_t *perm, float *bx,
                             float *by, float *g, float *nz, fl_ws *ws)
{
    size_t n = s->n_train, b = n < 32 ? n : 32, p = d + 1;
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    gsl_ran_shuffle(r, perm, n, sizeof *perm);
    for (size_t step = 0; step < n / b; step++) {
        for (size_t i = 0; i < b; i++) {
            size_t row = perm[step * b + i];
            memcpy(bx + i * d, s->x_train + row * d, d * sizeof(float));
            by[i] = s->y_train[row];
        }
        fl_model_clipped_grad_sum(m, w, bx, by, b, 1.0, ws, g, NULL);
        fl_gauss_fill(nz, p, z * 1.0, dp_rng_derive(noise_seed, step));
        for (size_t j = 0; j < p; j++)
            w[j] -= (float)(0.01 * ((double)g[j] + (double)nz[j]) / (double)b);
    }
}

/* Final pooled test MSE of Local (fedavg false) or FedAvg with the authors' batching. */
static int probe_shuffled(const fl_federation *f, const double *z, bool fedavg, uint64_t seed,
                          uint64_t rounds, double *mse)
{
    fl_model_spec m = {.type = FL_MODEL_LINEAR, .d_in = f->d};
    size_t d = f->d, p = d + 1, n_max = 0, n_all = 0;
    for (size_t k = 0; k < f->n_silos; k++) {
        n_max = f->silo[k].n_train > n_max ? f->silo[k].n_train : n_max;
        n_all += f->silo[k].n_train;
    }
    dp_err e;
    dp_err_clear(&e);
    int rc = DP_ENOMEM;
    float *w = calloc(f->n_silos * p, sizeof *w), *gw = calloc(p, sizeof *gw);
    double *acc = calloc(p, sizeof *acc);
    float *bx = calloc(32 * d, sizeof *bx), *by = calloc(32, sizeof *by);
    float *g = calloc(p, sizeof *g), *nz = calloc(p, sizeof *nz);
    size_t *perm = calloc(n_max, sizeof *perm);
    gsl_rng *r = dp_rng_alloc(seed, DP_RNG_STREAM_DATA, &e);
    fl_ws *ws = fl_ws_alloc(&m, 256, &e);
    if (w == NULL || gw == NULL || acc == NULL || bx == NULL || by == NULL || g == NULL ||
        nz == NULL || perm == NULL || r == NULL || ws == NULL)
        goto out;
    for (uint64_t t = 0; t < rounds; t++) {
        memset(acc, 0, p * sizeof *acc);
        for (size_t k = 0; k < f->n_silos; k++) {
            float *wk = w + k * p;
            if (fedavg)
                memcpy(wk, gw, p * sizeof *wk);
            uint64_t ns = dp_rng_derive(dp_rng_derive(seed, k), t);
            probe_silo_epoch(&m, &f->silo[k], d, z[k], r, ns, wk, perm, bx, by, g, nz, ws);
            double pk = (double)f->silo[k].n_train / (double)n_all;
            for (size_t j = 0; j < p; j++)
                acc[j] += pk * (double)wk[j];
        }
        if (fedavg)
            for (size_t j = 0; j < p; j++)
                gw[j] = (float)acc[j];
    }
    fl_eval ev;
    memset(&ev, 0, sizeof ev);
    for (size_t k = 0; k < f->n_silos; k++)
        fl_model_eval(&m, fedavg ? gw : w + k * p, f->silo[k].x_test, f->silo[k].y_test,
                      f->silo[k].n_test, ws, &ev);
    *mse = ev.sq_err / (double)ev.n;
    rc = DP_OK;
out:
    fl_ws_free(ws);
    gsl_rng_free(r);
    free(perm);
    free(nz);
    free(g);
    free(by);
    free(bx);
    free(acc);
    free(gw);
    free(w);
    return rc;
}

static int part_school(const char *path)
{
    static const char *const methods[] = {"mrmtl", "fedavg", "local"};
    static const double paper[] = {0.02394, 0.02564, 0.02628};
    enum { N_METHODS = 3 };
    int n_seeds = env_int("REPRO_SEEDS", 5, 1, MAX_SEEDS);
    fl_dataset ds;
    memset(&ds, 0, sizeof ds);
    fl_federation f;
    memset(&f, 0, sizeof f);
    double *z = NULL;
    double mse[N_METHODS][MAX_SEEDS], ms[N_METHODS][MAX_SEEDS], cpu[N_METHODS][MAX_SEEDS];
    double calib_ms[MAX_SEEDS], calib_cpu[MAX_SEEDS];
    int rc = school_load(path, &ds);
    if (rc != DP_OK)
        return rc;
    rc = DP_ENOMEM;
    z = calloc(ds.n_silos, sizeof *z);
    if (z == NULL)
        goto out;
    fl_accountant acct = {.delta = 1e-3, .conv = ACCT_CONV_OPTIMAL, .orders = NULL, .n_orders = 0};
    printf("== School: K=%zu, n=%zu, d=%zu; eps=6 delta=1e-3 T=%d B=32 c=1 lr=0.01, "
           "%d seeds, %d thread(s)\n",
           ds.n_silos, ds.n, ds.d, g_school_rounds, n_seeds, g_threads);
    printf("(ms: CPU time)\nseed  calib_ms  z_min   z_max   | mrmtl   run ms  | fedavg  run ms  | "
           "local   run ms\n");
    for (int s = 0; s < n_seeds; s++) {
        uint64_t seed = (uint64_t)s + (uint64_t)g_seed_base;
        fl_federation_free(&f);
        if ((rc = school_federate(&ds, seed, &f)) != DP_OK)
            goto out;
        fl_job_cfg cfg;
        school_cfg(&cfg, "fedavg", seed, z);
        double t0 = now_ms(), c0 = cpu_ms();
        if ((rc = calibrate_all(&cfg, &f, 6.0, &acct, z)) != DP_OK)
            goto out;
        calib_ms[s] = now_ms() - t0;
        calib_cpu[s] = cpu_ms() - c0;
        double zmin = z[0], zmax = z[0];
        for (size_t k = 1; k < f.n_silos; k++) {
            zmin = fmin(zmin, z[k]);
            zmax = fmax(zmax, z[k]);
        }
        printf("%-4llu  %8.1f  %6.3f  %6.3f ", (unsigned long long)seed, calib_cpu[s], zmin, zmax);
        for (int a = 0; a < N_METHODS; a++) {
            school_cfg(&cfg, methods[a], seed, z);
            if ((rc = run_job(&cfg, &f, &mse[a][s], &ms[a][s], &cpu[a][s])) != DP_OK)
                goto out;
            printf(" | %.5f %7.1f", mse[a][s], cpu[a][s]);
        }
        if (g_probe) {
            double pl, pf;
            if ((rc = probe_shuffled(&f, z, false, seed, (uint64_t)g_school_rounds, &pl)) !=
                    DP_OK ||
                (rc = probe_shuffled(&f, z, true, seed, (uint64_t)g_school_rounds, &pf)) != DP_OK)
                goto out;
            printf(" | probe (shuffled batches): local %.5f fedavg %.5f", pl, pf);
        }
        printf("\n");
        fflush(stdout);
    }
    printf("\nmethod   paper     ours (mean +- sample std, %d seeds)  |ours-paper|  "
           "per run: CPU ms (min)  wall ms (min)\n",
           n_seeds);
    for (int a = 0; a < N_METHODS; a++) {
        double m, sd, cm, csd, cmin = cpu[a][0], wmin = ms[a][0];
        for (int s = 1; s < n_seeds; s++) {
            cmin = fmin(cmin, cpu[a][s]);
            wmin = fmin(wmin, ms[a][s]);
        }
        mean_std(cpu[a], (size_t)n_seeds, &cm, &csd);
        mean_std(mse[a], (size_t)n_seeds, &m, &sd);
        printf("%-7s  %.5f   %.5f +- %.5f               %.5f       %6.1f (%6.1f)  %6.1f\n",
               methods[a], paper[a], m, sd, fabs(m - paper[a]), cm, cmin, wmin);
    }
    double cm, csd, cmin = calib_cpu[0], wmin = calib_ms[0];
    for (int s = 1; s < n_seeds; s++) {
        cmin = fmin(cmin, calib_cpu[s]);
        wmin = fmin(wmin, calib_ms[s]);
    }
    mean_std(calib_cpu, (size_t)n_seeds, &cm, &csd);
    printf("calibration of all %zu silos: CPU %.1f ms (mean), %.1f ms (min); wall %.1f ms (min)\n",
           f.n_silos, cm, cmin, wmin);
    rc = DP_OK;
out:
    free(z);
    fl_federation_free(&f);
    fl_dataset_free(&ds);
    return rc;
}

/* ============================================================== synthetic */

/* The sweep's fixed settings (reduced from the paper's Vehicle runs: see docs/REPRODUCTION.md). */
#define SYN_K      20
#define SYN_D      50
#define SYN_NMIN   400
#define SYN_NMAX   1000
#define SYN_NOISE  0.5
#define SYN_ROUNDS 100
#define SYN_B      64
#define SYN_CLIP   1.0
#define SYN_LR     0.01
#define SYN_DELTA  1e-5
#define SYN_SEEDS  3

static const double syn_lambdas[] = {0.001, 0.01, 0.1, 0.3, 1, 3, 10, 30};
#define N_LAMBDAS (sizeof syn_lambdas / sizeof syn_lambdas[0])

typedef struct syn_result {
    double local, fedavg, finetune;
    double mrmtl[N_LAMBDAS], ditto[N_LAMBDAS];
} syn_result;

static void syn_cfg(fl_job_cfg *cfg, const char *algorithm, double lambda, uint64_t seed,
                    const double *z)
{
    fl_job_cfg_default(cfg);
    cfg->algorithm = algorithm;
    cfg->model.type = FL_MODEL_SVM;
    cfg->model.d_in = SYN_D;
    cfg->rounds = SYN_ROUNDS;
    cfg->batch_size = SYN_B;
    cfg->lr = SYN_LR;
    cfg->lambda = lambda;
    cfg->seed = seed;
    cfg->clip = SYN_CLIP;
    cfg->noise_multiplier = z;
}

/* Mean test accuracy over SYN_SEEDS seeds of every method at (tau, eps); eps <= 0: no DP. */
static int syn_cell(double tau, double eps, syn_result *r)
{
    memset(r, 0, sizeof *r);
    double z1[MAX_SILOS_SYNTH], z2[MAX_SILOS_SYNTH];
    fl_accountant acct = {.delta = SYN_DELTA, .conv = ACCT_CONV_OPTIMAL};
    for (int s = 0; s < SYN_SEEDS; s++) {
        uint64_t seed = (uint64_t)s + 1;
        fl_synth_spec sp = {.silos = SYN_K,
                            .dim = SYN_D,
                            .n_min = SYN_NMIN,
                            .n_max = SYN_NMAX,
                            .tau = tau,
                            .noise = SYN_NOISE,
                            .classes = 2,
                            .seed = seed};
        fl_dataset ds;
        fl_federation f;
        memset(&ds, 0, sizeof ds);
        memset(&f, 0, sizeof f);
        dp_err e;
        dp_err_clear(&e);
        uint32_t *assign = NULL;
        size_t k = 0;
        int rc = fl_synth_generate(&sp, &ds, &e);
        if (rc == DP_OK) {
            assign = calloc(ds.n, sizeof *assign);
            fl_partition_spec p = {.kind = FL_PARTITION_NATURAL};
            rc = assign == NULL ? DP_ENOMEM : fl_partition(&ds, &p, assign, &k, &e);
        }
        if (rc == DP_OK)
            rc = fl_federate(&ds, assign, k, 0.2, seed, true, &f, &e);
        free(assign);
        fl_dataset_free(&ds);
        const double *zp = NULL, *zd = NULL;
        if (rc == DP_OK && eps > 0) {
            fl_job_cfg c;
            syn_cfg(&c, "fedavg", 0, seed, NULL);
            rc = calibrate_all(&c, &f, eps, &acct, z1);
            syn_cfg(&c, "ditto", 0, seed, NULL);
            if (rc == DP_OK)
                rc = calibrate_all(&c, &f, eps, &acct, z2);
            zp = z1;
            zd = z2;
        }
        double acc, ms;
        fl_job_cfg c;
        if (rc == DP_OK) {
            syn_cfg(&c, "local", 0, seed, zp);
            rc = run_job(&c, &f, &acc, &ms, NULL);
            r->local += acc / SYN_SEEDS;
        }
        if (rc == DP_OK) {
            syn_cfg(&c, "fedavg", 0, seed, zp);
            rc = run_job(&c, &f, &acc, &ms, NULL);
            r->fedavg += acc / SYN_SEEDS;
        }
        if (rc == DP_OK) {
            syn_cfg(&c, "finetune", 0, seed, zp);
            rc = run_job(&c, &f, &acc, &ms, NULL);
            r->finetune += acc / SYN_SEEDS;
        }
        for (size_t l = 0; rc == DP_OK && l < N_LAMBDAS; l++) {
            syn_cfg(&c, "mrmtl", syn_lambdas[l], seed, zp);
            rc = run_job(&c, &f, &acc, &ms, NULL);
            r->mrmtl[l] += acc / SYN_SEEDS;
            if (rc == DP_OK) {
                syn_cfg(&c, "ditto", syn_lambdas[l], seed, zd);
                rc = run_job(&c, &f, &acc, &ms, NULL);
                r->ditto[l] += acc / SYN_SEEDS;
            }
        }
        fl_federation_free(&f);
        if (rc != DP_OK) {
            fprintf(stderr, "reproduce: synthetic cell tau=%g eps=%g: %s\n", tau, eps, e.msg);
            return rc;
        }
    }
    return DP_OK;
}

static size_t argmax(const double *v, size_t n)
{
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static void syn_print(double tau, double eps, const syn_result *r)
{
    size_t lm = argmax(r->mrmtl, N_LAMBDAS), ld = argmax(r->ditto, N_LAMBDAS);
    char e[16];
    if (eps > 0)
        snprintf(e, sizeof e, "%g", eps);
    else
        snprintf(e, sizeof e, "inf");
    printf("%-5g %-5s | %.4f %.4f %.4f | %.4f (%-5g) | %.4f (%-5g) | mrmtl by lambda:", tau, e,
           r->local, r->fedavg, r->finetune, r->mrmtl[lm], syn_lambdas[lm], r->ditto[ld],
           syn_lambdas[ld]);
    for (size_t l = 0; l < N_LAMBDAS; l++)
        printf(" %.3f", r->mrmtl[l]);
    printf("\n");
    fflush(stdout);
}

static int part_synth(void)
{
    static const double taus[] = {0.0, 0.05, 0.1, 0.2};
    static const double epss[] = {-1, 8, 4, 2, 1, 0.5, 0.25};
    const double tau_main = 0.1;
    printf("\n== Synthetic linear SVM: K=%d d=%d n_k in [%d, %d] (80/20 split), label noise %g, "
           "T=%d B=%d c=%g lr=%g delta=%g, %d seeds; test accuracy (mean over seeds)\n",
           SYN_K, SYN_D, SYN_NMIN, SYN_NMAX, SYN_NOISE, SYN_ROUNDS, SYN_B, SYN_CLIP, SYN_LR,
           SYN_DELTA, SYN_SEEDS);
    printf("tau   eps   | local  fedavg finetune | mrmtl* (lambda*) | ditto* (lambda*) |\n");
    double t0 = now_ms();
    syn_result r;
    for (size_t i = 0; i < sizeof epss / sizeof epss[0]; i++) {
        if (syn_cell(tau_main, epss[i], &r) != DP_OK)
            return DP_EINTERNAL;
        syn_print(tau_main, epss[i], &r);
    }
    for (size_t i = 0; i < sizeof taus / sizeof taus[0]; i++) {
        if (taus[i] == tau_main)
            continue;
        for (int j = 0; j < 2; j++) {
            double eps = j == 0 ? -1 : 1;
            if (syn_cell(taus[i], eps, &r) != DP_OK)
                return DP_EINTERNAL;
            syn_print(taus[i], eps, &r);
        }
    }
    printf("synthetic sweep: %.1f s\n", (now_ms() - t0) / 1e3);
    return DP_OK;
}

/* ============================================================== Fashion-MNIST */

static int part_fmnist(void)
{
    const char *dir = getenv("FMNIST_DIR");
    if (dir == NULL || *dir == '\0')
        dir = "/usr/share/datasets/fashion-mnist";
    char img[512], lab[512];
    if (snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir) >= (int)sizeof img ||
        snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir) >= (int)sizeof lab)
        return DP_EINVAL;
    fl_dataset ds;
    fl_federation f;
    memset(&ds, 0, sizeof ds);
    memset(&f, 0, sizeof f);
    uint32_t *assign = NULL;
    dp_err e;
    dp_err_clear(&e);
    size_t k = 0;
    double z[10];
    const double eps_list[] = {-1, 8, 4, 2};
    int rc = fl_idx_load(img, lab, 0, &ds, &e);
    if (rc != DP_OK)
        goto out;
    assign = calloc(ds.n, sizeof *assign);
    if (assign == NULL) {
        rc = DP_ENOMEM;
        goto out;
    }
    fl_partition_spec p = {.kind = FL_PARTITION_IID, .silos = 10, .seed = 1};
    if ((rc = fl_partition(&ds, &p, assign, &k, &e)) != DP_OK)
        goto out;
    /* Pixels stay in [0, 1] (no standardisation): one shared input scale for all silos. */
    if ((rc = fl_federate(&ds, assign, k, 1.0 / 6.0, 1, false, &f, &e)) != DP_OK)
        goto out;
    fl_job_cfg cfg;
    fl_job_cfg_default(&cfg);
    cfg.algorithm = "fedavg";
    cfg.model.type = FL_MODEL_MLP;
    cfg.model.d_in = ds.d;
    cfg.model.n_classes = 10;
    cfg.model.n_hidden = 1;
    cfg.model.hidden[0] = 100;
    cfg.rounds = 40;
    cfg.batch_size = 256;
    cfg.lr = 0.5;
    cfg.clip = 1.0;
    cfg.seed = 1;
    printf("\n== Fashion-MNIST: 60,000 training images, 10 IID silos (%zu train / %zu test rows "
           "each), MLP 784-100-10, FedAvg, T=%llu B=%zu c=1 lr=%g delta=1e-5\n",
           f.silo[0].n_train, f.silo[0].n_test, (unsigned long long)cfg.rounds, cfg.batch_size,
           cfg.lr);
    printf("eps   z (silo 0)   test accuracy   wall s\n");
    fl_accountant acct = {.delta = 1e-5, .conv = ACCT_CONV_OPTIMAL};
    for (size_t i = 0; i < sizeof eps_list / sizeof eps_list[0]; i++) {
        cfg.noise_multiplier = NULL;
        if (eps_list[i] > 0) {
            if ((rc = calibrate_all(&cfg, &f, eps_list[i], &acct, z)) != DP_OK)
                goto out;
            cfg.noise_multiplier = z;
        }
        double acc, ms;
        if ((rc = run_job(&cfg, &f, &acc, &ms, NULL)) != DP_OK)
            goto out;
        if (eps_list[i] > 0)
            printf("%-5g %-12.4f %.4f          %.1f\n", eps_list[i], z[0], acc, ms / 1e3);
        else
            printf("inf   0            %.4f          %.1f\n", acc, ms / 1e3);
        fflush(stdout);
    }
out:
    if (rc != DP_OK)
        fprintf(stderr, "reproduce: fashion-mnist: %s\n", e.msg);
    free(assign);
    fl_federation_free(&f);
    fl_dataset_free(&ds);
    return rc;
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    const char *part = argc > 1 ? argv[1] : "all";
    const char *csv = getenv("DPSILO_SCHOOL_CSV");
    if (argc > 2)
        csv = argv[2];
    if (csv == NULL || *csv == '\0')
        csv = SCHOOL_DEFAULT_CSV;
    g_threads = env_int("REPRO_THREADS", 1, 1, 64);
    g_school_rounds = env_int("REPRO_ROUNDS", 200, 1, FL_MAX_ROUNDS);
    g_seed_base = env_int("REPRO_SEED_BASE", 1, 0, 1000000);
    g_probe = env_int("REPRO_PROBE", 0, 0, 1);
    bool all = strcmp(part, "all") == 0;
    if (!all && strcmp(part, "school") != 0 && strcmp(part, "synth") != 0 &&
        strcmp(part, "fmnist") != 0 && strcmp(part, "ppsgd") != 0 && strcmp(part, "altmin") != 0 &&
        strcmp(part, "adaped") != 0 && strcmp(part, "ifca") != 0 && strcmp(part, "adamix") != 0 &&
        strcmp(part, "altmin-alg1") != 0 && strcmp(part, "altmin-scaling") != 0 &&
        strcmp(part, "fedhdp_r6") != 0) {
        fprintf(stderr,
                "usage: %s "
                "[all|school|synth|fmnist|ppsgd|altmin|altmin-alg1|altmin-scaling|adaped|ifca|"
                "adamix|fedhdp_r6] [school.csv]\n",
                argv[0]);
        return 2;
    }
    if (strcmp(part, "fedhdp_r6") == 0)
        return part_fedhdp_r6(g_threads, env_int("REPRO_FEDHDP_SEEDS", 3, 1, 20),
                              env_int("REPRO_FEDHDP_ROUNDS", 200, 1, 100000),
                              env_int("REPRO_FEDHDP_CLIENTS", 200, 10, 1000)) == DP_OK
                   ? 0
                   : 1;
    if (strcmp(part, "altmin") == 0)
        return part_altmin(env_int("REPRO_ALTMIN_USERS", 50000, 100, 1000000),
                           env_int("REPRO_ALTMIN_SEEDS", 5, 1, 20)) == DP_OK
                   ? 0
                   : 1;
    if (strcmp(part, "altmin-alg1") == 0)
        return part_altmin_alg1(env_int("REPRO_ALTMIN_USERS", 50000, 100, 1000000),
                                env_int("REPRO_ALTMIN_SEEDS", 3, 1, 20)) == DP_OK
                   ? 0
                   : 1;
    if (strcmp(part, "altmin-scaling") == 0)
        return part_altmin_scaling(env_int("REPRO_ALTMIN_SEEDS", 3, 1, 20)) == DP_OK ? 0 : 1;
    if (strcmp(part, "adaped") == 0)
        return part_adaped(g_threads) == DP_OK ? 0 : 1;
    if (strcmp(part, "ifca") == 0)
        return part_ifca(g_threads) == DP_OK ? 0 : 1;
    if (strcmp(part, "adamix") == 0)
        return part_adamix(env_int("REPRO_ADAMIX_SILOS", 2000, 10, 10000),
                           env_int("REPRO_ADAMIX_ROUNDS", 150, 2, 100000), g_threads) == DP_OK
                   ? 0
                   : 1;
    if (strcmp(part, "ppsgd") == 0)
        return part_ppsgd(g_threads, env_int("REPRO_PPSGD_USERS", 1000, 2, 10000),
                          env_int("REPRO_PPSGD_ROUNDS", 1000, 1, 100000)) == DP_OK
                   ? 0
                   : 1;
    if ((all || strcmp(part, "school") == 0) && part_school(csv) != DP_OK)
        return 1;
    if ((all || strcmp(part, "synth") == 0) && part_synth() != DP_OK)
        return 1;
    if ((all || strcmp(part, "fmnist") == 0) && part_fmnist() != DP_OK)
        return 1;
    return 0;
}
