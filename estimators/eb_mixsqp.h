/*
 * eb_mixsqp.h: maximum-likelihood mixture proportions by sequential quadratic programming with an
 * active-set inner solver (Kim, Carbonetto, Stephens & Anitescu, "A fast algorithm for maximum
 * likelihood estimation of mixture proportions using sequential quadratic programming", J. Comput.
 * Graph. Stat. 29(2), 2020, Algorithm 2 and Sec. 2.2-2.3; the method of R's mixsqp).
 *
 * Problem: given an n x k matrix L of component likelihoods (L_jk = p(x_j | component k) >= 0),
 * maximise sum_j log(sum_k L_jk pi_k) over the simplex {pi >= 0, sum pi = 1}. It is convex. As in
 * the paper (Sec. 2.1, eq. 5), the simplex constraint is dropped by minimising
 *     phi(x) = -(1/n) sum_j log(L_j x) + sum_k x_k   over x >= 0,
 * whose minimiser lies on the simplex. Each outer iteration forms the gradient g = -(1/n) L^T
 * (1/(Lx)) + 1 and Hessian H = (1/n) L^T diag(1/(Lx)^2) L, solves the quadratic model
 * min_p g^T p + p^T H p / 2 subject to x + p >= 0 by a primal active-set method (Nocedal & Wright,
 * Numerical Optimization, 2nd ed., Algorithm 16.3, on bound constraints), and takes a backtracking
 * (Armijo) step along p. Stops when min_k g_k >= -tol (the paper's dual-residual test: at the
 * optimum g_k >= 0, with equality where x_k > 0). The returned proportions are normalised to sum
 * to 1.
 *
 * Scaling: the caller passes L with each row divided by its largest entry (row-wise max
 * subtraction in log space, so every row has a 1 and nothing under- or overflows; the stopping
 * test's "16 roundings of the objective" assumes that scale); the
 * log-likelihood is then sum_j (rowmax_j + log(L_j pi)) with rowmax_j the log of the factor
 * removed, which eb_mixsqp_loglik adds back.
 *
 * Cost per outer iteration: one pass over L in chunks of 64 rows that stay in L1, each turned
 * column-major (lanes are rows) so that one loop of eight-double vectors (eb_simd.h: AVX-512,
 * AVX2 or baseline, picked at run time, the same bits on each) forms L_B x, the logs, the gradient
 * and the Hessian's sums sum_j R_ja R_jb (R = L_j / L_j x) in one sweep. Logs: sum_j log(L_j x)
 * is the sum of the values' binary exponents plus the log of the product of their mantissas,
 * renormalised after every chunk, so eight logs are taken per pass instead of n, and the sum is
 * more accurate than adding n logs. Sums run lane by lane and are reduced in a fixed order at the
 * end of the pass. Above 512 components the Hessian goes to dsyrk (OpenBLAS, pinned to one thread
 * by eb_mixsqp_solve: see eb_blas_single_thread) a chunk at a time.
 * The Hessian is formed only on the set S of components with a positive weight at the pass's
 * point or a negative gradient at the last one (the first pass of a solve: every component), and
 * the QP is solved on S with the other weights held at 0: the QP's multipliers b_i = c_i +
 * (H y)_i need only H's columns in the support of y, and a weight outside S is not released. The
 * direction is still one of descent, and the stopping test is on the whole gradient; if the QP on
 * S finds no descent while some weight outside S has a negative gradient, the pass is repeated on
 * every component (info.restarts). At the npmle optimum S is a few atoms of the grid, so a pass
 * forms |S|(|S| + 1)/2 of the k(k + 1)/2 sums: 1.5x faster at k = 20, 1.6x at k = 100. A line
 * search that accepts the full step (the usual case near the optimum) reuses that pass's L x, so an
 * iteration reads L once. eb_mixsqp_solve_rows takes the rows from a generator instead, a chunk at
 * a time: for matrices too large to hold whose rows cost no more to recompute than to read back
 * from memory. The Hessian must be fresh at every iteration: one formed once at the start of the
 * full-data solve and reused took 42 iterations instead of 5 on the npmle benchmark (linear
 * convergence, ending on the rounding stop with the dual residual at 8e-6): weights near 0 change
 * its scale from one iterate to the next.
 *
 * Warm start: with n >= 131072 rows the problem is first solved on 16384 evenly strided rows (a
 * copy that stays in cache), and the full problem is started from that answer; the SQP's local
 * (Newton-like) convergence then needs few passes over the full L, which is what costs (its size
 * is memory bandwidth). The answer is the full problem's, to the same tolerance.
 *
 * Memory: L and weights borrowed; x caller-owned (k entries, in: a start or NULL via
 * EB_MIXSQP_START_UNIFORM, out: the proportions). Threading: reentrant, single-threaded (BLAS
 * pinned to one thread).
 */
#ifndef DP_ESTIMATORS_EB_MIXSQP_H
#define DP_ESTIMATORS_EB_MIXSQP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/dp_err.h"
#include "estimators/eb_common.h"

#define EB_MIXSQP_MAX_K 4096 /* components; more are refused (the k x k Hessian is dense) */

typedef struct eb_mixsqp_opts {
    unsigned max_iter;        /* outer SQP iterations, [1, EB_MAX_ITER_CAP]; default 1000 */
    unsigned max_iter_active; /* active-set iterations per QP; default 20 + 2k (set when 0) */
    double tol;               /* dual residual tolerance (min_k g_k >= -tol); default 1e-8 */
    bool start_given;         /* x holds a start on entry (>= 0, not all 0); else uniform */
    /* NULL, or polled before every outer iteration (of the warm start too): once true the solve
     * stops with DP_EBUSY ("cancelled"), x partly updated (discard it); borrowed (issue #15) */
    const atomic_bool *cancel;
    /* Tests: the Hessian of every pass after the first is formed on the support of x alone (not
     * also on the weights the last gradient would release), so that a weight that should grow is
     * found only by the stall check (info.restarts). Default false. */
    bool hess_support_only;
} eb_mixsqp_opts;

/* Defaults: max_iter 1000, max_iter_active 0 (20 + 2k), tol 1e-8 (mixsqp's convtol.sqp),
 * uniform start, no cancel flag. */
eb_mixsqp_opts eb_mixsqp_opts_default(void);

typedef struct eb_mixsqp_info {
    unsigned iterations;        /* outer iterations taken on the full data */
    unsigned warm_iterations;   /* outer iterations of the warm start on a subsample (0: none) */
    unsigned active_iterations; /* inner active-set iterations, summed */
    double objective;           /* -(1/n) sum_j log(L_j pi) of the scaled L, at the answer */
    double dual_residual;       /* max(0, -min_k g_k) at the answer */
    double sum_log;             /* sum_j log(L_j pi) at the (normalised) answer, from the last
                                   pass: the log-likelihood of the scaled L, no extra pass */
    eb_status status;           /* converged, or max_iter */
    unsigned restarts;          /* passes repeated on every component after the QP on the partial
                                   Hessian found no descent while a weight outside it should grow */
} eb_mixsqp_info;

/* Solves the problem above. L: n*k row-major, entries finite and >= 0, each row with a positive
 * entry (n in [1, EB_MAX_CLIENTS], k in [1, EB_MIXSQP_MAX_K]); x: k entries. DP_EINVAL on bad
 * sizes or options (field "mixsqp"), DP_ENUMERIC when a row's likelihood is 0 at every component
 * or the objective turns non-finite, DP_ENOMEM, DP_EBUSY when o->cancel was set. Non-convergence
 * within max_iter is not an error: info->status = EB_STATUS_MAX_ITER and x holds the last iterate
 * (normalised). */
int eb_mixsqp_solve(size_t n, size_t k, const double *L, const eb_mixsqp_opts *o, double *x,
                    eb_mixsqp_info *info, dp_err *err);

/* Fills out with rows j0, j0 + stride, ..., j0 + (nb - 1) stride of the scaled likelihood matrix
 * (the rows eb_mixsqp_solve would read from L), column-major: entry c of the i-th row asked for at
 * out[c * ld + i]. ld is a multiple of 8 and at least nb; lanes nb .. ld - 1 of each column are
 * scratch (the generator may write them; the solver ignores them). Must be deterministic: a row is
 * asked for once per pass and its values must be the same every time. */
typedef void (*eb_mixsqp_rows_fn)(void *ctx, size_t j0, size_t stride, size_t nb, double *out,
                                  size_t ld);

/* eb_mixsqp_solve on a matrix that is not stored: rows(ctx, ...) regenerates it block by block
 * (a few hundred rows at a time, in cache) on every pass. For a matrix too large to hold whose rows
 * cost no more to compute than to read back (evenly spaced npmle atoms: eb_nm.c). Given the same
 * values as a stored L, the answer and info are bit-identical to eb_mixsqp_solve's. ctx borrowed;
 * errors as eb_mixsqp_solve, and DP_EINVAL when rows is NULL. */
int eb_mixsqp_solve_rows(size_t n, size_t k, eb_mixsqp_rows_fn rows, void *ctx,
                         const eb_mixsqp_opts *o, double *x, eb_mixsqp_info *info, dp_err *err);

/* sum_j (rowmax[j] + log(sum_k L_jk pi_k)) (rowmax NULL: 0), in row order. */
double eb_mixsqp_loglik(size_t n, size_t k, const double *L, const double *rowmax,
                        const double *pi);

/* Pins OpenBLAS to one thread (openblas_set_num_threads(1)); called by eb_mixsqp_solve. Idempotent.
 * estimators/ may not depend on federated/ (whose fl_blas_single_thread does the same once per
 * process) nor use threads, so it is called on every solve; the call only stores the count. */
void eb_blas_single_thread(void);

#endif
