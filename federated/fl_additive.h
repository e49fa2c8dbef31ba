/*
 * federated/fl_additive: the synthetic personalised regression of Bietti, Wei, Dudik, Langford &
 * Wu, "Personalization Improves Privacy-Accuracy Tradeoffs in Federated Learning", ICML 2022, §6.1
 * (Fig. 1a), with its closed-form excess risk. An online setting: every round each user draws
 * fresh samples, so the data are drawn into a federation round by round (fl_additive_draw).
 *
 * Model: d features, x ~ N(0, Sigma) with Sigma = diag(1/k), k = 1..d; user i's true parameter
 * theta_i* equals a shared theta_0 ~ N(0, theta_scale^2 I) on its first d - personal coordinates
 * and theta_0 + N(0, s^2 I) on the last `personal` ones; y = theta_i*.x + N(0, label_noise^2).
 * The paper's setting: d = 100, personal = 5, theta_scale = 10, s = 0.01 in its text (0.1 in its
 * experiments' defaults), label_noise = 0.01, 1000 users, 10 samples per user per round.
 *
 * Excess risk of the linear model u_i.x + b_i of user i (our linear model has an intercept, the
 * paper's has none): E[(u_i.x + b_i - y)^2] - tau^2 = ||u_i - theta_i*||_Sigma^2 + b_i^2, since x
 * has mean 0; fl_additive_excess_risk averages it over the users (the paper's "sum form"; its
 * code's figure axis divides by d).
 *
 * Reproducible: theta_0 and the theta_i* come from (seed, DP_RNG_STREAM_DATA) streams, round t's
 * samples of user i from fl_gauss_fill seeds derived from (seed, i, t). Thread-safety: reentrant.
 */
#ifndef DP_FEDERATED_FL_ADDITIVE_H
#define DP_FEDERATED_FL_ADDITIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "federated/fl_data.h"

typedef struct fl_additive_spec {
    size_t users;       /* >= 1 (FL_MAX_SILOS at most) */
    size_t dim;         /* d >= 1 */
    size_t personal;    /* coordinates that differ between users, 0..dim */
    size_t rows;        /* samples per user per round, >= 1 */
    double theta_scale; /* std of theta_0's coordinates, >= 0 */
    double s;           /* std of the personal deviations, >= 0 */
    double label_noise; /* tau, the std of y around theta_i*.x, >= 0 */
    uint64_t seed;
} fl_additive_spec;

typedef struct fl_additive {
    fl_additive_spec spec;
    double *theta; /* users x dim: theta_i*; owned */
    float *scale;  /* dim: 1 / sqrt(k), the standard deviation of feature k; owned */
} fl_additive;

/* The paper's setting (the header comment, with the experiments' s = 0.1) and seed 42. */
fl_additive_spec fl_additive_paper_spec(void);

/* Draws the users' true parameters. DP_EINVAL naming the field, DP_ENOMEM. */
int fl_additive_init(const fl_additive_spec *spec, fl_additive *out, dp_err *err);
void fl_additive_free(fl_additive *a);

/* A federation of `users` silos with `rows` training rows each and no test rows (x_train and
 * y_train allocated, to be filled by fl_additive_draw). Free with fl_federation_free. */
int fl_additive_federation(const fl_additive *a, fl_federation *out, dp_err *err);

/* Fills every silo's training rows with round t's fresh samples (and refreshes the federation's
 * cached row norms). DP_ENOMEM from the refresh. */
int fl_additive_draw(const fl_additive *a, uint64_t round, fl_federation *f, dp_err *err);

/* (1/users) sum_i ||u_i - theta_i*||_Sigma^2 + b_i^2 for the linear models in `personal` (users x
 * (dim + 1) floats: weights then intercept, the linear model's layout). */
double fl_additive_excess_risk(const fl_additive *a, const float *personal);

#endif
