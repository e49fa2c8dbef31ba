/*
 * Unit tests for clients_json_load_numbers (service/codec/clients_json.h), the reader of
 * normal-means' "x" and "s" arrays straight from the body text (issue 15): every body gets what
 * json_loadb(body, len, JSON_REJECT_DUPLICATES) gives (the same tree once the arrays are put back,
 * bit-identical doubles, the same error text, line, column and position), the body's dump (the
 * idempotency hash's text) equals jansson's, the arrays are read without a tree whenever they are
 * plain arrays of numbers, and a differential run over random and mutated bodies finds no
 * difference.
 */
#include "tests/support/json_text.h"
#include "tests/support/test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/codec/clients_json.h"

static const char *const KEYS[] = {"x", "s"};

/* Loads text[0, len) both ways and asserts the same outcome. Returns -1 for an error (the same
 * both ways), else how many of "x" and "s" were read as numbers (0: the tree holds them). */
static int check_same(const char *text, size_t len)
{
    json_error_t rerr, gerr;
    memset(&rerr, 0, sizeof rerr);
    memset(&gerr, 0, sizeof gerr);
    json_t *ref = json_loadb(text, len, JSON_REJECT_DUPLICATES, &rerr);
    char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, text, len);
    clients_json *cj = (clients_json *)1;
    json_t *got = clients_json_load_numbers(buf, len, KEYS, 2, &cj, &gerr);
    if (cj == NULL)
        free(buf); /* not stolen */
    if (ref == NULL) {
        if (got != NULL)
            fail_msg("accepted what jansson refuses (%s): %.*s", rerr.text, (int)len, text);
        assert_null(cj);
        assert_string_equal(gerr.text, rerr.text);
        assert_int_equal(gerr.line, rerr.line);
        assert_int_equal(gerr.column, rerr.column);
        assert_int_equal(gerr.position, rerr.position);
        return -1;
    }
    if (got == NULL)
        fail_msg("refused (%s) what jansson accepts: %.*s", gerr.text, (int)len, text);
    int read = 0;
    json_t *whole = json_copy(got);
    assert_non_null(whole);
    for (size_t k = 0; k < 2; k++) {
        size_t n = 99;
        const double *v = clients_json_numbers(cj, KEYS[k], &n);
        if (v == NULL) {
            assert_int_equal(n, 0);
            continue;
        }
        read++;
        const json_t *ra = json_object_get(ref, KEYS[k]);
        assert_true(json_is_array(ra));
        assert_int_equal(json_array_size(ra), n);
        const json_t *ga = json_object_get(got, KEYS[k]);
        assert_true(json_is_array(ga));
        assert_int_equal(json_array_size(ga), 0);
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(ra, i);
            assert_true(json_is_number(e));
            double w = json_number_value(e);
            if (memcmp(&w, &v[i], sizeof w) != 0)
                fail_msg("%s[%zu]: %.17g, jansson %.17g: %.*s", KEYS[k], i, v[i], w, (int)len,
                         text);
        }
        assert_int_equal(json_object_set(whole, KEYS[k], (json_t *)ra), 0);
    }
    if (cj != NULL && clients_json_count(cj) > 0) { /* a "clients" array read as spans too */
        json_t *arr = json_array();
        for (size_t i = 0; i < clients_json_count(cj); i++)
            assert_int_equal(json_array_append_new(arr, clients_json_get(cj, i)), 0);
        assert_int_equal(json_object_set_new(whole, "clients", arr), 0);
    }
    if (!json_equal(whole, ref))
        fail_msg("the rest differs from jansson's tree: %.*s", (int)len, text);
    if (cj != NULL) { /* the dump (the idempotency hash's text) is jansson's, byte for byte */
        static const size_t FLAGS[] = {JSON_COMPACT | JSON_SORT_KEYS, 0, JSON_ENSURE_ASCII,
                                       JSON_COMPACT | JSON_REAL_PRECISION(5)};
        for (size_t f = 0; f < sizeof FLAGS / sizeof FLAGS[0]; f++) {
            sbuf b = {0};
            assert_int_equal(clients_json_dump_body(got, cj, FLAGS[f], sbuf_cb, &b), 0);
            char *want = json_dumps(ref, FLAGS[f]);
            assert_non_null(want);
            assert_string_equal(b.p, want);
            free(want);
            free(b.p);
        }
        clients_json_decref(cj);
    } else {
        assert_int_equal(read, 0);
    }
    json_decref(whole);
    json_decref(got);
    json_decref(ref);
    return read;
}

static int check_str(const char *s)
{
    return check_same(s, strlen(s));
}

/* One body {"x": [tok], "s": [tok, 1]} per token. */
static int check_token(const char *tok)
{
    sbuf b = {0};
    put(&b, "{\"prior_family\":\"npmle\",\"x\":[");
    put(&b, tok);
    put(&b, "],\"s\":[");
    put(&b, tok);
    put(&b, ",1]}");
    int r = check_same(b.p, b.len);
    free(b.p);
    return r;
}

static void edge_numbers_are_jansson_s_bit_for_bit(void **state)
{
    (void)state;
    static const char *const READ[] = {
        "0",
        "-0",   /* an integer: jansson gives +0 */
        "-0.0", /* a real: -0 */
        "0.0",
        "1e-320", /* subnormal */
        "4.9406564584124654e-324",
        "2.4703282292062328e-324", /* rounds up to the least subnormal */
        "2.4703282292062327e-324", /* rounds to 0 */
        "1e-400",
        "2.2250738585072011e-308",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "1.7976931348623158e308", /* still rounds to the largest double */
        "-1.7976931348623157E+308",
        "0.1000000000000000055511151231257827021181583404541015625",
        "3."
        "14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482"
        "53421170679",
        "1.00000000000000011102230246251565404236316680908203125", /* a tie: to even */
        "1.000000000000000111022302462515654042363166809082031250000000001",
        "123456789012345",
        "-999999999999999",
        "1E2",
        "1e+2",
        "0.5e-0",
        "100000000000000000000000.0",
        "9007199254740993.0",
        /* the edges of Clinger's fast path (15 digits, |exponent| <= 22) and just past them */
        "1e22",
        "1e23",
        "-1e-22",
        "1e-23",
        "123456789012345e-22",
        "123456789012345e7",
        "123456789012345e8",
        "1234567890123456e-5",
        "0.000000000000000000001",
        "0.0000000000000000000001234",
        "999999999999999.9",
        "0.299999999999999988897769753748434595763683319091796875",
        "-0e5",
        "0e-400",
        "1e0000000000000000000000000000000001",
        "1e-99999",
        "7.0e-10",
        "8.98846567431158e307",
    };
    for (size_t i = 0; i < sizeof READ / sizeof READ[0]; i++)
        if (check_token(READ[i]) != 2)
            fail_msg("not read as numbers: %s", READ[i]);
    /* jansson's own answer (a tree or its error), not read here */
    static const char *const TREE[] = {
        "9007199254740993",     /* more than 15 digits: the tree path */
        "-1234567890123456789", /* ditto */
        "1e400",                /* overflow: jansson's error */
        "-1.7976931348623159e308",
        "99999999999999999999", /* a too big integer: jansson's error */
        "NaN",
        "nan",
        "Infinity",
        "-Infinity",
        "inf",
        "+1",
        "0x10",
        "01",
        "-01",
        "1.",
        ".5",
        "1e",
        "1e+",
        "-",
        "1.5.3",
        "1,",
        ",1",
        "",
        "\"1\"",
        "null",
        "true",
        "[1]",
        "{}",
        "1 2",
        "0 x",
    };
    for (size_t i = 0; i < sizeof TREE / sizeof TREE[0]; i++)
        if (check_token(TREE[i]) > 0)
            fail_msg("read as numbers: %s", TREE[i]);
}

static void shapes_are_jansson_s(void **state)
{
    (void)state;
    assert_int_equal(check_str("{\"x\":[1,2.5,-3],\"s\":[1,1,1]}"), 2);
    assert_int_equal(check_str(" {\n\"s\" : [ 1 ,\t2 ] ,\"x\":[3,4] } \n"), 2);
    assert_int_equal(check_str("{\"x\":[1,2],\"s\":1}"), 1); /* s a number: the tree */
    assert_int_equal(check_str("{\"x\":[],\"s\":[]}"), 2);
    assert_int_equal(check_str("{\"x\":[1,2],\"s\":[1,\"a\"]}"), 0); /* the tree: s[1] named */
    assert_int_equal(check_str("{\"x\":[1,null],\"s\":[1,1]}"), 0);
    assert_int_equal(check_str("{\"x\":[1],\"grid\":[1,2],\"s\":[1]}"), 2);
    assert_int_equal(check_str("{\"prior_family\":\"npmle\"}"), 0);
    assert_int_equal(check_str("{\"\\u0078\":[1],\"s\":[1]}"), 1); /* an escaped key: the tree */
    assert_int_equal(check_str("{\"x\":[1],\"x\":[2]}"), -1);      /* duplicates */
    assert_int_equal(check_str("{\"x\":[1],\"\\u0078\":[2]}"), -1);
    assert_int_equal(check_str("{\"s\":1,\"s\":[2]}"), -1);
    assert_int_equal(check_str("{\"x\":[1,2]"), -1);
    assert_int_equal(check_str("{\"x\":[1,2]} x"), -1);
    assert_int_equal(check_str("{\"x\":[1,2,]}"), -1);
    assert_int_equal(check_str("{\"x\":[1 2]}"), -1);
    assert_int_equal(check_str("{\"x\":[1,2],}"), -1);
    assert_int_equal(check_str("{\"x\":[1e999]}"), -1);
    assert_int_equal(check_str("{\"x\":[1,2],\"s\":[1,2],\"clients\":[{\"n\":1}]}"), 2);
    assert_int_equal(check_str("[1,2]"), 0);
    assert_int_equal(check_str("{\"x\":[1,2"), -1);
    assert_int_equal(check_str("{\"x\":[1,2]"), -1);
}

/* ---- differential: random bodies and mutations of them ---- */

static void digits(sbuf *b, size_t n, int lead_nonzero)
{
    for (size_t i = 0; i < n; i++) {
        char c[2] = {(char)('0' + (i == 0 && lead_nonzero ? 1 + below(9) : below(10))), '\0'};
        put(b, c);
    }
}

/* A random JSON number token (long mantissas, large and small exponents), now and then a token
 * that is not one. */
static void gen_number(sbuf *b)
{
    static const char *const ODD[] = {"-0",       "1e-320", "1.7976931348623157e308",
                                      "NaN",      "+1",     "0x1F",
                                      "01",       "1e400",  "\"2\"",
                                      "null",     "1.",     "-",
                                      "Infinity", "[1]",    "5E-324"};
    if (below(50) == 0) {
        put(b, ODD[below(sizeof ODD / sizeof ODD[0])]);
        return;
    }
    if (below(2))
        put(b, "-");
    size_t nd = 1 + (below(4) == 0 ? below(40) : below(8));
    if (below(6) == 0)
        put(b, "0");
    else
        digits(b, nd, 1);
    if (nd > 15 || below(2)) { /* a longer integer is mostly jansson's "too big" error */
        put(b, ".");
        digits(b, 1 + (below(3) == 0 ? below(60) : below(17)), 0);
    }
    if (below(3) == 0) {
        static const char *const E[] = {"e", "E", "e+", "e-", "E-"};
        put(b, E[below(5)]);
        digits(b, below(8) == 0 ? 3 : 1 + below(2), 0);
    }
}

static void gen_array(sbuf *b)
{
    put(b, "[");
    size_t m = below(12);
    for (size_t j = 0; j < m; j++) {
        if (j > 0)
            put(b, ",");
        ws(b);
        gen_number(b);
        ws(b);
    }
    put(b, "]");
}

static void gen_body(sbuf *b)
{
    /* the last three repeat a key (often jansson's error) */
    static const char *const OTHER[] = {"\"prior_family\":\"npmle\"",
                                        "\"grid\":[1,2.5]",
                                        "\"mode\":\"estimate\"",
                                        "\"tol\":1e-8",
                                        "\"results\":\"summary\"",
                                        "\"s\":0.5",
                                        "\"\\u0073\":[1]",
                                        "\"x\":{\"a\":[1]}"};
    put(b, "{");
    ws(b);
    size_t n = 2 + below(4), first = below(5);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            put(b, ",");
            ws(b);
        }
        if (i < 2 && below(6) != 0) {
            put(b, (i == 0) != (below(16) == 0) ? "\"x\"" : "\"s\"");
            ws(b);
            put(b, ":");
            ws(b);
            gen_array(b);
        } else {
            put(b, below(8) == 0 ? OTHER[5 + below(3)] : OTHER[(first + i) % 5]);
        }
        ws(b);
    }
    put(b, "}");
    ws(b);
}

/* One random edit of b: replace, delete or insert a byte (often a structural or numeric one),
 * truncate. */
static void mutate(sbuf *b)
{
    static const char BYTES[] = "{}[]\",:\\ 0-+.eE1x\n";
    if (b->len == 0)
        return;
    size_t at = below(b->len);
    switch (below(4)) {
        case 0:
            b->p[at] = BYTES[below(sizeof BYTES - 1)];
            break;
        case 1:
            memmove(b->p + at, b->p + at + 1, b->len - at);
            b->len--;
            break;
        case 2: {
            char c[2] = {BYTES[below(sizeof BYTES - 1)], '\0'};
            sbuf t = {0};
            assert_int_equal(sbuf_cb(b->p, at, &t), 0);
            put(&t, c);
            assert_int_equal(sbuf_cb(b->p + at, b->len - at, &t), 0);
            free(b->p);
            *b = t;
            break;
        }
        default:
            b->len = at;
            b->p[at] = '\0';
    }
}

static void random_and_mutated_bodies_agree_with_jansson(void **state)
{
    (void)state;
    rng_state = 0x1515u;
    size_t outcome[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < 6000; i++) {
        sbuf b = {0};
        gen_body(&b);
        size_t edits = i % 3 == 0 ? 1 + below(2) : 0;
        for (size_t k = 0; k < edits; k++)
            mutate(&b);
        outcome[check_same(b.p ? b.p : "", b.len) + 1]++;
        free(b.p);
    }
    print_message("errors %zu, tree %zu, one array read %zu, both %zu\n", outcome[0], outcome[1],
                  outcome[2], outcome[3]);
    assert_true(outcome[0] > 300); /* errors */
    assert_true(outcome[1] > 100); /* the tree path */
    assert_true(outcome[2] > 300); /* one array read */
    assert_true(outcome[3] > 300); /* both */
}

/* A body without numeric keys asked for: clients_json_load's answer (no "clients": the tree). */
static void no_keys_is_clients_json_load(void **state)
{
    (void)state;
    const char *t = "{\"x\":[1,2],\"s\":[1,1]}";
    char *buf = strdup(t);
    assert_non_null(buf);
    clients_json *cj = (clients_json *)1;
    json_error_t je;
    json_t *got = clients_json_load_numbers(buf, strlen(t), NULL, 0, &cj, &je);
    assert_null(cj);
    assert_int_equal(json_array_size(json_object_get(got, "x")), 2);
    size_t n = 7;
    assert_null(clients_json_numbers(NULL, "x", &n));
    assert_int_equal(n, 0);
    json_decref(got);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edge_numbers_are_jansson_s_bit_for_bit),
        cmocka_unit_test(shapes_are_jansson_s),
        cmocka_unit_test(random_and_mutated_bodies_agree_with_jansson),
        cmocka_unit_test(no_keys_is_clients_json_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
