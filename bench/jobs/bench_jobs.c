/*
 * bench_jobs.c: the wall time of one run of each registered job type (federated/fl_algo.c's
 * registry: local, fedavg, finetune, mrmtl, ditto, dp_fedavg, ppsgd, fedhdp, adaped, dp_adaped,
 * ifca, adamix, gaussian_prior, altmin) through the engine (fl_state_init, then fl_round_run once
 * per round on one thread, no per-round evaluation, fl_state_free), at a small setting of
 * docs/REPRODUCTION.md:
 *
 *   School (local, fedavg, finetune, mrmtl, ditto, dp_fedavg): the School data set (139 silos,
 *     d = 28, natural silos, 80/20 split, per-silo standardisation, y scaled to [0, 1]), T = 200,
 *     B = 32, clip 1, lr 0.01, weighted (Liu et al., NeurIPS 2022, App. C); mrmtl lambda 1, ditto
 *     lambda 1; the record-level noise multiplier is z = 1 on every silo instead of the epsilon = 6
 *     calibration (the time does not depend on z); dp_fedavg: client rate 0.5, update clip 1,
 *     server noise 1; ifca: 3 clusters (the authors' code for School), selection in the first 20
 *     rounds (10%) at epsilon 0.18 (0.03 x 6), IFCA throughout. Needs DPSILO_SCHOOL_CSV (the CSV is
 * not part of the repository); without it these rows print as skipped. ppsgd: Bietti et al., ICML
 * 2022, §6.1 (fl_additive_paper_spec: N = 1000 users, d = 100, 10 fresh samples per user per round,
 * every user every round), clip 10, sigma 10, r = 1, lr 0.4, T = 100 (the paper's T is 1000); the
 * fresh draw of each round (fl_additive_draw) is part of the timed run, as in the reproduction.
 *   fedhdp: 40 silos of 40-60 rows (fl_synth_generate, d = 10, tau 0.2, label noise 0.1), q = 0.5,
 *     60 rounds, 4 silos opted out (r 1) and the rest in one private group (z 1, r 0.1), lambda
 *     0.1 (docs/REPRODUCTION.md "FedHDP", the job's trend over r; z fixed instead of epsilon 1).
 *   fedhdp (R6): the FedHDP r = 0.01 run of bench/reproduce/fedhdp.c (docs/REPRODUCTION.md, "FedHDP
 *     R6"): Fashion-MNIST, 200 silos of one class and 30 images, MLP 784-50-10, q 0.1, T 200,
 *     B 20, lr 0.1, lambda 0.05, adaptive clip; skipped without the Fashion-MNIST files.
 *   adaped, dp_adaped: bench/reproduce/adaped.c's RT10 federation (seed 101: 10 silos of
 *     10-30 rows, d = 10, 4 classes, softmax, full batch, 10 local steps, lr 0.3), 30 rounds
 *     (adaped) and 60 rounds at z = 1 (dp_adaped, C_1 = 0.5).
 *   adamix: Ozkara et al.'s Table 3 setting (fl_prior_rt7_spec: 1000 silos of n = 20 rows, d =
 *     50, a two-component prior), k 2, 20 gradient steps and 3 EM iterations a round, 10 rounds.
 *   gaussian_prior: their App. K setting (fl_prior_rt8_spec: 1000 silos of 10 rows, d = 50), the
 *     em variant (a 51 x 51 Cholesky per silo per round), 10 rounds.
 *   altmin: Jain et al., NeurIPS 2021, §6 at a reduced user count: n = 5,000 users (the paper's
 *     50,000), m = 10 samples (2 held out), d = 50, k = 2, label noise 0.01, spectral init,
 *     clip 1e-4, z 1, 10 rounds (epochs).
 *
 * Each job type runs BENCH_REPEATS (default 3) timed runs after one untimed warm-up run; the row
 * gives the median wall ms of a run, that per round, and the median CPU ms. BENCH_ONLY=text runs
 * only the job types whose name contains text. Prints the load average first; timings are printed,
 * never asserted. Not part of make test; bench/jobs/run.sh runs it (`make bench`).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_err.h"
#include "federated/fl_additive.h"
#include "federated/fl_algo.h"
#include "federated/fl_data.h"

#define MAX_REPEATS       15
#define SCHOOL_MAX_BYTES  ((long)64 << 20)
#define ALTMIN_USERS      5000
#define FEDHDP_SILOS      40
#define FEDHDP_OPTED_OUT  4
#define SCHOOL_SEED       1
#define ADAPED_SEED       101
#define DP_FEDAVG_SERVERZ 1.0

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *s = getenv(name);
    if (s == NULL)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end != '\0' || v < lo || v > hi) ? def : (int)v;
}

/* ---- the data of each setting ---- */

/* The School CSV at path, y scaled to (y - 1) / 69 (bench/reproduce/reproduce.c's reading). */
static int school_load(const char *path, fl_dataset *ds, dp_err *e)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return dp_err_set(e, DP_ENOTFOUND, "path", "cannot open the School CSV");
    char *text = NULL;
    int rc = dp_err_set(e, DP_EINTERNAL, "path", "cannot read the School CSV");
    long len = -1;
    if (fseek(fp, 0, SEEK_END) == 0)
        len = ftell(fp);
    if (len > 0 && len <= SCHOOL_MAX_BYTES && fseek(fp, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)len)) != NULL && fread(text, 1, (size_t)len, fp) == (size_t)len) {
        size_t line = 0, col = 0;
        dp_err_clear(e);
        rc = fl_csv_parse(text, (size_t)len, "score", "school", ds, &line, &col, e);
    }
    if (rc == DP_OK) {
        for (size_t i = 0; i < ds->n; i++)
            ds->y[i] = (ds->y[i] - 1.0f) / 69.0f;
        ds->n_classes = fl_labels_n_classes(ds->y, ds->n);
    }
    free(text);
    fclose(fp);
    return rc;
}

/* ds's natural silos, federated with test_fraction. */
static int federate_natural(const fl_dataset *ds, double test_fraction, uint64_t seed,
                            bool standardize, fl_federation *f, dp_err *e)
{
    uint32_t *assign = calloc(ds->n, sizeof *assign);
    if (assign == NULL)
        return dp_err_set(e, DP_ENOMEM, NULL, "out of memory");
    size_t k = 0;
    fl_partition_spec p = {.kind = FL_PARTITION_NATURAL, .seed = seed};
    int rc = fl_partition(ds, &p, assign, &k, e);
    if (rc == DP_OK)
        rc = fl_federate(ds, assign, k, test_fraction, seed + 1, standardize, f, e);
    free(assign);
    return rc;
}

static int synth_federate(const fl_synth_spec *sp, double test_fraction, bool standardize,
                          fl_federation *f, dp_err *e)
{
    fl_dataset ds;
    memset(&ds, 0, sizeof ds);
    int rc = fl_synth_generate(sp, &ds, e);
    if (rc == DP_OK)
        rc = federate_natural(&ds, test_fraction, sp->seed + 1, standardize, f, e);
    fl_dataset_free(&ds);
    return rc;
}

/* ---- the job types ---- */

typedef enum {
    SET_SCHOOL,
    SET_PPSGD,
    SET_FEDHDP,
    SET_FEDHDP_R6,
    SET_ADAPED,
    SET_ALTMIN,
    SET_RT7,
    SET_RT8
} setting;

typedef struct job_row {
    const char *algo;
    setting set;
    const char *desc;
} job_row;

static const job_row ROWS[] = {
    {"local", SET_SCHOOL, "School, 139 silos, B 32, z 1"},
    {"fedavg", SET_SCHOOL, "School, 139 silos, B 32, z 1"},
    {"finetune", SET_SCHOOL, "School, 139 silos, B 32, z 1"},
    {"mrmtl", SET_SCHOOL, "School, 139 silos, B 32, z 1"},
    {"ditto", SET_SCHOOL, "School, 139 silos, B 32, z 1"},
    {"dp_fedavg", SET_SCHOOL, "School, 139 silos, B 32, q 0.5"},
    {"ppsgd", SET_PPSGD, "Bietti 6.1: N 1000, d 100, 10/user"},
    {"fedhdp", SET_FEDHDP, "synth 40 silos x 40-60, d 10"},
    {"fedhdp", SET_FEDHDP_R6, "R6 FMNIST 200 x 30, MLP 50, r 0.01"},
    {"adaped", SET_ADAPED, "RT10 synth 10 silos, softmax"},
    {"dp_adaped", SET_ADAPED, "RT10 synth 10 silos, z 1"},
    {"ifca", SET_SCHOOL, "School, 139 silos, G 3, 10% sel"},
    {"adamix", SET_RT7, "RT7 1000 silos x 20, d 50, k 2"},
    {"gaussian_prior", SET_RT8, "RT8 1000 silos x 10, d 50, em"},
    {"altmin", SET_ALTMIN, "Jain 6: n 5000, m 10, d 50, k 2"},
};
#define N_ROWS (sizeof ROWS / sizeof ROWS[0])

typedef struct bench_ctx {
    fl_federation school, fedhdp, adaped, altmin, ppsgd_fed, rt7, rt8, r6;
    bool have_school, have_fedhdp, have_adaped, have_altmin, have_ppsgd, have_rt7, have_rt8,
        have_r6;
    fl_additive ppsgd;
    double *z_school; /* 1 per School silo */
    uint32_t *hdp_group;
    fl_hdp_group_cfg hdp_groups[2];
    uint32_t *r6_group;
    fl_hdp_group_cfg r6_groups[2];
} bench_ctx;

static void job_cfg(const bench_ctx *x, const job_row *r, fl_job_cfg *c)
{
    fl_job_cfg_default(c);
    c->algorithm = r->algo;
    switch (r->set) {
        case SET_SCHOOL:
            c->model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = x->school.d};
            c->rounds = 200;
            c->batch_size = 32;
            c->lr = 0.01;
            c->seed = SCHOOL_SEED;
            c->weighted = true;
            c->clip = 1.0;
            c->lambda = strcmp(r->algo, "mrmtl") == 0 || strcmp(r->algo, "ditto") == 0 ? 1.0 : 0.0;
            if (strcmp(r->algo, "dp_fedavg") == 0) {
                c->client_rate = 0.5;
                c->update_clip = 1.0;
                c->server_noise = DP_FEDAVG_SERVERZ;
            } else {
                c->noise_multiplier = x->z_school;
            }
            c->ifca_clusters = 3;
            c->ifca_select_rounds = 20;
            c->ifca_select_eps = 0.18;
            break;
        case SET_PPSGD:
            c->model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = x->ppsgd.spec.dim};
            c->rounds = 100;
            c->batch_size = x->ppsgd.spec.rows;
            c->lr = 0.4;
            c->seed = 7;
            c->ppsgd_ratio = 1.0;
            c->client_rate = 1.0;
            c->update_clip = 10.0;
            c->server_noise = 10.0;
            break;
        case SET_FEDHDP:
            c->model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = x->fedhdp.d};
            c->rounds = 60;
            c->batch_size = 16;
            c->lr = 0.05;
            c->seed = 1;
            c->lambda = 0.1;
            c->clip = 1.0;
            c->client_rate = 0.5;
            c->update_clip = 1.0;
            c->hdp_n_groups = 2;
            c->hdp_groups = x->hdp_groups;
            c->hdp_silo_group = x->hdp_group;
            break;
        case SET_FEDHDP_R6:
            c->model = (fl_model_spec){
                .type = FL_MODEL_MLP, .d_in = x->r6.d, .n_classes = 10, .n_hidden = 1};
            c->model.hidden[0] = 50;
            c->rounds = 200;
            c->batch_size = 20;
            c->lr = 0.1;
            c->seed = 1;
            c->lambda = 0.05;
            c->client_rate = 0.1;
            c->update_clip = 0.5;
            c->hdp_n_groups = 2;
            c->hdp_groups = x->r6_groups;
            c->hdp_silo_group = x->r6_group;
            c->hdp_adaptive = true;
            c->hdp_clip_quantile = 0.5;
            c->hdp_clip_lr = 0.2;
            c->hdp_count_noise = 10.0;
            break;
        case SET_ADAPED:
            c->model =
                (fl_model_spec){.type = FL_MODEL_SOFTMAX, .d_in = x->adaped.d, .n_classes = 4};
            c->rounds = strcmp(r->algo, "dp_adaped") == 0 ? 60 : 30;
            c->batch_size = 100000;
            c->local_epochs = 10;
            c->lr = 0.3;
            c->seed = 5;
            c->ap_tau = 10;
            c->ap_lr_mu = 0.3;
            c->update_clip = 0.5;
            c->server_noise = strcmp(r->algo, "dp_adaped") == 0 ? 1.0 : 0.0;
            break;
        case SET_RT7:
        case SET_RT8:
            c->model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = 50};
            c->rounds = 10;
            c->batch_size = 1;
            c->lr = 1;
            c->seed = 7;
            c->pr_steps = r->set == SET_RT7 ? 20 : 1;
            c->pr_noise_var = 0.1;
            c->pr_variant = FL_GP_EM;
            break;
        case SET_ALTMIN:
            c->model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = x->altmin.d};
            c->rounds = 10;
            c->batch_size = 1;
            c->lr = 1;
            c->seed = 11;
            c->update_clip = 1e-4;
            c->server_noise = 1.0;
            c->altmin_rank = 2;
            c->altmin_spectral = true;
            break;
    }
}

static const fl_federation *job_fed(bench_ctx *x, setting s)
{
    switch (s) {
        case SET_SCHOOL:
            return x->have_school ? &x->school : NULL;
        case SET_PPSGD:
            return x->have_ppsgd ? &x->ppsgd_fed : NULL;
        case SET_FEDHDP:
            return x->have_fedhdp ? &x->fedhdp : NULL;
        case SET_FEDHDP_R6:
            return x->have_r6 ? &x->r6 : NULL;
        case SET_ADAPED:
            return x->have_adaped ? &x->adaped : NULL;
        case SET_ALTMIN:
            return x->have_altmin ? &x->altmin : NULL;
        case SET_RT7:
            return x->have_rt7 ? &x->rt7 : NULL;
        case SET_RT8:
            return x->have_rt8 ? &x->rt8 : NULL;
    }
    return NULL;
}

/* One whole run: state, every round (ppsgd draws its fresh samples first), free. */
static int run_job(bench_ctx *x, const job_row *r, const fl_job_cfg *c, fl_federation *f, dp_err *e)
{
    fl_state s;
    memset(&s, 0, sizeof s);
    int rc = fl_state_init(c, f, &s, e);
    while (rc == DP_OK && s.round < c->rounds) {
        if (r->set == SET_PPSGD && (rc = fl_additive_draw(&x->ppsgd, s.round, f, e)) != DP_OK)
            break;
        rc = fl_round_run(c, f, &s, NULL, 1, NULL, e);
    }
    fl_state_free(&s);
    return rc;
}

/* The FedHDP R6 federation (bench/reproduce/fedhdp.c, seed 1): Fashion-MNIST's training images,
 * 200 silos of one class and 30 images each, 80/20, pixels in [0, 1]; silos 0-19 opted out, the
 * rest private (z_g 1.5 combined with sigma_b 10 to an effective 1.5, r 0.01). Without the IDX
 * files (FMNIST_DIR, default /usr/share/datasets/fashion-mnist) the row is skipped. */
static int r6_open(bench_ctx *x, dp_err *e)
{
    const char *dir = getenv("FMNIST_DIR");
    char img[512], lab[512];
    if (dir == NULL || dir[0] == '\0')
        dir = "/usr/share/datasets/fashion-mnist";
    if (snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir) >= (int)sizeof img ||
        snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir) >= (int)sizeof lab)
        return DP_OK;
    fl_dataset ds;
    memset(&ds, 0, sizeof ds);
    dp_err le;
    dp_err_clear(&le);
    if (fl_idx_load(img, lab, 0, &ds, &le) != DP_OK)
        return DP_OK; /* not installed: skipped */
    uint32_t *assign = calloc(ds.n, sizeof *assign);
    fl_partition_spec p = {.kind = FL_PARTITION_CLASSES,
                           .silos = 200,
                           .classes_per_silo = 1,
                           .seed = 1,
                           .rows_per_silo = 30};
    size_t k = 0;
    int rc = assign == NULL ? dp_err_set(e, DP_ENOMEM, NULL, "out of memory") : DP_OK;
    if (rc == DP_OK)
        rc = fl_partition(&ds, &p, assign, &k, e);
    if (rc == DP_OK)
        rc = fl_federate(&ds, assign, k, 0.2, 1, false, &x->r6, e);
    free(assign);
    fl_dataset_free(&ds);
    if (rc != DP_OK)
        return rc;
    x->have_r6 = true;
    if ((x->r6_group = calloc(x->r6.n_silos, sizeof *x->r6_group)) == NULL)
        return dp_err_set(e, DP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < x->r6.n_silos; j++)
        x->r6_group[j] = j < 20 ? 0 : 1;
    double zg = 1.0 / sqrt(1.0 / (1.5 * 1.5) - 1.0 / (10.0 * 10.0));
    x->r6_groups[0] = (fl_hdp_group_cfg){true, 0.0, 1.0, 0.05};
    x->r6_groups[1] = (fl_hdp_group_cfg){false, zg, 0.01, 0.05};
    return DP_OK;
}

static int ctx_open(bench_ctx *x, dp_err *e)
{
    memset(x, 0, sizeof *x);
    int rc;
    const char *csv = getenv("DPSILO_SCHOOL_CSV");
    if (csv != NULL && csv[0] != '\0') {
        fl_dataset ds;
        memset(&ds, 0, sizeof ds);
        rc = school_load(csv, &ds, e);
        if (rc == DP_OK)
            rc = federate_natural(&ds, 0.2, SCHOOL_SEED, true, &x->school, e);
        fl_dataset_free(&ds);
        if (rc != DP_OK)
            return rc;
        x->have_school = true;
        if ((x->z_school = malloc(x->school.n_silos * sizeof *x->z_school)) == NULL)
            return dp_err_set(e, DP_ENOMEM, NULL, "out of memory");
        for (size_t k = 0; k < x->school.n_silos; k++)
            x->z_school[k] = 1.0;
    }
    fl_additive_spec ap = fl_additive_paper_spec();
    if ((rc = fl_additive_init(&ap, &x->ppsgd, e)) != DP_OK)
        return rc;
    x->have_ppsgd = true;
    if ((rc = fl_additive_federation(&x->ppsgd, &x->ppsgd_fed, e)) != DP_OK)
        return rc;
    fl_synth_spec hs = {.silos = FEDHDP_SILOS,
                        .dim = 10,
                        .n_min = 40,
                        .n_max = 60,
                        .tau = 0.2,
                        .noise = 0.1,
                        .seed = 3};
    if ((rc = synth_federate(&hs, 0.2, true, &x->fedhdp, e)) != DP_OK)
        return rc;
    x->have_fedhdp = true;
    if ((x->hdp_group = calloc(x->fedhdp.n_silos, sizeof *x->hdp_group)) == NULL)
        return dp_err_set(e, DP_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < x->fedhdp.n_silos; k++)
        x->hdp_group[k] = k < FEDHDP_OPTED_OUT ? 1 : 0;
    x->hdp_groups[0] = (fl_hdp_group_cfg){false, 1.0, 0.1, 0.1};
    x->hdp_groups[1] = (fl_hdp_group_cfg){true, 0.0, 1.0, 0.1};
    if ((rc = r6_open(x, e)) != DP_OK)
        return rc;
    fl_synth_spec as = fl_adaped_rt10_spec(ADAPED_SEED);
    if ((rc = synth_federate(&as, 0.5, true, &x->adaped, e)) != DP_OK)
        return rc;
    x->have_adaped = true;
    fl_synth_spec ls = {.silos = ALTMIN_USERS,
                        .dim = 50,
                        .n_min = 10,
                        .n_max = 10,
                        .noise = 0.01,
                        .rank = 2,
                        .seed = 1};
    if ((rc = synth_federate(&ls, 0.2, false, &x->altmin, e)) != DP_OK)
        return rc;
    x->have_altmin = true;
    fl_prior_synth p7 = fl_prior_rt7_spec(1000, 20, 1);
    if ((rc = fl_prior_synth_generate(&p7, &x->rt7, NULL, e)) != DP_OK)
        return rc;
    x->have_rt7 = true;
    fl_prior_synth p8 = fl_prior_rt8_spec(1000, 50, 1);
    if ((rc = fl_prior_synth_generate(&p8, &x->rt8, NULL, e)) != DP_OK)
        return rc;
    x->have_rt8 = true;
    return DP_OK;
}

static void ctx_close(bench_ctx *x)
{
    if (x->have_school)
        fl_federation_free(&x->school);
    if (x->have_ppsgd) {
        fl_federation_free(&x->ppsgd_fed);
        fl_additive_free(&x->ppsgd);
    }
    if (x->have_fedhdp)
        fl_federation_free(&x->fedhdp);
    if (x->have_r6)
        fl_federation_free(&x->r6);
    if (x->have_adaped)
        fl_federation_free(&x->adaped);
    if (x->have_altmin)
        fl_federation_free(&x->altmin);
    if (x->have_rt7)
        fl_federation_free(&x->rt7);
    if (x->have_rt8)
        fl_federation_free(&x->rt8);
    free(x->z_school);
    free(x->hdp_group);
    free(x->r6_group);
}

int main(void)
{
    int repeats = env_int("BENCH_REPEATS", 3, 1, MAX_REPEATS);
    const char *only = getenv("BENCH_ONLY");
    double load[3] = {0};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf != NULL) {
        if (fscanf(lf, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = load[1] = load[2] = -1;
        fclose(lf);
    }
    dp_err e;
    dp_err_clear(&e);
    bench_ctx x;
    if (ctx_open(&x, &e) != DP_OK) {
        fprintf(stderr, "bench/jobs: setting up: %s (%s)\n", e.msg, e.field);
        ctx_close(&x);
        return 1;
    }
    printf("bench/jobs: one thread, median of %d runs after a warm-up; load average %.2f %.2f "
           "%.2f at the start\n",
           repeats, load[0], load[1], load[2]);
    printf("%-14s %-36s %6s %10s %9s %10s\n", "job type", "setting", "rounds", "wall ms",
           "ms/round", "CPU ms");
    int status = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const job_row *r = &ROWS[i];
        if (only != NULL && strstr(r->algo, only) == NULL)
            continue;
        fl_federation *f = (fl_federation *)job_fed(&x, r->set);
        if (f == NULL) {
            printf("%-14s %-36s skipped (%s)\n", r->algo, r->desc,
                   r->set == SET_FEDHDP_R6 ? "Fashion-MNIST not installed: make deps"
                                           : "set DPSILO_SCHOOL_CSV to the School CSV");
            continue;
        }
        fl_job_cfg c;
        job_cfg(&x, r, &c);
        double wall[MAX_REPEATS], cpu[MAX_REPEATS];
        int rc = run_job(&x, r, &c, f, &e); /* warm-up */
        for (int k = 0; rc == DP_OK && k < repeats; k++) {
            double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
            rc = run_job(&x, r, &c, f, &e);
            wall[k] = clock_ms(CLOCK_MONOTONIC) - w0;
            cpu[k] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
        if (rc != DP_OK) {
            printf("%-14s failed: %s (%s)\n", r->algo, e.msg, e.field);
            dp_err_clear(&e);
            status = 1;
            continue;
        }
        qsort(wall, (size_t)repeats, sizeof wall[0], cmp_double);
        qsort(cpu, (size_t)repeats, sizeof cpu[0], cmp_double);
        double wm = wall[repeats / 2], cm = cpu[repeats / 2];
        printf("%-14s %-36s %6llu %10.1f %9.3f %10.1f\n", r->algo, r->desc,
               (unsigned long long)c.rounds, wm, wm / (double)c.rounds, cm);
        fflush(stdout);
    }
    ctx_close(&x);
    return status;
}
