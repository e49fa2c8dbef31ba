/*
 * federated/fl_theory: the closed forms that the papers behind our training algorithms give for
 * their best hyperparameters, so that a user can plan a job before spending any budget. Pure
 * arithmetic on C numbers (no I/O); each function validates its inputs and names the bad field.
 *
 *   fl_mrmtl_*   Liu, Zhao, Smith & Chen, "On Privacy and Personalization in Cross-Silo Federated
 *                Learning", NeurIPS 2022, §6 and App. E: mean estimation with K silos of n samples,
 *                x_{k,i} = w_k + N(0, sigma^2), w_k = theta + N(0, tau^2), each silo's mean
 * released with Gaussian noise of std sigma_dp on the sum. Local variance sigma_loc^2 = sigma^2/n +
 * sigma_dp^2/n^2 (Eq. 5); MR-MTL's estimate with weight lambda (Lemma 6.1); the optimal lambda* =
 * sigma_loc^2 / tau^2 (Theorem 6.3); the errors of local training, FedAvg, MR-MTL at lambda*
 * (Corollary 6.4) and at any lambda (Lemma 6.7); the gains of Props. 6.5-6.6 and the privacy gap of
 * Theorem 6.8. Silos that differ (App. E.5): lambda_k* of Theorem E.5, the Bayes error of Lemma
 * E.4. fl_fedhdp_*  Aldaghri, Mahdavifar & Beirami, "Federated Learning with Heterogeneous
 * Differential Privacy", App. A (Bayesian federated linear regression with privacy groups): the
 *                optimal server weights r_g* = sigma_p1^2 / sigma_pg^2 (Lemma 2, Eq. 28; App. A.6,
 * Eqs. 63-64 for any number of groups), the server variance at any weights (Eqs. 29 and 61 at r*),
 * the Bayes-optimal local error (Eq. 41, from Lemma 1), the optimal Ditto weight lambda_g* (Lemma
 * 3, Eq. 47; computed by matching one coefficient of the Bayes estimator, which gives the same
 * value as Eq. 47 and extends it to any number of groups), and the exact error of a client's
 * personalised estimate at any (r, lambda), with or without the client's own noise inside the
 * global model. fl_ppsgd_*   Bietti, Wei, Dudik, Langford & Wu, "Personalization Improves
 * Privacy-Accuracy Tradeoffs in Federated Learning", ICML 2022, §4: the threshold n* of Lemma 4.6
 *                (Eq. 10, with eps squared as its derivation gives) above which local learning
 *                has the smaller variance term, and the excess-risk bound of Theorem 4.5 (Eq. 7)
 *                with its privacy noise of Eq. 4 at the minimal alpha-norm minimiser of Lemma 4.6,
 *                minimised over the personalisation weight alpha.
 *
 * Infinite answers (lambda* when tau = 0, i.e. "federate fully") are +infinity; callers print them
 * as null. Thread-safety: reentrant.
 */
#ifndef DP_FEDERATED_FL_THEORY_H
#define DP_FEDERATED_FL_THEORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

/* ---- MR-MTL, identical silos (Liu et al. 2022, §6) ---- */

typedef struct fl_mrmtl_in {
    size_t silos;    /* K >= 2 */
    double n;        /* samples per silo, > 0 */
    double sigma;    /* std of one sample around the silo's mean, >= 0 */
    double tau;      /* std of the silo means around the global mean (heterogeneity), >= 0 */
    double sigma_dp; /* std of the privacy noise on a silo's sum, >= 0 (0: no privacy) */
    double lambda;   /* a lambda to evaluate, >= 0 or +inf; NAN: none */
} fl_mrmtl_in;

typedef struct fl_mrmtl_out {
    double sigma_loc2;   /* Eq. 5 */
    double lambda_star;  /* Theorem 6.3; +inf when tau = 0 */
    double mse_local;    /* E(0) = sigma_loc^2 */
    double mse_fedavg;   /* E(inf) = (sigma_loc^2 + (K - 1) tau^2) / K */
    double mse_star;     /* Corollary 6.4 */
    double gain_local;   /* Prop. 6.5: mse_local - mse_star */
    double gain_fedavg;  /* Prop. 6.6: mse_fedavg - mse_star */
    double mse_lambda;   /* Lemma 6.7 at in->lambda (NAN if none) */
    double privacy_gap;  /* Theorem 6.8 at in->lambda (NAN if none) */
    double alpha_lambda; /* weight of the silo's own estimate at in->lambda (Lemma 6.1), or NAN */
} fl_mrmtl_out;

int fl_mrmtl_theory(const fl_mrmtl_in *in, fl_mrmtl_out *out, dp_err *err);

/* ---- MR-MTL, silos that differ (Liu et al. 2022, App. E.5) ---- */

typedef struct fl_mrmtl_silo {
    double n, sigma, sigma_dp; /* as fl_mrmtl_in, per silo */
} fl_mrmtl_silo;

typedef struct fl_mrmtl_silo_out {
    double sigma_loc2;  /* Eq. 39 */
    double lambda_star; /* Theorem E.5; +inf when the silo should use the global model (the
                         * formula's denominator is <= 0, or tau = 0 with equal silos) */
    double mse_star;    /* the error at lambda_star: Lemma E.4's Bayes error, or the FedAvg end's
                         * error when lambda_star is +inf */
    double mse_local;   /* sigma_loc2 */
    double mse_fedavg;  /* the error of the plain mean of all silos' estimates for this silo */
} fl_mrmtl_silo_out;

/* k >= 2 silos; out has k entries. */
int fl_mrmtl_theory_silos(const fl_mrmtl_silo *silos, size_t k, double tau, fl_mrmtl_silo_out *out,
                          dp_err *err);

/* ---- FedHDP (Aldaghri et al., App. A) ---- */

typedef struct fl_hdp_group {
    double clients; /* N_g >= 1, an integer */
    double noise;   /* L_g >= 0: variance of the privacy noise each client of the group adds */
} fl_hdp_group;

typedef struct fl_hdp_group_out {
    double sigma_p2;        /* alpha^2 + tau^2 + L_g (Eq. 15-21) */
    double r_star;          /* sigma_p1^2 / sigma_pg^2, group 1 the least noisy (Eq. 63) */
    double weight_star;     /* a client's server weight at r* (Eq. 28 / 63) */
    double bayes_mse;       /* the Bayes-optimal local error of a client of the group (Eq. 41) */
    double lambda_star;     /* Eq. 47, by coefficient matching; +inf when B >= 1 */
    double mse_own_noise;   /* exact error at (r*, lambda*) with the client's own noise kept */
    double lambda_best_own; /* argmin over lambda of that error at r* */
    double mse_best_own;    /* its value */
} fl_hdp_group_out;

typedef struct fl_hdp_out {
    double server_var_star;    /* Eq. 61 (= Eq. 29 for two groups) */
    double server_var_uniform; /* r = 1 for every group (HDP-FedAvg) */
} fl_hdp_out;

/* 1 <= n_groups <= 64 groups with sum of clients >= 2, alpha2 > 0, tau2 >= 0. out_g has n_groups
 * entries.
 */
int fl_hdp_theory(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                  fl_hdp_out *out, fl_hdp_group_out *out_g, dp_err *err);

/* The server's variance with weights r[g] >= 0 per group (not all zero): sum_g N_g r_g^2 sigma_pg^2
 * / (sum_g N_g r_g)^2. */
int fl_hdp_server_var(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                      const double *r, double *var, dp_err *err);

/* The exact error of the personalised estimate (phi_hat_j + lambda theta_hat) / (1 + lambda) of a
 * client of group `group`, with server weights r per group and lambda >= 0 (+inf: the global
 * model): (1 + lambda w_j)^2 alpha^2 + lambda^2 (1 - w_j)^2 tau^2 + [own] lambda^2 w_j^2 L_j +
 * lambda^2 sum_{i != j} w_i^2 (tau^2 + alpha^2 + L_i), all over (1 + lambda)^2. */
int fl_hdp_client_mse(const fl_hdp_group *g, size_t n_groups, double alpha2, double tau2,
                      const double *r, size_t group, double lambda, bool own_noise, double *mse,
                      dp_err *err);

/* FedHDP's Algorithms 1 (linear regression, App. A) and 3 (point estimation, App. B) on this model,
 * all n clients taking part, eta = 1: the server's one aggregation
 *     global = sum_j r_{g(j)} psi_j / sum_j r_{g(j)}
 * (Alg. 1's (1/W) sum_np psi + (r/W) sum_p psi with W = N_np + r N_p; App. A.6's w_j = r_g /
 * sum_h N_h r_h for any number of groups), then each client's personalisation step with eta_p =
 * 1 / (1 + lambda), which lands on the minimiser of its Ditto objective from any start:
 *     personal_j = (phi_j + lambda_{g(j)} global) / (1 + lambda_{g(j)})   (global when lambda inf)
 * anchored at the received global model, as the proof of Lemma 4 has it (the printed line uses the
 * client's own updated estimate, which would make personal_j = phi_j). phi: n x d local estimates
 * (a client's least-squares solution; its sample mean for d = 1); psi: n x d what each client sends
 * (phi_j plus its privacy noise, drawn by the caller; = phi_j for an opted-out client); group[j] <
 * n_groups <= 64; r[g] finite >= 0, not 0 for every group holding a client; lambda[g] >= 0 or +inf.
 * global: d doubles; personal: n x d (both owned by the caller). DP_EINVAL naming the field. */
int fl_hdp_alg1(size_t n, size_t d, const double *phi, const double *psi, const uint32_t *group,
                size_t n_groups, const double *r, const double *lambda, double *global,
                double *personal, dp_err *err);

/* ---- PPSGD (Bietti et al. 2022, §4) ---- */

typedef struct fl_ppsgd_in {
    double users;   /* N >= 2 */
    double sigma;   /* gradient noise std at the optimum, sigma_w = sigma_theta, >= 0 */
    double epsilon; /* > 0 */
    double delta;   /* in (0, 1) */
    double dim_w;   /* d_w >= 1: dimension of the shared model */
    double grad;    /* G > 0: bound on the norm of grad_w (the clipping norm C = G) */
    double c;       /* the absolute constant of Eq. 4, > 0 (1 in the paper's checks) */
    double n;       /* iterations (samples per user), > 0; NAN: no bound */
    double smooth;  /* L > 0, the smoothness of Assumption 4.3; NAN: no bound */
    double v_norm2; /* ||v||^2 >= 0 of the homogeneous minimiser (v, 0); NAN: no bound */
} fl_ppsgd_in;

typedef struct fl_ppsgd_out {
    double n_star;       /* Eq. 10 */
    double sigma_zeta;   /* Eq. 4 at n (NAN without n) */
    double bound_local;  /* Eq. 7 at alpha = 0 (NAN without the bound's inputs) */
    double bound_1n;     /* at alpha = 1/N */
    double bound_global; /* alpha -> inf */
    double alpha_best;   /* argmin over alpha in [0, inf] (0 and +inf included) */
    double bound_best;   /* its bound */
} fl_ppsgd_out;

int fl_ppsgd_theory(const fl_ppsgd_in *in, fl_ppsgd_out *out, dp_err *err);

/* Eq. 7 at one alpha in [0, +inf]. */
double fl_ppsgd_bound(const fl_ppsgd_in *in, double alpha);

#endif
