/*
 * altmin.c: the "altmin" part of build/bench/reproduce: Jain, Rush, Smith, Song & Thakurta,
 * "Differentially Private Model Personalization", NeurIPS 2021, §6 and Fig. 2, on the synthetic
 * low-rank regression of federated/fl_altmin.h, through the library (fl_altmin_run and the
 * baselines).
 *
 * Setting (the paper's §6): n = 50,000 users, m = 10 samples each, d = 50, k = 2, label noise
 * s_F = 0.01, delta = 1e-6, clip 1e-4 for both eta and zeta (every W and y~ is clipped: normalised
 * statistics), full batch (every user in every epoch), epochs E in {1, 2, 5, 10} with the best
 * taken per epsilon (the paper's selection, not privately accounted, as in the paper), per-epoch
 * noise multiplier sqrt(E) sqrt(8 ln(1/delta)) / eps so that the whole run is rho = eps^2 / (8
 * ln(1/delta)) zCDP (Lemma 4.3; the paper's printed 0.009 / 0.04 / 0.23 / 0.90), sensitivities
 * under replacement (the paper's), random initialisation (the paper does not say; see
 * docs/REPRODUCTION.md). The MSE is (1/n) sum_j ||U v_j - theta*_j||^2, v_j fitted on user j's own
 * samples (the excess population risk; add s_F^2 = 1e-4 for the prediction error).
 *
 * Targets (docs/REPRODUCTION.md "APriv-AltMin"): R2 the baselines (own data 1.6, single model 2.0,
 * random model 4.0), R3 non-private AltMin (<= 2e-4 after 5 epochs, ~3e-5 after 10; the spectral
 * init alone ~4e-3), R4 the Fig. 2 curves, R4b (not in the paper) half the budget on the private
 * spectral init and half on AltMin, R5 the private spectral init with the whole budget.
 *
 * Environment (read by reproduce.c's main): REPRO_ALTMIN_USERS (n, default 50000),
 * REPRO_ALTMIN_SEEDS (seeds 1..S averaged, default 5). Single-threaded; prints tables.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>

#include "accounting/zcdp.h"
#include "common/dp_err.h"
#include "common/dp_math.h"
#include "federated/fl_altmin.h"
#include "bench/reproduce/repro_util.h"

int part_altmin(int users, int seeds);

#define CLIP  1e-4
#define DELTA 1e-6
#define MAX_S 20
static const double EPS[] = {1, 2, 4, 5, 6, 8, 10};
#define N_EPS (sizeof EPS / sizeof EPS[0])
static const unsigned EPOCHS[] = {1, 2, 5, 10};
#define N_EP (sizeof EPOCHS / sizeof EPOCHS[0])

int part_altmin(int users, int seeds)
{
    gsl_set_error_handler_off();
    if (seeds > MAX_S)
        seeds = MAX_S;
    dp_err e = {0};
    double l = log(1.0 / DELTA), t0 = repro_cpu_s();
    fl_lowrank g[MAX_S];
    for (int s = 0; s < seeds; s++) {
        fl_lowrank_spec sp = fl_lowrank_paper_spec();
        sp.users = (size_t)users;
        sp.seed = (uint64_t)(s + 1);
        if (fl_lowrank_init(&sp, &g[s], &e) != DP_OK)
            return repro_fail("altmin", &e);
    }
    printf("== APriv-AltMin (Jain et al., NeurIPS 2021, Fig. 2): n = %d, m = 10, d = 50, k = 2, "
           "s_F = 0.01, delta = 1e-6, clip 1e-4, %d seeds (mean +- sd)\n",
           users, seeds);

    /* R1: the accountant at the paper's calibration */
    printf("\n-- privacy: sigma = sqrt(8 ln(1/delta))/eps per run (Lemma 4.3)\n");
    printf("%6s %10s %10s %10s\n", "eps", "rho", "eps'(BS)", "eps'(CKS)");
    for (size_t i = 0; i < N_EPS; i++) {
        fl_altmin_params p = {.k = 2,
                              .epochs = 1,
                              .eta = CLIP,
                              .zeta = CLIP,
                              .sigma = sqrt(8 * l) / EPS[i],
                              .replace = true};
        acct_event *ev = NULL;
        bool none;
        double rho = 0, e1 = 0, e2 = 0, opt;
        if (fl_altmin_event(&p, &ev, &none, &e) != DP_OK || acct_zcdp_eval(ev, &rho, &e) != DP_OK ||
            acct_zcdp_to_epsilon(rho, DELTA, ACCT_ZCDP_BS2016, &e1, &opt, &e) != DP_OK ||
            acct_zcdp_to_epsilon(rho, DELTA, ACCT_ZCDP_CKS2020, &e2, &opt, &e) != DP_OK) {
            acct_event_free(ev);
            return repro_fail("altmin", &e);
        }
        acct_event_free(ev);
        printf("%6g %10.6f %10.4f %10.4f\n", EPS[i], rho, e1, e2);
    }

    /* R2: baselines */
    double loc[MAX_S], zero[MAX_S], rnd[MAX_S], single[MAX_S];
    for (int s = 0; s < seeds; s++) {
        if (fl_lowrank_local_mse(&g[s], &loc[s], &e) != DP_OK ||
            fl_lowrank_single_mse(&g[s], 0, 0, 0, false, 1, &single[s], &e) != DP_OK)
            return repro_fail("altmin", &e);
        rnd[s] = fl_lowrank_random_mse(&g[s], 1, &zero[s]);
    }
    printf("\n-- R2 baselines (paper: own data 1.6, single model ~2.0, random ~4)\n");
    printf("own data (min-norm LS)     %.4f +- %.4f\n", repro_mean(loc, seeds),
           repro_sd(loc, seeds));
    printf("zero model                 %.4f +- %.4f\n", repro_mean(zero, seeds),
           repro_sd(zero, seeds));
    printf("single model, non-private  %.4f +- %.4f\n", repro_mean(single, seeds),
           repro_sd(single, seeds));
    printf("random model               %.4f +- %.4f\n", repro_mean(rnd, seeds),
           repro_sd(rnd, seeds));
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);

    /* R3: non-private AltMin */
    printf("\n-- R3 non-private AltMin (no clip, no noise)\n");
    printf("%-28s %12s %12s\n", "run", "MSE", "subspace");
    for (size_t i = 0; i < N_EP; i++) {
        double m[MAX_S], dd[MAX_S];
        for (int s = 0; s < seeds; s++) {
            fl_altmin_params p = {.k = 2, .epochs = EPOCHS[i], .seed = (uint64_t)s + 1};
            fl_altmin_result r;
            if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                return repro_fail("altmin", &e);
            m[s] = r.mse;
            dd[s] = r.subspace_dist;
        }
        printf("random init, E = %-11u %12.3e %12.3e\n", EPOCHS[i], repro_mean(m, seeds),
               repro_mean(dd, seeds));
    }
    for (unsigned ep = 0; ep <= 3; ep += ep == 0 ? 1 : 2) {
        double m[MAX_S], dd[MAX_S];
        for (int s = 0; s < seeds; s++) {
            fl_altmin_params p = {
                .k = 2, .epochs = ep, .init = FL_ALTMIN_INIT_SPECTRAL, .seed = (uint64_t)s + 1};
            fl_altmin_result r;
            if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                return repro_fail("altmin", &e);
            m[s] = r.mse;
            dd[s] = r.subspace_dist;
        }
        printf("spectral init, E = %-9u %12.3e %12.3e\n", ep, repro_mean(m, seeds),
               repro_mean(dd, seeds));
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);

    /* R4: Fig. 2 */
    printf("\n-- R4 Fig. 2: APriv-AltMin (random init, best E of {1,2,5,10} on the seed mean), "
           "single DP model, own data 1.6\n");
    printf("%5s %10s %8s %4s | %10s %10s %10s %10s | %10s\n", "eps", "altmin", "sd", "E*", "E=1",
           "E=2", "E=5", "E=10", "single DP");
    for (size_t i = 0; i < N_EPS; i++) {
        double best = DP_INF, best_sd = 0, per[N_EP];
        unsigned best_e = 0;
        for (size_t j = 0; j < N_EP; j++) {
            double m[MAX_S];
            for (int s = 0; s < seeds; s++) {
                fl_altmin_params p = {.k = 2,
                                      .epochs = EPOCHS[j],
                                      .eta = CLIP,
                                      .zeta = CLIP,
                                      .sigma = sqrt((double)EPOCHS[j]) * sqrt(8 * l) / EPS[i],
                                      .replace = true,
                                      .seed = (uint64_t)s + 1};
                fl_altmin_result r;
                if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                    return repro_fail("altmin", &e);
                m[s] = r.mse;
            }
            per[j] = repro_mean(m, seeds);
            if (per[j] < best) {
                best = per[j];
                best_sd = repro_sd(m, seeds);
                best_e = EPOCHS[j];
            }
        }
        double sdp[MAX_S];
        for (int s = 0; s < seeds; s++)
            if (fl_lowrank_single_mse(&g[s], CLIP, CLIP, sqrt(8 * l) / EPS[i], true,
                                      (uint64_t)s + 1, &sdp[s], &e) != DP_OK)
                return repro_fail("altmin", &e);
        printf("%5g %10.4f %8.4f %4u | %10.4f %10.4f %10.4f %10.4f | %10.4f\n", EPS[i], best,
               best_sd, best_e, per[0], per[1], per[2], per[3], repro_mean(sdp, seeds));
        fflush(stdout);
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);

    /* R4b (not in the paper): half the budget on the private spectral init, half on AltMin */
    printf("\n-- R4b private spectral init (rho/2) + APriv-AltMin (rho/2), best E of {1,2,5}\n");
    printf("%5s %10s %8s %4s\n", "eps", "MSE", "sd", "E*");
    for (size_t i = 0; i < N_EPS; i++) {
        double best = DP_INF, best_sd = 0;
        unsigned best_e = 0;
        for (size_t j = 0; j < 3; j++) {
            double m[MAX_S];
            for (int s = 0; s < seeds; s++) {
                fl_altmin_params p = {.k = 2,
                                      .epochs = EPOCHS[j],
                                      .init = FL_ALTMIN_INIT_SPECTRAL,
                                      .eta = CLIP,
                                      .zeta = CLIP,
                                      .sigma = sqrt((double)EPOCHS[j]) * sqrt(16 * l) / EPS[i],
                                      .sigma_init = sqrt(8 * l) / EPS[i],
                                      .replace = true,
                                      .seed = (uint64_t)s + 1};
                fl_altmin_result r;
                if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                    return repro_fail("altmin", &e);
                m[s] = r.mse;
            }
            if (repro_mean(m, seeds) < best) {
                best = repro_mean(m, seeds);
                best_sd = repro_sd(m, seeds);
                best_e = EPOCHS[j];
            }
        }
        printf("%5g %10.4f %8.4f %4u\n", EPS[i], best, best_sd, best_e);
        fflush(stdout);
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);

    /* R5: the private spectral init alone with the whole budget */
    printf("\n-- R5 private spectral init (Alg. 3) alone, one Gaussian release with rho = "
           "eps^2/(8 ln(1/delta)), zeta = 1e-4\n");
    printf("%5s %10s %8s %10s %8s\n", "eps", "MSE", "sd", "subspace", "sd");
    for (size_t i = 0; i < N_EPS; i++) {
        double m[MAX_S], dd[MAX_S];
        for (int s = 0; s < seeds; s++) {
            fl_altmin_params p = {.k = 2,
                                  .init = FL_ALTMIN_INIT_SPECTRAL,
                                  .zeta = CLIP,
                                  .sigma_init = sqrt(4 * l) / EPS[i],
                                  .replace = true,
                                  .seed = (uint64_t)s + 1};
            fl_altmin_result r;
            if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                return repro_fail("altmin", &e);
            m[s] = r.mse;
            dd[s] = r.subspace_dist;
        }
        printf("%5g %10.4f %8.4f %10.4f %8.4f\n", EPS[i], repro_mean(m, seeds), repro_sd(m, seeds),
               repro_mean(dd, seeds), repro_sd(dd, seeds));
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);
    for (int s = 0; s < seeds; s++)
        fl_lowrank_free(&g[s]);
    return DP_OK;
}
