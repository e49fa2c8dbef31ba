/*
 * test_fl_data.c: federated/fl_data: the synthetic generator (determinism, sizes, moments, the
 * shared model at tau = 0), the CSV reader (valid texts, quoting, CRLF, every error with its
 * exact line and column, a seeded differential round trip of random tables, the School file when
 * DPSILO_SCHOOL_CSV names it), the IDX reader (plain and gzip files written here, malformed
 * headers, Fashion-MNIST's t10k set when installed), the partitions and fl_federate.
 *
 * Statistical checks draw from fixed seeds, so they are deterministic; their bounds are several
 * standard errors wide (stated next to each).
 */
#include "tests/support/test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>
#include <zlib.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "common/dp_rng.h"
#include "federated/fl_data.h"
#include "federated/fl_model.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static dp_err E;

static fl_synth_spec synth_spec(void)
{
    return (fl_synth_spec){.silos = 6,
                           .dim = 5,
                           .n_min = 20,
                           .n_max = 40,
                           .tau = 0.5,
                           .noise = 0.1,
                           .classes = 0,
                           .seed = 42};
}

/* A data set of n rows, d features, owned by the library's allocator (fl_dataset_free frees it):
 * x[i][0] = i, x[i][j] = j * (i % 7) for j > 0, labels i % classes (or 0.5 * i when classes = 0).
 */
static fl_dataset make_ds(size_t n, size_t d, size_t classes)
{
    fl_dataset ds = {0};
    ds.n = n;
    ds.d = d;
    ds.x = dp_malloc(n * d * sizeof(float));
    ds.y = dp_malloc(n * sizeof(float));
    assert_non_null(ds.x);
    assert_non_null(ds.y);
    for (size_t i = 0; i < n; i++) {
        ds.x[i * d] = (float)i;
        for (size_t j = 1; j < d; j++)
            ds.x[i * d + j] = (float)(j * (i % 7));
        ds.y[i] = classes ? (float)(i % classes) : 0.5f * (float)i;
    }
    ds.n_classes = fl_labels_n_classes(ds.y, n);
    return ds;
}

/* ---------------------------------------------------------------- synthetic */

static void synth_rejects_each_bad_field(void **state)
{
    (void)state;
    struct {
        const char *field;
        fl_synth_spec s;
    } cases[8];
    for (int i = 0; i < 8; i++)
        cases[i].s = synth_spec();
    cases[0].field = "silos", cases[0].s.silos = 0;
    cases[1].field = "silos", cases[1].s.silos = FL_MAX_SILOS + 1;
    cases[2].field = "dim", cases[2].s.dim = 0;
    cases[3].field = "n_min", cases[3].s.n_min = 0;
    cases[4].field = "n_max", cases[4].s.n_max = 19;
    cases[5].field = "tau", cases[5].s.tau = -1;
    cases[6].field = "noise", cases[6].s.noise = DP_NAN;
    cases[7].field = "classes", cases[7].s.classes = 1;
    for (int i = 0; i < 8; i++) {
        fl_dataset ds;
        dp_err_clear(&E);
        assert_int_equal(fl_synth_generate(&cases[i].s, &ds, &E), DP_EINVAL);
        assert_string_equal(E.field, cases[i].field);
        assert_null(ds.x);
    }
    fl_synth_spec big = synth_spec();
    big.silos = 10000, big.dim = 100000, big.n_max = 1000;
    fl_dataset ds;
    dp_err_clear(&E);
    assert_int_equal(fl_synth_generate(&big, &ds, &E), DP_EINVAL);
    assert_string_equal(E.field, "n_max");
}

static void synth_is_deterministic_by_seed(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    fl_dataset a, b, c;
    assert_int_equal(fl_synth_generate(&s, &a, &E), DP_OK);
    assert_int_equal(fl_synth_generate(&s, &b, &E), DP_OK);
    s.seed = 43;
    assert_int_equal(fl_synth_generate(&s, &c, &E), DP_OK);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.x, b.x, a.n * a.d * sizeof(float));
    assert_memory_equal(a.y, b.y, a.n * sizeof(float));
    assert_memory_equal(a.silo, b.silo, a.n * sizeof(uint32_t));
    assert_true(a.n != c.n || memcmp(a.x, c.x, a.n * a.d * sizeof(float)) != 0);
    fl_dataset_free(&a);
    fl_dataset_free(&b);
    fl_dataset_free(&c);
}

static void synth_silos_are_sized_named_and_ordered(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.silos = 200, s.n_min = 5, s.n_max = 8;
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_int_equal(ds.n_silos, 200);
    assert_int_equal(ds.n_classes, 0);
    assert_null(ds.feature_names);
    size_t count[200] = {0}, seen[9] = {0};
    for (size_t i = 0; i < ds.n; i++) {
        assert_true(ds.silo[i] < 200);
        if (i > 0)
            assert_true(ds.silo[i] >= ds.silo[i - 1]); /* silo 0's rows first */
        count[ds.silo[i]]++;
    }
    for (size_t k = 0; k < 200; k++) {
        assert_in_range(count[k], 5, 8);
        seen[count[k]]++;
        char want[8];
        snprintf(want, sizeof want, "%zu", k);
        assert_string_equal(ds.silo_names[k], want);
    }
    /* 200 uniform draws over 4 sizes: each size appears (P(one missing) < 4 * 0.75^200) */
    for (size_t v = 5; v <= 8; v++)
        assert_true(seen[v] > 0);
    fl_dataset_free(&ds);
}

static void synth_rows_are_standard_normal(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.silos = 20, s.dim = 10, s.n_min = s.n_max = 500; /* 100,000 cells */
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_int_equal(ds.n, 10000);
    double m = 0, v = 0, N = (double)(ds.n * ds.d);
    for (size_t i = 0; i < ds.n * ds.d; i++)
        m += (double)ds.x[i];
    m /= N;
    for (size_t i = 0; i < ds.n * ds.d; i++)
        v += ((double)ds.x[i] - m) * ((double)ds.x[i] - m);
    v /= N;
    /* standard errors: 1/sqrt(N) = 0.0032 for the mean, sqrt(2/N) = 0.0045 for the variance */
    assert_close(m, 0.0, 0, 0.016);
    assert_close(v, 1.0, 0, 0.023);
    fl_dataset_free(&ds);
}

/* Max absolute residual of the least-squares fit y ~ X over rows [r0, r1) (no intercept). */
static double fit_residual(const fl_dataset *ds, size_t r0, size_t r1)
{
    size_t n = r1 - r0, d = ds->d;
    gsl_matrix *X = gsl_matrix_alloc(n, d), *cov = gsl_matrix_alloc(d, d);
    gsl_vector *y = gsl_vector_alloc(n), *c = gsl_vector_alloc(d);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc(n, d);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++)
            gsl_matrix_set(X, i, j, (double)ds->x[(r0 + i) * d + j]);
        gsl_vector_set(y, i, (double)ds->y[r0 + i]);
    }
    double chisq, worst = 0;
    assert_int_equal(gsl_multifit_linear(X, y, c, cov, &chisq, w), GSL_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        double pred = 0;
        for (size_t j = 0; j < d; j++)
            pred += gsl_matrix_get(X, i, j) * gsl_vector_get(c, j);
        worst = fmax(worst, fabs(pred - gsl_vector_get(y, i)));
    }
    gsl_multifit_linear_free(w);
    gsl_matrix_free(X);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
    return worst;
}

static void synth_tau_zero_gives_every_silo_one_model(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.noise = 0, s.tau = 0;
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    /* one linear model explains every silo's noise-free labels up to float rounding (|y| ~ 1) */
    assert_true(fit_residual(&ds, 0, ds.n) < 1e-5);
    fl_dataset_free(&ds);
    s.tau = 1.0;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_true(fit_residual(&ds, 0, ds.n) > 0.1); /* the pooled fit no longer does */
    size_t r0 = 0;
    for (size_t k = 0; k < ds.n_silos; k++) { /* but each silo's own model does */
        size_t r1 = r0;
        while (r1 < ds.n && ds.silo[r1] == k)
            r1++;
        assert_true(fit_residual(&ds, r0, r1) < 1e-5);
        r0 = r1;
    }
    fl_dataset_free(&ds);
}

static void synth_classification_labels(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.classes = 2, s.silos = 10;
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_int_equal(ds.n_classes, 2);
    size_t ones = 0;
    for (size_t i = 0; i < ds.n; i++) {
        assert_true(ds.y[i] == 0.0f || ds.y[i] == 1.0f);
        ones += ds.y[i] == 1.0f;
    }
    /* w.x is symmetric about 0: about half are 1 (n ~ 300) */
    assert_in_range(ones, ds.n / 4, 3 * ds.n / 4);
    fl_dataset_free(&ds);
    s.classes = 5;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_int_equal(ds.n_classes, 5);
    size_t count[5] = {0};
    for (size_t i = 0; i < ds.n; i++) {
        assert_true(ds.y[i] == floorf(ds.y[i]) && ds.y[i] >= 0 && ds.y[i] < 5);
        count[(size_t)ds.y[i]]++;
    }
    for (int c = 0; c < 5; c++)
        assert_true(count[c] > 0);
    assert_int_equal(fl_labels_n_classes(ds.y, ds.n), 5);
    fl_dataset_free(&ds);
}

/* ---------------------------------------------------------------- CSV */

static int parse(const char *text, const char *label, const char *silo, fl_dataset *ds,
                 size_t *line, size_t *col)
{
    dp_err_clear(&E);
    return fl_csv_parse(text, strlen(text), label, silo, ds, line, col, &E);
}

static void csv_parses_a_small_table(void **state)
{
    (void)state;
    fl_dataset ds;
    size_t line, col;
    const char *t = "a,y,s,b\n1.5,1,north,-2\n2,0,south,3e2\n-0.25,2,north,4\n";
    assert_int_equal(parse(t, "y", "s", &ds, &line, &col), DP_OK);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.d, 2);
    assert_string_equal(ds.feature_names[0], "a");
    assert_string_equal(ds.feature_names[1], "b");
    const float x[] = {1.5f, -2, 2, 300, -0.25f, 4}, y[] = {1, 0, 2};
    assert_memory_equal(ds.x, x, sizeof x);
    assert_memory_equal(ds.y, y, sizeof y);
    assert_int_equal(ds.n_silos, 2);
    assert_string_equal(ds.silo_names[0], "north");
    assert_string_equal(ds.silo_names[1], "south");
    assert_int_equal(ds.silo[0], 0);
    assert_int_equal(ds.silo[1], 1);
    assert_int_equal(ds.silo[2], 0);
    assert_int_equal(ds.n_classes, 3);
    fl_dataset_free(&ds);
    /* without a silo column: every other column is a feature, in header order */
    assert_int_equal(parse(t, "y", NULL, &ds, &line, &col), DP_EINVAL); /* s is not a number */
    assert_int_equal(line, 2);
    assert_int_equal(col, 3);
    assert_int_equal(parse("y,a,b\n1,2,3\n4,5,6", "y", "", &ds, &line, &col), DP_OK);
    assert_int_equal(ds.n, 2);
    assert_null(ds.silo);
    assert_int_equal(ds.n_silos, 0);
    assert_true(ds.x[2] == 5.0f && ds.x[3] == 6.0f && ds.y[1] == 4.0f);
    fl_dataset_free(&ds);
}

static void csv_reads_quotes_crlf_bom_and_trailing_lines(void **state)
{
    (void)state;
    fl_dataset ds;
    size_t line, col;
    const char *t = "\xEF\xBB\xBF"
                    "\"x,1\",\"y\"\"\",site\r\n"
                    "\" 1.25 \",\"7\",\"a, \"\"b\"\"\"\r\n"
                    "2,8,\"two\nlines\"\r\n"
                    "\t3 ,9,plain\r\n"
                    "\r\n\r\n\n";
    assert_int_equal(parse(t, "y\"", "site", &ds, &line, &col), DP_OK);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.d, 1);
    assert_string_equal(ds.feature_names[0], "x,1");
    assert_true(ds.x[0] == 1.25f && ds.x[1] == 2.0f && ds.x[2] == 3.0f);
    assert_true(ds.y[0] == 7.0f && ds.y[2] == 9.0f);
    assert_int_equal(ds.n_silos, 3);
    assert_string_equal(ds.silo_names[0], "a, \"b\"");
    assert_string_equal(ds.silo_names[1], "two\nlines");
    assert_int_equal(ds.n_classes, 10);
    fl_dataset_free(&ds);
    /* an empty trailing field, and a CR ending the text */
    assert_int_equal(parse("y,s,x\n1,,2\r", "y", "s", &ds, &line, &col), DP_OK);
    assert_int_equal(ds.n, 1);
    assert_string_equal(ds.silo_names[0], "");
    fl_dataset_free(&ds);
}

typedef struct csv_bad {
    const char *text, *label, *silo;
    int code;
    size_t line, column;
    const char *field, *msg; /* msg: a substring of the message */
} csv_bad;

static void csv_reports_each_error_at_its_line_and_column(void **state)
{
    (void)state;
    static const csv_bad cases[] = {
        {"y,x1,x2\n1,2,3\n1,abc,3\n", "y", NULL, DP_EINVAL, 3, 2, "csv",
         "line 3, column 2 (\"x1\"): \"abc\" is not a number"},
        {"y,x1,x2\n1,2,\n", "y", NULL, DP_EINVAL, 2, 3, "csv", "(\"x2\"): the cell is empty"},
        {"y,x1,x2\n1,2,\" \"\n", "y", NULL, DP_EINVAL, 2, 3, "csv", "empty"},
        {"y,x1\n1,nan\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "\"nan\" is not a number"},
        {"y,x1\n1,-inf\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "not a number"},
        {"y,x1\n1,0x10\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "not a number"},
        {"y,x1\n1,1.5abc\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "not a number"},
        {"y,x1\n1,1e\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "not a number"},
        {"y,x1\n1,2\n1e999,2\n", "y", NULL, DP_EINVAL, 3, 1, "csv",
         "(\"y\"): \"1e999\" is outside the range of a float"},
        {"y,x1\n1,-1e39\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "outside the range"},
        {"y,x1\n1,2,3\n", "y", NULL, DP_EINVAL, 2, 3, "csv", "more fields than the header (2)"},
        {"y,x1,x2\n1,2\n", "y", NULL, DP_EINVAL, 2, 3, "csv",
         "(\"x2\"): missing (the line has 2 fields, the header 3)"},
        {"y,x1\n1,\"2\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "a quoted cell is not closed"},
        {"y,x1\n1,\"2\"3\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "closing quote"},
        {"y,x1\n1,2\"3\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "quote inside an unquoted cell"},
        {"y,x1\n1,2\r3\n", "y", NULL, DP_EINVAL, 2, 2, "csv", "carriage return"},
        {"y,x1\n1,2\n\n3,4\n", "y", NULL, DP_EINVAL, 3, 1, "csv", "the line is empty"},
        {"y,x1,y\n1,2,3\n", "y", NULL, DP_EINVAL, 1, 3, "csv", "repeats column 1"},
        {"y,,x\n1,2,3\n", "y", NULL, DP_EINVAL, 1, 2, "csv", "the column name is empty"},
        {"", "y", NULL, DP_EINVAL, 1, 1, "csv", "the header line is empty"},
        {"\ny,x\n1,2\n", "y", NULL, DP_EINVAL, 1, 1, "csv", "the header line is empty"},
        {"y,x\n", "y", NULL, DP_EINVAL, 0, 0, "csv", "no data rows"},
        {"y,s\n1,a\n", "y", "s", DP_EINVAL, 0, 0, "csv", "no feature column"},
        {"y,x\n1,2\n", "label", NULL, DP_EINVAL, 0, 0, "label", "\"label\" is not in the header"},
        {"y,x\n1,2\n", "y", "school", DP_EINVAL, 0, 0, "silo", "\"school\" is not"},
        {"y,x\n1,2\n", "y", "y", DP_EINVAL, 0, 0, "silo", "cannot be the label"},
        {"y,x\n1,2\n", "", NULL, DP_EINVAL, 0, 0, "label", "must be named"},
        /* a quoted line break moves later lines down */
        {"y,s,x\n1,\"a\nb\",2\n1,c,z\n", "y", "s", DP_EINVAL, 4, 3, "csv", "(\"x\"): \"z\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const csv_bad *c = &cases[i];
        fl_dataset ds;
        size_t line = 99, col = 99;
        int rc = parse(c->text, c->label, c->silo, &ds, &line, &col);
        if (rc != c->code || line != c->line || col != c->column ||
            strcmp(E.field, c->field) != 0 || strstr(E.msg, c->msg) == NULL)
            fail_msg("case %zu: rc %d line %zu column %zu field \"%s\" msg \"%s\"", i, rc, line,
                     col, E.field, E.msg);
        assert_null(ds.x);
        assert_null(ds.y);
    }
}

static void csv_refuses_more_silos_than_the_limit(void **state)
{
    (void)state;
    size_t cap = (FL_MAX_SILOS + 2) * 24, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "y,s,x\n");
    for (size_t i = 0; i <= FL_MAX_SILOS; i++)
        len += (size_t)snprintf(text + len, cap - len, "1,silo%zu,2\n", i);
    fl_dataset ds;
    size_t line, col;
    dp_err_clear(&E);
    assert_int_equal(fl_csv_parse(text, len, "y", "s", &ds, &line, &col, &E), DP_EINVAL);
    assert_int_equal(line, FL_MAX_SILOS + 2); /* the header, then silo number FL_MAX_SILOS + 1 */
    assert_int_equal(col, 2);
    assert_non_null(strstr(E.msg, "distinct silos"));
    /* one silo fewer is fine */
    char *last = text + len - 1;
    while (last[-1] != '\n')
        last--;
    assert_int_equal(fl_csv_parse(text, (size_t)(last - text), "y", "s", &ds, &line, &col, &E),
                     DP_OK);
    assert_int_equal(ds.n_silos, FL_MAX_SILOS);
    assert_string_equal(ds.silo_names[FL_MAX_SILOS - 1], "silo9999");
    fl_dataset_free(&ds);
    free(text);
}

static void csv_counts_classes_by_the_header_rule(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t n_classes;
    } cases[] = {
        {"y,x\n0,1\n4,1\n2,1\n", 5}, {"y,x\n1,1\n2.5,1\n", 0}, {"y,x\n-1,1\n1,1\n", 0},
        {"y,x\n999,1\n", 1000},      {"y,x\n1000,1\n", 0},     {"y,x\n3.0,1\n", 4},
        {"y,x\n0,1\n1e-30,1\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_dataset ds;
        size_t line, col;
        assert_int_equal(parse(cases[i].text, "y", NULL, &ds, &line, &col), DP_OK);
        assert_int_equal(ds.n_classes, cases[i].n_classes);
        fl_dataset_free(&ds);
    }
}

/* Random tables printed with %.9g (enough digits to round-trip a float), randomly quoted, padded
 * and CRLF-terminated, parse back to the same floats bit for bit. */
static void csv_random_tables_round_trip(void **state)
{
    (void)state;
    gsl_rng *r = dp_rng_alloc(20261127, DP_RNG_STREAM_DATA, &E);
    assert_non_null(r);
    for (int t = 0; t < 60; t++) {
        size_t rows = 1 + gsl_rng_uniform_int(r, 60), cols = 2 + gsl_rng_uniform_int(r, 12);
        size_t label = gsl_rng_uniform_int(r, cols), cap = (rows + 1) * cols * 48 + 64, len = 0;
        bool crlf = gsl_rng_uniform(r) < 0.5;
        char *text = malloc(cap);
        float *want = malloc(rows * cols * sizeof(float));
        assert_non_null(text);
        for (size_t j = 0; j < cols; j++)
            len += (size_t)snprintf(text + len, cap - len, "%sc%zu", j ? "," : "", j);
        for (size_t i = 0; i < rows; i++) {
            len += (size_t)snprintf(text + len, cap - len, crlf ? "\r\n" : "\n");
            for (size_t j = 0; j < cols; j++) {
                /* magnitudes from 1e-30 to 1e30, integers and exact zeros too */
                double u = gsl_rng_uniform(r), v;
                if (u < 0.1)
                    v = 0;
                else if (u < 0.3)
                    v = (double)gsl_rng_uniform_int(r, 100000) - 50000;
                else
                    v = gsl_ran_gaussian(r, 1.0) * pow(10.0, gsl_rng_uniform(r) * 60 - 30);
                float f = (float)v;
                want[i * cols + j] = f;
                const char *q = gsl_rng_uniform(r) < 0.2 ? "\"" : "";
                const char *pad = gsl_rng_uniform(r) < 0.1 ? " " : "";
                len += (size_t)snprintf(text + len, cap - len, "%s%s%s%.9g%s%s", j ? "," : "", q,
                                        pad, (double)f, pad, q);
            }
        }
        if (gsl_rng_uniform(r) < 0.5)
            len += (size_t)snprintf(text + len, cap - len, "\n");
        char lname[16];
        snprintf(lname, sizeof lname, "c%zu", label);
        fl_dataset ds;
        size_t line, col;
        dp_err_clear(&E);
        int rc = fl_csv_parse(text, len, lname, NULL, &ds, &line, &col, &E);
        if (rc != DP_OK)
            fail_msg("table %d: %s", t, E.msg);
        assert_int_equal(ds.n, rows);
        assert_int_equal(ds.d, cols - 1);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0, f = 0; j < cols; j++) {
                float got = j == label ? ds.y[i] : ds.x[i * ds.d + f++];
                if (memcmp(&got, &want[i * cols + j], sizeof got) != 0)
                    fail_msg("table %d row %zu col %zu: %.9g != %.9g", t, i, j, (double)got,
                             (double)want[i * cols + j]);
            }
        fl_dataset_free(&ds);
        free(text);
        free(want);
    }
    gsl_rng_free(r);
}

/* Every number the reader accepts is (float)strtod of its text: random decimals of 1 to 17 digits
 * (the reader's exact fast path takes those of at most 15 without exponent), with or without a
 * sign, a point and an exponent. */
static void csv_numbers_match_strtod(void **state)
{
    (void)state;
    gsl_rng *r = dp_rng_alloc(77, DP_RNG_STREAM_DATA, &E);
    enum { ROWS = 4000 };
    char *text = malloc(ROWS * 40 + 16), cells[ROWS][32];
    size_t len = (size_t)sprintf(text, "y,x\n");
    for (int i = 0; i < ROWS; i++) {
        size_t nd = 1 + gsl_rng_uniform_int(r, 17), o = 0, dot = gsl_rng_uniform_int(r, nd + 2);
        char *c = cells[i];
        if (gsl_rng_uniform(r) < 0.3)
            c[o++] = gsl_rng_uniform(r) < 0.5 ? '-' : '+';
        for (size_t k = 0; k < nd; k++) {
            if (k == dot)
                c[o++] = '.';
            c[o++] = (char)('0' + gsl_rng_uniform_int(r, 10));
        }
        if (gsl_rng_uniform(r) < 0.2)
            o += (size_t)sprintf(c + o, "e%d", (int)gsl_rng_uniform_int(r, 40) - 20);
        c[o] = '\0';
        len += (size_t)sprintf(text + len, "0,%s\n", c);
    }
    fl_dataset ds;
    size_t line, col;
    dp_err_clear(&E);
    assert_int_equal(fl_csv_parse(text, len, "y", NULL, &ds, &line, &col, &E), DP_OK);
    assert_int_equal(ds.n, ROWS);
    for (int i = 0; i < ROWS; i++) {
        float want = (float)strtod(cells[i], NULL);
        if (memcmp(&ds.x[i], &want, sizeof want) != 0)
            fail_msg("\"%s\": %.9g, strtod %.9g", cells[i], (double)ds.x[i], (double)want);
    }
    fl_dataset_free(&ds);
    free(text);
    gsl_rng_free(r);
}

static void csv_out_of_memory_fails_cleanly(void **state)
{
    (void)state;
    const char *t = "y,s,\"x 1\",x2\n1,a,2,3\n2,b,\"4\",5\n3,a,6,7\n";
    for (long k = 1;; k++) {
        fl_dataset ds;
        size_t line, col;
        dp_alloc_fail_after(k);
        int rc = parse(t, "y", "s", &ds, &line, &col);
        dp_alloc_fail_after(0);
        if (rc == DP_OK) {
            assert_int_equal(ds.n, 3);
            assert_int_equal(ds.n_silos, 2);
            fl_dataset_free(&ds);
            assert_true(k > 5);
            break;
        }
        assert_int_equal(rc, DP_ENOMEM);
        assert_null(ds.x);
        assert_null(ds.silo_names);
        assert_null(ds.feature_names);
    }
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The School data set (139 schools, 15,362 students; Liu et al., NeurIPS 2022, App. C.1), read
 * from the path in DPSILO_SCHOOL_CSV (the file is not part of the repository). */
static void csv_reads_the_school_file_when_given(void **state)
{
    (void)state;
    const char *path = getenv("DPSILO_SCHOOL_CSV");
    if (path == NULL || *path == '\0') {
        print_message("DPSILO_SCHOOL_CSV not set: skipped\n");
        skip();
    }
    size_t len, line, col;
    char *text = read_file(path, &len);
    fl_dataset ds;
    dp_err_clear(&E);
    assert_int_equal(fl_csv_parse(text, len, "score", "school", &ds, &line, &col, &E), DP_OK);
    assert_int_equal(ds.n, 15362);
    assert_int_equal(ds.d, 28);
    assert_int_equal(ds.n_silos, 139);
    assert_string_equal(ds.feature_names[0], "x1");
    assert_string_equal(ds.feature_names[27], "x28");
    size_t count[139] = {0};
    for (size_t i = 0; i < ds.n; i++) {
        count[ds.silo[i]]++;
        assert_true(ds.y[i] >= 1 && ds.y[i] <= 70);
        assert_true(ds.x[i * 28 + 27] == 1.0f); /* x28 is the constant 1 */
    }
    for (size_t k = 0; k < 139; k++)
        assert_in_range(count[k], 22, 251);
    assert_string_equal(ds.silo_names[0], "0");
    assert_int_equal(ds.n_classes, 71); /* integer scores 1..70: the rule says 71 classes */
    fl_dataset_free(&ds);
    free(text);
}

/* ---------------------------------------------------------------- IDX */

typedef struct tmpdir {
    char path[64];
} tmpdir;

static void tmp_make(tmpdir *t)
{
    snprintf(t->path, sizeof t->path, "/tmp/test_fl_data.XXXXXX");
    assert_non_null(mkdtemp(t->path));
}

static void tmp_remove(tmpdir *t, const char *const *names, size_t n)
{
    char p[128];
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s", t->path, names[i]);
        unlink(p);
    }
    rmdir(t->path);
}

/* Writes bytes to dir/name, gzip-compressed when gz. */
static void write_bytes(const tmpdir *t, const char *name, const unsigned char *b, size_t n,
                        bool gz)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", t->path, name);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
    }
}

static size_t idx_bytes(unsigned char *b, unsigned char type, const uint32_t *dims, unsigned nd,
                        const unsigned char *data, size_t n)
{
    size_t o = 0;
    b[o++] = 0, b[o++] = 0, b[o++] = 0x08, b[o++] = type;
    for (unsigned i = 0; i < nd; i++) {
        b[o++] = (unsigned char)(dims[i] >> 24), b[o++] = (unsigned char)(dims[i] >> 16);
        b[o++] = (unsigned char)(dims[i] >> 8), b[o++] = (unsigned char)dims[i];
    }
    memcpy(b + o, data, n);
    return o + n;
}

static int load(const tmpdir *t, const char *img, const char *lab, size_t max_rows, fl_dataset *ds)
{
    char pi[128], pl[128];
    snprintf(pi, sizeof pi, "%s/%s", t->path, img);
    snprintf(pl, sizeof pl, "%s/%s", t->path, lab);
    dp_err_clear(&E);
    return fl_idx_load(pi, pl, max_rows, ds, &E);
}

static void idx_reads_plain_and_gzip_files(void **state)
{
    (void)state;
    tmpdir t;
    tmp_make(&t);
    /* 3 images of 2 x 3 pixels, labels 2, 0, 7 */
    unsigned char pix[18], b[64];
    for (int i = 0; i < 18; i++)
        pix[i] = (unsigned char)(i * 15);
    const unsigned char lab[3] = {2, 0, 7};
    const uint32_t idims[3] = {3, 2, 3}, ldims[1] = {3};
    size_t ni = idx_bytes(b, 3, idims, 3, pix, 18);
    write_bytes(&t, "img", b, ni, false);
    write_bytes(&t, "img.gz", b, ni, true);
    size_t nl = idx_bytes(b, 1, ldims, 1, lab, 3);
    write_bytes(&t, "lab", b, nl, false);
    write_bytes(&t, "lab.gz", b, nl, true);
    const char *pairs[2][2] = {{"img", "lab"}, {"img.gz", "lab.gz"}};
    for (int p = 0; p < 2; p++) {
        fl_dataset ds;
        assert_int_equal(load(&t, pairs[p][0], pairs[p][1], 0, &ds), DP_OK);
        assert_int_equal(ds.n, 3);
        assert_int_equal(ds.d, 6);
        for (int i = 0; i < 18; i++)
            assert_true(ds.x[i] == (float)pix[i] / 255.0f);
        assert_true(ds.y[0] == 2 && ds.y[1] == 0 && ds.y[2] == 7);
        assert_int_equal(ds.n_classes, 8);
        assert_null(ds.silo);
        assert_null(ds.feature_names);
        fl_dataset_free(&ds);
        assert_int_equal(load(&t, pairs[p][0], pairs[p][1], 2, &ds), DP_OK);
        assert_int_equal(ds.n, 2);
        assert_int_equal(ds.n_classes, 3);
        fl_dataset_free(&ds);
    }
    const char *names[] = {"img", "img.gz", "lab", "lab.gz"};
    tmp_remove(&t, names, 4);
}

static void idx_refuses_malformed_files(void **state)
{
    (void)state;
    tmpdir t;
    tmp_make(&t);
    unsigned char pix[8] = {0, 1, 2, 3, 4, 5, 6, 7}, lab[3] = {1, 2, 3}, b[64];
    const uint32_t idims[3] = {2, 2, 2}, ldims[1] = {2}, ldims3[1] = {3}, zero[3] = {2, 0, 2};
    write_bytes(&t, "img", b, idx_bytes(b, 3, idims, 3, pix, 8), false);
    write_bytes(&t, "lab", b, idx_bytes(b, 1, ldims, 1, lab, 2), false);
    write_bytes(&t, "lab3", b, idx_bytes(b, 1, ldims3, 1, lab, 3), true);
    write_bytes(&t, "short", b, idx_bytes(b, 3, idims, 3, pix, 7), false);
    write_bytes(&t, "long", b, idx_bytes(b, 3, idims, 3, pix, 8) + 1, false);
    write_bytes(&t, "zero", b, idx_bytes(b, 3, zero, 3, pix, 0), false);
    size_t n = idx_bytes(b, 3, idims, 3, pix, 8);
    b[2] = 0x09; /* signed bytes */
    write_bytes(&t, "type", b, n, false);
    b[2] = 0x08;
    write_bytes(&t, "hdr", b, 6, true); /* cut inside the dimensions */
    static const struct {
        const char *img, *lab;
        int code;
        const char *field, *msg;
    } cases[] = {
        {"lab", "lab", DP_EINVAL, "images", "not an IDX file"},
        {"img", "img", DP_EINVAL, "labels", "not an IDX file"},
        {"type", "lab", DP_EINVAL, "images", "not an IDX file"},
        {"img", "lab3", DP_EINVAL, "labels", "3 labels for 2 images"},
        {"short", "lab", DP_EINVAL, "images", "truncated"},
        {"long", "lab", DP_EINVAL, "images", "bytes after"},
        {"zero", "lab", DP_EINVAL, "images", "zero dimension"},
        {"hdr", "lab", DP_EINVAL, "images", "truncated"},
        {"missing", "lab", DP_ENOTFOUND, "images", "does not exist"},
        {"img", "missing", DP_ENOTFOUND, "labels", "does not exist"},
        {".", "lab", DP_EINTERNAL, "images", "cannot be read"}, /* a directory */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_dataset ds;
        int rc = load(&t, cases[i].img, cases[i].lab, 0, &ds);
        if (rc != cases[i].code || strcmp(E.field, cases[i].field) != 0 ||
            strstr(E.msg, cases[i].msg) == NULL || strstr(E.msg, "/tmp") != NULL)
            fail_msg("case %zu: rc %d field \"%s\" msg \"%s\"", i, rc, E.field, E.msg);
        assert_null(ds.x);
    }
    /* a short images file read only up to max_rows is fine */
    fl_dataset ds;
    assert_int_equal(load(&t, "short", "lab", 1, &ds), DP_OK);
    assert_int_equal(ds.n, 1);
    fl_dataset_free(&ds);
    const char *names[] = {"img", "lab", "lab3", "short", "long", "zero", "type", "hdr"};
    tmp_remove(&t, names, 8);
}

static void idx_loads_fashion_mnist_t10k_when_installed(void **state)
{
    (void)state;
    if (access(FASHION_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        print_message(FASHION_DIR " not installed: skipped\n");
        skip();
    }
    fl_dataset ds;
    dp_err_clear(&E);
    assert_int_equal(fl_idx_load(FASHION_DIR "/t10k-images-idx3-ubyte.gz",
                                 FASHION_DIR "/t10k-labels-idx1-ubyte.gz", 0, &ds, &E),
                     DP_OK);
    assert_int_equal(ds.n, 10000);
    assert_int_equal(ds.d, 784);
    assert_int_equal(ds.n_classes, 10);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < ds.n * ds.d; i++) {
        lo = fminf(lo, ds.x[i]);
        hi = fmaxf(hi, ds.x[i]);
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    size_t count[10] = {0};
    for (size_t i = 0; i < ds.n; i++)
        count[(size_t)ds.y[i]]++;
    for (int c = 0; c < 10; c++)
        assert_int_equal(count[c], 1000); /* the test set is balanced (Xiao et al. 2017) */
    fl_dataset_free(&ds);
}

/* ---------------------------------------------------------------- partitions */

static void partition_natural_uses_the_silo_column(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    uint32_t *a = malloc(ds.n * sizeof *a);
    size_t k = 0;
    fl_partition_spec p = {.kind = FL_PARTITION_NATURAL};
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    assert_int_equal(k, 6);
    assert_memory_equal(a, ds.silo, ds.n * sizeof *a);
    free(a);
    fl_dataset_free(&ds);
    ds = make_ds(10, 2, 2);
    a = malloc(10 * sizeof *a);
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    free(a);
    fl_dataset_free(&ds);
}

static void partition_iid_deals_near_equal_silos(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(103, 2, 0);
    uint32_t a[103], b[103];
    size_t k, count[10] = {0};
    fl_partition_spec p = {.kind = FL_PARTITION_IID, .silos = 10, .seed = 7};
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    assert_int_equal(k, 10);
    for (size_t i = 0; i < 103; i++) {
        assert_true(a[i] < 10);
        count[a[i]]++;
    }
    for (int j = 0; j < 10; j++)
        assert_int_equal(count[j], j < 3 ? 11 : 10);
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_equal(a, b, sizeof a);
    p.seed = 8;
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_not_equal(a, b, sizeof a);
    /* a shuffle, not blocks: the first 10 rows do not all share a silo */
    bool mixed = false;
    for (int i = 1; i < 10; i++)
        mixed |= a[i] != a[0];
    assert_true(mixed);
    p.silos = 104;
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    p.silos = 0;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    fl_dataset_free(&ds);
}

/* Mean over silos of the largest class share within the silo. */
static double mean_top_share(const fl_dataset *ds, const uint32_t *a, size_t K, size_t C)
{
    size_t *cnt = calloc(K * C, sizeof *cnt), *tot = calloc(K, sizeof *tot);
    for (size_t i = 0; i < ds->n; i++) {
        cnt[a[i] * C + (size_t)ds->y[i]]++;
        tot[a[i]]++;
    }
    double s = 0;
    for (size_t k = 0; k < K; k++) {
        size_t mx = 0;
        for (size_t c = 0; c < C; c++)
            mx = cnt[k * C + c] > mx ? cnt[k * C + c] : mx;
        assert_true(tot[k] > 0);
        s += (double)mx / (double)tot[k];
    }
    free(cnt);
    free(tot);
    return s / (double)K;
}

static void partition_dirichlet_skews_with_small_alpha(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(10000, 1, 10); /* 1000 rows of each of 10 classes */
    uint32_t *a = malloc(ds.n * sizeof *a);
    size_t k;
    fl_partition_spec p = {.kind = FL_PARTITION_DIRICHLET, .silos = 5, .alpha = 1e6, .seed = 3};
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    assert_int_equal(k, 5);
    /* alpha -> infinity: each class split 1/5 per silo (share sd sqrt(.2*.8/(1e6*5)) ~ 2e-4),
     * so every silo holds ~200 rows of each class and its top share is ~0.1 */
    size_t cnt[5][10] = {{0}};
    for (size_t i = 0; i < ds.n; i++)
        cnt[a[i]][(size_t)ds.y[i]]++;
    for (int s = 0; s < 5; s++)
        for (int c = 0; c < 10; c++)
            assert_in_range(cnt[s][c], 198, 202);
    assert_close(mean_top_share(&ds, a, 5, 10), 0.1, 0, 0.002);
    /* alpha = 0.1: most of each class goes to one silo; a silo's top class dominates
     * (E[max share] of Dir(0.1 x 5) ~ 0.8; uniform would be 0.1) */
    p.alpha = 0.1;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    assert_true(mean_top_share(&ds, a, 5, 10) > 0.4);
    uint32_t *b = malloc(ds.n * sizeof *b);
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_equal(a, b, ds.n * sizeof *a);
    free(b);
    free(a);
    fl_dataset_free(&ds);
}

static void partition_dirichlet_refuses_what_it_cannot_do(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(20, 1, 2);
    uint32_t a[20];
    size_t k = 99;
    /* 20 silos of one row each from two classes with alpha = 0.001: every draw leaves one empty */
    fl_partition_spec p = {.kind = FL_PARTITION_DIRICHLET, .silos = 20, .alpha = 1e-3, .seed = 1};
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    assert_int_equal(k, 0);
    p.silos = 2, p.alpha = 0;
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    p.alpha = DP_INF;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    fl_dataset_free(&ds);
    ds = make_ds(20, 1, 0); /* real labels */
    p.alpha = 1;
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    p.kind = FL_PARTITION_CLASSES, p.classes_per_silo = 1;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    p.kind = (fl_partition_kind)9;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    fl_dataset_free(&ds);
}

static void partition_classes_gives_each_silo_its_classes(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(1000, 1, 10); /* 100 rows per class */
    uint32_t a[1000];
    size_t k;
    for (size_t m = 1; m <= 3; m++) {
        fl_partition_spec p = {
            .kind = FL_PARTITION_CLASSES, .silos = 7, .classes_per_silo = m, .seed = 11};
        if (7 * m < 10) {
            dp_err_clear(&E);
            assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
            assert_string_equal(E.field, "partition");
            continue;
        }
        assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
        size_t cnt[7][10] = {{0}};
        for (size_t i = 0; i < 1000; i++)
            cnt[a[i]][(size_t)ds.y[i]]++;
        for (size_t c = 0; c < 10; c++) { /* every class covered, split evenly */
            size_t mn = 1000, mx = 0, held = 0, tot = 0;
            for (size_t s = 0; s < 7; s++)
                if (cnt[s][c]) {
                    held++;
                    tot += cnt[s][c];
                    mn = cnt[s][c] < mn ? cnt[s][c] : mn;
                    mx = cnt[s][c] > mx ? cnt[s][c] : mx;
                }
            assert_true(held >= 1);
            assert_int_equal(tot, 100);
            assert_true(mx - mn <= 1);
        }
        for (size_t s = 0; s < 7; s++) { /* exactly m classes per silo */
            size_t held = 0;
            for (size_t c = 0; c < 10; c++)
                held += cnt[s][c] > 0;
            assert_int_equal(held, m);
        }
    }
    /* the classes a silo holds depend on the seed (silo 0's pair over five seeds) */
    unsigned sets[5] = {0};
    for (uint64_t seed = 0; seed < 5; seed++) {
        fl_partition_spec q = {
            .kind = FL_PARTITION_CLASSES, .silos = 5, .classes_per_silo = 2, .seed = seed};
        assert_int_equal(fl_partition(&ds, &q, a, &k, &E), DP_OK);
        for (size_t i = 0; i < 1000; i++)
            if (a[i] == 0)
                sets[seed] |= 1u << (unsigned)ds.y[i];
    }
    assert_true(sets[0] != sets[1] || sets[0] != sets[2] || sets[0] != sets[3] ||
                sets[0] != sets[4]);
    fl_partition_spec p = {
        .kind = FL_PARTITION_CLASSES, .silos = 7, .classes_per_silo = 11, .seed = 11};
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    /* classes absent from the data are not dealt: labels 0 and 3 only (n_classes 4), 2 silos of 1
     * class each get one class each */
    for (size_t i = 0; i < 1000; i++)
        ds.y[i] = i % 2 ? 3.0f : 0.0f;
    ds.n_classes = fl_labels_n_classes(ds.y, 1000);
    assert_int_equal(ds.n_classes, 4);
    p.silos = 2, p.classes_per_silo = 1;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(a[i], a[i % 2]);
    assert_true(a[0] != a[1]);
    p.classes_per_silo = 3; /* more than the 2 classes present */
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_non_null(strstr(E.msg, "classes present"));
    /* a class with fewer rows than silos holding it */
    ds.y[0] = 1.0f, ds.n_classes = 4;
    p.silos = 3, p.classes_per_silo = 2;
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_EINVAL);
    assert_non_null(strstr(E.msg, "class 1 has 1 rows for 2 silos"));
    fl_dataset_free(&ds);
}

/* ---------------------------------------------------------------- fl_federate */

static void federate_splits_every_row_once(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(101, 2, 3);
    uint32_t a[101];
    size_t k;
    fl_partition_spec p = {.kind = FL_PARTITION_IID, .silos = 4, .seed = 5};
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    a[100] = 3; /* silo 3: 26 rows */
    static const double fractions[] = {0.0, 0.25, 0.3, 0.5, 0.99};
    for (size_t t = 0; t < 5; t++) {
        fl_federation f;
        assert_int_equal(fl_federate(&ds, a, 4, fractions[t], 9, false, &f, &E), DP_OK);
        assert_int_equal(f.n_silos, 4);
        assert_int_equal(f.d, 2);
        assert_int_equal(f.n_classes, 3);
        int seen[101] = {0};
        for (size_t s = 0; s < 4; s++) {
            const fl_silo_data *sd = &f.silo[s];
            size_t nk = sd->n_train + sd->n_test;
            size_t want = (size_t)floor(fractions[t] * (double)nk + 0.5);
            assert_int_equal(sd->n_test, want < nk ? want : nk - 1);
            char name[8];
            snprintf(name, sizeof name, "%zu", s);
            assert_string_equal(sd->name, name);
            for (size_t i = 0; i < sd->n_train + sd->n_test; i++) {
                bool tr = i < sd->n_train;
                const float *x = tr ? sd->x_train + i * 2 : sd->x_test + (i - sd->n_train) * 2;
                float y = tr ? sd->y_train[i] : sd->y_test[i - sd->n_train];
                size_t row = (size_t)x[0];
                assert_true(row < 101 && a[row] == s);
                assert_true(y == ds.y[row] && x[1] == ds.x[row * 2 + 1]);
                seen[row]++;
            }
        }
        for (size_t i = 0; i < 101; i++)
            assert_int_equal(seen[i], 1); /* in one part of one silo: never in train and test */
        fl_federation_free(&f);
    }
    fl_dataset_free(&ds);
}

/* fl_federate caches each silo's training rows' 1 / sqrt(||x_i||^2 + 1) (after standardising: the
 * rows the trainer reads), exactly as fl_rows_inv_s computes them and close to the formula in
 * double; after the rows change in place, fl_federation_refresh recomputes them (they match the
 * changed rows, not the old ones), and it fills a hand-built silo's missing cache. */
static void federate_caches_row_norms_and_refresh_recomputes_them(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.dim = 7, s.silos = 3, s.n_min = 20, s.n_max = 40;
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    fl_federation f;
    assert_int_equal(fl_federate(&ds, ds.silo, 3, 0.25, 5, true, &f, &E), DP_OK);
    float want[40], old1[40];
    for (size_t k = 0; k < 3; k++) {
        fl_silo_data *b = &f.silo[k];
        assert_non_null(b->x_train_inv_s);
        fl_rows_inv_s(b->x_train, b->n_train, 7, want);
        assert_memory_equal(b->x_train_inv_s, want, b->n_train * sizeof(float));
        for (size_t i = 0; i < b->n_train; i++) {
            double direct = 0.0;
            for (size_t j = 0; j < 7; j++)
                direct += (double)b->x_train[i * 7 + j] * (double)b->x_train[i * 7 + j];
            assert_close((double)b->x_train_inv_s[i], 1.0 / sqrt(direct + 1.0), 1e-7, 0);
        }
    }
    memcpy(old1, f.silo[1].x_train_inv_s, f.silo[1].n_train * sizeof(float));
    for (size_t i = 0; i < f.silo[1].n_train * 7; i++)
        f.silo[1].x_train[i] += 1.0f;
    dp_free(f.silo[2].x_train_inv_s); /* a silo without a cache */
    f.silo[2].x_train_inv_s = NULL;
    assert_int_equal(fl_federation_refresh(&f, &E), DP_OK);
    for (size_t k = 0; k < 3; k++) {
        fl_silo_data *b = &f.silo[k];
        assert_non_null(b->x_train_inv_s);
        fl_rows_inv_s(b->x_train, b->n_train, 7, want);
        assert_memory_equal(b->x_train_inv_s, want, b->n_train * sizeof(float));
        for (size_t i = 0; i < b->n_train; i++) {
            double direct = 0.0;
            for (size_t j = 0; j < 7; j++)
                direct += (double)b->x_train[i * 7 + j] * (double)b->x_train[i * 7 + j];
            assert_close((double)b->x_train_inv_s[i], 1.0 / sqrt(direct + 1.0), 1e-7, 0);
        }
    }
    assert_memory_not_equal(f.silo[1].x_train_inv_s, old1, f.silo[1].n_train * sizeof(float));
    assert_int_equal(fl_federation_refresh(NULL, &E), DP_EINVAL);
    assert_string_equal(E.field, "federation");
    fl_federation_free(&f);
    fl_dataset_free(&ds);
}

static void federate_standardizes_on_the_training_part(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    s.dim = 3, s.silos = 3, s.n_min = 50, s.n_max = 80;
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    for (size_t i = 0; i < ds.n; i++) {
        ds.x[i * 3 + 1] = 5.0f + 3.0f * ds.x[i * 3 + 1]; /* shifted and scaled */
        ds.x[i * 3 + 2] = 2.5f;                          /* constant */
    }
    fl_federation raw, f;
    assert_int_equal(fl_federate(&ds, ds.silo, 3, 0.2, 1, false, &raw, &E), DP_OK);
    assert_int_equal(fl_federate(&ds, ds.silo, 3, 0.2, 1, true, &f, &E), DP_OK);
    for (size_t k = 0; k < 3; k++) {
        const fl_silo_data *a = &raw.silo[k], *b = &f.silo[k];
        assert_int_equal(a->n_train, b->n_train);
        assert_memory_equal(a->y_train, b->y_train, a->n_train * sizeof(float));
        assert_memory_equal(a->y_test, b->y_test, a->n_test * sizeof(float));
        for (size_t j = 0; j < 3; j++) {
            double m = 0, v = 0, mr = 0, vr = 0, n = (double)b->n_train;
            for (size_t i = 0; i < b->n_train; i++) {
                m += (double)b->x_train[i * 3 + j];
                mr += (double)a->x_train[i * 3 + j];
            }
            m /= n, mr /= n;
            for (size_t i = 0; i < b->n_train; i++) {
                v += pow((double)b->x_train[i * 3 + j] - m, 2);
                vr += pow((double)a->x_train[i * 3 + j] - mr, 2);
            }
            v /= n, vr /= n;
            assert_close(m, 0.0, 0, 1e-6);
            assert_close(v, j == 2 ? 0.0 : 1.0, 1e-5, 0);
            /* the test part goes through the same map */
            for (size_t i = 0; i < b->n_test; i++) {
                double want = j == 2 ? 0.0 : ((double)a->x_test[i * 3 + j] - mr) / sqrt(vr);
                assert_close((double)b->x_test[i * 3 + j], want, 1e-5, 1e-5);
            }
        }
        assert_string_equal(b->name, ds.silo_names[k]);
    }
    fl_federation_free(&raw);
    fl_federation_free(&f);
    fl_dataset_free(&ds);
}

static void federate_is_deterministic_by_seed_and_names_natural_silos(void **state)
{
    (void)state;
    fl_dataset ds;
    size_t line, col;
    assert_int_equal(parse("y,s,x\n0,b,1\n1,a,2\n0,b,3\n1,b,4\n0,a,5\n1,b,6\n1,a,7\n0,b,8\n", "y",
                           "s", &ds, &line, &col),
                     DP_OK);
    fl_federation f1, f2, f3;
    assert_int_equal(fl_federate(&ds, ds.silo, 2, 0.4, 77, false, &f1, &E), DP_OK);
    assert_int_equal(fl_federate(&ds, ds.silo, 2, 0.4, 77, false, &f2, &E), DP_OK);
    assert_string_equal(f1.silo[0].name, "b");
    assert_string_equal(f1.silo[1].name, "a");
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(f1.silo[k].n_test, k == 0 ? 2 : 1); /* round(0.4*5), round(0.4*3) */
        assert_memory_equal(f1.silo[k].x_train, f2.silo[k].x_train,
                            f1.silo[k].n_train * sizeof(float));
        assert_memory_equal(f1.silo[k].x_test, f2.silo[k].x_test,
                            f1.silo[k].n_test * sizeof(float));
    }
    /* another seed reorders silo b's five rows (at least one of eight seeds does) */
    bool differs = false;
    for (uint64_t seed = 78; seed < 86 && !differs; seed++) {
        assert_int_equal(fl_federate(&ds, ds.silo, 2, 0.4, seed, false, &f3, &E), DP_OK);
        differs = memcmp(f1.silo[0].x_test, f3.silo[0].x_test, 2 * sizeof(float)) != 0;
        fl_federation_free(&f3);
    }
    assert_true(differs);
    /* the same silos under another partition are named by number */
    uint32_t swapped[8];
    for (size_t i = 0; i < 8; i++)
        swapped[i] = 1 - ds.silo[i];
    assert_int_equal(fl_federate(&ds, swapped, 2, 0.4, 77, false, &f3, &E), DP_OK);
    assert_string_equal(f3.silo[0].name, "0");
    assert_int_equal(f3.silo[0].n_train + f3.silo[0].n_test, 3);
    fl_federation_free(&f1);
    fl_federation_free(&f2);
    fl_federation_free(&f3);
    fl_dataset_free(&ds);
}

static void federate_refuses_bad_arguments(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(10, 2, 2);
    uint32_t a[10] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    fl_federation f;
    static const double bad_fractions[] = {1.0, -0.1, DP_NAN};
    for (int i = 0; i < 3; i++) {
        dp_err_clear(&E);
        assert_int_equal(fl_federate(&ds, a, 2, bad_fractions[i], 1, true, &f, &E), DP_EINVAL);
        assert_string_equal(E.field, "test_fraction");
        assert_null(f.silo);
    }
    dp_err_clear(&E);
    assert_int_equal(fl_federate(&ds, a, 3, 0.2, 1, true, &f, &E), DP_EINVAL); /* silo 2 empty */
    assert_string_equal(E.field, "partition");
    a[4] = 2;
    dp_err_clear(&E);
    assert_int_equal(fl_federate(&ds, a, 2, 0.2, 1, true, &f, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    dp_err_clear(&E);
    assert_int_equal(fl_federate(&ds, a, 0, 0.2, 1, true, &f, &E), DP_EINVAL);
    fl_dataset_free(&ds);
}

static void federate_and_synth_out_of_memory_fail_cleanly(void **state)
{
    (void)state;
    fl_synth_spec s = synth_spec();
    fl_dataset ds;
    for (long k = 1;; k++) {
        dp_alloc_fail_after(k);
        dp_err_clear(&E);
        int rc = fl_synth_generate(&s, &ds, &E);
        dp_alloc_fail_after(0);
        if (rc == DP_OK)
            break;
        assert_int_equal(rc, DP_ENOMEM);
        assert_null(ds.x);
    }
    for (long k = 1;; k++) {
        fl_federation f;
        dp_alloc_fail_after(k);
        dp_err_clear(&E);
        int rc = fl_federate(&ds, ds.silo, ds.n_silos, 0.3, 1, true, &f, &E);
        dp_alloc_fail_after(0);
        if (rc == DP_OK) {
            fl_federation_free(&f);
            break;
        }
        assert_int_equal(rc, DP_ENOMEM);
        assert_null(f.silo);
    }
    uint32_t *a = malloc(ds.n * sizeof *a);
    for (long k = 1;; k++) {
        size_t n;
        fl_partition_spec p = {.kind = FL_PARTITION_IID, .silos = 3, .seed = 1};
        dp_alloc_fail_after(k);
        dp_err_clear(&E);
        int rc = fl_partition(&ds, &p, a, &n, &E);
        dp_alloc_fail_after(0);
        if (rc == DP_OK)
            break;
        assert_int_equal(rc, DP_ENOMEM);
    }
    free(a);
    fl_dataset_free(&ds);
}

/* The draws of a seeded generator, partition and split, recorded when they were written: a change
 * of stream, of draw order or of arithmetic would change stored jobs' data, so it must show here.
 */
static void seeded_outputs_are_pinned(void **state)
{
    (void)state;
    fl_synth_spec s = {.silos = 3,
                       .dim = 4,
                       .n_min = 5,
                       .n_max = 9,
                       .tau = 0.5,
                       .noise = 0.1,
                       .classes = 3,
                       .seed = 20261127};
    fl_dataset ds;
    assert_int_equal(fl_synth_generate(&s, &ds, &E), DP_OK);
    assert_int_equal(ds.n, 24);
    assert_true(ds.x[0] == 0x1.ac8674p+0f && ds.x[ds.n * 4 - 1] == 0x1.8bcbccp+0f);
    char got[32] = "";
    for (size_t i = 0; i < ds.n; i++)
        got[i] = (char)('0' + (int)ds.y[i]);
    assert_string_equal(got, "222202120012122022221012");
    uint32_t a[24];
    size_t k;
    fl_partition_spec p = {.kind = FL_PARTITION_IID, .silos = 3, .seed = 5};
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    for (size_t i = 0; i < ds.n; i++)
        got[i] = (char)('0' + a[i]);
    assert_string_equal(got, "221211200201100000211122");
    fl_federation f;
    assert_int_equal(fl_federate(&ds, ds.silo, 3, 0.3, 9, false, &f, &E), DP_OK);
    static const size_t n_test[3] = {3, 2, 2};
    static const float test0[3] = {0x1.866598p-3f, -0x1.1f708p-1f, -0x1.65085p+0f};
    for (size_t j = 0; j < 3; j++) {
        assert_int_equal(f.silo[j].n_test, n_test[j]);
        assert_true(f.silo[j].x_test[0] == test0[j]);
    }
    fl_federation_free(&f);
    fl_dataset_free(&ds);
}

/* rows_per_silo: one class per silo and a few rows each (Aldaghri et al.'s clients); the cap
 * keeps the partition's draws (silo k's class is the uncapped one's), keeps exactly the cap where a
 * silo has more, leaves the rest out of the federation, and is a function of the seed. Also under a
 * natural partition, whose silos keep their names. */
static void partition_rows_per_silo_caps_every_silo(void **state)
{
    (void)state;
    fl_dataset ds = make_ds(1000, 1, 10); /* 100 rows per class */
    uint32_t a[1000], b[1000], u[1000];
    size_t k;
    fl_partition_spec p = {
        .kind = FL_PARTITION_CLASSES, .silos = 20, .classes_per_silo = 1, .seed = 3};
    assert_int_equal(fl_partition(&ds, &p, u, &k, &E), DP_OK); /* uncapped: 50 rows a silo */
    p.rows_per_silo = 7;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    assert_int_equal(k, 20);
    size_t cnt[20] = {0}, dropped = 0;
    int cls[20];
    for (size_t s = 0; s < 20; s++)
        cls[s] = -1;
    for (size_t i = 0; i < 1000; i++) {
        if (a[i] == FL_ROW_DROPPED) {
            dropped++;
            continue;
        }
        assert_int_equal(a[i], u[i]); /* a kept row stays in its silo */
        cnt[a[i]]++;
        assert_true(cls[a[i]] == -1 || cls[a[i]] == (int)ds.y[i]); /* still one class */
        cls[a[i]] = (int)ds.y[i];
    }
    for (size_t s = 0; s < 20; s++)
        assert_int_equal(cnt[s], 7);
    assert_int_equal(dropped, 1000 - 140);
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_equal(a, b, sizeof a);
    p.seed = 4;
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_not_equal(a, b, sizeof a);
    /* the federation holds the kept rows only */
    p.seed = 3;
    assert_int_equal(fl_partition(&ds, &p, a, &k, &E), DP_OK);
    fl_federation f;
    assert_int_equal(fl_federate(&ds, a, k, 0.2, 1, false, &f, &E), DP_OK);
    for (size_t s = 0; s < 20; s++) {
        assert_int_equal(f.silo[s].n_train + f.silo[s].n_test, 7);
        for (size_t i = 0; i < f.silo[s].n_train; i++)
            assert_int_equal(a[(size_t)f.silo[s].x_train[i]], s); /* x[i][0] = i */
    }
    fl_federation_free(&f);
    /* a cap above every silo's size changes nothing */
    p.rows_per_silo = 50;
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_OK);
    assert_memory_equal(u, b, sizeof u);
    p.rows_per_silo = FL_MAX_ROWS_PER_SILO + 1;
    dp_err_clear(&E);
    assert_int_equal(fl_partition(&ds, &p, b, &k, &E), DP_EINVAL);
    assert_string_equal(E.field, "partition");
    fl_dataset_free(&ds);
    /* natural: 6 synthetic silos of 20..40 rows capped at 9, names kept */
    fl_synth_spec sp = synth_spec();
    assert_int_equal(fl_synth_generate(&sp, &ds, &E), DP_OK);
    uint32_t *n = malloc(ds.n * sizeof *n);
    fl_partition_spec q = {.kind = FL_PARTITION_NATURAL, .seed = 5, .rows_per_silo = 9};
    assert_int_equal(fl_partition(&ds, &q, n, &k, &E), DP_OK);
    assert_int_equal(k, 6);
    assert_int_equal(fl_federate(&ds, n, k, 0.0, 1, false, &f, &E), DP_OK);
    for (size_t s = 0; s < 6; s++) {
        assert_int_equal(f.silo[s].n_train, 9);
        assert_string_equal(f.silo[s].name, ds.silo_names[s]);
    }
    fl_federation_free(&f);
    free(n);
    fl_dataset_free(&ds);
}

int main(void)
{
    gsl_set_error_handler_off(); /* as dpsilod does: GSL must return errors, not abort */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(synth_rejects_each_bad_field),
        cmocka_unit_test(synth_is_deterministic_by_seed),
        cmocka_unit_test(synth_silos_are_sized_named_and_ordered),
        cmocka_unit_test(synth_rows_are_standard_normal),
        cmocka_unit_test(synth_tau_zero_gives_every_silo_one_model),
        cmocka_unit_test(synth_classification_labels),
        cmocka_unit_test(csv_parses_a_small_table),
        cmocka_unit_test(csv_reads_quotes_crlf_bom_and_trailing_lines),
        cmocka_unit_test(csv_reports_each_error_at_its_line_and_column),
        cmocka_unit_test(csv_refuses_more_silos_than_the_limit),
        cmocka_unit_test(csv_counts_classes_by_the_header_rule),
        cmocka_unit_test(csv_random_tables_round_trip),
        cmocka_unit_test(csv_numbers_match_strtod),
        cmocka_unit_test(csv_out_of_memory_fails_cleanly),
        cmocka_unit_test(csv_reads_the_school_file_when_given),
        cmocka_unit_test(idx_reads_plain_and_gzip_files),
        cmocka_unit_test(idx_refuses_malformed_files),
        cmocka_unit_test(idx_loads_fashion_mnist_t10k_when_installed),
        cmocka_unit_test(partition_natural_uses_the_silo_column),
        cmocka_unit_test(partition_iid_deals_near_equal_silos),
        cmocka_unit_test(partition_dirichlet_skews_with_small_alpha),
        cmocka_unit_test(partition_dirichlet_refuses_what_it_cannot_do),
        cmocka_unit_test(partition_classes_gives_each_silo_its_classes),
        cmocka_unit_test(partition_rows_per_silo_caps_every_silo),
        cmocka_unit_test(federate_splits_every_row_once),
        cmocka_unit_test(federate_standardizes_on_the_training_part),
        cmocka_unit_test(federate_is_deterministic_by_seed_and_names_natural_silos),
        cmocka_unit_test(federate_refuses_bad_arguments),
        cmocka_unit_test(federate_and_synth_out_of_memory_fail_cleanly),
        cmocka_unit_test(seeded_outputs_are_pinned),
        cmocka_unit_test(federate_caches_row_norms_and_refresh_recomputes_them),
    };
    return cmocka_run_group_tests_name("federated_fl_data", tests, NULL, NULL);
}
