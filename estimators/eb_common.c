/*
 * eb_common.c: status names and log-sum-exp for estimators/. See eb_common.h.
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
        case EB_STATUS_NO_POOLING_GAIN:
            return "no_pooling_gain";
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
        case EB_STATUS_NO_POOLING_GAIN:
            return 2;
        case EB_STATUS_DEGENERATE:
            return 3;
        case EB_STATUS_UNIDENTIFIABLE:
            return 4;
        case EB_STATUS_MAX_ITER:
            return 5;
    }
    return 6;
}

eb_status eb_status_worst(eb_status a, eb_status b)
{
    return status_rank(a) >= status_rank(b) ? a : b;
}

double eb_max_shrinkage(const double *shrinkage, size_t n)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        if (shrinkage[i] > mx)
            mx = shrinkage[i];
    return mx;
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
