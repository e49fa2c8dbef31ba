/*
 * pld.c: the privacy-loss-distribution accountant (see pld.h for the contract).
 *
 * DESIGN
 *
 * 1. Flatten. The event tree becomes a list of leaves (mechanism, count): self_composed
 * multiplies counts, composed concatenates, identical mechanisms merge. Unsampled Gaussians
 * compose exactly into one Gaussian with 1/sigma^2 = sum count_i / sigma_i^2 (Dong, Roth & Su
 * 2019, Cor. 3.3; dp_accounting uses sigma / sqrt(count)), which is then discretised once.
 *
 * 2. Discretise each leaf by connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi
 * 2022, "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
 * arXiv:2207.04380). The "remove" pair (P, Q) has a loss L(x) = log(P(x)/Q(x)) non-increasing in
 * x, so {L > eps} = {x < x*(eps)} with x* in closed form. At each grid point eps_j = j h we get
 * U_j = P(L > eps_j) and W_j = Q(L > eps_j), both tails from erfc so small masses keep their
 * relative accuracy. The P-mass dU and Q-mass dW of each bin (eps_k, eps_k+1] are split between
 * the two end points so that BOTH are preserved; the result is the PLD whose hockey-stick curve
 * delta(e^eps) interpolates the true one linearly in e^eps at the grid points. The true curve is
 * convex in e^eps, so the interpolation lies above it: the discrete PLD dominates the true one
 * (the paper's pessimistic estimate, which it shows is the best pessimistic one on that support),
 * and domination survives composition. Mass with L <= eps_min is lifted to eps_min; above eps_max
 * the Q-mass goes to eps_max with P-mass e^eps_max W and the rest of the P-mass to +infinity
 * (exact: delta beyond eps_max is then the true delta(eps_max)). The "add" direction is the pair
 * (Q, P) reflected (x -> -x; the noise is symmetric): its PMF is the reflection of the same bins
 * with the roles of dU and dW swapped, so it costs no further special-function evaluations.
 * Under replace_one the Poisson-sampled Gaussian pair (1-q) N(0) + q N(-+1/2) is symmetric, so one
 * PLD suffices, but x*(eps) has no closed form: a bracketed Newton iteration finds it.
 *
 * 3. Window. The composed loss S lives on integer grid indices; its tails are bounded by Chernoff,
 * P(S >= u) <= exp(K(t) - t u), with K the cumulant generating function of the discretised PMFs
 * (additive over composition) and t optimised by Newton's method. The window [A, B] leaves at most
 * tail_mass_truncation outside on each side (Koskela, Jälkö, Prediger & Honkela 2021 bound the FFT
 * aliasing error with moment bounds in the same way).
 *
 * 4. Compose. Each leaf PMF is wrapped modulo N (N >= B - A + 1, a 2-3-5-smooth length for GSL's
 * mixed-radix real FFT), transformed once, raised to its count by repeated squaring of each
 * Fourier coefficient, multiplied into the product, and transformed back (Koskela, Jälkö &
 * Honkela 2020; cyclic convolution = wrapped linear convolution). Mass outside the window aliases
 * into it: for the upper bound that can only add to delta (all terms are >= 0), and its bound is
 * also added as mass at +infinity; for the lower bound it is subtracted.
 *
 * 5. Read out. delta(eps) = sum_{l_J > eps} (1 - e^(eps - l_J)) r_J + mass(+inf), by one backward
 * scan; epsilon for a delta is solved exactly inside the grid cell where delta crosses. Lower
 * bound: connect-the-dots moves each run's loss by D in [-h, h) with 0 <= E[D] <= (e^h - 1)^2 / 8
 * (a mean-preserving spread of e^-L; -log is convex), independently across runs, so with n runs
 * P(sum D > t) <= beta for t = n (e^h - 1)^2 / 8 + h sqrt(2 n log(1/beta)) (Hoeffding 1963,
 * Thm. 2), and surely sum D < n h. On that event the true composed loss is >= S - t, hence
 * delta_true(eps) >= delta_disc(eps + t) - beta - (truncated, aliased and far-lifted mass), with
 * beta optimised over a small set. No second FFT is needed, and this is much tighter than rounding
 * every loss down (dp_accounting's optimistic "privacy buckets", Meiser & Mohammadi 2018).
 *
 * Floating point: bin masses are differences of tail probabilities (relative error ~1e-12 in the
 * split); FFT round-off is ~1e-16 per coefficient and grows like count * 1e-16 in z^count, hence
 * ACCT_PLD_MAX_COUNT. Negative FFT noise is clamped to 0 (which can only raise the upper delta).
 *
 * Thread-safety: no global state but one atomic statistic (acct_pld_pmf_builds); GSL's error
 * handler must be off (service/main.c does that).
 */
#include "accounting/pld.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fft_complex.h>
#include <gsl/gsl_math.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

/* Largest grid index magnitude accepted: keeps j * h and sums of counts * j exact in double/int64.
 */
#define PLD_MAX_INDEX 1.0e12
/* The same for the composed window (sums of count * index over leaves; doubles are exact to 2^53).
 */
#define PLD_MAX_COMPOSED_INDEX 1.0e15
/* Newton iterations for the Chernoff exponent; any iterate gives a valid bound, so a cap is safe.
 */
#define PLD_NEWTON_MAX_ITER 60
/* Relative step at which the Newton search for the Chernoff exponent stops. */
#define PLD_NEWTON_RTOL 1e-4
/* First Chernoff exponent (small: gives the variance), and the largest first guess derived from it.
 */
#define PLD_CHERNOFF_T0   1e-3
#define PLD_CHERNOFF_TMAX 1e6
/* Relative bracket width at which the replace-one loss inversion stops (near double precision). */
#define PLD_ROOT_XTOL 1e-14
/* Terms of a moment sum below this factor are bounded by it (keeps the bound an upper bound). */
#define PLD_TINY_FACTOR 1e-300
/* Exponent below which a Fourier coefficient raised to its count is zero in double precision. */
#define PLD_LOG_UNDERFLOW (-745.0)
/* Work cap of one call, in units of max_grid_points: total grid points discretised over all
 * mechanisms, and mechanisms x window length transformed (keeps a request to about a second). */
#define PLD_WORK_FACTOR 16.0
/* Twiddle factors between exact cos/sin re-anchors of the rotation recurrence. */
#define PLD_TWIDDLE_RESYNC 16
/* Grid points between exact exp() re-anchors of the e^eps recurrence in pmf_build. */
#define PLD_EXP_RESYNC 32

typedef enum { MECH_GAUSS, MECH_LAPLACE, MECH_PURE } mech_kind;

typedef struct pld_mech {
    mech_kind kind;
    double scale; /* GAUSS: sigma; LAPLACE: b (both relative to sensitivity 1) */
    double q;     /* Poisson sampling rate in (0, 1]; 1 = not sampled */
    double eps0;  /* PURE: epsilon */
    bool replace; /* GAUSS with q < 1 under replace_one: P = (1-q) N(0) + q N(-1/2),
                     Q = (1-q) N(0) + q N(+1/2) (a symmetric pair) */
} pld_mech;

typedef struct pld_leaf {
    pld_mech m;
    uint64_t count; /* runs of this mechanism, >= 1 */
} pld_leaf;

/* A discretised PLD of one run: mass p[i] at loss (j0 + i) h, plus p_inf at +infinity. */
typedef struct pld_pmf {
    int64_t j0;   /* grid index of p[0] */
    size_t n;     /* number of grid points */
    double *p;    /* owned */
    double p_inf; /* mass at +infinity */
    double bad;   /* P-mass whose loss the rounding moved by more than h (or to +inf) */
    double drift; /* extra mean loss shift from lifting the bottom tail (at most h per unit) */
} pld_pmf;

/* A composed PLD on the cyclic window [A, A + N). */
typedef struct pld_comp {
    int64_t a;       /* lowest grid index of the window */
    size_t n;        /* window length N (FFT length) */
    double *r;       /* borrowed from the workspace; r[J mod N] = mass at loss J h */
    double h;        /* grid step */
    double p_inf;    /* composed mass at +infinity */
    double trunc_hi; /* bound on the mass above the window */
    double trunc_lo; /* bound on the mass below the window */
    double bad;      /* bound on P(some run fell in a truncated tail) */
    double steps;    /* discretised runs n (for the Hoeffding shift) */
    double drift;    /* sum over runs of the bottom-lift mean shift */
} pld_comp;

/* GSL FFT workspace for one real length n (GSL's workspace rule: allocated once, passed in). A real
 * sequence of even length n is transformed as n/2 complex numbers (even samples real, odd samples
 * imaginary) plus an O(n) split, so one complex wavetable serves both directions: half the
 * trigonometric set-up of GSL's real + halfcomplex pair, which dominated a cold call. */
typedef struct pld_fft {
    size_t n;                       /* real length (even) */
    gsl_fft_complex_wavetable *cw;  /* for n/2 */
    gsl_fft_complex_workspace *cws; /* for n/2 */
} pld_fft;

/* The reusable workspace of pld.h: FFT tables for the last length used and three work arrays. */
struct acct_pld_ws {
    pld_fft fft;
    double *buf[3]; /* [0] remove window, [1] add window, [2] scratch spectrum */
    size_t cap[3];  /* length of each buf (0 = not allocated) */
};

/* ---- options ---- */

void acct_pld_opts_default(acct_pld_opts *o)
{
    o->value_discretization = ACCT_PLD_DEFAULT_DISCRETIZATION;
    o->tail_mass_truncation = ACCT_PLD_DEFAULT_TAIL_MASS;
    o->leaf_tail_mass = ACCT_PLD_DEFAULT_LEAF_TAIL_MASS;
    o->max_grid_points = ACCT_PLD_DEFAULT_MAX_GRID;
}

int acct_pld_opts_check(const acct_pld_opts *o, dp_err *err)
{
    double h = o->value_discretization;
    if (!(isfinite(h) && h >= ACCT_PLD_MIN_DISCRETIZATION && h <= ACCT_PLD_MAX_DISCRETIZATION))
        return dp_err_set(err, DP_EINVAL, "value_discretization",
                          "value_discretization must be in [1e-7, 1] (got %g)", h);
    if (!(isfinite(o->tail_mass_truncation) && o->tail_mass_truncation > 0 &&
          o->tail_mass_truncation <= 1e-3))
        return dp_err_set(err, DP_EINVAL, "tail_mass_truncation",
                          "tail_mass_truncation must be in (0, 1e-3] (got %g)",
                          o->tail_mass_truncation);
    if (!(isfinite(o->leaf_tail_mass) && o->leaf_tail_mass > 0 && o->leaf_tail_mass <= 1e-3))
        return dp_err_set(err, DP_EINVAL, "leaf_tail_mass",
                          "leaf_tail_mass must be in (0, 1e-3] (got %g)", o->leaf_tail_mass);
    if (o->max_grid_points < 64 || o->max_grid_points > ACCT_PLD_MAX_GRID)
        return dp_err_set(err, DP_EINVAL, "max_grid_points",
                          "max_grid_points must be in [64, %zu] (got %zu)", ACCT_PLD_MAX_GRID,
                          o->max_grid_points);
    return DP_OK;
}

/* ---- mechanisms: tails of the privacy loss ---- */

/* Standard normal CDF and survival at z, each computed directly when it is the smaller one. */
static void norm_cdf2(double z, double *cdf, double *sf)
{
    if (z < 0) {
        *cdf = 0.5 * erfc(-z * M_SQRT1_2);
        *sf = 1.0 - *cdf;
    } else {
        *sf = 0.5 * erfc(z * M_SQRT1_2);
        *cdf = 1.0 - *sf;
    }
}

/* Laplace(center c, scale b) CDF and survival at x. */
static void lap_cdf2(double x, double c, double b, double *cdf, double *sf)
{
    double d = (x - c) / b;
    if (d < 0) {
        *cdf = 0.5 * exp(d);
        *sf = 1.0 - *cdf;
    } else {
        *sf = 0.5 * exp(-d);
        *cdf = 1.0 - *sf;
    }
}

/* log(1 - q + q e^a), stable for all a (q in (0, 1]). */
static double log_mix(double a, double q)
{
    if (q >= 1.0)
        return a;
    if (a < 1.0)
        return log1p(q * expm1(a));
    return a + log(q) + log1p((1.0 - q) / q * exp(-a));
}

/* log((e^eps - 1 + q) / q): the log likelihood ratio threshold of the sampled mechanisms;
 * -DP_INF when e^eps <= 1 - q (every x has loss > eps). */
static double log_rho(double eps, double q)
{
    if (q >= 1.0)
        return eps;
    if (eps > 0)
        return eps + log1p((q - 1.0) * exp(-eps)) - log(q);
    double v = expm1(eps) + q;
    if (!(v > 0))
        return -DP_INF;
    return log(v) - log(q);
}

/* Privacy loss of the replace-one pair of the Poisson-sampled Gaussian at x, and its derivative:
 * L = log(1 - q + q e^am) - log(1 - q + q e^ap) with am = log N(x; -1/2) / N(x; 0) =
 * -(x + 1/4) / (2 s2) and ap = log N(x; 1/2) / N(x; 0) = (x - 1/4) / (2 s2). Decreasing in x. */
static double repl_loss(double x, double s2, double q, double *dloss)
{
    double am = -(x + 0.25) / (2.0 * s2), ap = (x - 0.25) / (2.0 * s2);
    double wm = 1.0 / (1.0 + (1.0 - q) / q * exp(-am)), wp = 1.0 / (1.0 + (1.0 - q) / q * exp(-ap));
    *dloss = -(wm + wp) / (2.0 * s2);
    return log_mix(am, q) - log_mix(ap, q);
}

/* x* with repl_loss(x*) = eps, by Newton's method inside a bracket kept by bisection. hint: the
 * previous solution (grid points come in order), updated. No closed form exists (L is a ratio of
 * mixtures). Returns NAN if no bracket is found (cannot happen for finite eps: L spans R). */
static double repl_xstar(double eps, double sg, double q, double *hint)
{
    double s2 = sg * sg, x = isfinite(*hint) ? *hint : -s2 * eps, d;
    double g = repl_loss(x, s2, q, &d) - eps, lo, hi;
    double step = (d < 0 && isfinite(g / d)) ? fabs(g / d) + PLD_ROOT_XTOL * (1 + fabs(x)) : sg;
    int it = 0;
    if (g > 0) { /* root to the right */
        lo = x;
        hi = x + step;
        while (repl_loss(hi, s2, q, &d) - eps > 0) {
            lo = hi;
            step *= 2;
            hi = lo + step;
            if (++it > PLD_NEWTON_MAX_ITER)
                return DP_NAN;
        }
    } else {
        hi = x;
        lo = x - step;
        while (!(repl_loss(lo, s2, q, &d) - eps > 0)) {
            hi = lo;
            step *= 2;
            lo = hi - step;
            if (++it > PLD_NEWTON_MAX_ITER)
                return DP_NAN;
        }
    }
    x = 0.5 * (lo + hi);
    for (it = 0; it < PLD_NEWTON_MAX_ITER; it++) {
        g = repl_loss(x, s2, q, &d) - eps;
        if (g > 0)
            lo = x;
        else
            hi = x;
        if (g == 0 || hi - lo <= PLD_ROOT_XTOL * (1.0 + fabs(x)))
            break;
        double xn = x - g / d;
        x = (xn > lo && xn < hi) ? xn : 0.5 * (lo + hi);
    }
    *hint = x;
    return x;
}

/* Tails at threshold eps of the "remove" pair: P = (1-q) N(0) + q N(-1) (or Laplace), Q = N(0).
 * u = P(L > eps), ub = P(L <= eps), w = Q(L > eps), wb = Q(L <= eps). */
typedef struct tails4 {
    double u, ub, w, wb;
} tails4;

static tails4 mech_tails(const pld_mech *m, double eps, double *hint)
{
    tails4 t;
    double q = m->q;
    if (m->replace) {
        /* L > eps <=> x < x*; P has its sampled component at -1/2, Q at +1/2 */
        double sg = m->scale, xs = repl_xstar(eps, sg, q, hint), f0, s0, f1, s1, f2, s2;
        norm_cdf2(xs / sg, &f0, &s0);
        norm_cdf2((xs + 0.5) / sg, &f1, &s1);
        norm_cdf2((xs - 0.5) / sg, &f2, &s2);
        t.u = (1.0 - q) * f0 + q * f1;
        t.ub = (1.0 - q) * s0 + q * s1;
        t.w = (1.0 - q) * f0 + q * f2;
        t.wb = (1.0 - q) * s0 + q * s2;
        return t;
    }
    if (m->kind == MECH_PURE) {
        double pu = 1.0 / (1.0 + exp(-m->eps0)), pl = 1.0 / (1.0 + exp(m->eps0));
        if (eps < -m->eps0) {
            t.u = 1, t.ub = 0, t.w = 1, t.wb = 0;
        } else if (eps < m->eps0) {
            t.u = pu, t.ub = pl, t.w = pl, t.wb = pu;
        } else {
            t.u = 0, t.ub = 1, t.w = 0, t.wb = 1;
        }
        return t;
    }
    double s = log_rho(eps, q), xs;
    double f0, s0, f1, s1;
    if (m->kind == MECH_GAUSS) {
        /* L(x) = log(1 - q + q exp(-(2x + 1) / (2 sigma^2))) > eps  <=>  x < -sigma^2 s - 1/2 */
        double sg = m->scale;
        xs = (s == -DP_INF) ? DP_INF : -sg * sg * s - 0.5;
        norm_cdf2(xs / sg, &f0, &s0);
        norm_cdf2((xs + 1.0) / sg, &f1, &s1);
    } else {
        /* Laplace: ratio exp((|x| - |x+1|)/b) is e^(1/b) for x <= -1, e^(-1/b) for x >= 0 and
         * exp(-(2x+1)/b) between; L > eps <=> ratio > e^s. */
        double b = m->scale;
        if (s >= 1.0 / b)
            xs = -DP_INF;
        else if (s < -1.0 / b)
            xs = DP_INF;
        else
            xs = -(b * s + 1.0) / 2.0;
        lap_cdf2(xs, 0.0, b, &f0, &s0);
        lap_cdf2(xs, -1.0, b, &f1, &s1);
    }
    t.u = (1.0 - q) * f0 + q * f1;
    t.ub = (1.0 - q) * s0 + q * s1;
    t.w = f0;
    t.wb = s0;
    return t;
}

/* Loss range [lo, hi] to discretise: the whole support, or the leaf_tail_mass quantiles. */
static void mech_range(const pld_mech *m, double leaf_tail, double *lo, double *hi)
{
    if (m->kind == MECH_PURE) {
        *lo = -m->eps0;
        *hi = m->eps0;
    } else if (m->kind == MECH_LAPLACE) {
        *lo = log_mix(-1.0 / m->scale, m->q);
        *hi = log_mix(1.0 / m->scale, m->q);
    } else if (m->replace) {
        double sg = m->scale, z = gsl_cdf_ugaussian_Qinv(leaf_tail), d;
        *hi = repl_loss(-0.5 - z * sg, sg * sg, m->q, &d);
        *lo = repl_loss(0.5 + z * sg, sg * sg, m->q, &d);
    } else {
        /* quantiles of P = (1-q) N(0) + q N(-1): both components when sampled, else N(-1) only */
        double sg = m->scale, z = gsl_cdf_ugaussian_Qinv(leaf_tail);
        double x_lo = -1.0 - z * sg, x_hi = (m->q < 1.0 ? 0.0 : -1.0) + z * sg;
        *hi = log_mix(-(2.0 * x_lo + 1.0) / (2.0 * sg * sg), m->q);
        *lo = log_mix(-(2.0 * x_hi + 1.0) / (2.0 * sg * sg), m->q);
    }
}

/* Mass between two thresholds from the tails at both ends (a is the lower threshold):
 * uses whichever representation avoids cancellation. */
static double bin_mass(double big_a, double small_a, double big_b, double small_b)
{
    /* big = P(L > eps), small = P(L <= eps); mass of (eps_a, eps_b] = big_a - big_b */
    double m = (big_a <= 0.5) ? big_a - big_b : small_b - small_a;
    return m > 0 ? m : 0.0;
}

/* ---- discretisation (connect the dots) ---- */

static void pmf_free(pld_pmf *p)
{
    if (p != NULL) {
        dp_free(p->p);
        p->p = NULL;
    }
}

/* Builds the connect-the-dots PMFs of one run of m in the remove direction (rm) and, when add is
 * non-NULL, of the add direction (the reflected, swapped pair). */
/* PMFs built since the process started (all threads): lets the tests prove that a request refused
 * by the early work estimate built none (issue #10). Relaxed: a statistic, orders nothing. */
static atomic_ulong pld_pmf_build_count;

unsigned long acct_pld_pmf_builds(void)
{
    return atomic_load_explicit(&pld_pmf_build_count, memory_order_relaxed);
}

/* Grid indices [*jlo, *jhi] (jhi > jlo) of the discretised remove-direction PMF of one run of m:
 * the same arithmetic for pmf_build and for the early window estimate, so the estimate's support
 * bound equals the support compose_dir sums. */
static int leaf_grid(const pld_mech *m, const acct_pld_opts *o, double *jlo_out, double *jhi_out,
                     dp_err *err)
{
    double h = o->value_discretization, lo, hi;
    mech_range(m, o->leaf_tail_mass, &lo, &hi);
    double jlo = floor(lo / h), jhi = ceil(hi / h);
    /* Bounded losses (Laplace, pure) have an atom at lo: keep it strictly inside the first bin, so
     * nothing is lifted (the lower bound would otherwise charge the atom a lift of up to h). */
    if (m->kind != MECH_GAUSS && jlo * h >= lo)
        jlo -= 1;
    if (!(isfinite(jlo) && isfinite(jhi)) || fabs(jlo) > PLD_MAX_INDEX ||
        fabs(jhi) > PLD_MAX_INDEX || jhi - jlo + 1 > (double)o->max_grid_points)
        return dp_err_set(err, DP_EINVAL, "value_discretization",
                          "the privacy loss spans [%g, %g]: more than %zu grid points at "
                          "value_discretization %g; use a coarser grid or accountant rdp",
                          lo, hi, o->max_grid_points, h);
    if (jhi <= jlo)
        jhi = jlo + 1;
    *jlo_out = jlo;
    *jhi_out = jhi;
    return DP_OK;
}

static int pmf_build(const pld_mech *m, const acct_pld_opts *o, pld_pmf *rm, pld_pmf *add,
                     dp_err *err)
{
    double h = o->value_discretization, jlo, jhi;
    int rc = leaf_grid(m, o, &jlo, &jhi, err);
    if (rc != DP_OK)
        return rc;
    atomic_fetch_add_explicit(&pld_pmf_build_count, 1, memory_order_relaxed);
    size_t n = (size_t)(jhi - jlo) + 1;
    int64_t jmin = (int64_t)jlo, jmax = (int64_t)jhi;
    rm->p = dp_calloc(n, sizeof(double));
    if (add != NULL)
        add->p = dp_calloc(n, sizeof(double));
    if (rm->p == NULL || (add != NULL && add->p == NULL))
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for a %zu-point PLD", n);
    rm->j0 = jmin;
    rm->n = n;
    double *pr = rm->p, *pa = add != NULL ? add->p : NULL;
    double em1h = expm1(h);

    /* bottom: L <= eps_min lifted to eps_min; in the add direction this is the top (+inf part). */
    double e_min = (double)jmin * h;
    double hint = DP_NAN;
    tails4 prev = mech_tails(m, e_min, &hint);
    pr[0] += prev.ub;
    /* Lower-bound bookkeeping (DESIGN 5): mass lifted by less than h only shifts the mean (by at
     * most h times its mass); mass lifted further, or sent to +inf, is "bad". */
    double hint_b = hint;
    tails4 below = mech_tails(m, e_min - h, &hint_b);
    double bad_r = below.ub, drift_r = h * prev.ub, pinf_a = 0.0;
    if (pa != NULL) {
        double v = prev.ub * exp(-e_min);
        if (!(v <= prev.wb))
            v = prev.wb;
        pa[n - 1] += v;
        pinf_a = prev.wb - v;
    }
    double eh = exp(h), xk = 0.0;
    for (size_t k = 0; k + 1 < n; k++) {
        double ek = (double)(jmin + (int64_t)k) * h;
        /* x_k = e^eps_k by recurrence, re-anchored every PLD_EXP_RESYNC steps (relative error
         * below PLD_EXP_RESYNC ulps; saves two exp calls per grid point) */
        xk = (k % PLD_EXP_RESYNC == 0) ? exp(ek) : xk * eh;
        tails4 cur = mech_tails(m, ek + h, &hint);
        double du = bin_mass(prev.u, prev.ub, cur.u, cur.ub);
        double dw = bin_mass(prev.w, prev.wb, cur.w, cur.wb);
        prev = cur;
        if (du <= 0 && dw <= 0)
            continue;
        /* v = e^eps_k dW in [e^-h dU, dU]; a = dU - v; the P-mass sent up is a e^h / (e^h - 1). */
        double v = xk * dw, up;
        if (!isfinite(v) || !(dw > 0)) {
            up = du; /* degenerate bin: round the whole bin up (pessimistic) */
        } else {
            up = (du - v) * (1.0 + 1.0 / em1h);
            if (up < 0)
                up = 0;
            if (up > du)
                up = du;
        }
        pr[k + 1] += up;
        pr[k] += du - up;
        if (pa != NULL) {
            /* add direction: loss -eps_(k+1) (index n-2-k) gets the Q-mass matching up, the rest of
             * dW goes to -eps_k (index n-1-k); degenerate bins round up (all at -eps_k). */
            double a = (isfinite(v) && dw > 0) ? up / (xk * eh) : 0.0;
            if (!(a >= 0))
                a = 0;
            if (a > dw)
                a = dw;
            pa[n - 2 - k] += a;
            pa[n - 1 - k] += dw - a;
        }
    }
    /* top: L > eps_max; P-mass e^eps_max W at eps_max, the rest at +inf. */
    double e_max = (double)jmax * h;
    double v = exp(e_max) * prev.w;
    if (!(v <= prev.u))
        v = prev.u;
    pr[n - 1] += v;
    rm->p_inf = prev.u - v;
    rm->bad = bad_r + rm->p_inf;
    rm->drift = drift_r;
    if (pa != NULL) {
        pa[0] += prev.w; /* add direction bottom (loss <= -eps_max): lifted */
        tails4 above = mech_tails(m, e_max + h, &hint);
        add->j0 = -jmax;
        add->n = n;
        add->p_inf = pinf_a;
        add->bad = above.w + pinf_a;
        add->drift = h * prev.w;
    }
    return DP_OK;
}

/* ---- flattening the event tree ---- */

typedef struct flat_ctx {
    acct_neighboring nb;
    pld_leaf *leaves; /* NULL in the counting pass */
    size_t n_leaves;
    size_t nodes;
    double gauss_mu2;     /* sum of count / sigma^2 of unsampled Gaussians */
    bool field_is_global; /* the error names a request field, not an event path */
    bool count_pending;   /* a leaf exceeded ACCT_PLD_MAX_COUNT: the error belongs to the
                             self_composed node whose count first crossed it (not yet reached) */
} flat_ctx;

static int check_noise(double s, dp_err *err)
{
    if (isnan(s))
        return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                          "noise_multiplier is open (null); the pld accountant needs a value");
    if (!(isfinite(s) && s > 0))
        return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                          "noise_multiplier must be finite and > 0 (got %g)", s);
    return DP_OK;
}

static int add_leaf(flat_ctx *c, mech_kind kind, double scale, double q, double eps0, bool replace,
                    uint64_t mult, dp_err *err)
{
    if (mult > ACCT_PLD_MAX_COUNT) {
        c->count_pending = true;
        return dp_err_set(err, DP_EINVAL, "count",
                          "the pld accountant composes at most %llu runs of one mechanism (got "
                          "%llu); use accountant rdp",
                          (unsigned long long)ACCT_PLD_MAX_COUNT, (unsigned long long)mult);
    }
    if (c->leaves != NULL) {
        pld_leaf *l = &c->leaves[c->n_leaves];
        l->m.kind = kind;
        l->m.scale = scale;
        l->m.q = q;
        l->m.eps0 = eps0;
        l->m.replace = replace;
        l->count = mult;
    }
    c->n_leaves++;
    return DP_OK;
}

static int flat_walk(const acct_event *ev, uint64_t mult, double q, int depth, flat_ctx *c,
                     dp_err *err)
{
    if (ev == NULL)
        return dp_err_set(err, DP_EINVAL, "type", "missing event");
    if (depth > ACCT_EVENT_MAX_DEPTH)
        return dp_err_set(err, DP_EINVAL, "type", "event tree deeper than %d levels",
                          ACCT_EVENT_MAX_DEPTH);
    if (++c->nodes > ACCT_EVENT_MAX_NODES)
        return dp_err_set(err, DP_EINVAL, "type", "event tree has more than %d nodes",
                          ACCT_EVENT_MAX_NODES);
    int rc;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
            if ((rc = check_noise(ev->noise_multiplier, err)) != DP_OK)
                return rc;
            if (q >= 1.0) {
                if (c->leaves != NULL)
                    c->gauss_mu2 += (double)mult / (ev->noise_multiplier * ev->noise_multiplier);
                return DP_OK;
            }
            return add_leaf(c, MECH_GAUSS, ev->noise_multiplier, q, 0, c->nb == ACCT_NB_REPLACE_ONE,
                            mult, err);
        case ACCT_EV_LAPLACE:
            if ((rc = check_noise(ev->noise_multiplier, err)) != DP_OK)
                return rc;
            return add_leaf(c, MECH_LAPLACE, ev->noise_multiplier, q, 0, false, mult, err);
        case ACCT_EV_PURE:
            if (!(isfinite(ev->epsilon) && ev->epsilon >= 0))
                return dp_err_set(err, DP_EINVAL, "epsilon",
                                  "epsilon must be finite and >= 0 (got %g)", ev->epsilon);
            if (ev->epsilon == 0)
                return DP_OK; /* 0-DP: the identity PLD */
            return add_leaf(c, MECH_PURE, 0, 1.0, ev->epsilon, false, mult, err);
        case ACCT_EV_POISSON: {
            double r = ev->sampling_rate;
            if (isnan(r))
                return dp_err_set(err, DP_EINVAL, "sampling_rate",
                                  "sampling_rate is open (null); the pld accountant needs a value");
            if (!(isfinite(r) && r > 0 && r <= 1))
                return dp_err_set(err, DP_EINVAL, "sampling_rate",
                                  "sampling_rate must be in (0, 1] (got %g)", r);
            const acct_event *ch = ev->child;
            if (c->nb == ACCT_NB_REPLACE_ONE && r < 1 && ch != NULL &&
                ch->type == ACCT_EV_LAPLACE) {
                c->field_is_global = true;
                return dp_err_set(err, DP_EINVAL, "neighboring",
                                  "the pld accountant supports poisson_sampled laplace events only "
                                  "under add_remove neighbouring");
            }
            if (ch == NULL || (ch->type != ACCT_EV_GAUSSIAN && ch->type != ACCT_EV_LAPLACE)) {
                rc = dp_err_set(err, DP_EINVAL, "type",
                                "the pld accountant samples only gaussian or laplace events (got "
                                "%s)",
                                ch == NULL ? "none" : acct_event_type_name(ch->type));
                dp_err_prefix_field(err, "event");
                return rc;
            }
            rc = flat_walk(ch, mult, r, depth + 1, c, err);
            if (rc != DP_OK && !c->field_is_global && !c->count_pending)
                dp_err_prefix_field(err, "event");
            return rc;
        }
        case ACCT_EV_SELF_COMPOSED: {
            if (ev->count_open)
                return dp_err_set(err, DP_EINVAL, "count",
                                  "count is open (null); the pld accountant needs a value");
            if (ev->count < 1 || ev->count > ACCT_EVENT_MAX_COUNT)
                return dp_err_set(err, DP_EINVAL, "count", "count must be in [1, 1e12] (got %llu)",
                                  (unsigned long long)ev->count);
            uint64_t m2;
            if (__builtin_mul_overflow(mult, ev->count, &m2) ||
                m2 > ACCT_EVENT_MAX_COUNT * 1000000ULL)
                return dp_err_set(err, DP_EINVAL, "count",
                                  "nested counts multiply to more than 1e18 runs");
            rc = flat_walk(ev->child, m2, q, depth + 1, c, err);
            if (rc != DP_OK && c->count_pending && mult <= ACCT_PLD_MAX_COUNT &&
                m2 > ACCT_PLD_MAX_COUNT)
                c->count_pending = false; /* this node's count is the one named */
            else if (rc != DP_OK && !c->field_is_global && !c->count_pending)
                dp_err_prefix_field(err, "event");
            return rc;
        }
        case ACCT_EV_COMPOSED:
            if (ev->n_children > 0 && ev->children == NULL)
                return dp_err_set(err, DP_EINVAL, "events", "missing events");
            for (size_t i = 0; i < ev->n_children; i++) {
                rc = flat_walk(ev->children[i], mult, q, depth + 1, c, err);
                if (rc != DP_OK) {
                    if (!c->field_is_global && !c->count_pending) {
                        char pre[32];
                        snprintf(pre, sizeof pre, "events[%zu]", i);
                        dp_err_prefix_field(err, pre);
                    }
                    return rc;
                }
            }
            return DP_OK;
        case ACCT_EV_ZCDP:
        case ACCT_EV_SWOR:
        case ACCT_EV_REPEAT_SELECT:
            return dp_err_set(err, DP_EINVAL, "type",
                              "the pld accountant does not support %s events; use accountant rdp",
                              acct_event_type_name(ev->type));
    }
    return dp_err_set(err, DP_EINVAL, "type", "unknown event type %d", (int)ev->type);
}

/* Orders leaves by mechanism parameters (exact equality merges them). */
static int leaf_cmp(const void *pa, const void *pb)
{
    const pld_leaf *a = pa, *b = pb;
    if (a->m.kind != b->m.kind)
        return (int)a->m.kind - (int)b->m.kind;
    if (a->m.scale != b->m.scale)
        return a->m.scale < b->m.scale ? -1 : 1;
    if (a->m.q != b->m.q)
        return a->m.q < b->m.q ? -1 : 1;
    if (a->m.eps0 != b->m.eps0)
        return a->m.eps0 < b->m.eps0 ? -1 : 1;
    return (int)a->m.replace - (int)b->m.replace;
}

/* Flattens ev into a leaf array (owned by caller, dp_free), identical mechanisms merged. */
static int flatten(const acct_event *ev, acct_neighboring nb, pld_leaf **out, size_t *n_out,
                   dp_err *err)
{
    flat_ctx c;
    memset(&c, 0, sizeof c);
    c.nb = nb;
    *out = NULL;
    *n_out = 0;
    int rc = flat_walk(ev, 1, 1.0, 0, &c, err);
    if (rc != DP_OK)
        return rc;
    size_t cap = c.n_leaves + 1;
    pld_leaf *leaves = dp_calloc(cap, sizeof *leaves);
    if (leaves == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for %zu leaves", cap);
    memset(&c, 0, sizeof c);
    c.nb = nb;
    c.leaves = leaves;
    rc = flat_walk(ev, 1, 1.0, 0, &c, err);
    if (rc != DP_OK) {
        dp_free(leaves);
        return rc;
    }
    /* identical mechanisms anywhere in the tree compose by adding their counts: sort and merge */
    qsort(leaves, c.n_leaves, sizeof *leaves, leaf_cmp);
    size_t m = 0;
    for (size_t i = 0; i < c.n_leaves; i++) {
        if (m > 0 && leaf_cmp(&leaves[m - 1], &leaves[i]) == 0) {
            leaves[m - 1].count += leaves[i].count; /* both <= 1e8: no overflow */
            if (leaves[m - 1].count > ACCT_PLD_MAX_COUNT) {
                dp_free(leaves);
                return dp_err_set(err, DP_EINVAL, "count",
                                  "runs of one mechanism across the tree add up to more than %llu; "
                                  "use accountant rdp",
                                  (unsigned long long)ACCT_PLD_MAX_COUNT);
            }
        } else {
            leaves[m++] = leaves[i];
        }
    }
    c.n_leaves = m;
    if (m > ACCT_PLD_MAX_MECHANISMS) {
        dp_free(leaves);
        return dp_err_set(err, DP_EINVAL, "events",
                          "the pld accountant composes at most %d distinct mechanisms (got %zu); "
                          "use accountant rdp",
                          ACCT_PLD_MAX_MECHANISMS, m);
    }
    if (c.gauss_mu2 > 0) {
        /* unsampled Gaussians compose exactly: one Gaussian with mu^2 = sum count / sigma^2 */
        pld_leaf *l = &leaves[c.n_leaves++];
        l->m.kind = MECH_GAUSS;
        l->m.scale = 1.0 / sqrt(c.gauss_mu2);
        l->m.q = 1.0;
        l->m.eps0 = 0;
        l->count = 1;
    }
    *out = leaves;
    *n_out = c.n_leaves;
    return DP_OK;
}

/* ---- Chernoff bounds from the cumulant generating function ---- */

/* K(t) = sum_k c_k log E[e^(t sgn L_k)] over the finite parts, with K' and K'' (t > 0). Returns
 * -DP_INF for K if some leaf has no finite mass. */
static void cgf_eval(const pld_pmf *pm, const pld_leaf *lv, size_t nl, double h, int sgn, double t,
                     double *k0, double *k1, double *k2)
{
    double K = 0, K1 = 0, K2 = 0, ratio = exp(-t * h);
    for (size_t k = 0; k < nl; k++) {
        const pld_pmf *p = &pm[k];
        double s0 = 0, s1 = 0, s2 = 0, f = 1.0;
        /* reference point: the largest value of sgn * loss; d = distance below it */
        for (size_t i = 0; i < p->n; i++) {
            size_t idx = sgn > 0 ? p->n - 1 - i : i;
            double d = (double)i * h, w = p->p[idx] * f;
            s0 += w;
            s1 += w * d;
            s2 += w * d * d;
            f *= ratio;
            if (f < PLD_TINY_FACTOR) {
                s0 += PLD_TINY_FACTOR; /* remaining mass <= 1, each term <= its mass * f */
                break;
            }
        }
        if (!(s0 > 0)) {
            *k0 = -DP_INF;
            *k1 = *k2 = 0;
            return;
        }
        double ref = sgn > 0 ? (double)(p->j0 + (int64_t)p->n - 1) * h : -(double)p->j0 * h;
        double m1 = s1 / s0, var = s2 / s0 - m1 * m1;
        double c = (double)lv[k].count;
        K += c * (t * ref + log(s0));
        K1 += c * (ref - m1);
        K2 += c * (var > 0 ? var : 0);
    }
    *k0 = K;
    *k1 = K1;
    *k2 = K2;
}

/* One safeguarded Newton step t -> t - step for the convex searches over t > 0 below: the new t is
 * kept in [t/8, 64 t] (t/8 replaces a non-positive one). Returns false, leaving t as it is, once
 * the step is within PLD_NEWTON_RTOL of t (converged). */
static bool newton_step(double *t, double step)
{
    double tn = *t - step;
    if (!(tn > 0))
        tn = *t / 8;
    if (tn > 64 * *t)
        tn = 64 * *t;
    if (fabs(tn - *t) <= PLD_NEWTON_RTOL * *t)
        return false;
    *t = tn;
    return true;
}

/* min over t > 0 of (K(t) + c) / t: a bound u with P(sgn S >= u) <= e^-c. */
static double chernoff_cut(const pld_pmf *pm, const pld_leaf *lv, size_t nl, double h, int sgn,
                           double c)
{
    /* start where a Gaussian with the same variance would have its optimum, t = sqrt(2c / var) */
    double t = PLD_CHERNOFF_T0, best = DP_INF;
    for (int it = 0; it < PLD_NEWTON_MAX_ITER; it++) {
        double K, K1, K2;
        cgf_eval(pm, lv, nl, h, sgn, t, &K, &K1, &K2);
        if (K == -DP_INF)
            return -DP_INF;
        if (it == 0 && K2 > 0) {
            double t0 = sqrt(2.0 * c / K2);
            if (t0 > t) {
                t = t0 < PLD_CHERNOFF_TMAX ? t0 : PLD_CHERNOFF_TMAX;
                continue;
            }
        }
        double u = (K + c) / t;
        if (u < best)
            best = u;
        double g = t * K1 - K - c, gp = t * K2;
        if (!(gp > 0) || !newton_step(&t, g / gp))
            break;
    }
    return best;
}

/* Upper bound on delta(eps) of the composed finite parts: min_t c(t) exp(K(t) - t eps) with
 * c(t) = (t/(1+t))^t / (1+t) = sup_y (1 - e^-y) e^-(t y) (the RDP-style conversion). Convex in t.
 */
static double chernoff_delta(const pld_pmf *pm, const pld_leaf *lv, size_t nl, double h, double eps)
{
    double t = 1.0, best = DP_INF;
    for (int it = 0; it < PLD_NEWTON_MAX_ITER; it++) {
        double K, K1, K2;
        cgf_eval(pm, lv, nl, h, 1, t, &K, &K1, &K2);
        if (K == -DP_INF)
            return 0.0;
        double lc = t * log(t / (1 + t)) - log1p(t);
        double f = lc + K - t * eps;
        if (f < best)
            best = f;
        double fp = log(t / (1 + t)) + K1 - eps, fpp = 1.0 / (t * (1 + t)) + K2;
        if (!newton_step(&t, fp / fpp))
            break;
    }
    return exp(best);
}

/* ---- FFT composition ---- */

/* FFT length for a window of n points: the smallest 2^a 3^b 5^c >= n with 1 <= a <= 6 (even, for
 * the half-length complex transform). GSL's mixed-radix
 * real FFT is fastest with small factors, and large powers of two make its strides collide in the
 * cache (measured here: 2^18 takes 5x longer than 200000 = 2^6 5^5). */
static size_t fft_length(size_t n)
{
    for (size_t m = n < 16 ? 16 : n;; m++) {
        size_t r = m, twos = 0;
        while (r % 2 == 0) {
            r /= 2;
            twos++;
        }
        while (r % 3 == 0)
            r /= 3;
        while (r % 5 == 0)
            r /= 5;
        if (r == 1 && twos >= 1 && twos <= 6)
            return m;
    }
}

/* FFT length when fft_length(w) is above the cap: the smallest even n in [w, max] whose half is
 * 7-smooth (GSL's mixed-radix complex FFT has kernels for factors 2..7 only; a large prime factor
 * in n / 2 would make the transform quadratic), or 0 when there is none. Any even n >= w is a
 * correct length: the window is zero-padded. */
static size_t fft_length_capped(size_t w, size_t max)
{
    for (size_t n = w + (w & 1); n <= max; n += 2) {
        size_t r = n / 2;
        for (size_t p = 2; p <= 7; p++)
            while (r % p == 0)
                r /= p;
        if (r == 1)
            return n;
    }
    return 0;
}

static void fft_free(pld_fft *f)
{
    if (f->cw != NULL)
        gsl_fft_complex_wavetable_free(f->cw);
    if (f->cws != NULL)
        gsl_fft_complex_workspace_free(f->cws);
    memset(f, 0, sizeof *f);
}

static int fft_alloc(pld_fft *f, size_t n, dp_err *err)
{
    if (f->n == n)
        return DP_OK;
    fft_free(f);
    f->cw = gsl_fft_complex_wavetable_alloc(n / 2);
    f->cws = gsl_fft_complex_workspace_alloc(n / 2);
    if (f->cw == NULL || f->cws == NULL) {
        fft_free(f);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for an FFT of length %zu", n);
    }
    f->n = n;
    return DP_OK;
}

/* Twiddles w^k = cos(2 pi k / n) - i sin(2 pi k / n) for k = 1, 2, ... by rotation, re-anchored
 * with cos/sin every PLD_TWIDDLE_RESYNC steps (error a few ulps). */
typedef struct twiddle {
    double c, s, c1, s1, scale; /* current cos, sin; one-step rotation; 2 pi / n */
    size_t k;
} twiddle;

static void twiddle_init(twiddle *t, size_t n)
{
    t->scale = 2.0 * M_PI / (double)n;
    t->c1 = cos(t->scale);
    t->s1 = sin(t->scale);
    t->c = 1.0;
    t->s = 0.0;
    t->k = 0;
}

static void twiddle_next(twiddle *t)
{
    t->k++;
    if (t->k % PLD_TWIDDLE_RESYNC == 0) {
        t->c = cos(t->scale * (double)t->k);
        t->s = sin(t->scale * (double)t->k);
    } else {
        double c = t->c * t->c1 - t->s * t->s1;
        t->s = t->s * t->c1 + t->c * t->s1;
        t->c = c;
    }
}

/* x (real, length n = 2m, as m complex numbers) -> its DFT X_0..X_m, packed in place: slot 0 holds
 * (X_0, X_m) (both real), slot k the complex X_k, 1 <= k < m. With Z = DFT_m(x_even + i x_odd),
 * E_k = (Z_k + conj Z_(m-k)) / 2, O_k = (Z_k - conj Z_(m-k)) / 2i and X_k = E_k + w^k O_k,
 * X_(m-k) = conj(E_k - w^k O_k), w = e^(-2 pi i / n) (the standard real-from-complex split). */
static int fft_forward(const pld_fft *f, double *x)
{
    size_t m = f->n / 2;
    if (gsl_fft_complex_forward(x, 1, m, f->cw, f->cws) != GSL_SUCCESS)
        return DP_ENUMERIC;
    double a = x[0], b = x[1];
    x[0] = a + b;
    x[1] = a - b;
    twiddle t;
    twiddle_init(&t, f->n);
    for (size_t k = 1; 2 * k <= m; k++) {
        twiddle_next(&t);
        size_t j = m - k;
        double zr = x[2 * k], zi = x[2 * k + 1], yr = x[2 * j], yi = x[2 * j + 1];
        double er = 0.5 * (zr + yr), ei = 0.5 * (zi - yi);
        double or_ = 0.5 * (zi + yi), oi = -0.5 * (zr - yr);
        double wr = t.c * or_ + t.s * oi, wi = t.c * oi - t.s * or_; /* w^k O_k */
        x[2 * k] = er + wr;
        x[2 * k + 1] = ei + wi;
        if (j != k) {
            x[2 * j] = er - wr;
            x[2 * j + 1] = -(ei - wi);
        }
    }
    return DP_OK;
}

/* The inverse of fft_forward (including the 1/n normalisation): packed X -> real x in place. */
static int fft_inverse(const pld_fft *f, double *x)
{
    size_t m = f->n / 2;
    double x0 = x[0], xm = x[1];
    x[0] = 0.5 * (x0 + xm);
    x[1] = 0.5 * (x0 - xm);
    twiddle t;
    twiddle_init(&t, f->n);
    for (size_t k = 1; 2 * k <= m; k++) {
        twiddle_next(&t);
        size_t j = m - k;
        double ar = x[2 * k], ai = x[2 * k + 1], cr = x[2 * j], ci = x[2 * j + 1];
        double er = 0.5 * (ar + cr), ei = 0.5 * (ai - ci);
        double pr = ar - cr, pi_ = ai + ci; /* X_k - conj X_(m-k) */
        double or_ = 0.5 * (pr * t.c - pi_ * t.s), oi = 0.5 * (pr * t.s + pi_ * t.c);
        x[2 * k] = er - oi;
        x[2 * k + 1] = ei + or_;
        if (j != k) {
            x[2 * j] = er + oi;
            x[2 * j + 1] = or_ - ei;
        }
    }
    if (gsl_fft_complex_inverse(x, 1, m, f->cw, f->cws) != GSL_SUCCESS)
        return DP_ENUMERIC;
    return DP_OK;
}

/* z <- z^c by repeated squaring (c >= 1). */
static void cpow_u64(double *re, double *im, uint64_t c)
{
    double br = *re, bi = *im, m2 = br * br + bi * bi;
    if (c > 1 && m2 < 0.25 && 0.5 * log(m2) * (double)c < PLD_LOG_UNDERFLOW) {
        *re = 0;
        *im = 0;
        return;
    }
    double rr = 1.0, ri = 0.0;
    for (;;) {
        if (c & 1) {
            double tr = rr * br - ri * bi;
            ri = rr * bi + ri * br;
            rr = tr;
        }
        c >>= 1;
        if (c == 0)
            break;
        double tr = br * br - bi * bi;
        bi = 2.0 * br * bi;
        br = tr;
    }
    *re = rr;
    *im = ri;
}

static double rpow_u64(double x, uint64_t c)
{
    double im = 0.0;
    cpow_u64(&x, &im, c);
    return x;
}

static int64_t mod_i64(int64_t a, int64_t n)
{
    int64_t r = a % n;
    return r < 0 ? r + n : r;
}

acct_pld_ws *acct_pld_ws_alloc(void)
{
    return dp_calloc(1, sizeof(acct_pld_ws));
}

void acct_pld_ws_free(acct_pld_ws *ws)
{
    if (ws == NULL)
        return;
    fft_free(&ws->fft);
    for (int i = 0; i < 3; i++)
        dp_free(ws->buf[i]);
    dp_free(ws);
}

/* Makes work array i hold at least n doubles (contents not kept); arrays are allocated only when a
 * composition needs them. */
static int ws_reserve(acct_pld_ws *ws, int i, size_t n, dp_err *err)
{
    if (ws->cap[i] >= n)
        return DP_OK;
    dp_free(ws->buf[i]);
    ws->cap[i] = 0;
    ws->buf[i] = dp_malloc(n * sizeof(double));
    if (ws->buf[i] == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for a %zu-point composition", n);
    ws->cap[i] = n;
    return DP_OK;
}

/* The work caps of compose_dir, checked on a window of `points` points spanning [lo, hi]. */
static int window_check(double points, double lo, double hi, size_t nl, const acct_pld_opts *o,
                        dp_err *err)
{
    double h = o->value_discretization;
    if (!(points <= (double)o->max_grid_points) || fabs(lo / h) > PLD_MAX_COMPOSED_INDEX ||
        fabs(hi / h) > PLD_MAX_COMPOSED_INDEX)
        return dp_err_set(err, DP_EINVAL, "value_discretization",
                          "the composed privacy loss spans [%g, %g]: more than %zu grid points at "
                          "value_discretization %g; use a coarser grid or accountant rdp",
                          lo, hi, o->max_grid_points, h);
    if (!((double)nl * points <= PLD_WORK_FACTOR * (double)o->max_grid_points))
        return dp_err_set(err, DP_EINVAL, "value_discretization",
                          "composing %zu mechanisms on a %.0f-point window takes more than %g "
                          "point-FFTs at value_discretization %g; use a coarser grid or accountant "
                          "rdp",
                          nl, points, PLD_WORK_FACTOR * (double)o->max_grid_points, h);
    return DP_OK;
}

/* The composed window [*a, *b] (grid indices): the support [lo_sup, hi_sup] cut where Chernoff
 * leaves at most e^-lc outside on each side (*cut_lo / *cut_hi: that side was cut). */
static void window_bounds(const pld_pmf *pm, const pld_leaf *lv, size_t nl, double h, double lc,
                          double lo_sup, double hi_sup, const double *clamp, double *a_out,
                          double *b_out, bool *cut_lo, bool *cut_hi)
{
    double ua = chernoff_cut(pm, lv, nl, h, -1, lc); /* P(S <= -ua) <= tau */
    double ub = chernoff_cut(pm, lv, nl, h, 1, lc);  /* P(S >= ub) <= tau */
    double a = lo_sup, b = hi_sup;
    *cut_lo = *cut_hi = false;
    if (isfinite(ua) && floor(-ua / h) > a) {
        a = floor(-ua / h);
        *cut_lo = true;
    }
    if (isfinite(ub) && ceil(ub / h) < b) {
        b = ceil(ub / h);
        *cut_hi = true;
    }
    /* the early estimate's cuts (valid for these PMFs too) where Newton stopped short of them */
    if (clamp != NULL && clamp[0] > a) {
        a = clamp[0];
        *cut_lo = true;
    }
    if (clamp != NULL && clamp[1] < b) {
        b = clamp[1];
        *cut_hi = true;
    }
    if (b < a)
        b = a;
    *a_out = a;
    *b_out = b;
}

/* Composes all leaves of one direction into c; clamp: NULL, or a window [clamp[0], clamp[1]] whose
 * ends are valid cuts (the early estimate's, remove direction). */
static int compose_dir(const pld_pmf *pm, const pld_leaf *lv, size_t nl, const acct_pld_opts *o,
                       const double *clamp, acct_pld_ws *ws, int slot, pld_comp *c, dp_err *err)
{
    double h = o->value_discretization, lc = -log(o->tail_mass_truncation);
    double lo_sup = 0, hi_sup = 0, log_fin = 0, bad = 0, steps = 0, drift = 0;
    memset(c, 0, sizeof *c);
    c->h = h;
    for (size_t k = 0; k < nl; k++) {
        double cnt = (double)lv[k].count;
        lo_sup += cnt * (double)pm[k].j0;
        hi_sup += cnt * (double)(pm[k].j0 + (int64_t)pm[k].n - 1);
        log_fin += cnt * log1p(-pm[k].p_inf);
        bad += cnt * pm[k].bad;
        drift += cnt * pm[k].drift;
        steps += cnt;
    }
    c->p_inf = -expm1(log_fin);
    c->bad = bad < 1 ? bad : 1;
    c->steps = steps;
    c->drift = drift;
    double a, b;
    bool cut_lo, cut_hi;
    window_bounds(pm, lv, nl, h, lc, lo_sup, hi_sup, clamp, &a, &b, &cut_lo, &cut_hi);
    c->trunc_lo = cut_lo ? o->tail_mass_truncation : 0;
    c->trunc_hi = cut_hi ? o->tail_mass_truncation : 0;
    int rc = window_check(b - a + 1, a * h, b * h, nl, o, err);
    if (rc != DP_OK)
        return rc;
    size_t w = (size_t)(b - a) + 1, n = fft_length(w);
    if (n > o->max_grid_points)
        n = fft_length_capped(w, o->max_grid_points);
    if (n == 0)
        return dp_err_set(err, DP_EINVAL, "value_discretization",
                          "no FFT length with small factors fits a %zu-point window within %zu "
                          "grid points at value_discretization %g; use a coarser grid",
                          w, o->max_grid_points, h);
    if ((rc = fft_alloc(&ws->fft, n, err)) != DP_OK)
        return rc;
    if ((rc = ws_reserve(ws, slot, n, err)) != DP_OK ||
        (nl > 1 && (rc = ws_reserve(ws, 2, n, err)) != DP_OK))
        return rc;
    pld_fft *fft = &ws->fft;
    double *acc = ws->buf[slot], *tmp = ws->buf[2];
    memset(acc, 0, n * sizeof(double));
    for (size_t k = 0; k < nl; k++) {
        double *dst = (k == 0) ? acc : tmp;
        if (k > 0)
            memset(tmp, 0, n * sizeof(double));
        int64_t pos = mod_i64(pm[k].j0, (int64_t)n);
        for (size_t i = 0; i < pm[k].n; i++) {
            dst[pos] += pm[k].p[i];
            if (++pos == (int64_t)n)
                pos = 0;
        }
        if (fft_forward(fft, dst) != DP_OK)
            return dp_err_set(err, DP_ENUMERIC, NULL, "FFT of length %zu failed", n);
        /* packed layout (fft_forward): [0], [1] = X_0, X_(n/2) (real); [2i], [2i+1] = X_i */
        uint64_t cnt = lv[k].count;
        if (cnt > 1) {
            dst[0] = rpow_u64(dst[0], cnt);
            dst[1] = rpow_u64(dst[1], cnt);
            for (size_t i = 1; 2 * i < n; i++)
                cpow_u64(&dst[2 * i], &dst[2 * i + 1], cnt);
        }
        if (k > 0) {
            acc[0] *= tmp[0];
            acc[1] *= tmp[1];
            for (size_t i = 1; 2 * i < n; i++) {
                double ar = acc[2 * i], ai = acc[2 * i + 1], br = tmp[2 * i], bi = tmp[2 * i + 1];
                acc[2 * i] = ar * br - ai * bi;
                acc[2 * i + 1] = ar * bi + ai * br;
            }
        }
    }
    if (fft_inverse(fft, acc) != DP_OK)
        return dp_err_set(err, DP_ENUMERIC, NULL, "inverse FFT of length %zu failed", n);
    for (size_t i = 0; i < n; i++)
        if (!(acc[i] > 0))
            acc[i] = 0; /* FFT round-off; raising it to 0 can only increase the upper delta */
    c->a = (int64_t)a;
    c->n = n;
    c->r = acc;
    return DP_OK;
}

/* ---- early work estimate (issue #10) ----
 *
 * compose_dir refuses a window wider than max_grid_points, or nl x window above PLD_WORK_FACTOR x
 * max_grid_points, but it only knows the window once every leaf PMF is built and its Chernoff cuts
 * are searched (about a second and a half for 256 mechanisms). pld_window_estimate bounds the
 * remove-direction window from above at a fraction of that cost:
 * - the support [lo_sup, hi_sup] is exact (leaf_grid, the arithmetic pmf_build uses);
 * - each Chernoff cut is computed on COARSE connect-the-dots PMFs: the same construction
 * (pmf_build) on the same grid ends, with bins of M fine steps (the last one shorter). Every coarse
 * bin is a union of fine bins, and connect-the-dots keeps each bin's P-mass and E_P[e^-L]; so the
 * coarse PMF is the fine one with the mass of each coarse bin spread to its ends keeping its mass
 * and the mean of u = e^-L (a mean-preserving spread in u), and the bottom and top tails are moved
 *   identically. For g convex in u, E[g] can only grow under such a spread: g = u^-t = e^(t L)
 *   (upper cut) and g = u^t (lower cut, t >= 1). For 0 < t < 1, u^t is concave and the coarse E[g]
 *   is smaller than the fine one by at most the chord gap, a relative t (1 - t) (e^H - 1)^2 / 8
 *   (H = M h; the interpolation error bound (du)^2 / 8 max |g''| over min g), which is added.
 *   Hence the coarse cumulant generating function bounds the fine one from above at every t, and
 *   any t gives a cut at least as wide as compose_dir's optimum: a golden-section search over
 *   log t suffices. PLD_EST_SLACK grid points cover compose_dir's Newton stopping tolerance.
 * M is chosen per leaf from the standard deviation s of its loss (measured on a coarser PMF first,
 * refined twice): bins of about s / PLD_EST_BINS_PER_SD add at most ~1/(4 PLD_EST_BINS_PER_SD^2)
 * to the variance, so the estimate stays within a few percent of the window (tested against it
 * on random mechanism lists in tests/unit/test_accounting_pld.c), and refusing on it refuses only
 * requests within that margin of the cap that the late check would have let through
 * (docs/ACCOUNTING.md, "Work caps"). Mass-less (degenerate) bins, which pmf_build rounds up whole,
 * carry less than 1e-300 and are ignored. The add direction, composed only when a Chernoff bound
 * cannot rule it out, keeps its check in compose_dir. */

#define PLD_EST_SLACK       2.0  /* grid points added to each estimated cut */
#define PLD_EST_T_MIN       1e-4 /* golden-section range of the Chernoff exponent t */
#define PLD_EST_T_MAX       1e6
#define PLD_EST_ITER        24  /* golden-section steps (the log t range shrinks by 0.618^24) */
#define PLD_EST_BINS_PER_SD 4.0 /* coarse bins per standard deviation of one run's loss */
#define PLD_EST_FIRST_BINS  256 /* bins of the first, variance-measuring coarse PMF */
#define PLD_EST_PASSES      3   /* coarse PMFs built per leaf at most */

/* A coarse PMF of one run: mass p[i] at loss x[i] (increasing), p_inf at +infinity. */
typedef struct est_pmf {
    double *x, *p; /* owned */
    size_t n;
    double hmax; /* widest bin */
} est_pmf;

static void est_pmf_free(est_pmf *e)
{
    dp_free(e->x);
    dp_free(e->p);
    e->x = e->p = NULL;
}

/* pmf_build's remove direction on grid indices [jlo, jhi] with bins of mstep fine steps. */
static int est_pmf_build(const pld_mech *m, double h, double jlo, double jhi, double mstep,
                         est_pmf *e, dp_err *err)
{
    size_t nb = (size_t)ceil((jhi - jlo) / mstep), n = nb + 1;
    est_pmf_free(e);
    e->x = dp_calloc(n, sizeof(double));
    e->p = dp_calloc(n, sizeof(double));
    if (e->x == NULL || e->p == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for a %zu-point PLD estimate", n);
    e->n = n;
    e->hmax = 0;
    for (size_t k = 0; k < n; k++) {
        double j = jlo + (double)k * mstep;
        e->x[k] = (k + 1 == n || j > jhi ? jhi : j) * h; /* the fine grid's own arithmetic */
    }
    double hint = DP_NAN;
    tails4 prev = mech_tails(m, e->x[0], &hint);
    e->p[0] += prev.ub;
    for (size_t k = 0; k + 1 < n; k++) {
        double w = e->x[k + 1] - e->x[k];
        e->hmax = fmax(e->hmax, w);
        tails4 cur = mech_tails(m, e->x[k + 1], &hint);
        double du = bin_mass(prev.u, prev.ub, cur.u, cur.ub);
        double dw = bin_mass(prev.w, prev.wb, cur.w, cur.wb);
        prev = cur;
        if (du <= 0 && dw <= 0)
            continue;
        double v = exp(e->x[k]) * dw, up;
        if (!isfinite(v) || !(dw > 0)) {
            up = du;
        } else {
            up = (du - v) / -expm1(-w);
            if (up < 0)
                up = 0;
            if (up > du)
                up = du;
        }
        e->p[k + 1] += up;
        e->p[k] += du - up;
    }
    double v = exp(e->x[n - 1]) * prev.w;
    if (!(v <= prev.u))
        v = prev.u;
    e->p[n - 1] += v;
    return DP_OK;
}

/* Standard deviation of the finite part of e (normalised). */
static double est_pmf_sd(const est_pmf *e)
{
    double s0 = 0, s1 = 0, s2 = 0, x0 = e->x[0];
    for (size_t i = 0; i < e->n; i++) {
        double d = e->x[i] - x0;
        s0 += e->p[i];
        s1 += e->p[i] * d;
        s2 += e->p[i] * d * d;
    }
    if (!(s0 > 0))
        return 0;
    double var = s2 / s0 - (s1 / s0) * (s1 / s0);
    return var > 0 ? sqrt(var) : 0;
}

/* log sum_i p_i e^(sgn t x_i), with the concave-case gap of the comment above when sgn < 0 and
 * t < 1; -INF if e has no finite mass. */
static double est_pmf_cgf(const est_pmf *e, int sgn, double t)
{
    double ref = sgn > 0 ? e->x[e->n - 1] : -e->x[0], s = 0;
    for (size_t i = 0; i < e->n; i++)
        if (e->p[i] > 0)
            s += e->p[i] * exp(t * (sgn * e->x[i] - ref));
    if (!(s > 0))
        return -DP_INF;
    double k = t * ref + log(s);
    if (sgn < 0 && t < 1.0) {
        double em1 = expm1(e->hmax);
        k += log1p(t * (1.0 - t) * em1 * em1 / 8.0);
    }
    return k;
}

/* The cumulant generating function summed over the leaves, for the cut search below. */
typedef struct cgf_src {
    const est_pmf *ep; /* coarse PMFs (the estimate), or NULL: */
    const pld_pmf *pm; /* the fine ones (tests: the optimum of the fine cuts) */
    const pld_leaf *lv;
    size_t nl;
    double h;
} cgf_src;

static double src_cgf(const cgf_src *c, int sgn, double t)
{
    if (c->ep == NULL) {
        double K, K1, K2;
        cgf_eval(c->pm, c->lv, c->nl, c->h, sgn, t, &K, &K1, &K2);
        return K == -DP_INF ? DP_NAN : K;
    }
    double K = 0;
    for (size_t k = 0; k < c->nl; k++) {
        double v = est_pmf_cgf(&c->ep[k], sgn, t);
        if (v == -DP_INF)
            return DP_NAN; /* compose_dir keeps the support: no cut */
        K += (double)c->lv[k].count * v;
    }
    return K;
}

/* min over t of (K(t) + lc) / t by golden section over log t (every t gives a valid cut, so this
 * needs no convergence to be sound); +INF when K has no finite mass (the support is kept). */
static double est_cut(const cgf_src *c, int sgn, double lc)
{
    double x0 = log(PLD_EST_T_MIN), x1 = log(PLD_EST_T_MAX), gr = 0.5 * (sqrt(5.0) - 1.0);
    double xa = x1 - gr * (x1 - x0), xb = x0 + gr * (x1 - x0);
    double fa = (src_cgf(c, sgn, exp(xa)) + lc) / exp(xa);
    double fb = (src_cgf(c, sgn, exp(xb)) + lc) / exp(xb);
    if (isnan(fa) || isnan(fb))
        return DP_INF;
    double best = fmin(fa, fb);
    for (int it = 0; it < PLD_EST_ITER; it++) {
        if (fa <= fb) {
            x1 = xb;
            xb = xa;
            fb = fa;
            xa = x1 - gr * (x1 - x0);
            fa = (src_cgf(c, sgn, exp(xa)) + lc) / exp(xa);
        } else {
            x0 = xa;
            xa = xb;
            fa = fb;
            xb = x0 + gr * (x1 - x0);
            fb = (src_cgf(c, sgn, exp(xb)) + lc) / exp(xb);
        }
        best = fmin(best, fmin(fa, fb));
    }
    return best;
}

/* Window [*a, *b] (grid indices) from the support and the cuts of c. */
static void est_window(const cgf_src *c, double lo_sup, double hi_sup, double lc, double *a_out,
                       double *b_out)
{
    double h = c->h, a = lo_sup, b = hi_sup;
    double ua = est_cut(c, -1, lc), ub = est_cut(c, 1, lc);
    if (isfinite(ua))
        a = fmax(a, floor(-ua / h) - PLD_EST_SLACK);
    if (isfinite(ub))
        b = fmin(b, ceil(ub / h) + PLD_EST_SLACK);
    if (b < a)
        b = a;
    *a_out = a;
    *b_out = b;
}

/* Upper bound [win[0], win[1]] (grid indices) on the remove-direction composed window of lv; its
 * cuts are valid Chernoff cuts of the fine PMFs too, so compose_dir also cuts there (the window it
 * takes is never wider). DP_EINVAL as pmf_build for a leaf grid too wide; DP_ENOMEM. */
static int pld_window_estimate(const pld_leaf *lv, size_t nl, const acct_pld_opts *o, double win[2],
                               dp_err *err)
{
    double h = o->value_discretization, lc = -log(o->tail_mass_truncation);
    est_pmf *ep = dp_calloc(nl, sizeof *ep);
    int rc = DP_OK;
    if (ep == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for the pld work estimate");
    double lo_sup = 0, hi_sup = 0;
    for (size_t k = 0; k < nl; k++) {
        double jlo, jhi;
        if ((rc = leaf_grid(&lv[k].m, o, &jlo, &jhi, err)) != DP_OK)
            goto out;
        double cnt = (double)lv[k].count;
        lo_sup += cnt * jlo; /* as compose_dir: j0 and j0 + n - 1 */
        hi_sup += cnt * jhi;
        /* bins of ~ sd / PLD_EST_BINS_PER_SD, the sd measured on coarser PMFs first */
        double mstep = fmax(1.0, ceil((jhi - jlo) / PLD_EST_FIRST_BINS));
        for (int pass = 0; pass < PLD_EST_PASSES; pass++) {
            if ((rc = est_pmf_build(&lv[k].m, h, jlo, jhi, mstep, &ep[k], err)) != DP_OK)
                goto out;
            double want = fmax(1.0, floor(est_pmf_sd(&ep[k]) / (PLD_EST_BINS_PER_SD * h)));
            if (want >= mstep)
                break;
            mstep = want;
        }
    }
    cgf_src src = {ep, NULL, lv, nl, h};
    est_window(&src, lo_sup, hi_sup, lc, &win[0], &win[1]);
out:
    for (size_t k = 0; k < nl; k++)
        est_pmf_free(&ep[k]);
    dp_free(ep);
    return rc;
}

/* ---- reading epsilon and delta off a composed PLD ---- */

/* sum over window losses l > eps of (1 - e^(eps - l)) r. Scans down from the top of the window;
 * pos walks the cyclic array without a division per step. */
static double window_delta(const pld_comp *c, double eps)
{
    double s = 0;
    int64_t n = (int64_t)c->n, top = c->a + n - 1;
    int64_t pos = mod_i64(top, n);
    for (int64_t j = top; j >= c->a; j--) {
        double l = (double)j * c->h;
        if (!(l > eps))
            break;
        s += -expm1(eps - l) * c->r[pos];
        pos = (pos == 0) ? n - 1 : pos - 1;
    }
    return s;
}

/* Smallest eps with window_delta(eps) <= d[k] for each of the nd thresholds (any order):
 * eps_out[k] = +INFINITY if d[k] <= 0, -INFINITY if every eps works. One scan for all. */
static void window_eps_multi(const pld_comp *c, const double *d, double *eps_out, size_t nd)
{
    size_t left = 0;
    for (size_t k = 0; k < nd; k++) {
        if (!(d[k] > 0)) {
            eps_out[k] = DP_INF;
        } else {
            eps_out[k] = DP_NAN;
            left++;
        }
    }
    int64_t n = (int64_t)c->n, top = c->a + n - 1;
    int64_t pos = mod_i64(top, n);
    double s1 = 0, tt = 0, emh = exp(-c->h);
    for (int64_t j = top; j >= c->a && left > 0; j--) {
        double r = c->r[pos];
        pos = (pos == 0) ? n - 1 : pos - 1;
        /* tt = sum_{j' >= j} r_j' e^-(l_j' - l_j); on [l_(j-1), l_j): delta = s1 - e^(eps-l_j) tt
         */
        tt = r + emh * tt;
        s1 += r;
        double at_left = s1 - emh * tt;
        for (size_t k = 0; k < nd; k++) {
            if (!isnan(eps_out[k]))
                continue;
            if (at_left > d[k] || j == c->a) {
                eps_out[k] = (s1 > d[k]) ? (double)j * c->h + log((s1 - d[k]) / tt) : -DP_INF;
                left--;
            }
        }
    }
    for (size_t k = 0; k < nd; k++)
        if (isnan(eps_out[k]))
            eps_out[k] = -DP_INF;
}

static double window_eps(const pld_comp *c, double d)
{
    double e;
    window_eps_multi(c, &d, &e, 1);
    return e;
}

/* Hoeffding shift for the lower bound (see DESIGN 5). */
static double hoeffding_shift(const pld_comp *c, double beta)
{
    double em1h = expm1(c->h);
    return c->steps * em1h * em1h / 8.0 + c->drift + c->h * sqrt(2.0 * c->steps * log(1.0 / beta));
}

static const double PLD_BETA_FRACTIONS[] = {0.5, 0.2, 0.1, 0.03, 0.01, 1e-3, 1e-4, 1e-6};
#define PLD_N_BETA (sizeof PLD_BETA_FRACTIONS / sizeof PLD_BETA_FRACTIONS[0])

static double comp_slack(const pld_comp *c)
{
    double s = c->trunc_lo + c->trunc_hi + c->bad - c->p_inf;
    return s > 0 ? s : 0;
}

static double comp_eps_upper(const pld_comp *c, double delta)
{
    double e = window_eps(c, delta - c->p_inf - c->trunc_hi);
    return e > 0 ? e : 0.0;
}

/* Lower epsilon: max over the beta candidates, plus the deterministic shift t = n h (every run's
 * rounding error is < h, so sum D < n h surely; best for few runs). */
static double comp_eps_lower(const pld_comp *c, double delta)
{
    double best = 0, slack = comp_slack(c), d[PLD_N_BETA + 1], e[PLD_N_BETA + 1];
    for (size_t i = 0; i < PLD_N_BETA; i++)
        d[i] = delta + slack + delta * PLD_BETA_FRACTIONS[i];
    d[PLD_N_BETA] = delta + slack;
    window_eps_multi(c, d, e, PLD_N_BETA + 1);
    for (size_t i = 0; i <= PLD_N_BETA; i++) {
        double t =
            (i < PLD_N_BETA) ? hoeffding_shift(c, delta * PLD_BETA_FRACTIONS[i]) : c->steps * c->h;
        double v = e[i] - t;
        if (isfinite(v) && v > best)
            best = v;
    }
    return best;
}

static double comp_delta_upper(const pld_comp *c, double eps)
{
    double d = window_delta(c, eps) + c->p_inf + c->trunc_hi;
    return d < 1 ? d : 1.0;
}

static double comp_delta_lower(const pld_comp *c, double eps)
{
    double best = 0, slack = comp_slack(c), scale = comp_delta_upper(c, eps);
    double sure = window_delta(c, eps + c->steps * c->h) - slack;
    if (sure > best)
        best = sure;
    for (size_t i = 0; i < PLD_N_BETA && scale > 0; i++) {
        double beta = scale * PLD_BETA_FRACTIONS[i];
        double d = window_delta(c, eps + hoeffding_shift(c, beta)) - slack - beta;
        if (d > best)
            best = d;
    }
    return best < 1 ? best : 1.0;
}

/* ---- driver ---- */

typedef struct pld_query {
    bool want_eps; /* true: epsilon for delta; false: delta for epsilon */
    double value;  /* delta or epsilon */
} pld_query;

static void result_fill(acct_pld_result *out, const pld_comp *c, const char *dir, bool want_eps,
                        double value)
{
    if (want_eps) {
        out->epsilon_upper = comp_eps_upper(c, value);
        out->epsilon_lower = comp_eps_lower(c, value);
        if (out->epsilon_lower > out->epsilon_upper)
            out->epsilon_lower = out->epsilon_upper;
        out->epsilon = out->epsilon_upper;
        out->delta = value;
    } else {
        out->delta_upper = comp_delta_upper(c, value);
        out->delta_lower = comp_delta_lower(c, value);
        if (out->delta_lower > out->delta_upper)
            out->delta_lower = out->delta_upper;
        out->delta = out->delta_upper;
        out->epsilon = value;
    }
    out->infinity_mass = c->p_inf;
    out->truncated_mass = c->trunc_lo + c->trunc_hi;
    out->grid_points = c->n;
    out->steps = (uint64_t)c->steps;
    out->direction = dir;
}

static int pld_run(const acct_event *ev, acct_neighboring nb, pld_query qy,
                   const acct_pld_opts *o_in, acct_pld_ws *ws_in, acct_pld_result *out, dp_err *err)
{
    acct_pld_opts o;
    if (o_in == NULL)
        acct_pld_opts_default(&o);
    else
        o = *o_in;
    int rc = acct_pld_opts_check(&o, err);
    if (rc != DP_OK)
        return rc;
    if (nb != ACCT_NB_ADD_REMOVE && nb != ACCT_NB_REPLACE_ONE)
        return dp_err_set(err, DP_EINVAL, "neighboring", "unknown neighbouring relation %d",
                          (int)nb);
    memset(out, 0, sizeof *out);
    out->value_discretization = o.value_discretization;
    out->tail_mass_truncation = o.tail_mass_truncation;

    pld_leaf *lv = NULL;
    size_t nl = 0;
    pld_pmf *pr = NULL, *pa = NULL;
    pld_comp cr, ca;
    acct_pld_ws *ws = ws_in;
    memset(&cr, 0, sizeof cr);
    memset(&ca, 0, sizeof ca);
    if (ws == NULL && (ws = acct_pld_ws_alloc()) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory for the pld workspace");

    if ((rc = flatten(ev, nb, &lv, &nl, err)) != DP_OK)
        goto out;
    if (nl == 0) { /* nothing private happened: the identity PLD */
        out->direction = "symmetric";
        if (qy.want_eps) {
            out->delta = qy.value;
        } else {
            out->epsilon = qy.value;
        }
        goto out;
    }
    bool sym = true;
    for (size_t k = 0; k < nl; k++)
        if (lv[k].m.q < 1.0 && !lv[k].m.replace)
            sym = false; /* the replace-one pair is symmetric (x -> -x swaps P and Q) */
    pr = dp_calloc(nl, sizeof *pr);
    pa = sym ? NULL : dp_calloc(nl, sizeof *pa);
    if (pr == NULL || (!sym && pa == NULL)) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory for %zu PLDs", nl);
        goto out;
    }
    /* bound the work of one call: grid points over all mechanisms */
    double total = 0;
    for (size_t k = 0; k < nl; k++) {
        double lo, hi;
        mech_range(&lv[k].m, o.leaf_tail_mass, &lo, &hi);
        total += (hi - lo) / o.value_discretization + 2;
    }
    if (!(total <= PLD_WORK_FACTOR * (double)o.max_grid_points)) {
        rc = dp_err_set(err, DP_EINVAL, "value_discretization",
                        "the %zu mechanisms need %.3g grid points in all at value_discretization "
                        "%g (at most %g); use a coarser grid or accountant rdp",
                        nl, total, o.value_discretization,
                        PLD_WORK_FACTOR * (double)o.max_grid_points);
        goto out;
    }
    /* ... and the composed window, from the parameters alone (issue #10): refused here, before
     * any PMF is built, by the same caps and message compose_dir would give */
    double est[2];
    if ((rc = pld_window_estimate(lv, nl, &o, est, err)) != DP_OK ||
        (rc = window_check(est[1] - est[0] + 1, est[0] * o.value_discretization,
                           est[1] * o.value_discretization, nl, &o, err)) != DP_OK)
        goto out;
    for (size_t k = 0; k < nl; k++)
        if ((rc = pmf_build(&lv[k].m, &o, &pr[k], sym ? NULL : &pa[k], err)) != DP_OK)
            goto out;
    if ((rc = compose_dir(pr, lv, nl, &o, est, ws, 0, &cr, err)) != DP_OK)
        goto out;
    result_fill(out, &cr, sym ? "symmetric" : "remove", qy.want_eps, qy.value);
    if (sym)
        goto out;

    /* add direction: skip it when a Chernoff bound proves it cannot be the worse one. */
    double log_fin = 0;
    for (size_t k = 0; k < nl; k++)
        log_fin += (double)lv[k].count * log1p(-pa[k].p_inf);
    double pinf_a = -expm1(log_fin);
    double at_eps = qy.want_eps ? out->epsilon_upper : qy.value;
    double need = qy.want_eps ? qy.value : out->delta_upper;
    if (isinf(at_eps) ||
        pinf_a + chernoff_delta(pa, lv, nl, o.value_discretization, at_eps) <= need)
        goto out;
    if ((rc = compose_dir(pa, lv, nl, &o, NULL, ws, 1, &ca, err)) != DP_OK)
        goto out;
    acct_pld_result ra;
    memset(&ra, 0, sizeof ra);
    ra.value_discretization = out->value_discretization;
    ra.tail_mass_truncation = out->tail_mass_truncation;
    result_fill(&ra, &ca, "add", qy.want_eps, qy.value);
    if (qy.want_eps) {
        double lower = fmax(out->epsilon_lower, ra.epsilon_lower);
        if (ra.epsilon_upper > out->epsilon_upper)
            *out = ra;
        out->epsilon_lower = fmin(lower, out->epsilon_upper);
    } else {
        double lower = fmax(out->delta_lower, ra.delta_lower);
        if (ra.delta_upper > out->delta_upper)
            *out = ra;
        out->delta_lower = fmin(lower, out->delta_upper);
    }

out:
    if (ws_in == NULL)
        acct_pld_ws_free(ws);
    for (size_t k = 0; k < nl; k++) {
        if (pr != NULL)
            pmf_free(&pr[k]);
        if (pa != NULL)
            pmf_free(&pa[k]);
    }
    dp_free(pr);
    dp_free(pa);
    dp_free(lv);
    return rc;
}

int acct_pld_window_points(const acct_event *ev, acct_neighboring nb, const acct_pld_opts *o_in,
                           double *estimate, double *optimum, double *taken, dp_err *err)
{
    acct_pld_opts o;
    if (o_in == NULL)
        acct_pld_opts_default(&o);
    else
        o = *o_in;
    int rc = acct_pld_opts_check(&o, err);
    if (rc != DP_OK)
        return rc;
    pld_leaf *lv = NULL;
    pld_pmf *pm = NULL;
    size_t nl = 0;
    double est[2] = {0, 0}, h = o.value_discretization, lc = -log(o.tail_mass_truncation);
    if (estimate != NULL)
        *estimate = 0;
    if (optimum != NULL)
        *optimum = 0;
    if (taken != NULL)
        *taken = 0;
    if ((rc = flatten(ev, nb, &lv, &nl, err)) != DP_OK || nl == 0)
        goto out;
    if ((estimate != NULL || taken != NULL) &&
        (rc = pld_window_estimate(lv, nl, &o, est, err)) != DP_OK)
        goto out;
    if (estimate != NULL)
        *estimate = est[1] - est[0] + 1;
    if (optimum == NULL && taken == NULL)
        goto out;
    if ((pm = dp_calloc(nl, sizeof *pm)) == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory for %zu PLDs", nl);
        goto out;
    }
    double lo_sup = 0, hi_sup = 0, a, b;
    for (size_t k = 0; k < nl; k++) {
        if ((rc = pmf_build(&lv[k].m, &o, &pm[k], NULL, err)) != DP_OK)
            goto out;
        double cnt = (double)lv[k].count;
        lo_sup += cnt * (double)pm[k].j0;
        hi_sup += cnt * (double)(pm[k].j0 + (int64_t)pm[k].n - 1);
    }
    if (optimum != NULL) {
        cgf_src src = {NULL, pm, lv, nl, h};
        est_window(&src, lo_sup, hi_sup, lc, &a, &b);
        *optimum = b - a + 1;
    }
    if (taken != NULL) {
        bool cut_lo, cut_hi;
        window_bounds(pm, lv, nl, h, lc, lo_sup, hi_sup, est, &a, &b, &cut_lo, &cut_hi);
        *taken = b - a + 1;
    }
out:
    for (size_t k = 0; pm != NULL && k < nl; k++)
        pmf_free(&pm[k]);
    dp_free(pm);
    dp_free(lv);
    return rc;
}

int acct_pld_epsilon(const acct_event *ev, acct_neighboring nb, double delta,
                     const acct_pld_opts *o, acct_pld_result *out, dp_err *err)
{
    return acct_pld_epsilon_ws(ev, nb, delta, o, NULL, out, err);
}

int acct_pld_delta(const acct_event *ev, acct_neighboring nb, double epsilon,
                   const acct_pld_opts *o, acct_pld_result *out, dp_err *err)
{
    return acct_pld_delta_ws(ev, nb, epsilon, o, NULL, out, err);
}

int acct_pld_epsilon_ws(const acct_event *ev, acct_neighboring nb, double delta,
                        const acct_pld_opts *o, acct_pld_ws *ws, acct_pld_result *out, dp_err *err)
{
    if (!(isfinite(delta) && delta > 0 && delta < 1))
        return dp_err_set(err, DP_EINVAL, "delta", "delta must be in (0, 1) (got %g)", delta);
    pld_query q = {true, delta};
    return pld_run(ev, nb, q, o, ws, out, err);
}

int acct_pld_delta_ws(const acct_event *ev, acct_neighboring nb, double epsilon,
                      const acct_pld_opts *o, acct_pld_ws *ws, acct_pld_result *out, dp_err *err)
{
    if (!(isfinite(epsilon) && epsilon >= 0))
        return dp_err_set(err, DP_EINVAL, "epsilon", "epsilon must be finite and >= 0 (got %g)",
                          epsilon);
    pld_query q = {false, epsilon};
    return pld_run(ev, nb, q, o, ws, out, err);
}
