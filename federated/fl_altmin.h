/*
 * federated/fl_altmin: private low-rank model personalisation by alternating minimisation, Jain,
 * Rush, Smith, Song & Thakurta, "Differentially Private Model Personalization", NeurIPS 2021:
 * APriv-AltMin (§4, Alg. 1) with the noisy sufficient statistics of Alg. 2 for linear regression,
 * the private spectral initialisation APriv-init (Alg. 3), the synthetic low-rank regression of the
 * paper's §6 (Fig. 2), and the two private baselines of that figure (each user on its own data; one
 * DP model for all users).
 *
 * MODEL (§4, Eq. 2). n users; user j holds m samples x ~ N(0, I_d), y = <x, U* v*_j> + N(0, s_F^2),
 * with U* in R^{d x k} shared and v*_j in R^k personal. A solution is an orthonormal U (d x k,
 * broadcast: the billboard model, §2) and per-user heads v_j fitted locally by least squares on
 * U^T x; user j predicts <x, U v_j>. Matrices are COLUMN-MAJOR: U[c d + i] = U_{i,c}, so that
 * vec(U) stacks the columns and <x, U v> = <vec(U), v (x) x> (the paper's vec(x v^T), §4).
 *
 * ONE ALTMIN STEP (Alg. 1 lines 5-6 with Alg. 2), over a set of users:
 *   user j:  v_j = argmin_v sum_i (y_ij - <U^T x_ij, v>)^2               (local, not released)
 *            W_ij = clip(v_j (x) x_ij; eta),  y~_ij = clip(y_ij; zeta)
 *            A_j = (1/m_j) sum_i W_ij W_ij^T,  b_j = (1/m_j) sum_i y~_ij W_ij
 *   server:  A = sum_j A_j + N_sym(0, (sigma Delta_A)^2),  b = sum_j b_j + N(0, (sigma Delta_b)^2)
 *            u = A^{-1} b, Z = reshape(u, d x k), U <- Q of QR(Z)
 * DEVIATION: the paper sums over the user's samples (sensitivity m eta^2 / 2 under its quarter
 * split); here each user contributes the MEAN over its samples, so the sensitivity is eta^2 (eta
 * zeta for b) whatever the user's sample count. With equal m for every user this is Alg. 2 scaled
 * by 1/m: the same solution and the same noise-to-signal ratio.
 * Sensitivities (the released object of a symmetric matrix is its upper triangle, diagonal
 * included, whose L2 norm is at most the Frobenius norm): add/remove one user Delta_A = eta^2,
 * Delta_b = eta zeta; replacement (the paper's relation, §2) twice that. sigma is a noise
 * multiplier: noise std per unit of sensitivity.
 *
 * APRIV-INIT (Alg. 3): user j pairs its samples (0,1), (2,3), ... and contributes the mean over
 * its pairs of sym(x x'^T / (||x|| ||x'||)) clip(y; zeta) clip(y'; zeta) (sym copies the upper
 * triangle into the lower one); the server adds N_sym(0, (sigma_init Delta_M)^2) with Delta_M =
 * zeta^2 (add/remove; 2 zeta^2 replacement) and takes the top-k eigenvectors.
 *
 * PRIVACY (§4, Lemmas 4.3 and 4.5, Thm. 4.2): each release is a Gaussian mechanism with noise
 * multiplier sigma, zero-concentrated DP with rho = 1/(2 sigma^2) per release (Bun & Steinke
 * 2016, Prop. 1.6). An AltMin epoch over all users releases A and b (rho = 1/sigma^2 per user),
 * the initialisation one matrix (1/(2 sigma_init^2)); epochs compose sequentially. The local
 * v-fits and the final personalisation are post-processing of the broadcast U (billboard lemma).
 * fl_altmin_event builds the whole run's accounting event.
 *
 * ALG. 1 AS WRITTEN (the paper's §4; fl_altmin_params split and disjoint): with quarter splits a
 * user's v-step reads its first quarter of samples, its U-step term the second, Alg. 3 and the
 * final fit the second half; with disjoint batches the users are put in a seeded uniform order
 * and step t reads only the t-th of E consecutive batches of it, so each user is in one U-step
 * and the run costs rho = 1/(2 sigma_init^2) + 1/sigma^2 whatever E (Thm. 4.2's calibration
 * sigma = sigma_init = sqrt(16 ln(1/delta))/eps: fl_altmin_sigma). The defaults (no split, full
 * batches) are §6's experiment.
 *
 * DATA are never stored: user j's samples are regenerated on demand from (seed, j), so a run at
 * the paper's scale (n = 50,000, m = 10, d = 50) needs O(d^2 k^2) memory.
 *
 * Determinism: every draw comes from a seed derived from (seed, purpose, index) (dp_rng_derive);
 * users are reduced in index order. Thread-safety: reentrant; a generator is read-only after
 * fl_lowrank_init and may be shared.
 */
#ifndef DP_FEDERATED_FL_ALTMIN_H
#define DP_FEDERATED_FL_ALTMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/event.h"
#include "common/dp_err.h"
#include "federated/fl_data.h"

#define FL_ALTMIN_MAX_DK     4096    /* d k: the d k x d k statistic is (d k)^2 doubles (128 MiB) */
#define FL_ALTMIN_MAX_D      4096    /* d: Alg. 3's d x d matrix */
#define FL_ALTMIN_MAX_USERS  1000000 /* n */
#define FL_ALTMIN_MAX_M      100000  /* samples per user */
#define FL_ALTMIN_MAX_EPOCHS 1000
#define FL_ALTMIN_MAX_K      64 /* rank: the k x k v-fit lives on the stack */
#define FL_ALTMIN_JOB_MAX_DK                                                                       \
    256 /* d k of a training job: a silo uploads (d k)(d k + 1)/2 + d k floats */

/* ---- the synthetic low-rank regression (§6) ---- */
typedef struct fl_lowrank_spec {
    size_t users;   /* n >= 1 */
    size_t m;       /* samples per user >= 1 */
    size_t d;       /* features >= 1 */
    size_t k;       /* rank, 1..d */
    double sigma_f; /* label noise std, >= 0 (the paper: 0.01) */
    uint64_t seed;
} fl_lowrank_spec;

typedef struct fl_lowrank {
    fl_lowrank_spec spec;
    double *u_star; /* d x k: Gaussian columns normalised to unit norm (§6 "normalized to unit
                       norm", per column: a random model then has MSE 2k, the paper's ~4); owned */
    double *basis;  /* d x k: an orthonormal basis of span(U*) (for subspace distances); owned */
    double *v_star; /* n x k row-major: v*_j ~ N(0, I_k); owned */
} fl_lowrank;

/* The paper's setting: n = 50,000, m = 10, d = 50, k = 2, s_F = 0.01, seed 1. */
fl_lowrank_spec fl_lowrank_paper_spec(void);

/* Draws U* and the v*_j. DP_EINVAL naming the field, DP_ENOMEM. */
int fl_lowrank_init(const fl_lowrank_spec *spec, fl_lowrank *out, dp_err *err);
void fl_lowrank_free(fl_lowrank *g);

/* User j's samples: x (m x d row-major) and y (m), the same on every call. */
void fl_lowrank_user(const fl_lowrank *g, size_t j, double *x, double *y);
/* The whole data set as rows (n m rows of d floats, user j's rows j m .. j m + m - 1, silo j named
 * "j"; real labels): what a training job reads (fl_synth_generate with rank >= 1). Needs n m d <=
 * FL_MAX_CELLS (DP_EINVAL "n_min"). DP_ENOMEM. */
int fl_lowrank_dataset(const fl_lowrank *g, fl_dataset *out, dp_err *err);

/* theta*_j = U* v*_j (d). */
void fl_lowrank_theta(const fl_lowrank *g, size_t j, double *theta);

/* ||(I - B B^T) U||_F for an orthonormal U (d x k), B the basis of span(U*): the sine of the
 * principal angles in Frobenius norm (0: the same subspace; sqrt(k) at most). */
double fl_lowrank_subspace_dist(const fl_lowrank *g, const double *u);

/* ---- APriv-AltMin ---- */
typedef enum fl_altmin_init {
    FL_ALTMIN_INIT_RANDOM = 0, /* Q of a Gaussian d x k matrix from the seed (data-free) */
    FL_ALTMIN_INIT_SPECTRAL    /* Alg. 3 (private when sigma_init > 0) */
} fl_altmin_init;

/* Which of a user's m samples each step reads. */
typedef enum fl_altmin_split {
    FL_ALTMIN_SPLIT_NONE = 0, /* every step (Alg. 3, v-steps, U-steps, final fit) reads all m: §6's
                                 experiment, whose m = 10 is not a multiple of 4 */
    FL_ALTMIN_SPLIT_QUARTERS  /* Alg. 1 (m % 4 == 0): samples [0, m/4) for the v-step (line 5),
                                 [m/4, m/2) for the U-step (line 6), [m/2, m) for Alg. 3's pairs
                                 and the final fit (the "disjoint set" of Lemma 4.6; the final
                                 fit's range was lost in the paper's text: the unused half) */
} fl_altmin_split;

typedef struct fl_altmin_params {
    size_t k;              /* rank, 1..d */
    unsigned epochs;       /* E >= 0 AltMin steps: each over every user (full batch, §6), or
                              with disjoint, Alg. 1's T = E iterations over disjoint batches */
    fl_altmin_split split; /* which samples each step reads */
    bool disjoint;         /* Alg. 1 lines 2 and 4: users in a seeded uniform order, step t reads
                              only the batch fl_altmin_batch(n, E, t) of that order (about n/E
                              users, E <= n): every user takes part in exactly one U-step, so the
                              whole run costs one step's privacy (parallel composition) */
    fl_altmin_init init;   /* how U starts */
    double eta;            /* clip of W = v (x) x (L2); 0 = none (then sigma must be 0) */
    double zeta;           /* clip of y; 0 = none (then sigma and sigma_init must be 0) */
    double sigma;          /* noise multiplier of each AltMin release (A and b); 0 = none */
    double sigma_init;     /* noise multiplier of Alg. 3's release; 0 = none */
    bool replace;          /* sensitivities under replacement (the paper's, x2) or add/remove */
    uint64_t seed;         /* the run's noise and random initialisation */
} fl_altmin_params;

/* Checks p against d. DP_EINVAL naming the field. */
int fl_altmin_params_check(const fl_altmin_params *p, size_t d, dp_err *err);

/* v = argmin_v sum_i (y_i - <U^T x_i, v>)^2 over m samples (x m x d row-major), with a ridge of
 * FL_ALTMIN_VRIDGE times the mean diagonal of Z^T Z (Z = X U) so that m < k still answers. */
void fl_altmin_vfit(const double *u, size_t d, size_t k, const double *x, const double *y, size_t m,
                    double *v);

/* Adds user j's term of Alg. 2 to a (dk x dk, upper triangle: row <= column, column-major
 * indices r = c d + i) and b (dk): the means over its m samples of W W^T and y~ W (the header). eta
 * or zeta 0: that clip is off. */
void fl_altmin_ustats_add(const double *x, const double *y, size_t m, size_t d, size_t k,
                          const double *v, double eta, double zeta, double *a, double *b);

/* The server's U-step from the summed statistics: Wigner noise of std noise_a on a's upper
 * triangle (mirrored), N(0, noise_b^2) on b, solve A u = b (LU), U = Q of QR(reshape(u)). a, b
 * are overwritten. When A is singular or the solution not finite, U is left unchanged and
 * *kept = true. rng_seed seeds the noise. DP_ENOMEM. */
int fl_altmin_ustep(double *a, double *b, size_t d, size_t k, double noise_a, double noise_b,
                    uint64_t rng_seed, double *u, bool *kept, dp_err *err);

/* Adds user j's term of Alg. 3 (the mean over its floor(m/2) pairs) to mm (d x d upper triangle,
 * column-major). A user with fewer than 2 samples adds nothing. */
void fl_altmin_init_add(const double *x, const double *y, size_t m, size_t d, double zeta,
                        double *mm);
/* Wigner noise of std noise on mm's upper triangle (mirrored), then U = the eigenvectors of the k
 * largest eigenvalues. mm is overwritten. DP_ENOMEM, DP_ENUMERIC. */
int fl_altmin_init_finish(double *mm, size_t d, size_t k, double noise, uint64_t rng_seed,
                          double *u, dp_err *err);

/* A data-free initial U: Q of a d x k matrix of N(0, 1) draws from seed. */
void fl_altmin_random_u(size_t d, size_t k, uint64_t seed, double *u);

/* Orthonormalises the k columns of z (d x k, in place) by two passes of modified Gram-Schmidt; a
 * column that vanishes is replaced by a unit vector orthogonal to the previous ones. */
void fl_altmin_orthonormalize(double *z, size_t d, size_t k);

/* The noise multiplier sqrt(c ln(1/delta)) / eps of the paper's calibrations (natural log): c = 8
 * for one phase (Lemmas 4.3 and 4.5: rho = 1/sigma^2 for AltMin's two releases), c = 16 for the
 * whole of Thm. 4.2 (Alg. 3 + APriv-AltMin with disjoint batches at the same sigma: rho = 3 /
 * (2 sigma^2) = 3 eps^2 / (32 ln(1/delta)) <= what (eps, delta)-DP needs). NaN unless eps > 0, 0 <
 * delta < 1 and c > 0. */
double fl_altmin_sigma(double eps, double delta, double c);

/* Alg. 1's batches: users [n t / T, n (t + 1) / T) (integer division) of the order perm, for t <
 * T <= n: T disjoint batches that cover the n users, their sizes within 1 of each other. */
void fl_altmin_batch(size_t n, unsigned T, unsigned t, size_t *lo, size_t *hi);
/* The user order of the run with seed `seed` (fl_altmin_params.seed; Alg. 1 line 2): a uniform
 * permutation of 0..n-1 (Fisher-Yates on a stream derived from the seed). */
void fl_altmin_order(size_t n, uint64_t seed, size_t *perm);

/* The noise stds of a run: AltMin's A and b releases and Alg. 3's matrix. */
void fl_altmin_noise_stds(const fl_altmin_params *p, double *noise_a, double *noise_b,
                          double *noise_init);

/* The accounting event of one user over the whole run (the same for every user: all take part
 * in every epoch, or with disjoint batches each in exactly one): compose(gaussian(sigma_init) when
 * init is spectral and sigma_init > 0, self_composed(2 E, gaussian(sigma)) when E > 0 and sigma >
 * 0, 2 instead of 2 E with disjoint); NULL with *none = true when nothing private is released.
 * DP_ENOMEM. */
int fl_altmin_event(const fl_altmin_params *p, acct_event **ev, bool *none, dp_err *err);

typedef struct fl_altmin_result {
    double mse;           /* (1/n) sum_j ||U v_j - theta*_j||^2, v_j fitted on all of user j's
                             samples, or on [m/2, m) with quarter splits (the excess population
                             risk for x ~ N(0, I)) */
    double subspace_dist; /* fl_lowrank_subspace_dist of the final U */
    double init_dist;     /* ... of the initial U */
    unsigned kept;        /* U-steps that kept the previous U (singular noisy A) */
} fl_altmin_result;

/* The whole run over g: initialisation, E epochs, personalisation. u (d x k, may be NULL)
 * receives the final U. DP_EINVAL ("split" when m is not a positive multiple of 4 with quarter
 * splits, "epochs" when disjoint batches outnumber the users), DP_ENOMEM, DP_ENUMERIC. */
int fl_altmin_run(const fl_lowrank *g, const fl_altmin_params *p, double *u, fl_altmin_result *out,
                  dp_err *err);

/* The personalised MSE of a given U (each user fits v_j on its own samples). */
double fl_altmin_mse(const fl_lowrank *g, const double *u);

/* ---- baselines (Fig. 2) ---- */
/* Each user alone: the minimum-norm least-squares fit on its m samples (m < d; ordinary least
 * squares when m >= d); the MSE (1/n) sum_j ||theta_j - theta*_j||^2 (the paper's "own data",
 * (1 - m/d) k in expectation when m < d). DP_ENOMEM. */
int fl_lowrank_local_mse(const fl_lowrank *g, double *mse, dp_err *err);
/* One linear model for every user by sufficient-statistics perturbation: A = sum_j mean_i c_i^2 x_i
 * x_i^T, b = sum_j mean_i clip(y_i; zeta) c_i x_i with c_i = min(1, eta / ||x_i||), Gaussian noise
 * of multiplier sigma (sensitivities eta^2 and eta zeta, doubled under replacement) on each,
 * theta = A^{-1} b; eta = zeta = 0 and sigma = 0: ordinary least squares. *mse as above. Privacy:
 * two Gaussian releases of multiplier sigma (rho = 1/sigma^2). DP_ENOMEM. */
int fl_lowrank_single_mse(const fl_lowrank *g, double eta, double zeta, double sigma, bool replace,
                          uint64_t seed, double *mse, dp_err *err);
/* An independent draw theta_j = U' v'_j of the same law (the paper's "purely random model",
 * 2k in expectation); the zero model's MSE (1/n) sum_j ||theta*_j||^2 in *zero (may be NULL). */
double fl_lowrank_random_mse(const fl_lowrank *g, uint64_t seed, double *zero);

#endif
