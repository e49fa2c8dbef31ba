/*
 * altmin_alg1.c: the "altmin-alg1" and "altmin-scaling" parts of build/bench/reproduce: Jain, Rush,
 * Smith, Song & Thakurta, "Differentially Private Model Personalization", NeurIPS 2021, §4, on the
 * synthetic low-rank regression of federated/fl_altmin.h, through the library (fl_altmin_run).
 *
 * altmin-alg1 (seed 004's target R6): Algorithm 1 as written rather than §6's full-batch epochs.
 * n = 50,000 users, m = 12 samples each (a multiple of 4), d = 50, k = 2, s_F = 0.01, delta =
 * 1e-6, clip 1e-4 for eta and zeta, replacement sensitivities; quarter splits (samples 1-3 the
 * v-step, 4-6 the U-step, 7-12 Alg. 3's pairs and the final fit); the private spectral
 * initialisation (Alg. 3) then T disjoint batches of about n/T users (each user in one U-step);
 * sigma = sigma_init = sqrt(16 ln(1/delta)) / eps for both (Thm. 4.2: the whole run is then rho =
 * 3 eps^2 / (32 ln(1/delta)) whatever T). T = 0 is the initialisation alone at that sigma. MSE as
 * in altmin.c, the final heads fitted on samples 7-12.
 *
 * altmin-scaling (target R7; checks of the theory's shapes, not pass/fail):
 *   (a) n in {12.5k, 25k, 50k, 100k} at fixed eps, label noise s_F = 0 (the privacy-dominated
 *       regime), Alg. 1 as above with T = 1 (eps 2, 5, 10) and Alg. 3 alone at the same sigma
 *       (T = 0; eps 2, 5): the privacy excess MSE(eps) - MSE(the same run, clips and data without
 *       noise) and its least-squares log-log slope in n over the points that have not collapsed
 *       (subspace distance < 0.6; a random plane is at ~1.4) (Thm. 4.2's first term is ~ 1/(eps
 *       n)^2; expect a slope between -1 and -2);
 *   (b) d in {25, 50, 100} at fixed n = 50,000 and eps (so fixed n eps), s_F = 0, m = 10: the
 *       subspace distance ||(I - P*) U||_F of Alg. 3 alone with the whole budget (noise
 *       multiplier sqrt(4 ln(1/delta)) / eps, rho = eps^2 / (8 ln(1/delta)), as R5), the
 *       non-private Alg. 3's distance (the sampling term), and the log-log slope in d of the
 *       private distance and of its excess sqrt(dist^2 - dist_np^2) (Lemma 4.6: ~ d^1.5 / (eps
 *       n) while the distance is small).
 *
 * Environment (reproduce.c's main): REPRO_ALTMIN_USERS (n of altmin-alg1, default 50000),
 * REPRO_ALTMIN_SEEDS (seeds 1..S averaged, default 3). Single-threaded; prints tables.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>

#include "common/dp_err.h"
#include "common/dp_math.h"
#include "federated/fl_altmin.h"
#include "bench/reproduce/repro_util.h"

int part_altmin_alg1(int users, int seeds);
int part_altmin_scaling(int seeds);

#define CLIP  1e-4
#define DELTA 1e-6
#define MAX_S 20

/* Least-squares slope of log y against log x over the points with y > 0; NaN with fewer than 2. */
static double loglog_slope(const double *x, const double *y, int n)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int c = 0;
    for (int i = 0; i < n; i++) {
        if (!(y[i] > 0))
            continue;
        double lx = log(x[i]), ly = log(y[i]);
        sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
        c++;
    }
    if (c < 2)
        return DP_NAN;
    return (c * sxy - sx * sy) / (c * sxx - sx * sx);
}

/* Alg. 1 as written: quarter splits, private Alg. 3, T disjoint batches, Thm. 4.2's sigma (0:
 * non-private, no clips). */
static fl_altmin_params alg1_params(unsigned T, double eps, uint64_t seed)
{
    fl_altmin_params p = {.k = 2,
                          .epochs = T,
                          .split = FL_ALTMIN_SPLIT_QUARTERS,
                          .disjoint = true,
                          .init = FL_ALTMIN_INIT_SPECTRAL,
                          .replace = true,
                          .seed = seed};
    if (eps > 0) {
        p.eta = p.zeta = CLIP;
        p.sigma = p.sigma_init = fl_altmin_sigma(eps, DELTA, 16);
    }
    return p;
}

int part_altmin_alg1(int users, int seeds)
{
    gsl_set_error_handler_off();
    if (seeds > MAX_S)
        seeds = MAX_S;
    static const double EPS[] = {1, 2, 5, 10};
    static const unsigned TS[] = {0, 1, 2, 5};
    dp_err e = {0};
    double t0 = repro_cpu_s();
    fl_lowrank g[MAX_S];
    for (int s = 0; s < seeds; s++) {
        fl_lowrank_spec sp = fl_lowrank_paper_spec();
        sp.users = (size_t)users;
        sp.m = 12;
        sp.seed = (uint64_t)(s + 1);
        if (fl_lowrank_init(&sp, &g[s], &e) != DP_OK)
            return repro_fail("altmin", &e);
    }
    printf("== APriv-AltMin, Alg. 1 as written (R6): n = %d, m = 12 (quarter splits), d = 50, "
           "k = 2, s_F = 0.01, delta = 1e-6, clip 1e-4, private Alg. 3 then T disjoint batches, "
           "sigma = sqrt(16 ln(1/delta))/eps for both; %d seeds (mean +- sd; subspace distance "
           "in brackets)\n",
           users, seeds);
    printf("%5s %12s | %22s | %22s | %22s | %22s\n", "eps", "sigma", "T = 0 (init only)", "T = 1",
           "T = 2", "T = 5");
    for (size_t i = 0; i < sizeof EPS / sizeof EPS[0]; i++) {
        printf("%5g %12.4f", EPS[i], fl_altmin_sigma(EPS[i], DELTA, 16));
        for (size_t j = 0; j < sizeof TS / sizeof TS[0]; j++) {
            double m[MAX_S], dd[MAX_S];
            for (int s = 0; s < seeds; s++) {
                fl_altmin_params p = alg1_params(TS[j], EPS[i], (uint64_t)s + 1);
                fl_altmin_result r;
                if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
                    return repro_fail("altmin", &e);
                m[s] = r.mse;
                dd[s] = r.subspace_dist;
            }
            printf(" | %7.4f +- %6.4f [%4.2f]", repro_mean(m, seeds), repro_sd(m, seeds),
                   repro_mean(dd, seeds));
        }
        printf("\n");
        fflush(stdout);
    }
    double m[MAX_S];
    for (int s = 0; s < seeds; s++) {
        fl_altmin_params p = alg1_params(1, 0, (uint64_t)s + 1);
        fl_altmin_result r;
        if (fl_altmin_run(&g[s], &p, NULL, &r, &e) != DP_OK)
            return repro_fail("altmin", &e);
        m[s] = r.mse;
    }
    printf("non-private (no clip, no noise), T = 1: %.3e\n", repro_mean(m, seeds));
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);
    for (int s = 0; s < seeds; s++)
        fl_lowrank_free(&g[s]);
    return DP_OK;
}

int part_altmin_scaling(int seeds)
{
    gsl_set_error_handler_off();
    if (seeds > MAX_S)
        seeds = MAX_S;
    dp_err e = {0};
    double t0 = repro_cpu_s(), l = log(1.0 / DELTA);

    /* (a) n: each row against the same run without noise (same clips, splits and data) */
    static const double NS[] = {12500, 25000, 50000, 100000};
    static const struct {
        unsigned T;
        double eps;
    } ROWS[] = {{1, 2}, {1, 5}, {1, 10}, {0, 2}, {0, 5}};
    enum { NN = sizeof NS / sizeof NS[0], NR = sizeof ROWS / sizeof ROWS[0] };
    double ex[NR][NN], dist[NR][NN], base[2][NN];
    for (int i = 0; i < NN; i++) {
        double acc[NR][2] = {{0}}, accb[2] = {0};
        for (int s = 0; s < seeds; s++) {
            fl_lowrank_spec sp = fl_lowrank_paper_spec();
            sp.users = (size_t)NS[i];
            sp.m = 12;
            sp.sigma_f = 0;
            sp.seed = (uint64_t)(s + 1);
            fl_lowrank g;
            if (fl_lowrank_init(&sp, &g, &e) != DP_OK)
                return repro_fail("altmin", &e);
            int rc = DP_OK;
            double b[2] = {0};
            for (unsigned t = 0; t < 2 && rc == DP_OK; t++) {
                fl_altmin_params p = alg1_params(t, 1, (uint64_t)s + 1);
                p.sigma = p.sigma_init = 0; /* the same clips, no noise */
                fl_altmin_result r;
                rc = fl_altmin_run(&g, &p, NULL, &r, &e);
                b[t] = r.mse;
                accb[t] += r.mse / seeds;
            }
            for (int q = 0; q < NR && rc == DP_OK; q++) {
                fl_altmin_params p = alg1_params(ROWS[q].T, ROWS[q].eps, (uint64_t)s + 1);
                fl_altmin_result r;
                rc = fl_altmin_run(&g, &p, NULL, &r, &e);
                acc[q][0] += (r.mse - b[ROWS[q].T]) / seeds;
                acc[q][1] += r.subspace_dist / seeds;
            }
            fl_lowrank_free(&g);
            if (rc != DP_OK)
                return repro_fail("altmin", &e);
        }
        for (int q = 0; q < NR; q++) {
            ex[q][i] = acc[q][0];
            dist[q][i] = acc[q][1];
        }
        base[0][i] = accb[0];
        base[1][i] = accb[1];
    }
    printf("== R7 (a): privacy excess against n, s_F = 0, m = 12 (quarter splits), Thm. 4.2's "
           "sigma, %d seeds: mean MSE(eps) - MSE(the same run without noise) [subspace "
           "distance]; slope of log excess in log n over the points with distance < 0.6 (not "
           "collapsed)\n",
           seeds);
    printf("%-22s", "run");
    for (int i = 0; i < NN; i++)
        printf(" | %9.0f %8s", NS[i], "");
    printf(" | slope (points)\n");
    for (int q = 0; q < NR; q++) {
        double xs[NN], ys[NN];
        int c = 0;
        for (int i = 0; i < NN; i++)
            if (dist[q][i] < 0.6) {
                xs[c] = NS[i];
                ys[c++] = ex[q][i];
            }
        char name[40];
        snprintf(name, sizeof name, "%s, eps %g", ROWS[q].T ? "Alg. 1, T = 1" : "Alg. 3 alone",
                 ROWS[q].eps);
        printf("%-22s", name);
        for (int i = 0; i < NN; i++)
            printf(" | %9.3e [%5.3f]", ex[q][i], dist[q][i]);
        printf(" | %6.2f (%d)\n", loglog_slope(xs, ys, c), c);
    }
    for (int t = 1; t >= 0; t--) {
        printf("%-22s", t ? "no noise, T = 1" : "no noise, Alg. 3 alone");
        for (int i = 0; i < NN; i++)
            printf(" | %9.3e %8s", base[t][i], "");
        printf("\n");
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);

    /* (b) d */
    static const double DS[] = {25, 50, 100};
    static const double EPS_D[] = {2, 5};
    enum { ND = sizeof DS / sizeof DS[0] };
    printf("\n== R7 (b): subspace distance of Alg. 3 alone (whole budget, noise multiplier "
           "sqrt(4 ln(1/delta))/eps) against d, n = 50000, m = 10, s_F = 0, %d seeds: private "
           "[non-private] and the excess sqrt(dist^2 - dist_np^2); slopes in log d\n",
           seeds);
    for (size_t a = 0; a < sizeof EPS_D / sizeof EPS_D[0]; a++) {
        double dd[ND], xd[ND];
        printf("eps %g:", EPS_D[a]);
        for (int i = 0; i < ND; i++) {
            double dp_[MAX_S], dn[MAX_S];
            for (int s = 0; s < seeds; s++) {
                fl_lowrank_spec sp = fl_lowrank_paper_spec();
                sp.d = (size_t)DS[i];
                sp.sigma_f = 0;
                sp.seed = (uint64_t)(s + 1);
                fl_lowrank g;
                if (fl_lowrank_init(&sp, &g, &e) != DP_OK)
                    return repro_fail("altmin", &e);
                fl_altmin_params p = {.k = 2,
                                      .init = FL_ALTMIN_INIT_SPECTRAL,
                                      .zeta = CLIP,
                                      .sigma_init = sqrt(4 * l) / EPS_D[a],
                                      .replace = true,
                                      .seed = (uint64_t)s + 1};
                fl_altmin_params pn = {
                    .k = 2, .init = FL_ALTMIN_INIT_SPECTRAL, .zeta = CLIP, .seed = (uint64_t)s + 1};
                fl_altmin_result r, rn;
                int rc = fl_altmin_run(&g, &p, NULL, &r, &e);
                if (rc == DP_OK)
                    rc = fl_altmin_run(&g, &pn, NULL, &rn, &e);
                fl_lowrank_free(&g);
                if (rc != DP_OK)
                    return repro_fail("altmin", &e);
                dp_[s] = r.subspace_dist;
                dn[s] = rn.subspace_dist;
            }
            dd[i] = repro_mean(dp_, seeds);
            double dnm = repro_mean(dn, seeds);
            xd[i] = dd[i] > dnm ? sqrt(dd[i] * dd[i] - dnm * dnm) : 0.0;
            printf("  d = %3.0f: %6.4f +- %6.4f [%6.4f] excess %6.4f;", DS[i], dd[i],
                   repro_sd(dp_, seeds), dnm, xd[i]);
            fflush(stdout);
        }
        printf("  slope %.2f (excess %.2f)\n", loglog_slope(DS, dd, ND), loglog_slope(DS, xd, ND));
    }
    printf("[%.0f s cpu]\n", repro_cpu_s() - t0);
    return DP_OK;
}
