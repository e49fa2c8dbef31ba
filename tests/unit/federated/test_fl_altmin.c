/*
 * test_fl_altmin.c: federated/fl_altmin (Jain, Rush, Smith, Song & Thakurta, "Differentially
 * Private Model Personalization", NeurIPS 2021: APriv-AltMin, Algs. 1-2; APriv-init, Alg. 3; the
 * synthetic low-rank regression of §6):
 *   - the generator: unit columns of U*, an orthonormal basis of their span, y - <x, theta*> with
 *     the label noise's std, the same data on every call;
 *   - the privacy numbers of §4 and §6: rho = eps^2 / (8 ln(1/delta)) of one AltMin run at the
 *     noise multiplier of Lemma 4.3 (the paper's printed 0.009 / 0.04 / 0.23 / 0.90), their
 *     (eps, delta) back-conversions, and Thm. 4.2's init + AltMin total 3 eps^2 / (32 ln(1/delta));
 *   - the sensitivities the noise is calibrated to: one user's term of Alg. 2 (A and b) and of
 *     Alg. 3 has norm at most eta^2, eta zeta and zeta^2 even for adversarial data;
 *   - Alg. 2's statistics equal the brute-force sums of clip(v (x) x) outer products;
 *   - recovery: non-private AltMin from a random start drives the subspace distance down to the
 *     noise floor; the non-private spectral init lands near U*; a private run with a very large
 *     epsilon ends close to the non-private run with the same clips, a small epsilon far from it;
 *   - the baselines' expectations: own data (1 - m/d) k, zero and single model ~k, random 2k;
 *   - Alg. 1 as written (quarter splits, disjoint batches): the batches partition a seeded
 *     permutation of the users, Thm. 4.2's sigma, a run costs one step whatever the number of
 *     batches, and without noise or clips it is exact alternating minimisation on the quarters.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "accounting/zcdp.h"
#include "common/dp_math.h"
#include "federated/fl_altmin.h"

static dp_err E;

static fl_lowrank_spec small_spec(void)
{
    fl_lowrank_spec s = fl_lowrank_paper_spec();
    s.users = 2000;
    s.d = 10;
    s.seed = 7;
    return s;
}

static double sq(double x)
{
    return x * x;
}

static void generator_has_the_papers_law(void **state)
{
    (void)state;
    fl_lowrank_spec s = small_spec();
    s.users = 200;
    s.m = 400;
    s.sigma_f = 0.5;
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    size_t d = s.d, k = s.k;
    for (size_t c = 0; c < k; c++) {
        double n2 = 0, b2 = 0;
        for (size_t i = 0; i < d; i++) {
            n2 += sq(g.u_star[c * d + i]);
            b2 += sq(g.basis[c * d + i]);
        }
        assert_close(n2, 1.0, 1e-12, 0);
        assert_close(b2, 1.0, 1e-12, 0);
    }
    /* the basis spans U*: U*'s distance to its own span is 0 */
    double ub[2 * 10];
    memcpy(ub, g.basis, sizeof ub);
    assert_true(fl_lowrank_subspace_dist(&g, ub) < 1e-12);
    double *x = malloc(s.m * d * sizeof *x), *y = malloc(s.m * sizeof *y);
    double *x2 = malloc(s.m * d * sizeof *x2), *y2 = malloc(s.m * sizeof *y2), th[10];
    double res2 = 0, xx = 0;
    for (size_t j = 0; j < s.users; j++) {
        fl_lowrank_user(&g, j, x, y);
        fl_lowrank_theta(&g, j, th);
        for (size_t i = 0; i < s.m; i++) {
            double p = 0;
            for (size_t q = 0; q < d; q++) {
                p += x[i * d + q] * th[q];
                xx += sq(x[i * d + q]);
            }
            res2 += sq(y[i] - p);
        }
    }
    double cnt = (double)(s.users * s.m);
    assert_close(sqrt(res2 / cnt), 0.5, 0.02, 0);       /* 80,000 draws: sd of the estimate 0.25% */
    assert_close(xx / (cnt * (double)d), 1.0, 0.02, 0); /* x ~ N(0, I) */
    fl_lowrank_user(&g, 17, x, y);
    fl_lowrank_user(&g, 17, x2, y2);
    assert_memory_equal(x, x2, s.m * d * sizeof *x);
    assert_memory_equal(y, y2, s.m * sizeof *y);
    free(x), free(y), free(x2), free(y2);
    fl_lowrank_free(&g);
}

/* §3 of the paper's numbers: at delta = 1e-6 the noise multiplier of Lemma 4.3,
 * sigma = sqrt(8 ln(1/delta)) / eps, makes one AltMin run (two Gaussian releases) rho =
 * eps^2 / (8 ln(1/delta)) zCDP: the paper prints 0.009, 0.04, 0.23, 0.90 for eps = 1, 2, 5, 10. */
static void privacy_numbers_of_section_4(void **state)
{
    (void)state;
    const double eps[4] = {1, 2, 5, 10};
    const double rho_ref[4] = {0.009048, 0.036191, 0.226195, 0.904780};
    const double printed[4] = {0.009, 0.04, 0.23, 0.90};
    const double bs[4] = {0.7162, 1.4504, 3.7617, 7.9758};
    const double cks[4] = {0.5894, 1.2367, 3.3513, 7.3288};
    const double thm42[4] = {0.006786, 0.027143, 0.169646, 0.678585};
    double l = log(1e6);
    for (size_t i = 0; i < 4; i++) {
        fl_altmin_params p = {.k = 2,
                              .epochs = 1,
                              .init = FL_ALTMIN_INIT_RANDOM,
                              .eta = 1e-4,
                              .zeta = 1e-4,
                              .sigma = sqrt(8 * l) / eps[i],
                              .replace = true};
        acct_event *ev = NULL;
        bool none = true;
        assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
        assert_false(none);
        double rho = 0, e1 = 0, e2 = 0, opt = 0;
        assert_int_equal(acct_zcdp_eval(ev, &rho, &E), DP_OK);
        assert_close(rho, rho_ref[i], 1e-4, 0);
        assert_close(rho, printed[i], 0.11, 0); /* 2 significant digits: 0.04 vs 0.0362 */
        assert_int_equal(acct_zcdp_to_epsilon(rho, 1e-6, ACCT_ZCDP_BS2016, &e1, &opt, &E), DP_OK);
        assert_int_equal(acct_zcdp_to_epsilon(rho, 1e-6, ACCT_ZCDP_CKS2020, &e2, &opt, &E), DP_OK);
        assert_close(e1, bs[i], 1e-4, 0);
        assert_close(e2, cks[i], 1e-3, 0);
        assert_true(e1 <= eps[i]); /* Lemma 4.3: (eps, delta)-DP */
        acct_event_free(ev);
        /* Thm. 4.2: init + AltMin at sigma = sqrt(16 ln(1/delta)) / eps: 3 eps^2 / (32 ln) */
        p.init = FL_ALTMIN_INIT_SPECTRAL;
        p.sigma = p.sigma_init = sqrt(16 * l) / eps[i];
        assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
        assert_int_equal(acct_zcdp_eval(ev, &rho, &E), DP_OK);
        assert_close(rho, thm42[i], 1e-4, 0);
        acct_event_free(ev);
    }
    /* E epochs at sigma sqrt(E) cost what one epoch costs at sigma (§6's per-epoch noise) */
    fl_altmin_params p = {.k = 2, .epochs = 5, .eta = 1, .zeta = 1, .sigma = sqrt(5.0) * 2.1};
    acct_event *ev = NULL;
    bool none;
    double rho5 = 0;
    assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
    assert_int_equal(acct_zcdp_eval(ev, &rho5, &E), DP_OK);
    assert_close(rho5, 1.0 / sq(2.1), 1e-12, 0);
    acct_event_free(ev);
    /* a non-private run releases nothing */
    p.sigma = 0;
    assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
    assert_true(none);
    assert_null(ev);
}

/* Upper-triangle (diagonal included) L2 norm of the n x n column-major a. */
static double upper_norm(const double *a, size_t n)
{
    double s = 0;
    for (size_t q = 0; q < n; q++)
        for (size_t p = 0; p <= q; p++)
            s += sq(a[p + q * n]);
    return sqrt(s);
}

static void one_users_terms_are_bounded_by_the_clips(void **state)
{
    (void)state;
    enum { D = 6, K = 2, M = 8, DK = D * K };
    double x[M * D], y[M], v[K] = {3.0, -7.5}, a[DK * DK], b[DK], mm[D * D];
    const double eta = 0.37, zeta = 0.61;
    /* adversarial: large aligned samples and responses */
    for (size_t i = 0; i < M; i++) {
        for (size_t q = 0; q < D; q++)
            x[i * D + q] = 100.0 * (q == 0 ? 1.0 : 0.3);
        y[i] = i % 2 ? 1e3 : -1e3;
    }
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    fl_altmin_ustats_add(x, y, M, D, K, v, eta, zeta, a, b);
    double bn = 0;
    for (size_t i = 0; i < DK; i++)
        bn += sq(b[i]);
    assert_true(upper_norm(a, DK) <= eta * eta * (1 + 1e-12));
    assert_true(sqrt(bn) <= eta * zeta * (1 + 1e-12));
    /* all samples equal: the bound is attained for A (||W W^T||_F = eta^2 for every sample) */
    double full = 0;
    for (size_t q = 0; q < DK; q++)
        for (size_t p = 0; p < DK; p++) {
            double e = p <= q ? a[p + q * DK] : a[q + p * DK];
            full += sq(e);
        }
    assert_close(sqrt(full), eta * eta, 1e-12, 0);
    memset(mm, 0, sizeof mm);
    fl_altmin_init_add(x, y, M, D, zeta, mm);
    assert_true(upper_norm(mm, D) <= zeta * zeta * (1 + 1e-12));
}

/* Alg. 2 line 2 by brute force: W_i = clip(v (x) x_i; eta) (v (x) x = [v_1 x; ...; v_k x]),
 * A = mean W W^T, b = mean clip(y; zeta) W. */
static void ustats_equal_the_brute_force_sums(void **state)
{
    (void)state;
    enum { D = 5, K = 3, M = 7, DK = D * K };
    double x[M * D], y[M], v[K] = {0.4, -1.3, 2.2}, a[DK * DK], b[DK];
    for (size_t i = 0; i < M * D; i++)
        x[i] = sin(2.385 * (double)i + 0.7) * (1.0 + (double)(i % 3));
    for (size_t i = 0; i < M; i++)
        y[i] = cos(1.117 * (double)i) * 3.0;
    const double eta = 2.5, zeta = 1.5;
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    fl_altmin_ustats_add(x, y, M, D, K, v, eta, zeta, a, b);
    double ra[DK * DK] = {0}, rb[DK] = {0};
    for (size_t i = 0; i < M; i++) {
        double w[DK], nrm = 0;
        for (size_t c = 0; c < K; c++)
            for (size_t p = 0; p < D; p++) {
                w[c * D + p] = v[c] * x[i * D + p];
                nrm += sq(w[c * D + p]);
            }
        nrm = sqrt(nrm);
        double cl = nrm > eta ? eta / nrm : 1.0;
        double yt = fabs(y[i]) > zeta ? (y[i] > 0 ? zeta : -zeta) : y[i];
        for (size_t r = 0; r < DK; r++) {
            rb[r] += yt * cl * w[r] / M;
            for (size_t c = 0; c < DK; c++)
                ra[r + c * DK] += cl * cl * w[r] * w[c] / M;
        }
    }
    for (size_t q = 0; q < DK; q++) {
        assert_close(b[q], rb[q], 1e-12, 1e-14);
        for (size_t p = 0; p <= q; p++)
            assert_close(a[p + q * DK], ra[p + q * DK], 1e-12, 1e-14);
    }
}

static void vfit_recovers_an_exact_head(void **state)
{
    (void)state;
    enum { D = 4, K = 2, M = 6 };
    double u[D * K], x[M * D], y[M], v[K], vt[K] = {1.25, -0.5};
    for (size_t i = 0; i < D * K; i++)
        u[i] = cos(0.9 * (double)i + 0.2);
    fl_altmin_orthonormalize(u, D, K);
    for (size_t i = 0; i < M * D; i++)
        x[i] = sin(1.7 * (double)i);
    for (size_t i = 0; i < M; i++) {
        y[i] = 0;
        for (size_t c = 0; c < K; c++)
            for (size_t q = 0; q < D; q++)
                y[i] += x[i * D + q] * u[c * D + q] * vt[c];
    }
    fl_altmin_vfit(u, D, K, x, y, M, v);
    assert_close(v[0], vt[0], 1e-8, 0);
    assert_close(v[1], vt[1], 1e-8, 0);
}

static void nonprivate_altmin_recovers_the_subspace(void **state)
{
    (void)state;
    fl_lowrank_spec s = small_spec();
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    fl_altmin_params p = {.k = 2, .init = FL_ALTMIN_INIT_RANDOM, .seed = 3};
    fl_altmin_result r[4];
    const unsigned ep[4] = {0, 1, 3, 8};
    for (size_t i = 0; i < 4; i++) {
        p.epochs = ep[i];
        assert_int_equal(fl_altmin_run(&g, &p, NULL, &r[i], &E), DP_OK);
        assert_int_equal(r[i].kept, 0);
    }
    assert_true(r[0].subspace_dist > 0.5); /* a random 2-plane in R^10 */
    for (size_t i = 1; i < 4; i++)
        assert_true(r[i].subspace_dist < r[i - 1].subspace_dist);
    assert_true(r[3].subspace_dist < 1e-2);
    /* the per-user floor sigma_F^2 k / (m - k - 1) = 2.9e-5 (§3), within sampling error */
    assert_true(r[3].mse < 1e-4);
    assert_true(r[3].mse > 1e-5);
    /* the non-private spectral initialisation (Alg. 3, no clips) lands near U* by itself */
    p.init = FL_ALTMIN_INIT_SPECTRAL;
    p.epochs = 0;
    fl_altmin_result sp;
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &sp, &E), DP_OK);
    assert_true(sp.init_dist < 0.35);
    assert_true(sp.mse < r[0].mse / 4);
    fl_lowrank_free(&g);
}

static void private_altmin_tends_to_the_nonprivate_one(void **state)
{
    (void)state;
    gsl_set_error_handler_off();
    fl_lowrank_spec s = small_spec();
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    double l = log(1e6);
    /* §6's clips: every W and y~ at norm 1e-4 (normalised statistics) */
    fl_altmin_params p = {.k = 2,
                          .epochs = 5,
                          .init = FL_ALTMIN_INIT_RANDOM,
                          .eta = 1e-4,
                          .zeta = 1e-4,
                          .replace = true,
                          .seed = 5};
    fl_altmin_result np, big, small;
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &np, &E), DP_OK);
    assert_true(np.subspace_dist < 0.1);     /* the clipped estimator still finds span(U*) */
    p.sigma = sqrt(5.0) * sqrt(8 * l) / 1e4; /* eps = 10^4 over 5 epochs */
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &big, &E), DP_OK);
    assert_close(big.mse, np.mse, 0.5, 1e-4);
    p.sigma = sqrt(5.0) * sqrt(8 * l) / 0.5; /* eps = 0.5: noise swamps 2000 users */
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &small, &E), DP_OK);
    assert_true(small.mse > 10 * big.mse);
    assert_true(small.subspace_dist > big.subspace_dist);
    /* the private spectral init: more noise, a worse start */
    p.init = FL_ALTMIN_INIT_SPECTRAL;
    p.epochs = 0;
    p.sigma = 0;
    p.sigma_init = sqrt(4 * l) / 1e3;
    fl_altmin_result i1, i2;
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &i1, &E), DP_OK);
    p.sigma_init = sqrt(4 * l) / 0.5;
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &i2, &E), DP_OK);
    assert_true(i1.init_dist < i2.init_dist);
    assert_true(i1.mse < i2.mse);
    fl_lowrank_free(&g);
}

static void baselines_have_their_expectations(void **state)
{
    (void)state;
    gsl_set_error_handler_off();
    fl_lowrank_spec s = small_spec();
    s.d = 20; /* m = 10 < d: own data is underdetermined */
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    double local = 0, single = 0, zero = 0, rnd;
    assert_int_equal(fl_lowrank_local_mse(&g, &local, &E), DP_OK);
    assert_close(local, (1.0 - 10.0 / 20.0) * 2.0, 0.05, 0); /* (1 - m/d) k */
    rnd = fl_lowrank_random_mse(&g, 1, &zero);
    assert_close(zero, 2.0, 0.05, 0); /* E||theta*||^2 = k */
    assert_close(rnd, 4.0, 0.05, 0);  /* 2k */
    assert_int_equal(fl_lowrank_single_mse(&g, 0, 0, 0, false, 1, &single, &E), DP_OK);
    assert_close(single, 2.0, 0.05, 0);
    double dp = 0;
    assert_int_equal(fl_lowrank_single_mse(&g, 1e-4, 1e-4, 10.0, true, 1, &dp, &E), DP_OK);
    assert_true(dp > 1.9); /* Fig. 2: the single model stays near k */
    fl_lowrank_free(&g);
}

/* A small version of Fig. 2 (the full-size run is `make reproduce PART=altmin`): n = 4000 users
 * of d = 20, m = 10, clip 1e-4, delta = 1e-6, 5 epochs at the paper's per-epoch noise: the
 * personalised MSE falls as epsilon grows, beats each user alone ((1 - m/d) k = 1) from a
 * moderate epsilon on, and the single DP model stays near k = 2 at every epsilon. */
static void fig2_trends_hold_at_a_small_scale(void **state)
{
    (void)state;
    gsl_set_error_handler_off();
    fl_lowrank_spec s = fl_lowrank_paper_spec();
    s.users = 4000;
    s.d = 20;
    s.seed = 3;
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    double l = log(1e6), local = 0, mse[3];
    const double eps[3] = {2, 10, 50};
    assert_int_equal(fl_lowrank_local_mse(&g, &local, &E), DP_OK);
    for (size_t i = 0; i < 3; i++) {
        mse[i] = DP_INF; /* the best number of epochs, as the paper picks it */
        const unsigned ep[3] = {1, 2, 5};
        for (size_t e = 0; e < 3; e++) {
            fl_altmin_params p = {.k = 2,
                                  .epochs = ep[e],
                                  .eta = 1e-4,
                                  .zeta = 1e-4,
                                  .sigma = sqrt((double)ep[e]) * sqrt(8 * l) / eps[i],
                                  .replace = true,
                                  .seed = 2};
            fl_altmin_result r;
            assert_int_equal(fl_altmin_run(&g, &p, NULL, &r, &E), DP_OK);
            mse[i] = fmin(mse[i], r.mse);
        }
        double single = 0;
        assert_int_equal(
            fl_lowrank_single_mse(&g, 1e-4, 1e-4, sqrt(8 * l) / eps[i], true, 2, &single, &E),
            DP_OK);
        assert_true(single > 1.8);
    }
    if (!(mse[0] > mse[1] && mse[1] > mse[2]))
        fail_msg("MSE not decreasing in epsilon: %g %g %g", mse[0], mse[1], mse[2]);
    if (!(mse[1] < local && mse[2] < local / 10))
        fail_msg("private AltMin (%g at eps 10, %g at eps 50) does not beat own data (%g)", mse[1],
                 mse[2], local);
    fl_lowrank_free(&g);
}

/* Alg. 1 as written (split quarters, disjoint batches): the order is a seeded permutation, the
 * batches partition it, Thm. 4.2's sigma = sqrt(16 ln(1/delta)) / eps, and the run costs one
 * step whatever the number of batches: rho = 3 eps^2 / (32 ln(1/delta)) (§3 of the digest's
 * table: 0.006786 at eps 1, 0.678585 at eps 10). */
static void alg1_batches_are_disjoint_and_cost_one_step(void **state)
{
    (void)state;
    const size_t n = 1001;
    size_t *perm = malloc(n * sizeof *perm), *other = malloc(n * sizeof *other);
    unsigned char *seen = calloc(n, 1);
    assert_true(perm && other && seen);
    fl_altmin_order(n, 5, perm);
    fl_altmin_order(n, 5, other);
    assert_memory_equal(perm, other, n * sizeof *perm); /* a function of the seed */
    fl_altmin_order(n, 6, other);
    assert_true(memcmp(perm, other, n * sizeof *perm) != 0);
    size_t fixed = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(perm[i] < n);
        assert_int_equal(seen[perm[i]], 0);
        seen[perm[i]] = 1;
        fixed += perm[i] == i;
    }
    assert_true(fixed < 10); /* a uniform permutation has ~1 fixed point, not the identity */
    const unsigned ts[5] = {1, 2, 5, 7, 1001};
    for (size_t a = 0; a < 5; a++) {
        size_t prev_hi = 0, lo, hi;
        for (unsigned t = 0; t < ts[a]; t++) {
            fl_altmin_batch(n, ts[a], t, &lo, &hi);
            assert_int_equal(lo, prev_hi); /* consecutive, so disjoint in the order */
            assert_true(hi > lo);
            double size = (double)(hi - lo), want = (double)n / ts[a];
            assert_true(fabs(size - want) < 1.0);
            prev_hi = hi;
        }
        assert_int_equal(prev_hi, n); /* and they cover every user */
    }
    double l = log(1e6);
    assert_close(fl_altmin_sigma(1, 1e-6, 16), 14.8677, 1e-5, 0);
    assert_close(fl_altmin_sigma(1, 1e-6, 8), 10.5130, 1e-5, 0);
    assert_close(fl_altmin_sigma(5, 1e-6, 16), 2.9735, 1e-4, 0);
    assert_true(isnan(fl_altmin_sigma(0, 1e-6, 16)) && isnan(fl_altmin_sigma(1, 1, 16)));
    const double eps[2] = {1, 10}, thm42[2] = {0.006786, 0.678585};
    for (size_t i = 0; i < 2; i++)
        for (unsigned t = 1; t <= 5; t += 2) {
            double sg = fl_altmin_sigma(eps[i], 1e-6, 16);
            fl_altmin_params p = {.k = 2,
                                  .epochs = t,
                                  .split = FL_ALTMIN_SPLIT_QUARTERS,
                                  .disjoint = true,
                                  .init = FL_ALTMIN_INIT_SPECTRAL,
                                  .eta = 1e-4,
                                  .zeta = 1e-4,
                                  .sigma = sg,
                                  .sigma_init = sg,
                                  .replace = true};
            acct_event *ev = NULL;
            bool none = true;
            double rho = 0;
            assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
            assert_int_equal(acct_zcdp_eval(ev, &rho, &E), DP_OK);
            assert_close(rho, thm42[i], 1e-4, 0);
            assert_close(rho, 3 * sq(eps[i]) / (32 * l), 1e-12, 0);
            acct_event_free(ev);
            /* full batches: every user in all t steps */
            p.disjoint = false;
            assert_int_equal(fl_altmin_event(&p, &ev, &none, &E), DP_OK);
            assert_int_equal(acct_zcdp_eval(ev, &rho, &E), DP_OK);
            assert_close(rho, 1 / (2 * sq(sg)) + t / sq(sg), 1e-12, 0);
            acct_event_free(ev);
        }
    free(perm);
    free(other);
    free(seen);
}

/* Solves the n x n system a z = b (column-major a) by Gaussian elimination with partial pivoting,
 * in place (b receives z). */
static void gauss_solve(double *a, double *b, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        size_t piv = c;
        for (size_t r = c + 1; r < n; r++)
            if (fabs(a[r + c * n]) > fabs(a[piv + c * n]))
                piv = r;
        for (size_t q = 0; q < n; q++) {
            double t = a[c + q * n];
            a[c + q * n] = a[piv + q * n];
            a[piv + q * n] = t;
        }
        double t = b[c];
        b[c] = b[piv];
        b[piv] = t;
        for (size_t r = c + 1; r < n; r++) {
            double f = a[r + c * n] / a[c + c * n];
            for (size_t q = c; q < n; q++)
                a[r + q * n] -= f * a[c + q * n];
            b[r] -= f * b[c];
        }
    }
    for (size_t c = n; c-- > 0;) {
        for (size_t q = c + 1; q < n; q++)
            b[c] -= a[c + q * n] * b[q];
        b[c] /= a[c + c * n];
    }
}

/* The exact least-squares head on samples x (cnt x d), y: (Z^T Z) v = Z^T y, Z = X U. */
static void exact_head(const double *u, size_t d, size_t k, const double *x, const double *y,
                       size_t cnt, double *v)
{
    double zz[4 * 4] = {0}, zy[4] = {0}, z[4];
    for (size_t i = 0; i < cnt; i++) {
        for (size_t c = 0; c < k; c++) {
            z[c] = 0;
            for (size_t r = 0; r < d; r++)
                z[c] += x[i * d + r] * u[c * d + r];
        }
        for (size_t c = 0; c < k; c++) {
            zy[c] += z[c] * y[i];
            for (size_t e = 0; e < k; e++)
                zz[c + e * k] += z[c] * z[e];
        }
    }
    gauss_solve(zz, zy, k);
    memcpy(v, zy, k * sizeof *v);
}

/* Without noise or clips, Alg. 1 with quarter splits and disjoint batches is exact alternating
 * minimisation on the quarters: Alg. 3 on samples 6-11 of each user, then for each of T = 2
 * batches of the run's order the users' exact heads on samples 0-2 and the exact least-squares U
 * on samples 3-5 (the normal equations of sum_j sum_i (y - <x, U v_j>)^2 solved here by
 * elimination, then orthonormalised), then the final heads on samples 6-11. Checked against the
 * library's run: the same subspace to 1e-7 and the same MSE; reading the wrong quarter, all the
 * samples, or every user in both steps moves the subspace by far more (asserted too). */
static void alg1_nonprivate_limit_is_exact_altmin_on_its_quarters(void **state)
{
    (void)state;
    fl_lowrank_spec s = fl_lowrank_paper_spec();
    s.users = 240;
    s.m = 12;
    s.d = 6;
    s.seed = 11;
    const size_t d = 6, k = 2, n = 240, dk = d * k;
    fl_lowrank g;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    fl_altmin_params p = {.k = k,
                          .epochs = 2,
                          .split = FL_ALTMIN_SPLIT_QUARTERS,
                          .disjoint = true,
                          .init = FL_ALTMIN_INIT_SPECTRAL,
                          .seed = 9};
    double ulib[12], u[12], x[12 * 6], y[12], v[2], th[6];
    fl_altmin_result r;
    assert_int_equal(fl_altmin_run(&g, &p, ulib, &r, &E), DP_OK);
    assert_int_equal(r.kept, 0);
    /* Alg. 3 on the second half, noiseless */
    double mm[36] = {0};
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_user(&g, j, x, y);
        fl_altmin_init_add(x + 6 * d, y + 6, 6, d, 0, mm);
    }
    assert_int_equal(fl_altmin_init_finish(mm, d, k, 0, 1, u, &E), DP_OK);
    assert_close(fl_lowrank_subspace_dist(&g, u), r.init_dist, 1e-9, 1e-12);
    size_t order[240];
    fl_altmin_order(n, p.seed, order);
    for (unsigned t = 0; t < 2; t++) {
        double a[144] = {0}, b[12] = {0};
        size_t lo, hi;
        fl_altmin_batch(n, 2, t, &lo, &hi);
        for (size_t q = lo; q < hi; q++) {
            fl_lowrank_user(&g, order[q], x, y);
            exact_head(u, d, k, x, y, 3, v); /* quarter 1 */
            for (size_t i = 3; i < 6; i++) { /* quarter 2: w = v (x) x */
                double w[12];
                for (size_t c = 0; c < k; c++)
                    for (size_t e = 0; e < d; e++)
                        w[c * d + e] = v[c] * x[i * d + e];
                for (size_t c = 0; c < dk; c++) {
                    b[c] += y[i] * w[c];
                    for (size_t e = 0; e < dk; e++)
                        a[c + e * dk] += w[c] * w[e];
                }
            }
        }
        gauss_solve(a, b, dk);
        memcpy(u, b, dk * sizeof *u);
        fl_altmin_orthonormalize(u, d, k);
    }
    /* the same subspace: equal projections U U^T */
    for (size_t i = 0; i < d; i++)
        for (size_t e = 0; e < d; e++) {
            double pl = 0, pb = 0;
            for (size_t c = 0; c < k; c++) {
                pl += ulib[c * d + i] * ulib[c * d + e];
                pb += u[c * d + i] * u[c * d + e];
            }
            assert_close(pl, pb, 0, 1e-7);
        }
    /* the final heads on the second half */
    double mse = 0;
    for (size_t j = 0; j < n; j++) {
        fl_lowrank_user(&g, j, x, y);
        exact_head(ulib, d, k, x + 6 * d, y + 6, 6, v);
        fl_lowrank_theta(&g, j, th);
        for (size_t i = 0; i < d; i++)
            mse += sq(th[i] - (ulib[i] * v[0] + ulib[d + i] * v[1]));
    }
    assert_close(r.mse, mse / (double)n, 1e-6, 0);
    assert_true(r.subspace_dist < 0.3); /* and it learns (a random plane: ~1.2) */
    /* the other modes give other answers: the mode is what made them equal */
    fl_altmin_params q = p;
    q.disjoint = false;
    fl_altmin_result rq;
    double uq[12];
    assert_int_equal(fl_altmin_run(&g, &q, uq, &rq, &E), DP_OK);
    assert_true(fabs(rq.subspace_dist - r.subspace_dist) > 1e-4);
    q = p;
    q.split = FL_ALTMIN_SPLIT_NONE;
    assert_int_equal(fl_altmin_run(&g, &q, uq, &rq, &E), DP_OK);
    assert_true(fabs(rq.init_dist - r.init_dist) > 1e-4);
    /* quarters need m % 4 == 0; disjoint batches at most one per user */
    fl_lowrank_free(&g);
    s.m = 10;
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_OK);
    E = (dp_err){0};
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &r, &E), DP_EINVAL);
    assert_string_equal(E.field, "split");
    p.split = FL_ALTMIN_SPLIT_NONE;
    p.epochs = 241;
    E = (dp_err){0};
    assert_int_equal(fl_altmin_run(&g, &p, NULL, &r, &E), DP_EINVAL);
    assert_string_equal(E.field, "epochs");
    p.epochs = 2;
    p.split = (fl_altmin_split)7;
    E = (dp_err){0};
    assert_int_equal(fl_altmin_params_check(&p, 6, &E), DP_EINVAL);
    assert_string_equal(E.field, "split");
    fl_lowrank_free(&g);
}

static void params_are_checked_by_field(void **state)
{
    (void)state;
    fl_altmin_params p = {.k = 2, .epochs = 2, .eta = 1, .zeta = 1, .sigma = 1};
    assert_int_equal(fl_altmin_params_check(&p, 10, &E), DP_OK);
    p.k = 11;
    E = (dp_err){0};
    assert_int_equal(fl_altmin_params_check(&p, 10, &E), DP_EINVAL);
    assert_string_equal(E.field, "k");
    p.k = 2;
    p.eta = 0;
    E = (dp_err){0};
    assert_int_equal(fl_altmin_params_check(&p, 10, &E), DP_EINVAL);
    assert_string_equal(E.field, "eta");
    p.eta = 1;
    p.init = FL_ALTMIN_INIT_SPECTRAL; /* private AltMin after an unnoised init would leak */
    E = (dp_err){0};
    assert_int_equal(fl_altmin_params_check(&p, 10, &E), DP_EINVAL);
    assert_string_equal(E.field, "sigma_init");
    p.sigma_init = DP_NAN;
    E = (dp_err){0};
    assert_int_equal(fl_altmin_params_check(&p, 10, &E), DP_EINVAL);
    assert_string_equal(E.field, "sigma_init");
    fl_lowrank_spec s = small_spec();
    s.k = 0;
    fl_lowrank g;
    E = (dp_err){0};
    assert_int_equal(fl_lowrank_init(&s, &g, &E), DP_EINVAL);
    assert_string_equal(E.field, "k");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generator_has_the_papers_law),
        cmocka_unit_test(privacy_numbers_of_section_4),
        cmocka_unit_test(one_users_terms_are_bounded_by_the_clips),
        cmocka_unit_test(ustats_equal_the_brute_force_sums),
        cmocka_unit_test(vfit_recovers_an_exact_head),
        cmocka_unit_test(nonprivate_altmin_recovers_the_subspace),
        cmocka_unit_test(private_altmin_tends_to_the_nonprivate_one),
        cmocka_unit_test(baselines_have_their_expectations),
        cmocka_unit_test(fig2_trends_hold_at_a_small_scale),
        cmocka_unit_test(alg1_batches_are_disjoint_and_cost_one_step),
        cmocka_unit_test(alg1_nonprivate_limit_is_exact_altmin_on_its_quarters),
        cmocka_unit_test(params_are_checked_by_field),
    };
    return cmocka_run_group_tests_name("federated_fl_altmin", tests, NULL, NULL);
}
