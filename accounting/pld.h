/*
 * pld.h: a tight (epsilon, delta) accountant from privacy-loss distributions (PLD).
 *
 * The privacy loss of a mechanism, L = log(P(x)/Q(x)) for x ~ P, is discretised on the grid
 * {j * h : j integer} (h = value_discretization), the per-mechanism distributions are composed by
 * FFT (Koskela, Jälkö & Honkela 2020; Koskela et al. 2021), and delta(eps) = E[(1 - e^(eps - L))_+]
 * plus the mass at +infinity is read off the composed distribution. Both bounds returned are
 * rigorous (up to floating-point rounding, see docs/ACCOUNTING.md):
 *   epsilon_upper  from the "connect-the-dots" discretisation (Doroshenko, Ghazi, Kamath, Kumar &
 *                  Manurangsi 2022, §3), which dominates the true PLD, so delta and epsilon are
 *                  never under-reported; mass truncated from the composed window is added to
 *                  delta.
 *   epsilon_lower  an optimistic bound: the same composed distribution read with a loss shift
 *                  t = n (e^h - 1)^2 / 8 + h sqrt(2 n log(1/beta)), where n is the number of
 *                  discretised mechanism runs (Hoeffding bound on the summed rounding errors, in
 *                  the spirit of Gopi, Lee & Wutschitz 2021), beta optimised.
 * The true epsilon lies in [epsilon_lower, epsilon_upper]; the gap shows the discretisation error.
 *
 * Supported event nodes: gaussian, laplace, pure, poisson_sampled(gaussian | laplace),
 * self_composed and composed of these. Other nodes (zcdp, sampled_without_replacement,
 * repeat_and_select) give DP_EINVAL with field "<path>.type"; open parameters (NAN) give DP_EINVAL
 * naming the field.
 *
 * Neighbouring relations (docs/ACCOUNTING.md, "Neighbouring relations"):
 * - ACCT_NB_ADD_REMOVE: two PLDs per mechanism, "remove" (P = M(D), Q = M(D minus one record)) and
 *   "add" (the pair swapped), composed separately; the answer is the worse of the two (epsilon =
 *   max, delta = max), as dp_accounting's PLD does. Unsampled gaussian, laplace and pure mechanisms
 *   have the same PLD in both directions.
 * - ACCT_NB_REPLACE_ONE: noise multipliers are std (or scale) over the sensitivity under
 *   replace-one, as in accounting/rdp.h, so gaussian, laplace and pure give the same PLD as under
 *   add/remove. poisson_sampled(gaussian) compares (1-q) N(0) + q N(-1/2) with (1-q) N(0) + q
 *   N(+1/2), a symmetric pair (= dp_accounting's REPLACE_ONE at noise 2 sigma);
 *   poisson_sampled(laplace) is refused (DP_EINVAL, field "neighboring").
 *
 * Thread-safety: reentrant; each call allocates and frees its own workspace (GSL FFT wavetables and
 * work arrays, allocated once per call and passed down, as GSL does), unless the caller passes an
 * acct_pld_ws (see below), which one thread at a time may use.
 */
#ifndef DP_ACCOUNTING_PLD_H
#define DP_ACCOUNTING_PLD_H

#include <stddef.h>
#include <stdint.h>

#include "accounting/event.h"
#include "common/dp_err.h"

#define ACCT_PLD_DEFAULT_DISCRETIZATION 1e-4  /* dp_accounting's PLDAccountant default */
#define ACCT_PLD_DEFAULT_TAIL_MASS      1e-15 /* dp_accounting's default tail_mass_truncation */
/* e^-50, dp_accounting's default log_mass_truncation_bound */
#define ACCT_PLD_DEFAULT_LEAF_TAIL_MASS 1.9287498479639178e-22
#define ACCT_PLD_DEFAULT_MAX_GRID       ((size_t)1 << 22) /* 4 Mi points: ~100 MB of work arrays */
#define ACCT_PLD_MAX_GRID               ((size_t)1 << 24) /* hard cap a caller may raise to */
#define ACCT_PLD_MIN_DISCRETIZATION     1e-7 /* finer grids cannot fit any useful loss range */
#define ACCT_PLD_MAX_DISCRETIZATION     1.0  /* coarser grids are meaningless for epsilon */
/* Largest number of runs of one mechanism composed by raising its spectrum to a power: the relative
 * rounding error of z^c grows like c * DBL_EPSILON, which stays below 1e-8 up to here. */
#define ACCT_PLD_MAX_COUNT 100000000ULL
/* Most distinct mechanisms (after merging identical ones) in one tree: each costs a discretisation
 * and an FFT, so this bounds the work one request can cause (field "events"). */
#define ACCT_PLD_MAX_MECHANISMS 256

typedef struct acct_pld_opts {
    double value_discretization; /* grid step h of the privacy loss (nats), default 1e-4 */
    double tail_mass_truncation; /* mass allowed outside the composed window on each side; it is
                                    added to delta (upper) / subtracted (lower). Default 1e-15 */
    double leaf_tail_mass;       /* mass of one mechanism's loss cut at each end (moved to +inf for
                                    the upper bound), default e^-50 */
    size_t max_grid_points; /* refuse (DP_EINVAL, "value_discretization") beyond this FFT length */
} acct_pld_opts;

/* Fills *o with the defaults above. o must not be NULL. */
void acct_pld_opts_default(acct_pld_opts *o);

/* Validates o: value_discretization in [1e-7, 1], tail masses in (0, 1e-3], max_grid_points in
 * [64, ACCT_PLD_MAX_GRID]. DP_EINVAL naming the field. */
int acct_pld_opts_check(const acct_pld_opts *o, dp_err *err);

typedef struct acct_pld_result {
    double
        epsilon_upper; /* epsilon query: pessimistic epsilon (>= true); +INFINITY if unreachable */
    double epsilon_lower;  /* epsilon query: optimistic epsilon (<= true), >= 0 */
    double delta;          /* epsilon query: the delta asked; delta query: equals delta_upper */
    double epsilon;        /* delta query: the epsilon asked; epsilon query: equals epsilon_upper */
    double delta_upper;    /* delta query: pessimistic delta (>= true), in [0, 1] */
    double delta_lower;    /* delta query: optimistic delta (<= true), >= 0 */
    double infinity_mass;  /* mass at +infinity of the deciding composed PLD (upper bound) */
    double truncated_mass; /* bound on the mass outside the composed window (both tails) */
    size_t grid_points;    /* FFT length of the deciding composition (0 if none was needed) */
    uint64_t steps;        /* mechanism runs discretised (unsampled gaussians compose exactly: 1) */
    double value_discretization; /* h used */
    double tail_mass_truncation; /* tail mass used */
    const char *direction; /* static string: "remove", "add" or "symmetric" (which PLD decided) */
} acct_pld_result;

/* Smallest epsilon with delta(epsilon) <= delta for the tree, both bounds.
 * ev: borrowed, must not contain open parameters. delta in (0, 1). o: NULL for the defaults.
 * out: caller-owned. Returns DP_OK, DP_EINVAL (bad delta, option or event, field named), DP_ENOMEM,
 * or DP_ENUMERIC (GSL FFT failure). */
int acct_pld_epsilon(const acct_event *ev, acct_neighboring nb, double delta,
                     const acct_pld_opts *o, acct_pld_result *out, dp_err *err);

/* delta(epsilon) for the tree, both bounds. epsilon finite and >= 0. Same contract as above. */
int acct_pld_delta(const acct_event *ev, acct_neighboring nb, double epsilon,
                   const acct_pld_opts *o, acct_pld_result *out, dp_err *err);

/* A reusable workspace (GSL style): caches the FFT tables and work arrays of the last length used,
 * so repeated queries (sweeps, calibration) skip the trigonometric set-up and page faults. Owned by
 * the caller; used by one thread at a time. acct_pld_ws_free(NULL) is a no-op. */
typedef struct acct_pld_ws acct_pld_ws;
acct_pld_ws *acct_pld_ws_alloc(void); /* NULL on allocation failure */
void acct_pld_ws_free(acct_pld_ws *ws);

/* As acct_pld_epsilon / acct_pld_delta with a caller-owned workspace (borrowed; NULL = private). */
int acct_pld_epsilon_ws(const acct_event *ev, acct_neighboring nb, double delta,
                        const acct_pld_opts *o, acct_pld_ws *ws, acct_pld_result *out, dp_err *err);
int acct_pld_delta_ws(const acct_event *ev, acct_neighboring nb, double epsilon,
                      const acct_pld_opts *o, acct_pld_ws *ws, acct_pld_result *out, dp_err *err);

/* Work caps before any PMF is built (issue #10). pld_run refuses, with the message compose_dir
 * would give (DP_EINVAL, field "value_discretization"), when an upper bound on the remove-direction
 * composed window, computed from coarse discretisations of the mechanisms (no leaf PMF built),
 * exceeds max_grid_points or (mechanisms x window) exceeds 16 x max_grid_points. For tests and
 * benchmarks, acct_pld_window_points gives, in grid points, each when its pointer is not NULL:
 *   *estimate  that bound;
 *   *optimum   the window of the leaf PMFs' own Chernoff cuts, minimised over t by the same search
 *              (the narrowest window those cuts allow; the estimate is never below it);
 *   *taken     the window compose_dir takes (its Newton cuts, and the estimate's where narrower).
 * ev: borrowed; o: NULL for the defaults. Returns DP_OK, or the errors of acct_pld_epsilon (the
 * caps are not applied). */
int acct_pld_window_points(const acct_event *ev, acct_neighboring nb, const acct_pld_opts *o,
                           double *estimate, double *optimum, double *taken, dp_err *err);

/* Leaf PMFs built by this process so far (all threads; a statistic for tests). */
unsigned long acct_pld_pmf_builds(void);

#endif
