"""grid.py: the parameter grids shared by all of dpsilo's golden-vector generators (our own choice).

The issue's range: q in [1e-8, 1], sigma in [0.1, 1e5], orders in [1.0001, 1e5].
"""

# Per-order RDP grid (Poisson-subsampled Gaussian): 7 x 9 x 24 points.
Q_GRID = [1e-8, 1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0]
SIGMA_GRID = [0.1, 0.3, 0.5, 1.0, 2.0, 10.0, 100.0, 1e3, 1e5]
ORDER_GRID = [1.0001, 1.001, 1.01, 1.1, 1.5, 1.75, 2.0, 2.5, 3.0, 4.5, 5.0, 8.0, 10.5, 16.0, 32.0, 32.5,
              64.0, 100.5, 128.0, 256.0, 1000.0, 1000.5, 1e4, 1e5]

# Laplace mechanism, scale b (= noise_multiplier, L1 sensitivity 1).
LAPLACE_B_GRID = [0.1, 0.3, 1.0, 3.0, 10.0, 100.0, 1e3, 1e5]

# Default order lists of the two libraries, written out here (they are checked against the libraries by
# the generators): dp_accounting RdpAccountant DEFAULT_RDP_ORDERS, Opacus RDPAccountant.DEFAULT_ALPHAS.
DP_ACCOUNTING_DEFAULT_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(11, 64)] + \
    [128.0, 256.0, 512.0, 1024.0]
OPACUS_DEFAULT_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 64)]
# The older TF-Privacy grid (Liu, Hu, Wu & Smith, NeurIPS 2022, App. A), used by some published values.
TFP_OLD_ORDERS = [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5] + [float(a) for a in range(5, 64)] + \
    [128.0, 256.0, 512.0]

# (q, sigma) pairs for epsilon vectors; each is evaluated at every order of DP_ACCOUNTING_DEFAULT_ORDERS
# (a superset of OPACUS_DEFAULT_ORDERS) and composed over EPS_STEPS, converted at EPS_DELTAS.
EPS_PAIRS = [
    (0.01, 1.1), (256 / 60000, 1.1), (0.01, 3.0), (0.05, 1.5), (0.1, 0.3), (0.5, 0.5), (1e-3, 0.8),
    (1e-4, 0.5), (1e-6, 1.0), (1e-6, 0.3), (1e-8, 1.0), (0.01, 100.0), (1e-4, 1e3), (1.0, 1.0),
]
EPS_STEPS = [1, 10**4, 10**8, 10**12]
EPS_DELTAS = [1e-5, 1e-10]

# Sampling without replacement (dp_accounting, replace-one), (source_size, sample_size) x sigma x orders.
SWOR_SIZES = [(60000, 256), (1000, 10), (100, 50), (10**6, 1)]
SWOR_SIGMAS = [0.5, 1.0, 2.0, 10.0]
SWOR_ORDERS = [1.5, 2.0, 2.5, 3.0, 4.0, 8.0, 10.5, 32.0, 64.0, 128.0, 256.0, 300.0, 512.0]

# Pure epsilon-DP as RDP and zCDP.
PURE_EPS = [0.01, 0.1, 1.0, 5.0]
ZCDP_RHO = [1e-4, 0.05, 1.0]
