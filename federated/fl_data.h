/*
 * federated/fl_data: the data a training job learns from, and how it is split into silos.
 *
 * A data set is a dense float matrix of n rows and d features, one label per row, and optionally
 * the silo each row belongs to (natural silos, as the School data set's school column). It comes
 * from a seeded synthetic generator, from a CSV text a user uploaded, or from IDX files (the
 * format of Fashion-MNIST). A partition assigns every row to a silo (by that column, IID, Dirichlet
 * label skew, or k classes per silo); fl_federate then splits each silo's rows into a training and
 * a test part with a seed and standardises the features on the silo's own training part.
 *
 * Labels: for regression a real value; for classification the class index 0..n_classes-1 stored
 * as a float (binary tasks use 0 and 1). The library does not decide the task: a data set whose
 * labels are all integers in [0, FL_MAX_CLASSES) reports n_classes = max + 1, else 0 (real labels,
 * regression only), and the caller checks the model against it.
 *
 * Reproducibility: every random choice draws from dp_rng streams (common/dp_rng.h) derived from
 * the caller's seed, so the same inputs and seed give the same bytes on every machine. The three
 * seeded steps use unrelated streams even when given the same seed: the generator draws from
 * (seed, DP_RNG_STREAM_DATA) and (dp_rng_derive(dp_rng_derive(seed, FL_SEED_SYNTH), k),
 * DP_RNG_STREAM_DATA) for silo k, a partition from (dp_rng_derive(seed, FL_SEED_PARTITION),
 * DP_RNG_STREAM_DATA), and fl_federate from (dp_rng_derive(seed, k), DP_RNG_STREAM_DATA).
 *
 * No HTTP, JSON or SQL here; reading files is allowed. Errors: DP_OK, or a dp_err: DP_EINVAL with
 * the field named for bad parameters or malformed content, DP_ENOMEM, DP_ENOTFOUND for a file
 * that does not exist and DP_EINTERNAL for one that cannot be read (messages never carry paths).
 * Thread-safety: functions are reentrant; a data set is read-only once built and may then be shared
 * by threads.
 */
#ifndef DP_FEDERATED_FL_DATA_H
#define DP_FEDERATED_FL_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

#define FL_MAX_CLASSES 1000
#define FL_MAX_SILOS   10000
/* Largest data set built here, in cells (n * d floats: 1 GiB). */
#define FL_MAX_CELLS ((size_t)1 << 28)
/* dp_rng_derive labels of the generator's and the partitions' streams (see above). */
#define FL_SEED_SYNTH     UINT64_C(0x73796e7468) /* "synth" */
#define FL_SEED_PARTITION UINT64_C(0x7061727469) /* "parti" */

typedef struct fl_dataset {
    size_t n, d;
    float *x;             /* n x d, row-major, owned */
    float *y;             /* n labels, owned */
    size_t n_classes;     /* see the header comment: 0 = real labels */
    uint32_t *silo;       /* n silo indices (natural silos), or NULL; owned */
    size_t n_silos;       /* 0 when silo is NULL */
    char **silo_names;    /* n_silos names (CSV values, or "0".."K-1"), owned */
    char **feature_names; /* d names (CSV header), or NULL; owned */
} fl_dataset;

/* Frees what d owns and zeroes it. NULL is a no-op. */
void fl_dataset_free(fl_dataset *d);

/* The header comment's rule: max + 1 when every label is an integer in [0, FL_MAX_CLASSES),
 * else 0 (also for n = 0). */
size_t fl_labels_n_classes(const float *y, size_t n);

/* ---- synthetic federations (Liu et al., NeurIPS 2022, Sec. 6 "Setup", on linear models) ----
 * Silo k's true model is w_k = theta + tau * N(0, I) with theta ~ N(0, I/d) shared; rows
 * x ~ N(0, I_d), n_k uniform in [n_min, n_max]. Regression: y = w_k.x + noise * N(0, 1).
 * Classification with classes = 2: y = 1 if w_k.x + noise * N(0,1) > 0 else 0; classes > 2: one
 * such model per class (a d x classes matrix, each column perturbed by tau) and y = argmax over
 * the classes of w_kc.x + noise * N(0, 1) (ties to the lowest class). Rows carry natural silos
 * named "0".."silos-1", silo 0's rows first. n_classes is the spec's classes (0 for regression),
 * even if a class happens not to be drawn. Normals are GSL's ziggurat (Marsaglia & Tsang 2000);
 * n_k are drawn first from the (seed, DATA) stream, then theta; each silo's w_k, rows and noise
 * come from its own stream, so silo k's data depends only on (seed, k, n_k, spec).
 * Errors: DP_EINVAL naming the field ("silos", "dim", "n_min", "n_max", "tau", "noise",
 * "classes"; "n_max" also when silos * n_max * dim exceeds FL_MAX_CELLS). */
typedef struct fl_synth_spec {
    size_t silos;        /* 1..10000 */
    size_t dim;          /* 1..100000 */
    size_t n_min, n_max; /* rows per silo, 1 <= n_min <= n_max */
    double tau;          /* silo heterogeneity, >= 0 */
    double noise;        /* label noise std, >= 0 */
    size_t classes;      /* 0 = regression; 2..FL_MAX_CLASSES = classification */
    uint64_t seed;
    size_t rank; /* >= 1: the low-rank regression of federated/fl_altmin.h instead (Jain et al.,
                    NeurIPS 2021, §6): silos users of n_min rows each, label noise `noise`; tau,
                    n_max and classes unused. 0: the generator above */
} fl_synth_spec;

int fl_synth_generate(const fl_synth_spec *s, fl_dataset *out, dp_err *err);

/* ---- CSV (RFC 4180 subset: comma separated, optional double quotes, first line a header) ----
 * Every cell of a feature or label column must be a finite number; the silo column (optional) may
 * hold any text, each distinct value a silo (in order of first appearance). A failure sets *line
 * and *column (1-based; the header is line 1) and err (DP_EINVAL naming what was wrong, e.g.
 * "line 17, column 3 (\"x2\"): \"abc\" is not a number"; line and column may be NULL); *line is 0
 * when no cell is at fault (e.g. out of memory or an unknown label column name, then err->field
 * is "label" or "silo"). A cell error's column is the field's 1-based index. Details: a UTF-8
 * byte-order mark is skipped; lines end in LF or CRLF (a lone CR is an error); quoted cells may
 * hold commas, doubled quotes and line breaks (lines count physical lines); a quote inside an
 * unquoted cell is an error; empty lines are allowed only at the end. Column names must be
 * non-empty and distinct. Numbers are decimal (strtod's syntax without hex, nan or inf; spaces and
 * tabs around them are ignored) and must fit a float. Every line must have the header's number of
 * fields. label_col must be given; silo_col NULL or "" means no silo column; at most FL_MAX_SILOS
 * distinct silos; at least one data row and one feature column. The features are the remaining
 * columns in header order (feature_names). Cell errors have err->field "csv". n_classes follows the
 * header rule. */
int fl_csv_parse(const char *text, size_t len, const char *label_col, const char *silo_col,
                 fl_dataset *out, size_t *line, size_t *column, dp_err *err);

/* ---- IDX (LeCun's MNIST format; gzip-compressed files are read too) ----
 * images: an idx3-ubyte file of n images of r x c bytes, scaled to [0, 1]; labels: idx1-ubyte.
 * max_rows > 0 keeps only the first max_rows. No silo column. Files that do not start with the
 * right magic (0x00000803, 0x00000801), have a zero dimension, are shorter than their dimensions
 * say, or (when all rows are read) longer, and image and label counts that differ, are DP_EINVAL
 * (field "images" or "labels"). n_classes follows the header rule (at most 256). */
int fl_idx_load(const char *images_path, const char *labels_path, size_t max_rows, fl_dataset *out,
                dp_err *err);

/* ---- partitions ---- */
typedef enum fl_partition_kind {
    FL_PARTITION_NATURAL = 0, /* the data set's own silo column */
    FL_PARTITION_IID,         /* rows shuffled and dealt into silos of (almost) equal size */
    FL_PARTITION_DIRICHLET,   /* per class, silo shares ~ Dirichlet(alpha) (label skew) */
    FL_PARTITION_CLASSES      /* each silo holds classes_per_silo classes */
} fl_partition_kind;
/* DIRICHLET (Hsu, Qi & Brown, "Measuring the Effects of Non-Identical Data Distribution for
 * Federated Visual Classification", arXiv:1909.06335, 2019, Sec. 3): for each class in turn, its
 * rows (data-set order) are shuffled, q ~ Dirichlet(alpha, ..., alpha) is drawn over the silos and
 * the rows are cut at round(n_c * (q_1 + ... + q_j)). A draw that leaves a silo empty is redrawn
 * (at most FL_DIRICHLET_TRIES times in all, from the same stream), then DP_EINVAL.
 * CLASSES (McMahan et al., AISTATS 2017, Sec. 3, "pathological non-IID"): the classes present
 * are shuffled into a ring; silo k holds the classes_per_silo consecutive ones from position
 * k * classes_per_silo (so every class is held when silos * classes_per_silo >= the classes
 * present, which is required: every row must be assigned), and each class's shuffled rows are
 * split into near-equal parts among the silos holding it (a class with fewer rows than holders is
 * DP_EINVAL). DIRICHLET and CLASSES need n_classes > 0. */
#define FL_DIRICHLET_TRIES 100

typedef struct fl_partition_spec {
    fl_partition_kind kind;
    size_t silos;            /* IID, DIRICHLET, CLASSES: 1..10000 */
    double alpha;            /* DIRICHLET: > 0 */
    size_t classes_per_silo; /* CLASSES: 1..n_classes */
    uint64_t seed;
    size_t rows_per_silo; /* any kind: 0 = every row; else each silo keeps at most this many */
} fl_partition_spec;
/* rows_per_silo > 0 caps every silo after the partition: a silo with more rows keeps a uniformly
 * random subset of rows_per_silo of them (a random permutation of all rows, drawn after the
 * partition's own draws from the same stream, is walked and each silo keeps its first
 * rows_per_silo), and the other rows are left out of the federation: their assign entry is
 * FL_ROW_DROPPED, which fl_federate skips. A partition with rows_per_silo = 0 draws exactly as
 * before the cap existed. It gives e.g. the paper-sized silos of Aldaghri, Mahdavifar & Beirami
 * (one class and a few dozen images per client) from a data set of 60,000 rows. */
#define FL_ROW_DROPPED       UINT32_MAX
#define FL_MAX_ROWS_PER_SILO 10000000

/* Assigns every row of d to a silo: assign[i] in [0, *n_silos), or FL_ROW_DROPPED under
 * rows_per_silo. assign has d->n entries. Every silo gets at least one row, or DP_EINVAL (field
 * "partition"; also for a NATURAL partition of a data set without silos, a kind out of range,
 * silos outside 1..FL_MAX_SILOS or above d->n, alpha not finite and > 0, classes_per_silo outside
 * 1..the classes present, rows_per_silo above FL_MAX_ROWS_PER_SILO). */
int fl_partition(const fl_dataset *d, const fl_partition_spec *p, uint32_t *assign, size_t *n_silos,
                 dp_err *err);

/* ---- a federation: per silo, a training and a test part ----
 * x_train_inv_s caches 1 / sqrt(||x_i||^2 + 1) of each training row (fl_rows_inv_s,
 * federated/fl_model.h), which clipping of the linear, logistic and svm models needs for every row
 * drawn; the trainer (fl_round_run) passes it to fl_sgd_run instead of recomputing it at every
 * step. It is filled by fl_federate. Rule: the rows are read-only once federated; a caller that
 * changes x_train (or n_train) calls fl_federation_refresh before training again, since stale norms
 * would clip with the wrong per-example norms and void the privacy guarantee. A silo built by hand
 * may leave it NULL (then the norms are computed per step: the same bits, more time). Labels are
 * not cached. */
typedef struct fl_silo_data {
    size_t n_train, n_test;
    float *x_train, *y_train; /* n_train x d, n_train; owned */
    float *x_train_inv_s;     /* n_train: 1 / sqrt(||x_train row i||^2 + 1), or NULL (see above);
                                 owned */
    float *x_test, *y_test;   /* n_test x d, n_test; owned */
    char *name;               /* owned */
} fl_silo_data;

typedef struct fl_federation {
    size_t d;         /* features */
    size_t n_classes; /* as the data set's */
    size_t n_silos;
    fl_silo_data *silo; /* n_silos, owned */
} fl_federation;

/* Builds the federation of d under assign (n_silos silos, names from d->silo_names for a natural
 * partition, else "0".."K-1"). Silo k's rows, in data-set order, are shuffled with the stream
 * (dp_rng_derive(seed, k), DP_RNG_STREAM_DATA) and the first round(test_fraction * n_k) (at most
 * n_k - 1) go to the test part. standardize: each silo's features are centred and scaled by the
 * mean and standard deviation of its own training part (a constant feature is only centred), and
 * the same transform is applied to its test part. Labels are never transformed. Standard
 * deviations are the population ones (divided by n_train); a feature constant on the training
 * part is subtracted only. The test part takes the first rows of the shuffled order and the
 * training part the rest, both in that order. A row whose assign entry is FL_ROW_DROPPED belongs
 * to no silo and is skipped. Errors: DP_EINVAL, field "test_fraction" (outside [0, 1)) or
 * "partition" (n_silos outside 1..FL_MAX_SILOS, another assign value >= n_silos, an empty silo). */
int fl_federate(const fl_dataset *d, const uint32_t *assign, size_t n_silos, double test_fraction,
                uint64_t seed, bool standardize, fl_federation *out, dp_err *err);

void fl_federation_free(fl_federation *f);

/* Recomputes (allocating when NULL) every silo's x_train_inv_s from its current x_train: call after
 * changing training rows in place. DP_EINVAL (field "federation") for a NULL federation or a silo
 * with n_train > 0 and no rows, DP_ENOMEM (silos before the failing one are refreshed; the failing
 * one keeps NULL, which stays correct). */
int fl_federation_refresh(fl_federation *f, dp_err *err);

#endif
