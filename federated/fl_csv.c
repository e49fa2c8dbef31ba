/*
 * fl_csv.c: the CSV reader of fl_data.h (fl_csv_parse).
 *
 * One pass over the text (RFC 4180, Shafranovich 2005, Sec. 2, with LF accepted as well as CRLF):
 * a lexer hands out cells (csv_next: the cell's bytes, the line it starts on, whether the record
 * ends after it), and the parser stores each cell where its column goes: a feature cell into row
 * n of x, the label into y, a silo name through a hash table of names seen so far (insertion
 * order = silo index, so natural silos come in order of first appearance). Unquoted cells point
 * into the caller's text; quoted ones are unescaped into a scratch buffer, and numbers are copied
 * into a second one to give strtod its terminating NUL (the text need not be NUL-terminated).
 *
 * Memory: x and y are sized once from the number of LFs in the text (an upper bound on the rows)
 * and shrunk at the end, so a 256 MiB body is never copied through doubling reallocations.
 * strtod reads numbers in the C locale: the library never calls setlocale, and the daemon keeps
 * the default "C" locale for LC_NUMERIC.
 */
#include "federated/fl_data.h"
#include "federated/fl_data_priv.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_alloc.h"

/* ---- a table of distinct strings, indexed in order of insertion (open addressing) ---- */
typedef struct strtab {
    char **names;    /* n NUL-terminated copies, owned */
    size_t *lens;    /* their lengths */
    size_t n, cap;   /* used and allocated entries of names and lens */
    uint32_t *slots; /* nslots entries: index + 1, or 0 for an empty slot */
    size_t nslots;   /* a power of two, at least twice n */
} strtab;

static uint64_t str_hash(const char *s, size_t len)
{
    /* FNV-1a, 64 bits (Fowler, Noll & Vo; the IETF draft draft-eastlake-fnv, Sec. 2) */
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static void strtab_free(strtab *t)
{
    fl_names_free(t->names, t->n);
    dp_free(t->lens);
    dp_free(t->slots);
    memset(t, 0, sizeof *t);
}

static int strtab_rehash(strtab *t, size_t nslots)
{
    uint32_t *slots = dp_calloc(nslots, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        size_t h = (size_t)str_hash(t->names[i], t->lens[i]) & (nslots - 1);
        while (slots[h] != 0)
            h = (h + 1) & (nslots - 1);
        slots[h] = (uint32_t)(i + 1);
    }
    dp_free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* *idx = the index of s[0..len) in t, adding it if new (*added). -1 when out of memory. */
static int strtab_intern(strtab *t, const char *s, size_t len, size_t *idx, bool *added)
{
    if (2 * (t->n + 1) > t->nslots && strtab_rehash(t, t->nslots ? 2 * t->nslots : 64) != 0)
        return -1;
    size_t h = (size_t)str_hash(s, len) & (t->nslots - 1);
    while (t->slots[h] != 0) {
        size_t i = t->slots[h] - 1;
        if (t->lens[i] == len && memcmp(t->names[i], s, len) == 0) {
            *idx = i;
            *added = false;
            return 0;
        }
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char **names = dp_realloc(t->names, cap * sizeof *names);
        if (names == NULL)
            return -1;
        t->names = names;
        size_t *lens = dp_realloc(t->lens, cap * sizeof *lens);
        if (lens == NULL)
            return -1;
        t->lens = lens;
        t->cap = cap;
    }
    char *copy = dp_malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    t->names[t->n] = copy;
    t->lens[t->n] = len;
    t->slots[h] = (uint32_t)(t->n + 1);
    *idx = t->n++;
    *added = true;
    return 0;
}

/* ---- the lexer ---- */
typedef struct csv_reader {
    const char *p, *end; /* the text not read yet */
    size_t line;         /* physical line of p, 1-based */
    char *buf;           /* the unescaped text of the last quoted cell; owned */
    size_t cap;          /* bytes allocated in buf */
} csv_reader;

typedef struct csv_cell {
    const char *s; /* its bytes (into the text or the reader's buf), not NUL-terminated */
    size_t len;
    size_t line; /* the line it starts on */
    bool last;   /* the record ends after it */
} csv_cell;

enum { LEX_OK = 0, LEX_NOMEM, LEX_UNCLOSED, LEX_AFTER_QUOTE, LEX_QUOTE_IN_CELL, LEX_LONE_CR };

static const char *lex_message(int rc)
{
    switch (rc) {
        case LEX_UNCLOSED:
            return "a quoted cell is not closed";
        case LEX_AFTER_QUOTE:
            return "a closing quote must be followed by a comma or the end of the line";
        case LEX_QUOTE_IN_CELL:
            return "a quote inside an unquoted cell (quote the cell and double its quotes)";
        case LEX_LONE_CR:
            return "a carriage return not followed by a line feed";
    }
    return "out of memory";
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *b = dp_realloc(*buf, c);
    if (b == NULL)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

/* A quoted cell: R->p is just past the opening quote. Leaves R->p after the closing quote. */
static int lex_quoted(csv_reader *R, csv_cell *c)
{
    size_t len = 0;
    const char *p = R->p;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(R->end - p));
        if (q == NULL)
            return LEX_UNCLOSED;
        size_t seg = (size_t)(q - p);
        if (grow(&R->buf, &R->cap, len + seg + 1) != 0)
            return LEX_NOMEM;
        memcpy(R->buf + len, p, seg);
        for (const char *t = memchr(p, '\n', seg); t != NULL;
             t = memchr(t + 1, '\n', (size_t)(q - t - 1)))
            R->line++;
        len += seg;
        p = q + 1;
        if (p < R->end && *p == '"') { /* a doubled quote stands for one */
            R->buf[len++] = '"';
            p++;
            continue;
        }
        break;
    }
    c->s = R->buf ? R->buf : "";
    c->len = len;
    R->p = p;
    return LEX_OK;
}

static int csv_next(csv_reader *R, csv_cell *c)
{
    c->line = R->line;
    if (R->p < R->end && *R->p == '"') {
        R->p++;
        int rc = lex_quoted(R, c);
        if (rc != LEX_OK)
            return rc;
    } else {
        const char *q = R->p;
        while (q < R->end && *q != ',' && *q != '\n' && *q != '\r' && *q != '"')
            q++;
        if (q < R->end && *q == '"')
            return LEX_QUOTE_IN_CELL;
        c->s = R->p;
        c->len = (size_t)(q - R->p);
        R->p = q;
    }
    const char *p = R->p;
    if (p == R->end) {
        c->last = true;
    } else if (*p == ',') {
        c->last = false;
        p++;
    } else if (*p == '\n') {
        c->last = true;
        p++;
        R->line++;
    } else if (*p == '\r' && (p + 1 == R->end || p[1] == '\n')) {
        c->last = true;
        p += p + 1 == R->end ? 1 : 2;
        R->line += p[-1] == '\n';
    } else {
        return *p == '\r' ? LEX_LONE_CR : LEX_AFTER_QUOTE;
    }
    R->p = p;
    return LEX_OK;
}

/* true when R->p starts an empty line (LF, CRLF, or a CR ending the text) */
static bool at_empty_line(const csv_reader *R)
{
    const char *p = R->p;
    return p < R->end && (*p == '\n' || (*p == '\r' && (p + 1 == R->end || p[1] == '\n')));
}

/* ---- numbers ---- */
enum { NUM_OK = 0, NUM_EMPTY, NUM_SYNTAX, NUM_RANGE, NUM_NOMEM };

/* Decimal only: the characters strtod accepts for a finite decimal number, so "nan", "inf" and
 * hexadecimal are refused before strtod sees them. */
static bool decimal_chars(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == '+' || ch == '-' || ch == 'e' ||
              ch == 'E'))
            return false;
    }
    return true;
}

/* Clinger's fast path (W. D. Clinger, "How to Read Floating Point Numbers Accurately", PLDI 1990,
 * Sec. 4): a decimal of at most 15 digits without exponent is m / 10^k with m < 2^53 and 10^k
 * exact (k <= 15), and one IEEE division of exact operands is correctly rounded, so the result is
 * strtod's bit for bit. Returns false (strtod decides) for anything else. */
static bool fast_decimal(const char *s, size_t len, double *out)
{
    static const double pow10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    size_t i = 0, digits = 0, frac = 0;
    bool neg = false, dot = false;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
    }
    uint64_t m = 0;
    for (; i < len; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') {
            if (++digits > 15)
                return false;
            m = m * 10 + (uint64_t)(ch - '0');
            frac += dot;
        } else if (ch == '.' && !dot) {
            dot = true;
        } else {
            return false;
        }
    }
    if (digits == 0)
        return false;
    double v = (double)m / pow10[frac];
    *out = neg ? -v : v;
    return true;
}

static int parse_number(const char *s, size_t len, char **tmp, size_t *tmp_cap, float *out)
{
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len == 0)
        return NUM_EMPTY;
    double fast;
    if (fast_decimal(s, len, &fast)) {
        *out = (float)fast; /* at most 15 digits: far inside the float range */
        return NUM_OK;
    }
    if (!decimal_chars(s, len))
        return NUM_SYNTAX;
    if (grow(tmp, tmp_cap, len + 1) != 0)
        return NUM_NOMEM;
    memcpy(*tmp, s, len);
    (*tmp)[len] = '\0';
    char *endp = NULL;
    errno = 0;
    double v = strtod(*tmp, &endp);
    if (endp != *tmp + len)
        return NUM_SYNTAX;
    /* ERANGE on underflow is accepted (the value rounds towards 0); overflow gives HUGE_VAL */
    if (!isfinite(v) || fabs(v) > (double)FLT_MAX)
        return NUM_RANGE;
    *out = (float)v;
    return NUM_OK;
}

/* ---- the parser ---- */
typedef struct csv_parse {
    csv_reader R;
    strtab cols;  /* the header's names */
    strtab silos; /* distinct silo values */
    size_t label_col, silo_col, n_cols;
    size_t *feature_of; /* per column: its feature index, or SIZE_MAX for label and silo */
    char *num;          /* number scratch; owned */
    size_t num_cap;
    size_t *line, *column;
    dp_err *err;
} csv_parse;

#define NO_COLUMN SIZE_MAX

/* Copies at most 40 bytes of s[0..len) into out (>= 48 bytes), control bytes and quotes as '?',
 * with "..." when cut. */
static void excerpt(char *out, const char *s, size_t len)
{
    size_t n = len > 40 ? 40 : len, o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[o++] = (ch < 0x20 || ch == 0x7f || ch == '"') ? '?' : (char)ch;
    }
    if (n < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* A cell error at (line, col) (col 0-based; named by its header when there is one). */
__attribute__((format(printf, 4, 5))) static int cell_error(csv_parse *P, size_t line, size_t col,
                                                            const char *fmt, ...)
{
    char detail[160], name[48] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    *P->line = line;
    *P->column = col + 1;
    if (col < P->cols.n) {
        excerpt(name, P->cols.names[col], P->cols.lens[col]);
        return dp_err_set(P->err, DP_EINVAL, "csv", "line %zu, column %zu (\"%s\"): %s", line,
                          col + 1, name, detail);
    }
    return dp_err_set(P->err, DP_EINVAL, "csv", "line %zu, column %zu: %s", line, col + 1, detail);
}

static int lex_error(csv_parse *P, int rc, size_t line, size_t col)
{
    if (rc == LEX_NOMEM)
        return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
    return cell_error(P, line, col, "%s", lex_message(rc));
}

/* The header's names into P->cols: non-empty, distinct. */
static int read_header(csv_parse *P)
{
    if (P->R.p == P->R.end || at_empty_line(&P->R))
        return cell_error(P, 1, 0, "the header line is empty");
    csv_cell c;
    for (size_t col = 0;; col++) {
        int rc = csv_next(&P->R, &c);
        if (rc != LEX_OK)
            return lex_error(P, rc, c.line, col);
        if (c.len == 0)
            return cell_error(P, c.line, col, "the column name is empty");
        if (memchr(c.s, '\0', c.len) != NULL)
            return cell_error(P, c.line, col, "the column name contains a NUL byte");
        size_t idx;
        bool added;
        if (strtab_intern(&P->cols, c.s, c.len, &idx, &added) != 0)
            return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
        if (!added) {
            char name[48];
            excerpt(name, c.s, c.len);
            return cell_error(P, c.line, col, "the column name \"%s\" repeats column %zu", name,
                              idx + 1);
        }
        if (c.last)
            break;
    }
    P->n_cols = P->cols.n;
    return DP_OK;
}

/* Finds the label and silo columns by name and maps the others to features in header order. */
static int find_columns(csv_parse *P, const char *label_col, const char *silo_col)
{
    P->label_col = P->silo_col = NO_COLUMN;
    for (size_t j = 0; j < P->n_cols; j++) {
        if (strcmp(P->cols.names[j], label_col) == 0)
            P->label_col = j;
        if (silo_col != NULL && strcmp(P->cols.names[j], silo_col) == 0)
            P->silo_col = j;
    }
    char want[48];
    if (P->label_col == NO_COLUMN) {
        excerpt(want, label_col, strlen(label_col));
        return dp_err_set(P->err, DP_EINVAL, "label",
                          "the label column \"%s\" is not in the header", want);
    }
    if (silo_col != NULL && P->silo_col == NO_COLUMN) {
        excerpt(want, silo_col, strlen(silo_col));
        return dp_err_set(P->err, DP_EINVAL, "silo", "the silo column \"%s\" is not in the header",
                          want);
    }
    size_t d = P->n_cols - 1 - (silo_col != NULL);
    if (d == 0)
        return dp_err_set(P->err, DP_EINVAL, "csv", "the CSV text has no feature column");
    P->feature_of = dp_malloc(P->n_cols * sizeof *P->feature_of);
    if (P->feature_of == NULL)
        return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
    for (size_t j = 0, f = 0; j < P->n_cols; j++)
        P->feature_of[j] = (j == P->label_col || j == P->silo_col) ? NO_COLUMN : f++;
    return DP_OK;
}

static int number_error(csv_parse *P, int rc, const csv_cell *c, size_t col)
{
    char v[48];
    excerpt(v, c->s, c->len);
    switch (rc) {
        case NUM_EMPTY:
            return cell_error(P, c->line, col, "the cell is empty");
        case NUM_SYNTAX:
            return cell_error(P, c->line, col, "\"%s\" is not a number", v);
        case NUM_RANGE:
            return cell_error(P, c->line, col, "\"%s\" is outside the range of a float", v);
    }
    return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
}

/* One cell of data row `row` in column col. */
static int store_cell(csv_parse *P, fl_dataset *out, const csv_cell *c, size_t col, size_t row)
{
    if (col == P->silo_col) {
        size_t idx;
        bool added;
        if (strtab_intern(&P->silos, c->s, c->len, &idx, &added) != 0)
            return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
        if (added && P->silos.n > FL_MAX_SILOS)
            return cell_error(P, c->line, col, "more than %d distinct silos", FL_MAX_SILOS);
        out->silo[row] = (uint32_t)idx;
        return DP_OK;
    }
    float v;
    int rc = parse_number(c->s, c->len, &P->num, &P->num_cap, &v);
    if (rc != NUM_OK)
        return number_error(P, rc, c, col);
    if (col == P->label_col)
        out->y[row] = v;
    else
        out->x[row * out->d + P->feature_of[col]] = v;
    return DP_OK;
}

/* The rest of the text, from an empty line: only more empty lines may follow. */
static int trailing_lines(csv_parse *P)
{
    size_t line = P->R.line;
    for (const char *p = P->R.p; p < P->R.end; p++)
        if (*p != '\n' && *p != '\r')
            return cell_error(P, line, 0, "the line is empty (empty lines may only end the text)");
    P->R.p = P->R.end;
    return DP_OK;
}

static int read_rows(csv_parse *P, fl_dataset *out, size_t max_rows)
{
    size_t row = 0;
    while (P->R.p < P->R.end) {
        if (at_empty_line(&P->R)) {
            int rc = trailing_lines(P);
            if (rc != DP_OK)
                return rc;
            break;
        }
        if (row == max_rows)
            return dp_err_set(P->err, DP_ETOOBIG, "csv", "the CSV text has more than %zu cells",
                              FL_MAX_CELLS);
        csv_cell c = {0};
        size_t col = 0;
        for (;; col++) {
            int rc = csv_next(&P->R, &c);
            if (rc != LEX_OK)
                return lex_error(P, rc, c.line, col);
            if (col >= P->n_cols)
                return cell_error(P, c.line, col, "the line has more fields than the header (%zu)",
                                  P->n_cols);
            rc = store_cell(P, out, &c, col, row);
            if (rc != DP_OK)
                return rc;
            if (c.last)
                break;
        }
        if (col + 1 < P->n_cols)
            return cell_error(P, c.line, col + 1,
                              "missing (the line has %zu fields, the header %zu)", col + 1,
                              P->n_cols);
        row++;
    }
    out->n = row;
    if (row == 0)
        return dp_err_set(P->err, DP_EINVAL, "csv", "the CSV text has no data rows");
    return DP_OK;
}

/* Sizes x, y and silo for at most the number of LFs + 1 rows (capped by FL_MAX_CELLS). */
static int alloc_rows(csv_parse *P, fl_dataset *out, size_t *max_rows)
{
    size_t rows = 1;
    for (const char *p = P->R.p; p < P->R.end; p++) {
        p = memchr(p, '\n', (size_t)(P->R.end - p));
        if (p == NULL)
            break;
        rows++;
    }
    if (rows > FL_MAX_CELLS / out->d)
        rows = FL_MAX_CELLS / out->d;
    *max_rows = rows;
    out->x = dp_malloc(rows * out->d * sizeof(float));
    out->y = dp_malloc(rows * sizeof(float));
    if (P->silo_col != NO_COLUMN)
        out->silo = dp_malloc(rows * sizeof(uint32_t));
    if (!out->x || !out->y || (P->silo_col != NO_COLUMN && !out->silo))
        return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
    return DP_OK;
}

/* Moves the names and silos into out and shrinks the arrays to n rows. */
static int finish(csv_parse *P, fl_dataset *out)
{
    out->feature_names = dp_calloc(out->d, sizeof(char *));
    if (out->feature_names == NULL)
        return dp_err_set(P->err, DP_ENOMEM, NULL, "out of memory reading a CSV text");
    for (size_t j = 0; j < P->n_cols; j++) {
        if (P->feature_of[j] == NO_COLUMN)
            continue;
        out->feature_names[P->feature_of[j]] = P->cols.names[j];
        P->cols.names[j] = NULL;
    }
    if (P->silo_col != NO_COLUMN) {
        out->n_silos = P->silos.n;
        out->silo_names = P->silos.names;
        P->silos.names = NULL;
        P->silos.n = 0;
    }
    /* Shrinking cannot lose data: a failed realloc keeps the larger block. */
    float *x = dp_realloc(out->x, out->n * out->d * sizeof(float));
    if (x != NULL)
        out->x = x;
    float *y = dp_realloc(out->y, out->n * sizeof(float));
    if (y != NULL)
        out->y = y;
    if (out->silo != NULL) {
        uint32_t *s = dp_realloc(out->silo, out->n * sizeof(uint32_t));
        if (s != NULL)
            out->silo = s;
    }
    out->n_classes = fl_labels_n_classes(out->y, out->n);
    return DP_OK;
}

int fl_csv_parse(const char *text, size_t len, const char *label_col, const char *silo_col,
                 fl_dataset *out, size_t *line, size_t *column, dp_err *err)
{
    size_t line_unused, column_unused;
    if (line == NULL)
        line = &line_unused;
    if (column == NULL)
        column = &column_unused;
    memset(out, 0, sizeof *out);
    *line = 0;
    *column = 0;
    if (label_col == NULL || *label_col == '\0')
        return dp_err_set(err, DP_EINVAL, "label", "the label column must be named");
    if (silo_col != NULL && *silo_col == '\0')
        silo_col = NULL;
    if (silo_col != NULL && strcmp(silo_col, label_col) == 0)
        return dp_err_set(err, DP_EINVAL, "silo", "the silo column cannot be the label column");
    csv_parse P = {.R = {text, text + len, 1, NULL, 0}, .line = line, .column = column, .err = err};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        P.R.p += 3; /* a UTF-8 byte-order mark */
    size_t max_rows = 0;
    int rc = read_header(&P);
    if (rc == DP_OK)
        rc = find_columns(&P, label_col, silo_col);
    if (rc == DP_OK) {
        out->d = P.n_cols - 1 - (silo_col != NULL);
        rc = alloc_rows(&P, out, &max_rows);
    }
    if (rc == DP_OK)
        rc = read_rows(&P, out, max_rows);
    if (rc == DP_OK)
        rc = finish(&P, out);
    strtab_free(&P.cols);
    strtab_free(&P.silos);
    dp_free(P.feature_of);
    dp_free(P.R.buf);
    dp_free(P.num);
    if (rc != DP_OK)
        fl_dataset_free(out);
    return rc;
}
