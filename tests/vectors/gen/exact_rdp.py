"""exact_rdp.py: high-precision (mpmath) reference RDP curves, written for dpsilo's golden vectors.

This is our own code; it imports no accounting library. It evaluates the defining integrals directly, so it
is independent of the series that dp_accounting and Opacus sum.

Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019, "Renyi Differential Privacy of the Sampled
Gaussian Mechanism", Sec. 3, eq. for A_alpha):
    mu0 = N(0, s^2), mu1 = N(1, s^2), mu = (1-q) mu0 + q mu1,
    A_alpha = E_{z~mu0}[(mu(z)/mu0(z))^alpha],  RDP(alpha) = log(A_alpha) / (alpha - 1).
With L(z) = mu1(z)/mu0(z) = exp((2z - 1)/(2 s^2)) and x = q (L - 1):
    A_alpha - 1 = E_{mu0}[(1 + x)^alpha - 1 - alpha x]      (because E_{mu0}[x] = 0),
and the integrand is >= 0 for alpha > 1 (convexity of t -> t^alpha), so the integral has no cancellation
however small q is. The other direction, B_alpha = E_{mu}[(mu0/mu)^alpha] = E_{mu0}[(1+x)^(1-alpha)], is
computed the same way (integrand (1+x)^(1-alpha) - 1 - (1-alpha) x >= 0) to check that A dominates.

Integer orders are also computed by the finite binomial sum (MTZ 2019 Sec. 3.3, integer alpha)
    A_alpha - 1 = sum_{k=2}^{alpha} C(alpha,k) q^k (1-q)^(alpha-k) (exp((k^2-k)/(2 s^2)) - 1),
which is a second, quadrature-free evaluation used to validate the integral.

Laplace mechanism with scale b (L1 sensitivity 1), Mironov 2017 "Renyi Differential Privacy", Prop. 6:
    RDP(alpha) = 1/(alpha-1) log( alpha/(2alpha-1) exp((alpha-1)/b) + (alpha-1)/(2alpha-1) exp(-alpha/b) ).
"""
import mpmath as mp

DPS = 30  # decimal digits of working precision; results are needed to ~15 digits
QUAD_DPS = 20  # target digits of the quadrature


def _breakpoints(q, s, a):
    """Points (in u = z/s) around which the integrand's mass lies: the origin and the stationary point of
    -u^2/2 + a*log(1 - q + q*L), where L = exp(u/s - 1/(2 s^2)); it solves u = (a/s) * qL/(1-q+qL)."""
    pts = [mp.mpf(0)]
    hi = a / s
    if hi > 1:
        def g(u):
            lq = mp.log(q) + u / s - 1 / (2 * s * s)
            sig = 1 / (1 + mp.exp(mp.log1p(-q) - lq)) if q < 1 else mp.mpf(1)
            return hi * sig - u
        # scan g on a log grid of (0, hi + 1] for sign changes, refine by bisection
        grid = [hi * mp.mpf(10) ** (-k / mp.mpf(8)) for k in range(0, 8 * 12)][::-1] + [hi + 1]
        prev_u, prev_g = mp.mpf(0), g(mp.mpf(0))
        for u in grid:
            gu = g(u)
            if (gu > 0) != (prev_g > 0):
                lo_, hi_ = prev_u, u
                for _ in range(200):
                    mid = (lo_ + hi_) / 2
                    if (g(mid) > 0) == (prev_g > 0):
                        lo_ = mid
                    else:
                        hi_ = mid
                    if hi_ - lo_ < mp.mpf(10) ** -6 * (1 + abs(hi_)):
                        break
                pts.append((lo_ + hi_) / 2)
            prev_u, prev_g = u, gu
    out = []
    for p in pts:
        for w in (-40, -10, -3, 0, 3, 10, 40):
            out.append(p + w)
    out = sorted(set(out))
    return out


def _integrate(f, q, s, a):
    """Integral of f over the real line. f is rescaled by its largest value at the breakpoints so that
    mpmath's (absolute) error control works whatever the magnitude of the integral."""
    bp = _breakpoints(q, s, a)
    scale = max(abs(f(u)) for u in bp)
    if scale == 0:
        scale = mp.mpf(1)
    pts = [mp.ninf] + bp + [mp.inf]

    def g(u):
        with mp.workdps(DPS):
            v = f(u) / scale
        return +v  # rounded to the quadrature's precision

    # The integrand is evaluated at DPS digits (it cancels for small x) but the quadrature only needs
    # QUAD_DPS digits of the (non-negative) integral, which keeps the number of nodes small.
    with mp.workdps(QUAD_DPS):
        return scale * mp.quad(g, pts, maxdegree=8)


def sgm_log_a_minus_1(q, s, a, direction="A"):
    """A_alpha - 1 (direction "A") or B_alpha - 1 ("B") of the Poisson-subsampled Gaussian, by quadrature.
    q in (0,1), s > 0, a > 1; mpmath numbers returned."""
    q, s, a = mp.mpf(q), mp.mpf(s), mp.mpf(a)
    c = 1 / mp.sqrt(2 * mp.pi)
    e = a if direction == "A" else 1 - a

    def f(u):
        x = q * mp.expm1(u / s - 1 / (2 * s * s))
        # (1+x)^e - 1 - e x, evaluated without cancellation for small |x| by its Taylor series
        if x == 0:
            return mp.mpf(0)
        if abs(x) * max(abs(e), 1) < mp.mpf(10) ** -3:
            t = mp.mpf(0)
            term = e * (e - 1) / 2 * x * x
            k = 2
            while True:
                t += term
                if term == 0 or abs(term) < abs(t) * mp.mpf(10) ** -(DPS - 5):
                    break
                term = term * (e - k) / (k + 1) * x
                k += 1
            h = t
        else:
            h = mp.expm1(e * mp.log1p(x)) - e * x
        return c * mp.exp(-u * u / 2) * h

    return _integrate(f, q, s, a)


def sgm_rdp_quad(q, s, a, direction="A"):
    """RDP of the Poisson-subsampled Gaussian at order a (> 1) by quadrature (any real order), as an mpmath
    number. q = 1 is the plain Gaussian a / (2 s^2)."""
    with mp.workdps(DPS):
        q, s, a = mp.mpf(q), mp.mpf(s), mp.mpf(a)
        if q == 1:
            return a / (2 * s * s)
        am1 = sgm_log_a_minus_1(q, s, a, direction)
        return mp.log1p(am1) / (a - 1)


def sgm_rdp_binomial(q, s, a):
    """Exact RDP at an integer order a >= 2 by the finite binomial sum (MTZ 2019 Sec. 3.3); every term is
    positive, so the sum has no cancellation. The binomial pmf is built by its ratio recurrence."""
    with mp.workdps(DPS):
        q, s = mp.mpf(q), mp.mpf(s)
        if q == 1:
            return mp.mpf(a) / (2 * s * s)
        a = int(a)
        r = q / (1 - q)
        pmf = mp.exp(a * mp.log1p(-q))  # k = 0
        total = mp.mpf(0)
        two_s2 = 2 * s * s
        for k in range(0, a):
            pmf = pmf * (a - k) / (k + 1) * r  # now pmf of k + 1
            kk = k + 1
            if kk >= 2:
                total += pmf * mp.expm1(mp.mpf(kk * kk - kk) / two_s2)
        return mp.log1p(total) / (a - 1)


def sgm_rdp(q, s, a, direction="A"):
    """Exact RDP of the Poisson-subsampled Gaussian: the binomial sum at integer orders (direction A),
    quadrature otherwise."""
    if direction == "A" and float(a).is_integer() and a >= 2:
        return sgm_rdp_binomial(q, s, a)
    return sgm_rdp_quad(q, s, a, direction)


def laplace_rdp(b, a):
    """Exact RDP of the Laplace mechanism with scale b (L1 sensitivity 1), Mironov 2017 Prop. 6."""
    with mp.workdps(DPS):
        b, a = mp.mpf(b), mp.mpf(a)
        v = a / (2 * a - 1) * mp.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * mp.exp(-a / b)
        return mp.log(v) / (a - 1)


def eps_balle2020(orders, rdps, delta):
    """Balle et al. 2020 (Hypothesis testing interpretations and RDP, Thm 21):
    eps = min_a [ r_a + log((a-1)/a) - (log delta + log a)/(a-1) ], clamped at 0, together with the KL
    shortcut: D_a >= KL and TV <= sqrt(1 - exp(-KL)) (Bretagnolle-Huber), so an order with
    delta^2 >= 1 - exp(-r_a) certifies (0, delta)-DP. Returns (eps, order)."""
    with mp.workdps(DPS):
        best = None
        delta = mp.mpf(delta)
        for a, r in zip(orders, rdps):
            if r is None:
                continue
            a = mp.mpf(a)
            if delta * delta + mp.expm1(-mp.mpf(r)) >= 0:
                e = mp.mpf(0)
            else:
                e = mp.mpf(r) + mp.log((a - 1) / a) - (mp.log(delta) + mp.log(a)) / (a - 1)
            if best is None or e < best[0]:
                best = (e, a)
        return (max(best[0], mp.mpf(0)), best[1]) if best else (None, None)


def eps_mironov2017(orders, rdps, delta):
    """Mironov 2017 Prop. 3: eps = min_a [ r_a + log(1/delta)/(a-1) ]. Returns (eps, order)."""
    with mp.workdps(DPS):
        best = None
        for a, r in zip(orders, rdps):
            if r is None:
                continue
            a = mp.mpf(a)
            e = mp.mpf(r) - mp.log(delta) / (a - 1)
            if best is None or e < best[0]:
                best = (e, a)
        return best if best else (None, None)
