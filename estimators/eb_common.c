/*
 * eb_common.c: status names, seeded streams and log-sum-exp for estimators/. See eb_common.h.
 */
#include "estimators/eb_common.h"
#include "common/dp_math.h"

#include <math.h>

const char *eb_status_name(eb_status s)
{
    switch (s) {
        case EB_STATUS_CONVERGED:
            return "converged";
        case EB_STATUS_MAX_ITER:
            return "max_iter";
        case EB_STATUS_BOUNDARY:
            return "boundary";
        case EB_STATUS_UNIDENTIFIABLE:
            return "unidentifiable";
        case EB_STATUS_DEGENERATE:
            return "degenerate";
    }
    return "unknown";
}

static int status_rank(eb_status s)
{
    switch (s) {
        case EB_STATUS_CONVERGED:
            return 0;
        case EB_STATUS_BOUNDARY:
            return 1;
        case EB_STATUS_DEGENERATE:
            return 2;
        case EB_STATUS_UNIDENTIFIABLE:
            return 3;
        case EB_STATUS_MAX_ITER:
            return 4;
    }
    return 5;
}

eb_status eb_status_worst(eb_status a, eb_status b)
{
    return status_rank(a) >= status_rank(b) ? a : b;
}

uint64_t eb_splitmix64(uint64_t *state)
{
    /* Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014. */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

gsl_rng *eb_rng_alloc(uint64_t seed, uint64_t stream, dp_err *err)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory allocating a random stream");
        return NULL;
    }
    uint64_t st = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    uint64_t s = eb_splitmix64(&st);
    /* mt19937 takes an unsigned long seed; 0 is mapped by GSL to its default seed, so avoid it. */
    unsigned long ul = (unsigned long)(s ^ (s >> 32));
    gsl_rng_set(r, ul ? ul : 1UL);
    return r;
}

double eb_logsumexp(const double *x, size_t n)
{
    double mx = -DP_INF;
    for (size_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (!isfinite(mx))
        return mx;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += exp(x[i] - mx);
    return mx + log(s);
}
