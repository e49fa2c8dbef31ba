/*
 * fl_partition.c: partitions of a data set into silos (fl_data.h, fl_partition).
 *
 * All draws come from one stream, (dp_rng_derive(seed, FL_SEED_PARTITION), DP_RNG_STREAM_DATA),
 * in a fixed order (classes in increasing index, rows in data-set order before each shuffle; the
 * rows_per_silo cap last), so a partition is a function of (data set, spec). Class labels are read
 * as integers: DIRICHLET and CLASSES need n_classes > 0 and every label an integer in [0,
 * n_classes).
 */
#include "federated/fl_data.h"
#include "federated/fl_data_priv.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"

static int part_nomem(dp_err *err)
{
    return dp_err_set(err, DP_ENOMEM, NULL, "out of memory partitioning a data set");
}

static int natural(const fl_dataset *d, uint32_t *assign, size_t *n_silos, dp_err *err)
{
    if (d->silo == NULL || d->n_silos == 0)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "a natural partition needs a data set with a silo column");
    size_t *count = dp_calloc(d->n_silos, sizeof *count);
    if (count == NULL)
        return part_nomem(err);
    int rc = DP_OK;
    for (size_t i = 0; i < d->n && rc == DP_OK; i++) {
        if (d->silo[i] >= d->n_silos)
            rc = dp_err_set(err, DP_EINVAL, "partition", "row %zu has silo %u of %zu", i,
                            (unsigned)d->silo[i], d->n_silos);
        else
            count[d->silo[i]]++;
    }
    for (size_t k = 0; k < d->n_silos && rc == DP_OK; k++)
        if (count[k] == 0)
            rc = dp_err_set(err, DP_EINVAL, "partition", "silo %zu has no rows", k);
    dp_free(count);
    if (rc == DP_OK) {
        memcpy(assign, d->silo, d->n * sizeof *assign);
        *n_silos = d->n_silos;
    }
    return rc;
}

static void iid(const fl_dataset *d, size_t K, gsl_rng *r, uint32_t *perm, uint32_t *assign)
{
    for (size_t i = 0; i < d->n; i++)
        perm[i] = (uint32_t)i;
    fl_shuffle_u32(r, perm, d->n);
    for (size_t i = 0; i < d->n; i++)
        assign[perm[i]] = (uint32_t)(i % K);
}

/* The rows of each class, grouped: rows[start[c] .. start[c+1]) are class c's, in data-set
 * order. DP_EINVAL when a label is not an integer class. */
static int group_by_class(const fl_dataset *d, size_t C, size_t *start, uint32_t *rows, dp_err *err)
{
    memset(start, 0, (C + 1) * sizeof *start);
    for (size_t i = 0; i < d->n; i++) {
        float y = d->y[i];
        if (!(y >= 0.0f && y < (float)C && y == floorf(y)))
            return dp_err_set(err, DP_EINVAL, "partition",
                              "row %zu has the label %g, not a class in 0..%zu", i, (double)y,
                              C - 1);
        start[(size_t)y + 1]++;
    }
    for (size_t c = 0; c < C; c++)
        start[c + 1] += start[c];
    size_t *fill = dp_malloc(C * sizeof *fill);
    if (fill == NULL)
        return part_nomem(err);
    memcpy(fill, start, C * sizeof *fill);
    for (size_t i = 0; i < d->n; i++)
        rows[fill[(size_t)d->y[i]]++] = (uint32_t)i;
    dp_free(fill);
    return DP_OK;
}

/* One Dirichlet draw: every class's rows shuffled and cut by cumulative shares. */
static int dirichlet_once(size_t C, size_t K, const size_t *start, uint32_t *rows, gsl_rng *r,
                          double *alpha, double *q, size_t *count, uint32_t *assign, dp_err *err)
{
    memset(count, 0, K * sizeof *count);
    for (size_t c = 0; c < C; c++) {
        size_t nc = start[c + 1] - start[c];
        uint32_t *rc = rows + start[c];
        fl_shuffle_u32(r, rc, nc);
        gsl_ran_dirichlet(r, K, alpha, q);
        double cum = 0.0;
        size_t lo = 0;
        for (size_t k = 0; k < K; k++) {
            if (!isfinite(q[k]))
                return dp_err_set(err, DP_ENUMERIC, "partition",
                                  "the Dirichlet draw failed for alpha = %g", alpha[0]);
            cum += q[k];
            size_t hi = k + 1 == K ? nc : (size_t)floor(cum * (double)nc + 0.5);
            if (hi > nc)
                hi = nc;
            if (hi < lo)
                hi = lo;
            for (size_t i = lo; i < hi; i++)
                assign[rc[i]] = (uint32_t)k;
            count[k] += hi - lo;
            lo = hi;
        }
    }
    return DP_OK;
}

static int dirichlet(const fl_dataset *d, const fl_partition_spec *p, gsl_rng *r, uint32_t *rows,
                     uint32_t *assign, dp_err *err)
{
    size_t C = d->n_classes, K = p->silos;
    size_t *start = dp_malloc((C + 1) * sizeof *start);
    double *alpha = dp_malloc(K * sizeof *alpha), *q = dp_malloc(K * sizeof *q);
    size_t *count = dp_malloc(K * sizeof *count);
    int rc = (!start || !alpha || !q || !count) ? part_nomem(err) : DP_OK;
    if (rc == DP_OK)
        rc = group_by_class(d, C, start, rows, err);
    for (size_t k = 0; k < K && rc == DP_OK; k++)
        alpha[k] = p->alpha;
    bool ok = false;
    for (int t = 0; t < FL_DIRICHLET_TRIES && rc == DP_OK && !ok; t++) {
        rc = dirichlet_once(C, K, start, rows, r, alpha, q, count, assign, err);
        ok = true;
        for (size_t k = 0; k < K && ok; k++)
            ok = count[k] > 0;
    }
    if (rc == DP_OK && !ok)
        rc = dp_err_set(err, DP_EINVAL, "partition",
                        "%d Dirichlet(%g) draws all left a silo of %zu without rows; raise alpha "
                        "or lower silos",
                        FL_DIRICHLET_TRIES, p->alpha, K);
    dp_free(start);
    dp_free(alpha);
    dp_free(q);
    dp_free(count);
    return rc;
}

/* Silo k holds the m consecutive classes from ring position k * m. Lists the holders of each class
 * in silo order: holders[hstart[c] .. hstart[c+1]). */
static void list_holders(size_t K, size_t m, size_t P, size_t C, const uint32_t *ring,
                         size_t *hstart, uint32_t *holders)
{
    memset(hstart, 0, (C + 1) * sizeof *hstart);
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < m; j++)
            hstart[ring[(k * m + j) % P] + 1]++;
    for (size_t c = 0; c < C; c++)
        hstart[c + 1] += hstart[c];
    size_t *fill = hstart; /* advanced while filling, then shifted back */
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < m; j++)
            holders[fill[ring[(k * m + j) % P]]++] = (uint32_t)k;
    memmove(hstart + 1, hstart, C * sizeof *hstart);
    hstart[0] = 0;
}

/* CLASSES once the rows are grouped: the present classes shuffled into a ring, then each class's
 * shuffled rows dealt into near-equal consecutive parts among its holders. ring has C entries. */
static int classes_assign(const fl_partition_spec *p, size_t C, const size_t *start, uint32_t *rows,
                          gsl_rng *r, uint32_t *ring, uint32_t *assign, dp_err *err)
{
    size_t K = p->silos, m = p->classes_per_silo, P = 0;
    for (size_t c = 0; c < C; c++)
        if (start[c + 1] > start[c])
            ring[P++] = (uint32_t)c;
    if (m < 1 || m > P)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "classes_per_silo must be in 1..%zu (the classes present), got %zu", P,
                          m);
    if (K * m < P)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "%zu silos of %zu classes cannot hold the %zu classes present (every row "
                          "must be assigned)",
                          K, m, P);
    fl_shuffle_u32(r, ring, P);
    size_t *hstart = dp_malloc((C + 1) * sizeof *hstart);
    uint32_t *holders = dp_malloc(K * m * sizeof *holders); /* K, m <= 10^4 and 10^3 */
    int rc = (!hstart || !holders) ? part_nomem(err) : DP_OK;
    if (rc == DP_OK)
        list_holders(K, m, P, C, ring, hstart, holders);
    for (size_t c = 0; c < C && rc == DP_OK; c++) {
        size_t nc = start[c + 1] - start[c], h = hstart[c + 1] - hstart[c];
        if (nc == 0)
            continue;
        if (nc < h) {
            rc = dp_err_set(err, DP_EINVAL, "partition",
                            "class %zu has %zu rows for %zu silos holding it", c, nc, h);
            break;
        }
        uint32_t *rc_rows = rows + start[c];
        fl_shuffle_u32(r, rc_rows, nc);
        for (size_t j = 0; j < h; j++)
            for (size_t i = j * nc / h; i < (j + 1) * nc / h; i++)
                assign[rc_rows[i]] = holders[hstart[c] + j];
    }
    dp_free(hstart);
    dp_free(holders);
    return rc;
}

static int classes(const fl_dataset *d, const fl_partition_spec *p, gsl_rng *r, uint32_t *rows,
                   uint32_t *assign, dp_err *err)
{
    size_t C = d->n_classes;
    size_t *start = dp_malloc((C + 1) * sizeof *start);
    uint32_t *ring = dp_malloc(C * sizeof *ring);
    int rc = (!start || !ring) ? part_nomem(err) : DP_OK;
    if (rc == DP_OK)
        rc = group_by_class(d, C, start, rows, err);
    if (rc == DP_OK)
        rc = classes_assign(p, C, start, rows, r, ring, assign, err);
    dp_free(start);
    dp_free(ring);
    return rc;
}

static int part_check(const fl_dataset *d, const fl_partition_spec *p, dp_err *err)
{
    if (d == NULL || d->n == 0 || d->y == NULL)
        return dp_err_set(err, DP_EINVAL, "data", "the data set is empty");
    if (d->n > FL_MAX_CELLS) /* row indices then fit a uint32_t */
        return dp_err_set(err, DP_EINVAL, "data", "the data set has more than %zu rows",
                          FL_MAX_CELLS);
    if (p->kind != FL_PARTITION_IID && p->kind != FL_PARTITION_DIRICHLET &&
        p->kind != FL_PARTITION_CLASSES)
        return dp_err_set(err, DP_EINVAL, "partition", "unknown partition kind %d", (int)p->kind);
    if (p->silos < 1 || p->silos > FL_MAX_SILOS)
        return dp_err_set(err, DP_EINVAL, "partition", "silos must be in 1..%d, got %zu",
                          FL_MAX_SILOS, p->silos);
    if (p->silos > d->n)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "%zu silos need at least as many rows; the data set has %zu", p->silos,
                          d->n);
    if (p->kind != FL_PARTITION_IID && d->n_classes == 0)
        return dp_err_set(err, DP_EINVAL, "partition",
                          "label-skew partitions need class labels (integers 0..%d)",
                          FL_MAX_CLASSES - 1);
    if (p->kind == FL_PARTITION_DIRICHLET && !(isfinite(p->alpha) && p->alpha > 0.0))
        return dp_err_set(err, DP_EINVAL, "partition", "alpha must be finite and > 0, got %g",
                          p->alpha);
    return DP_OK;
}

/* rows_per_silo: walks a random permutation of the rows; each silo keeps its first cap rows and
 * the rest are FL_ROW_DROPPED. perm has d->n entries. */
static int cap_rows(size_t n, size_t K, size_t cap, gsl_rng *r, uint32_t *perm, uint32_t *assign,
                    dp_err *err)
{
    size_t *count = dp_calloc(K, sizeof *count);
    if (count == NULL)
        return part_nomem(err);
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    fl_shuffle_u32(r, perm, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t *a = &assign[perm[i]];
        if (*a == FL_ROW_DROPPED)
            continue;
        if (count[*a] < cap)
            count[*a]++;
        else
            *a = FL_ROW_DROPPED;
    }
    dp_free(count);
    return DP_OK;
}

int fl_partition(const fl_dataset *d, const fl_partition_spec *p, uint32_t *assign, size_t *n_silos,
                 dp_err *err)
{
    *n_silos = 0;
    size_t K = p->silos;
    int rc = DP_OK;
    if (p->rows_per_silo > FL_MAX_ROWS_PER_SILO)
        return dp_err_set(err, DP_EINVAL, "partition", "rows_per_silo must be in 0..%d, got %zu",
                          FL_MAX_ROWS_PER_SILO, p->rows_per_silo);
    if (d != NULL && p->kind == FL_PARTITION_NATURAL) {
        rc = natural(d, assign, &K, err);
        if (rc != DP_OK || p->rows_per_silo == 0) {
            *n_silos = rc == DP_OK ? K : 0;
            return rc;
        }
    } else {
        rc = part_check(d, p, err);
    }
    if (rc != DP_OK)
        return rc;
    uint32_t *rows = dp_malloc(d->n * sizeof *rows);
    if (rows == NULL)
        return part_nomem(err);
    gsl_rng *r = dp_rng_alloc(dp_rng_derive(p->seed, FL_SEED_PARTITION), DP_RNG_STREAM_DATA, err);
    if (r == NULL) {
        dp_free(rows);
        return err ? err->code : DP_ENOMEM;
    }
    if (p->kind == FL_PARTITION_IID)
        iid(d, p->silos, r, rows, assign);
    else if (p->kind == FL_PARTITION_DIRICHLET)
        rc = dirichlet(d, p, r, rows, assign, err);
    else if (p->kind == FL_PARTITION_CLASSES)
        rc = classes(d, p, r, rows, assign, err);
    if (rc == DP_OK && p->rows_per_silo > 0)
        rc = cap_rows(d->n, K, p->rows_per_silo, r, rows, assign, err);
    gsl_rng_free(r);
    dp_free(rows);
    if (rc == DP_OK)
        *n_silos = K;
    return rc;
}
