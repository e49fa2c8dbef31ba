/*
 * codec/run_rows.c: per-client result columns and their JSON rows. Contract in codec/run_rows.h.
 *
 * The number writer: |x| in [1e-11, 1e43) is scaled by an exact power of ten (10^k, |k| <= 27, is
 * exact in the x87 80-bit long double: 5^27 < 2^64) to y in [1e16, 1e17) with one rounding, so y
 * is within half an ulp (at most 2^-8, as y < 2^57) of x 10^k. Rounded to the nearest integer D,
 * with printf deciding where y's fraction is within 2^-8 of one half, D is the correctly rounded
 * 17-digit value: the digits of "%.17g", and 17 digits give any double back (Matula, "In-and-out
 * conversions", CACM 11(1), 1968). The text is jansson 2.14's for json_real (Debian 12's; a
 * jansson built with its shortest-digits printer writes other digits, and the unit test says so).
 * Other magnitudes, zero, and platforms whose long double is a plain double go through
 * snprintf("%.17g"). tests/unit/service/codec/test_service_run_rows.c compares the text with
 * jansson's and checks round trips on random bit patterns.
 */
#include "service/codec/run_rows.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_huge.h"

/* A text buffer of DP_HUGE_MIN bytes or more is on huge pages (common/dp_huge.h): the answer of
 * 10^6 clients is ~100 MB. Growth past it copies the text into a new such block (realloc would
 * move it off the 2 MB alignment); run_rows_write reserves the rest of its rows at once. */
int run_text_reserve(run_text *t, size_t extra)
{
    if (t->failed)
        return -1;
    if (t->s != NULL && t->cap - t->len > extra)
        return 0;
    size_t cap = t->cap ? t->cap : 1024;
    while (cap - t->len <= extra) {
        if (cap > SIZE_MAX / 2) {
            t->failed = true;
            return -1;
        }
        cap *= 2;
    }
    char *s;
    if (cap >= DP_HUGE_MIN) { /* a new block on huge pages, the text copied */
        s = dp_huge_alloc(cap);
        if (s == NULL) {
            t->failed = true;
            return -1;
        }
        if (t->s != NULL)
            memcpy(s, t->s, t->len + 1);
        free(t->s);
    } else {
        s = realloc(t->s, cap);
        if (s == NULL) {
            t->failed = true;
            return -1;
        }
    }
    if (t->s == NULL)
        s[0] = '\0';
    t->s = s;
    t->cap = cap;
    return 0;
}

/* "%.17g" as jansson writes a real (jsonp_dtostr): ".0" added when the text would read as an
 * integer, and the exponent without its "+" and leading zeros ("1e20", "2.5e-7"). */
static size_t fmt_slow(char *buf, double x)
{
    int n = snprintf(buf, RUN_ROWS_NUM_MAX - 2, "%.17g", x);
    if (n < 0)
        n = 0;
    if (strpbrk(buf, ".eE") == NULL) {
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    char *e = strchr(buf, 'e');
    if (e != NULL) {
        char *to = e + 1 + (e[1] == '-'), *from = e + 2; /* past the sign */
        while (*from == '0' && from[1] != '\0')
            from++;
        size_t rest = (size_t)(buf + n - from);
        memmove(to, from, rest + 1);
        n = (int)(to - buf) + (int)rest;
    }
    return (size_t)n;
}

/* The 8 decimal digits of x < 10^8 as ASCII, the first in the lowest byte (so that storing the word
 * on a little-endian machine writes them in order): x split into two groups of 4, each into two of
 * 2, each into two digits, all lanes of one 64-bit word at once. The quotients by 100 and by 10 are
 * multiplications and shifts, exact in these ranges: floor(v 10486 / 2^20) = floor(v / 100) for
 * v < 10^4 and floor(v 103 / 2^10) = floor(v / 10) for v < 100, and no lane's product reaches the
 * next lane (v 10486 < 2^27 in 32-bit lanes, v 103 < 2^14 in 16-bit lanes). */
static inline uint64_t digits8(uint32_t x)
{
    uint64_t v = (uint64_t)(x / 10000) | ((uint64_t)(x % 10000) << 32);
    uint64_t t = ((v * 10486) >> 20) & 0x0000007F0000007FULL;
    v = t | ((v - t * 100) << 16);
    t = ((v * 103) >> 10) & 0x000F000F000F000FULL;
    v = t | ((v - t * 10) << 8);
    v |= 0x3030303030303030ULL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

size_t run_rows_fmt_double(char *buf, double x)
{
    if (!isfinite(x)) {
        memcpy(buf, "null", 5);
        return 4;
    }
#if LDBL_MANT_DIG >= 64
    static const long double P10[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,
                                        1e7L,  1e8L,  1e9L,  1e10L, 1e11L, 1e12L, 1e13L,
                                        1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L,
                                        1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    double a = fabs(x);
    if (!(a >= 1e-11 && a < 1e43))
        return fmt_slow(buf, x);
    int b2;
    frexp(a, &b2);
    int e = (int)floor((double)(b2 - 1) * 0.30102999566398119521); /* floor(log10 a), or one less */
    long double y = 0;
    for (int tries = 0; tries < 4; tries++) {
        int k = 16 - e;
        if (k > 27 || k < -27)
            return fmt_slow(buf, x);
        y = k >= 0 ? (long double)a * P10[k] : (long double)a / P10[-k];
        if (y < 1e16L)
            e--;
        else if (y >= 1e17L)
            e++;
        else
            break;
    }
    if (!(y >= 1e16L && y < 1e17L))
        return fmt_slow(buf, x);
    /* y is x 10^k rounded once (10^k is exact in the 64-bit significand for k <= 27): within half
     * an ulp of y, at most 2^-8 in [10^16, 10^17). Where y's fraction is no farther than that from
     * one half, the rounding of the 17th digit is left to printf (exact, ties to even), so the
     * digits are always those of "%.17g" (0.8% of values go that way). */
    int64_t di = (int64_t)y; /* signed: one conversion instruction each way (y < 2^63) */
    long double frac = y - (long double)di; /* exact */
    if (fabsl(frac - 0.5L) <= 0x1p-8L)
        return fmt_slow(buf, x);
    uint64_t d = (uint64_t)di + (frac > 0.5L);
    if (d >= 100000000000000000ULL) { /* rounded up to 10^17 */
        d /= 10;
        e++;
    }
    /* the 17 digits: the first, then two groups of 8 as ASCII in one word each (digits8), stored
     * whole: byte-wise stores read back by wider loads stall on store forwarding */
    char dig[24];
    uint64_t hi8 = d / 100000000ULL, lo8 = d % 100000000ULL;
    dig[0] = (char)('0' + hi8 / 100000000ULL);
    uint64_t w1 = digits8((uint32_t)(hi8 % 100000000ULL)), w2 = digits8((uint32_t)lo8);
    memcpy(dig + 1, &w1, 8);
    memcpy(dig + 9, &w2, 8);
    int nd = 17;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    char *p = buf;
    if (x < 0)
        *p++ = '-';
    if (e < -4 || e >= 17) { /* as %g: d.ddd e XX */
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dig + 1, (size_t)nd - 1);
            p += nd - 1;
        }
        *p++ = 'e'; /* as jansson: no "+", no leading zero (1e20, 2.5e-7) */
        if (e < 0)
            *p++ = '-';
        int ae = e < 0 ? -e : e;
        if (ae >= 10)
            *p++ = (char)('0' + ae / 10);
        *p++ = (char)('0' + ae % 10);
    } else if (e >= 0) {
        for (int i = 0; i <= e; i++)
            *p++ = i < nd ? dig[i] : '0';
        *p++ = '.';
        if (nd > e + 1) {
            memcpy(p, dig + e + 1, (size_t)(nd - e - 1));
            p += nd - e - 1;
        } else {
            *p++ = '0';
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -e - 1; i++)
            *p++ = '0';
        memcpy(p, dig, (size_t)nd);
        p += nd;
    }
    *p = '\0';
    return (size_t)(p - buf);
#else
    return fmt_slow(buf, x);
#endif
}

int run_rows_add_field(run_rows *r, const char *name, size_t width, bool vec)
{
    size_t n = strlen(name);
    if (r->n_fields >= RUN_ROWS_MAX_FIELDS || n == 0 || n >= RUN_ROWS_NAME_MAX || width < 1 ||
        width > 1000000)
        return -1;
    run_field *f = &r->field[r->n_fields++];
    memcpy(f->name, name, n + 1);
    f->width = width;
    f->vec = vec;
    r->w += width;
    return 0;
}

int run_rows_alloc(run_rows *r, size_t m, run_ids ids)
{
    r->m = m;
    r->ids = ids;
    if (r->w == 0 || m > SIZE_MAX / sizeof(double) / r->w)
        return -1;
    size_t bytes = m * r->w * sizeof(double) + 1; /* 24 MB for 10^6 Gaussian clients */
    r->vals = dp_huge_alloc(bytes);
    if (r->vals == NULL)
        return -1;
    if (ids == RUN_IDS_TEXT) {
        r->id_off = dp_malloc((m + 1) * sizeof *r->id_off);
        if (r->id_off == NULL)
            return -1;
        r->id_off[0] = 0;
    }
    return 0;
}

int run_rows_push_id(run_rows *r, size_t i, const char *json, size_t len)
{
    if (r->ids != RUN_IDS_TEXT || i >= r->m || len > UINT32_MAX - r->id_len)
        return -1;
    if (r->id_cap - r->id_len < len) {
        size_t cap = r->id_cap ? r->id_cap : 4096;
        while (cap - r->id_len < len)
            cap *= 2;
        char *t = dp_realloc(r->id_text, cap);
        if (t == NULL)
            return -1;
        r->id_text = t;
        r->id_cap = cap;
    }
    memcpy(r->id_text + r->id_len, json, len);
    r->id_len += len;
    r->id_off[i + 1] = (uint32_t)r->id_len;
    return 0;
}

void run_text_append(run_text *t, const char *s, size_t n)
{
    if (run_text_reserve(t, n) != 0)
        return;
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* Appends n bytes (the caller reserved room). */
static void put(run_text *t, const char *s, size_t n)
{
    memcpy(t->s + t->len, s, n);
    t->len += n;
}

int run_rows_write(const run_rows *r, size_t from, size_t to, bool comma, bool with_position,
                   run_text *t)
{
    char num[RUN_ROWS_NUM_MAX];
    char pre[RUN_ROWS_MAX_FIELDS][RUN_ROWS_NAME_MAX + 8]; /* ,"name":[ of each field, once */
    size_t pre_len[RUN_ROWS_MAX_FIELDS];
    for (size_t f = 0; f < r->n_fields; f++)
        pre_len[f] = (size_t)snprintf(pre[f], sizeof pre[f], ",\"%s\":%s", r->field[f].name,
                                      r->field[f].vec ? "[" : "");
    if (run_text_reserve(t, 0) != 0)
        return -1;
    size_t len0 = t->len;
    for (size_t i = from; i < to; i++) {
        if (i == from + 256 &&
            to - i > 4096) { /* room for the rest at once, from the rows so far */
            size_t rest = (t->len - len0) / 256 * (to - i);
            if (run_text_reserve(t, rest + rest / 8) != 0)
                return -1;
        }
        size_t idl = r->ids == RUN_IDS_TEXT ? r->id_off[i + 1] - r->id_off[i] : 0;
        /* the largest a row can be: names, numbers, separators */
        size_t need = 64 + idl + r->n_fields * (RUN_ROWS_NAME_MAX + 8) + r->w * RUN_ROWS_NUM_MAX;
        if (run_text_reserve(t, need) != 0)
            return -1;
        if (comma || i > from)
            put(t, ",", 1);
        put(t, "{", 1);
        bool first = true;
        if (with_position) {
            put(t, num, (size_t)snprintf(num, sizeof num, "\"position\":%zu", r->base + i + 1));
            first = false;
        }
        if (r->ids == RUN_IDS_INDEX) {
            put(t, num,
                (size_t)snprintf(num, sizeof num, "%s\"id\":%zu", first ? "" : ",", r->base + i));
            first = false;
        } else if (r->ids == RUN_IDS_TEXT) {
            put(t, first ? "\"id\":" : ",\"id\":", first ? 5 : 6);
            put(t, r->id_text + r->id_off[i], idl);
            first = false;
        }
        const double *v = r->vals + i * r->w;
        for (size_t f = 0; f < r->n_fields; f++) {
            const run_field *fd = &r->field[f];
            put(t, pre[f] + (first ? 1 : 0), pre_len[f] - (first ? 1 : 0));
            first = false;
            for (size_t k = 0; k < fd->width; k++) {
                if (k > 0)
                    t->s[t->len++] = ',';
                t->len += run_rows_fmt_double(t->s + t->len, v[k]); /* room reserved above */
            }
            if (fd->vec)
                t->s[t->len++] = ']';
            v += fd->width;
        }
        put(t, "}", 1);
    }
    t->s[t->len] = '\0';
    return 0;
}

static const char *const IDS_NAME[] = {"none", "index", "text"};

#define DIGEST_PRIME UINT64_C(0x100000001b3)

/* FNV-1a over bytes, into h. */
static uint64_t digest_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * DIGEST_PRIME;
    return h;
}

void run_rows_digest(const run_rows *r, char hex[17])
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    uint64_t hdr[3] = {r->m, r->n_fields, r->w};
    h = digest_bytes(h, hdr, sizeof hdr);
    for (size_t f = 0; f < r->n_fields; f++) {
        uint64_t fw[2] = {r->field[f].width, r->field[f].vec};
        h = digest_bytes(h, r->field[f].name, strlen(r->field[f].name));
        h = digest_bytes(h, fw, sizeof fw);
    }
    /* the values a 64-bit word at a time, four independent lanes (a multiply's latency each) */
    uint64_t lane[4] = {h, h ^ 1, h ^ 2, h ^ 3};
    size_t n = r->m * r->w, i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, r->vals + i + k, sizeof w);
            lane[k] = (lane[k] ^ w) * DIGEST_PRIME;
        }
    for (; i < n; i++) {
        uint64_t w;
        memcpy(&w, r->vals + i, sizeof w);
        lane[0] = (lane[0] ^ w) * DIGEST_PRIME;
    }
    h = digest_bytes(lane[0], lane + 1, 3 * sizeof lane[0]);
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
}

char *run_rows_layout_text(const run_rows *r)
{
    json_t *f = json_array(), *o = NULL;
    for (size_t i = 0; f != NULL && i < r->n_fields; i++) {
        json_t *e = json_pack("{s:s, s:I, s:b}", "name", r->field[i].name, "width",
                              (json_int_t)r->field[i].width, "vector", r->field[i].vec);
        if (e == NULL || json_array_append_new(f, e) != 0) {
            json_decref(f);
            f = NULL;
        }
    }
    if (f != NULL)
        o = json_pack("{s:i, s:s, s:o}", "version", 1, "ids", IDS_NAME[r->ids], "fields", f);
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return t;
}

int run_rows_layout_parse(run_rows *r, const char *layout, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(layout, len, 0, &je);
    const char *ids = NULL;
    json_t *f = NULL;
    int version = 0, rc = -1;
    r->n_fields = 0;
    r->w = 0;
    if (o == NULL ||
        json_unpack(o, "{s:i, s:s, s:o}", "version", &version, "ids", &ids, "fields", &f) != 0 ||
        version != 1 || !json_is_array(f))
        goto out;
    r->ids = RUN_IDS_NONE;
    bool known = false;
    for (int i = 0; i < 3; i++)
        if (strcmp(ids, IDS_NAME[i]) == 0) {
            r->ids = (run_ids)i;
            known = true;
        }
    if (!known)
        goto out;
    for (size_t i = 0; i < json_array_size(f); i++) {
        const char *name = NULL;
        json_int_t width = 0;
        int vec = 0;
        if (json_unpack(json_array_get(f, i), "{s:s, s:I, s:b}", "name", &name, "width", &width,
                        "vector", &vec) != 0 ||
            width < 1 || run_rows_add_field(r, name, (size_t)width, vec != 0) != 0)
            goto out;
    }
    rc = r->n_fields > 0 ? 0 : -1;
out:
    json_decref(o);
    return rc;
}

void run_rows_clear(run_rows *r)
{
    if (r == NULL)
        return;
    dp_free(r->vals);
    dp_free(r->id_text);
    dp_free(r->id_off);
    memset(r, 0, sizeof *r);
}
