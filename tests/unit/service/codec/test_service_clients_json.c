/*
 * Unit tests for service/codec/clients_json.c: every body gets what
 * json_loadb(body, len, JSON_REJECT_DUPLICATES) gives (the same tree once the clients are put
 * back, or the same error text, line, column and position), the spans are used whenever the body
 * has a plain "clients" array, the dumps equal jansson's, and a differential run over random and
 * mutated bodies finds no difference.
 */
#include "tests/support/json_text.h"
#include "tests/support/test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/codec/clients_json.h"

/* Checks the dumps of (rest, cj) against jansson's dumps of the whole tree ref. */
static void check_dumps(const json_t *rest, const clients_json *cj, const json_t *ref)
{
    static const size_t FLAGS[] = {JSON_COMPACT | JSON_SORT_KEYS,
                                   JSON_COMPACT,
                                   0,
                                   JSON_SORT_KEYS | JSON_ENSURE_ASCII,
                                   JSON_COMPACT | JSON_ESCAPE_SLASH,
                                   JSON_COMPACT | JSON_REAL_PRECISION(5)};
    for (size_t f = 0; f < sizeof FLAGS / sizeof FLAGS[0]; f++) {
        sbuf b = {0};
        assert_int_equal(clients_json_dump_body(rest, cj, FLAGS[f], sbuf_cb, &b), 0);
        char *want = json_dumps(ref, FLAGS[f]);
        assert_non_null(want);
        assert_string_equal(b.p, want);
        free(want);
        free(b.p);
        char *arr = clients_json_dumps(cj, FLAGS[f]);
        want = json_dumps(json_object_get(ref, "clients"), FLAGS[f]);
        assert_non_null(arr);
        assert_string_equal(arr, want);
        free(arr);
        free(want);
    }
}

/* Loads text[0, len) both ways and asserts the same outcome. Returns 1 when the spans were used,
 * 0 for the tree path, -1 for an error (the same error both ways). */
static size_t n_flat;     /* elements read by clients_json_flat_get, over all checks */
static size_t n_flat_str; /* string members among them */

static int check_same(const char *text, size_t len, int dumps)
{
    json_error_t rerr, gerr;
    memset(&rerr, 0, sizeof rerr);
    memset(&gerr, 0, sizeof gerr);
    json_t *ref = json_loadb(text, len, JSON_REJECT_DUPLICATES, &rerr);
    char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, text, len);
    clients_json *cj = (clients_json *)1;
    json_t *got = clients_json_load(buf, len, &cj, &gerr);
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
    int streamed = cj != NULL;
    if (cj == NULL) {
        assert_true(json_equal(got, ref));
    } else {
        const json_t *rc = json_object_get(ref, "clients");
        assert_true(json_is_array(rc));
        assert_true(json_is_array(json_object_get(got, "clients")));
        assert_int_equal(json_array_size(json_object_get(got, "clients")), 0);
        assert_int_equal(clients_json_count(cj), json_array_size(rc));
        json_t *whole = json_copy(got);
        json_t *arr = json_array();
        size_t n_id = 0, n_silo = 0;
        for (size_t i = 0; i < clients_json_count(cj); i++) {
            json_t *e = clients_json_get(cj, i);
            assert_non_null(e);
            assert_true(json_equal(e, json_array_get(rc, i)));
            clients_json_flat f; /* the flat reader, when it reads one, agrees with jansson */
            if (clients_json_flat_get(cj, i, &f) == 0) {
                assert_true(json_is_object(e));
                assert_int_equal(json_object_size(e), f.n);
                for (size_t k = 0; k < f.n; k++) {
                    char key[64];
                    assert_true(f.m[k].key_len < sizeof key);
                    memcpy(key, f.m[k].key, f.m[k].key_len);
                    key[f.m[k].key_len] = '\0';
                    const json_t *v = json_object_get(e, key);
                    if (f.m[k].is_str) { /* the body's text is jansson's string and its dump */
                        assert_true(json_is_string(v));
                        assert_int_equal(json_string_length(v), f.m[k].text_len);
                        assert_memory_equal(json_string_value(v), f.m[k].text, f.m[k].text_len);
                        char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        assert_non_null(d);
                        assert_int_equal(strlen(d), f.m[k].text_len + 2);
                        assert_memory_equal(d, f.m[k].text - 1, f.m[k].text_len + 2);
                        free(d);
                        n_flat_str++;
                        continue;
                    }
                    assert_true(json_is_number(v));
                    assert_true(json_number_value(v) == f.m[k].v);
                    assert_int_equal(json_is_integer(v), f.m[k].is_int);
                    assert_true(f.m[k].text_len > 0 && f.m[k].text_len < 64);
                    char tok[64]; /* the token's text is the number's */
                    memcpy(tok, f.m[k].text, f.m[k].text_len);
                    tok[f.m[k].text_len] = '\0';
                    assert_true(strtod(tok, NULL) == f.m[k].v);
                }
                clients_json_flat g; /* peek: the same members and texts */
                assert_int_equal(clients_json_flat_peek(cj, i, &g), 0);
                assert_int_equal(g.n, f.n);
                for (size_t k = 0; k < f.n; k++) {
                    assert_ptr_equal(g.m[k].text, f.m[k].text);
                    assert_int_equal(g.m[k].text_len, f.m[k].text_len);
                    assert_int_equal(g.m[k].is_str, f.m[k].is_str);
                    assert_int_equal(g.m[k].is_int, f.m[k].is_int);
                }
                n_flat++;
            }
            n_id += json_is_object(e) && json_object_get(e, "id") != NULL;
            n_silo += json_is_object(e) && json_object_get(e, "silo_id") != NULL;
            assert_int_equal(json_array_append_new(arr, e), 0);
        }
        assert_int_equal(clients_json_count_with(cj, "id"), n_id);
        assert_int_equal(clients_json_count_with(cj, "silo_id"), n_silo);
        assert_int_equal(clients_json_count_with(cj, "mean"), SIZE_MAX);
        assert_int_equal(json_object_set_new(whole, "clients", arr), 0);
        assert_true(json_equal(whole, ref));
        if (dumps)
            check_dumps(got, cj, ref);
        json_decref(whole);
        /* a second reference outlives the first */
        assert_ptr_equal(clients_json_incref(cj), cj);
        clients_json_decref(cj);
        assert_int_equal(clients_json_count(cj), json_array_size(rc));
        clients_json_decref(cj);
    }
    json_decref(got);
    json_decref(ref);
    return streamed;
}

static int check_str(const char *s)
{
    return check_same(s, strlen(s), 1);
}

static void valid_bodies_use_spans_and_equal_jansson(void **state)
{
    (void)state;
    static const char *const BODIES[] = {
        "{\"clients\":[{\"mean\":0.5,\"n\":5},{\"mean\":-1e-3,\"n\":7}],\"noise_variance\":1}",
        " \t\r\n{ \"noise_variance\" : 2 ,\r\n \"clients\" :\n[ { \"mean\" : [1, 2.5] , \"n\" : 3 }"
        "\t,\n{\"mean\":[3,4],\"n\":3} ] , \"seed\": 7 }\n\t ",
        "{\"clients\":[]}",
        "{\"clients\":[1, \"two\", null, true, false, [3], {\"a\":{\"b\":[{}]}}, -0, 0.0]}",
        /* escaped strings in keys and values, outside and inside the array */
        "{\"a\\\"b\":1,\"k\\u00e9y\\n\":\"v\\\\\",\"clients\":[{\"i\\u0064\":\"x\\\"]}\","
        "\"silo_id\":3,\"m\\/\":\"\\ud83d\\ude00\"}]}",
        /* brackets and braces inside strings do not end an element */
        "{\"clients\":[{\"id\":\"]}[{,\",\"n\":1},{\"id\":\"\\\\\",\"n\":2}]}",
        /* UTF-8 as is, in keys and values */
        "{\"clients\":[{\"id\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}],"
        "\"\xc3\xa9t\xc3\xa9\":\"\xe2\x82\xac\"}",
        /* huge and tiny numbers that jansson accepts: int64 edges, subnormal, underflow to 0 */
        "{\"clients\":[{\"n\":9223372036854775807},{\"n\":-9223372036854775808},"
        "{\"mean\":1.7976931348623157e308},{\"mean\":4.9e-324},{\"mean\":1e-400},"
        "{\"mean\":123456789012345678901234567890.5}]}",
        "{\"prior\":{\"clients\":[1]},\"clients\":[{\"n\":1}]}",
        "{\"clients\":[{\"silo_id\":1,\"id\":2},{\"silo_id\":2},{\"n\":3}],\"keep_data\":true}",
        /* plain string members (read flat), and strings the flat reader leaves to jansson */
        "{\"clients\":[{\"id\":\"c1\",\"mean\":0.5,\"n\":5},{\"id\":\"a/b <x> ~!\",\"n\":1},"
        "{\"id\":\"\",\"n\":2},{\"id\":-0,\"n\":2},{\"id\":\"\\u0041\"},"
        "{\"id\":\"\x7f\"},{\"id\":\"caf\xc3\xa9\"}]}",
    };
    for (size_t i = 0; i < sizeof BODIES / sizeof BODIES[0]; i++)
        if (check_str(BODIES[i]) != 1)
            fail_msg("body %zu did not use the spans: %s", i, BODIES[i]);
    assert_true(n_flat_str >= 4); /* plain strings were read flat and compared */
}

static void unusual_bodies_take_the_tree_path_unchanged(void **state)
{
    (void)state;
    static const char *const BODIES[] = {
        "{\"cl\\u0069ents\":[{\"n\":1}]}", /* an escaped key is not recognised */
        "{\"clients\":5}",
        "{\"clients\":null,\"x\":[1]}",
        "{\"clients\":{\"a\":1}}",
        "{}",
        "{\"noise_variance\":1}",
        "[{\"clients\":[1]}]",
        "{\"clientsX\":[1],\"client\":[2]}",
    };
    for (size_t i = 0; i < sizeof BODIES / sizeof BODIES[0]; i++)
        if (check_str(BODIES[i]) != 0)
            fail_msg("body %zu: expected the tree path: %s", i, BODIES[i]);
    assert_int_equal(check_same("", 0, 1), -1);
    assert_int_equal(check_same("   ", 3, 1), -1);
}

static void every_error_is_jansson_s(void **state)
{
    (void)state;
    static const char *const BODIES[] = {
        "{\"clients\":[{\"n\":1}]} x",                     /* trailing garbage */
        "{\"clients\":[{\"n\":1}]}}",                      /* */
        "{\"clients\":[{\"n\":1}{\"n\":2}]}",              /* missing comma */
        "{\"clients\":[{\"n\":1},]}",                      /* trailing comma */
        "{\"clients\":[,{\"n\":1}]}",                      /* */
        "{\"clients\":[1 2]}",                             /* */
        "{\"clients\":[{\"n\":1,\"n\":2}]}",               /* duplicate key in a client */
        "{\"clients\":[{\"a\":{\"b\":1,\"b\":2}}]}",       /* duplicate key, nested */
        "{\"clients\":[],\"clients\":[]}",                 /* duplicate clients */
        "{\"clients\":[],\"cl\\u0069ents\":[]}",           /* duplicate, escaped */
        "{\"seed\":1,\"clients\":[{\"n\":1}],\"seed\":2}", /* duplicate key in the rest */
        "{\"clients\":[{\"id\":\"\xff\"}]}",               /* invalid UTF-8 in a client */
        "{\"clients\":[{\"id\":\"\xc3\"}]}",               /* truncated sequence */
        "{\"clients\":[{\"id\":\"\xed\xa0\x80\"}]}",       /* encoded surrogate */
        "{\"x\":\"\xfe\",\"clients\":[{\"n\":1}]}",        /* invalid UTF-8 in the rest */
        "{\"clients\":[{\"id\":\"\\ud800\"}]}",            /* lone surrogate escape */
        "{\"clients\":[{\"id\":\"\\u0000\"}]}",            /* NUL escape without ALLOW_NUL */
        "{\"clients\":[{\"i\\u0000d\":1}]}",               /* NUL in a key */
        "{\"clients\":[{\"id\":\"a\tb\"}]}",               /* control character */
        "{\"clients\":[{\"id\":\"\\x\"}]}",                /* invalid escape */
        "{\"clients\":[{\"n\":9223372036854775808}]}",     /* too big integer */
        "{\"clients\":[{\"n\":-9223372036854775809}]}",    /* too big negative integer */
        "{\"clients\":[{\"mean\":1e400}]}",                /* real overflow */
        "{\"clients\":[{\"mean\":-1e400}]}",               /* */
        "{\"clients\":[{\"n\":01}]}",                      /* leading zero */
        "{\"clients\":[{\"n\":1.}]}",                      /* */
        "{\"clients\":[{\"n\":-}]}",                       /* */
        "{\"clients\":[{\"n\":+1}]}",                      /* */
        "{\"clients\":[{\"n\":NaN}]}",                     /* */
        "{\"clients\":[{\"n\":tru}]}",                     /* */
        "{\"clients\":[{\"n\":1]}",                        /* mismatched brackets */
        "{\"clients\":[{\"n\":[1}]}",                      /* */
        "{\"clients\":[{\"n\":1}",                         /* premature end */
        "{\"clients\":[{\"id\":\"abc",                     /* unterminated string */
        "{\"clients\":[{\"id\":\"abc\\",                   /* */
        "{\"clients\" [1]}",                               /* missing colon */
        "{clients:[1]}",                                   /* bare key */
        "{\"clients\":[1],}",                              /* */
        "{\"clients\":['a']}",                             /* */
        "{\"clients\":[1]\n\n  , \"x\": @}",               /* error after the array, lines */
        "{\"clients\":[\n{\"n\":1},\n{\"n\":2},\n{\"n\":\"\xff\"}]}", /* error on line 4 */
    };
    for (size_t i = 0; i < sizeof BODIES / sizeof BODIES[0]; i++)
        if (check_str(BODIES[i]) != -1)
            fail_msg("body %zu: expected an error: %s", i, BODIES[i]);
    /* a NUL byte inside the body (http/server.c refuses it first; the reader still agrees with
     * jansson) */
    static const char nul[] = "{\"clients\":[{\"n\":1}\0]}";
    check_same(nul, sizeof nul - 1, 1);
    static const char nul2[] = "{\"clients\":[{\"n\":2}]}\0";
    check_same(nul2, sizeof nul2 - 1, 1);
}

/* An element nested d levels deep: {"clients":[[[...1...]]]}. */
static char *nested(size_t d)
{
    char *s = malloc(2 * d + 32);
    assert_non_null(s);
    size_t k = 0;
    k += (size_t)sprintf(s, "{\"clients\":[");
    for (size_t i = 0; i < d; i++)
        s[k++] = '[';
    s[k++] = '1';
    for (size_t i = 0; i < d; i++)
        s[k++] = ']';
    strcpy(s + k, "]}");
    return s;
}

static void deep_nesting_agrees_at_every_depth(void **state)
{
    (void)state;
    /* jansson allows 2048 levels in all: the object and the array take 2 */
    static const size_t DEPTHS[] = {1, 2, 63, 64, 65, 100, 2045, 2046, 2047, 2048, 5000};
    for (size_t i = 0; i < sizeof DEPTHS / sizeof DEPTHS[0]; i++) {
        char *s = nested(DEPTHS[i]);
        int r = check_same(s, strlen(s), 0);
        if (DEPTHS[i] <= CLIENTS_JSON_MAX_DEPTH)
            assert_int_equal(r, 1); /* spans */
        else if (DEPTHS[i] <= 100)
            assert_int_equal(r, 0); /* the tree path, accepted */
        else if (DEPTHS[i] >= 2048)
            assert_int_equal(r, -1); /* jansson's limit, its error */
        else
            assert_int_not_equal(r, 1);
        free(s);
    }
}

/* ---- differential: random bodies and mutations of them ---- */

static void gen_string(sbuf *b)
{
    static const char *const S[] = {
        "\"id\"", "\"n\"",     "\"mean\"",        "\"silo_id\"",        "\"a\\\"b\"", "\"\\u00e9\"",
        "\"]}\"", "\"x\\\\\"", "\"caf\xc3\xa9\"", "\"\\ud83d\\ude00\"", "\"\"",       "\"id\""};
    put(b, S[below(sizeof S / sizeof S[0])]);
}

static void gen_value(sbuf *b, int depth)
{
    static const char *const SCALARS[] = {"0",
                                          "-1",
                                          "2.385",
                                          "1e-3",
                                          "9223372036854775807",
                                          "-0.0",
                                          "true",
                                          "false",
                                          "null",
                                          "1E+2",
                                          "12345678901234567890.5",
                                          "1e-400",
                                          "123456789012345678",
                                          "-1234567890123456789",
                                          "0.1e1",
                                          "-0",
                                          "5E-324"};
    size_t kind = depth > 3 ? below(2) : below(5);
    if (kind == 0) {
        put(b, SCALARS[below(sizeof SCALARS / sizeof SCALARS[0])]);
    } else if (kind == 1) {
        gen_string(b);
    } else if (kind == 2) {
        put(b, "[");
        size_t n = below(4);
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                put(b, ",");
            ws(b);
            gen_value(b, depth + 1);
            ws(b);
        }
        put(b, "]");
    } else {
        put(b, "{");
        size_t n = below(4);
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                put(b, ",");
            ws(b);
            gen_string(b);
            ws(b);
            put(b, ":");
            ws(b);
            gen_value(b, depth + 1);
        }
        put(b, "}");
    }
}

static void gen_body(sbuf *b)
{
    static const char *const KEYS[] = {"\"noise_variance\"", "\"seed\"",          "\"prior\"",
                                       "\"keep_data\"",      "\"cl\\u0069ents\"", "\"clients\""};
    put(b, "{");
    ws(b);
    size_t n = 1 + below(4), at = below(n);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            put(b, ",");
            ws(b);
        }
        if (i == at) {
            put(b, "\"clients\"");
            ws(b);
            put(b, ":");
            ws(b);
            put(b, "[");
            size_t m = below(6);
            for (size_t j = 0; j < m; j++) {
                if (j > 0)
                    put(b, ",");
                ws(b);
                if (below(4) == 0)
                    gen_value(b, 2);
                else { /* a client-like object */
                    put(b, "{\"n\":");
                    put(b, below(2) ? "5" : "2.5");
                    if (below(2))
                        put(b, ",\"id\":\"c\"");
                    if (below(3) == 0)
                        put(b, ",\"silo_id\":1");
                    put(b, "}");
                }
                ws(b);
            }
            put(b, "]");
        } else {
            put(b, KEYS[below(sizeof KEYS / sizeof KEYS[0])]);
            ws(b);
            put(b, ":");
            ws(b);
            gen_value(b, 1);
        }
        ws(b);
    }
    put(b, "}");
    ws(b);
}

/* One random edit of b: replace, delete or insert a byte (often a structural one), truncate, or
 * repeat a slice. */
static void mutate(sbuf *b)
{
    static const char BYTES[] = "{}[]\",:\\ 0-.eE\n\t\xff\xc3\x80u";
    if (b->len == 0)
        return;
    size_t at = below(b->len);
    switch (below(5)) {
        case 0:
            b->p[at] = below(2) ? BYTES[below(sizeof BYTES - 1)] : (char)(1 + below(255));
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
        case 3:
            b->len = at;
            b->p[at] = '\0';
            break;
        default: {
            size_t n = below(b->len - at) + 1;
            sbuf t = {0};
            assert_int_equal(sbuf_cb(b->p, at + n, &t), 0);
            assert_int_equal(sbuf_cb(b->p + at, b->len - at, &t), 0);
            free(b->p);
            *b = t;
        }
    }
}

static void random_and_mutated_bodies_agree_with_jansson(void **state)
{
    (void)state;
    rng_state = 0x2385u;
    size_t outcome[3] = {0, 0, 0};
    for (size_t i = 0; i < 4000; i++) {
        sbuf b = {0};
        gen_body(&b);
        size_t edits = i % 4 == 0 ? 0 : 1 + below(3);
        for (size_t k = 0; k < edits; k++)
            mutate(&b);
        outcome[check_same(b.p ? b.p : "", b.len, i % 8 == 0) + 1]++;
        free(b.p);
    }
    /* the run covered all three outcomes */
    print_message("errors %zu, tree path %zu, spans %zu, flat clients %zu\n", outcome[0],
                  outcome[1], outcome[2], n_flat);
    assert_true(n_flat > 50);       /* the flat reader was compared with jansson */
    assert_true(outcome[0] > 1000); /* errors */
    assert_true(outcome[1] > 20);   /* tree path */
    assert_true(outcome[2] > 400);  /* spans */
}

/* ---- malformed large bodies: the error without a tree. jansson's allocations are counted (a
 * header before each block holds its size) and the peak of live bytes during clients_json_load
 * must stay below the body's size: the whole body as a tree would take many times more. */

static size_t live_bytes, peak_bytes;

static void *count_malloc(size_t n)
{
    size_t *p = malloc(sizeof(size_t) * 2 + n);
    if (p == NULL)
        return NULL;
    p[0] = n;
    live_bytes += n;
    if (live_bytes > peak_bytes)
        peak_bytes = live_bytes;
    return p + 2;
}

static void count_free(void *q)
{
    if (q == NULL)
        return;
    size_t *p = (size_t *)q - 2;
    live_bytes -= p[0];
    free(p);
}

/* A body of n clients, one per line, with bad (text) as client k; tail after the array. */
static sbuf big_body(size_t n, size_t k, const char *bad, const char *tail)
{
    sbuf b = {0};
    put(&b, "{\"noise_variance\": 1,\n \"clients\": [\n");
    for (size_t i = 0; i < n; i++) {
        char t[96];
        if (i == k)
            snprintf(t, sizeof t, "%s%s\n", i ? "," : "", bad);
        else
            snprintf(t, sizeof t, "%s{\"id\": \"c\u00e9%zu\", \"mean\": %zu.5, \"n\": 5}\n",
                     i ? "," : "", i, i % 97);
        put(&b, t);
    }
    put(&b, "]");
    put(&b, tail);
    return b;
}

static void malformed_large_bodies_err_without_a_tree(void **state)
{
    (void)state;
    static const struct {
        size_t k;         /* the bad client (SIZE_MAX: none) */
        const char *bad;  /* its text */
        const char *tail; /* after the array */
        size_t cut;       /* cut the body to this fraction in percent (0: whole) */
    } CASES[] = {
        {12000, "{\"n\": 01}", "}", 0},                     /* a bad number in a client */
        {15000, "{\"id\": \"\xff\"}", "}", 0},              /* invalid UTF-8 in a client */
        {19999, "{\"n\": 1, \"n\": 2}", "}", 0},            /* duplicate key, last client */
        {7000, "{\"n\": tru}", "}", 0},                     /* a bad literal */
        {0, "{\"n\": [1}", "}", 0},                         /* mismatched brackets, first client */
        {SIZE_MAX, "", ",\n \"seed\": @}", 0},              /* the rest after the array */
        {SIZE_MAX, "", ",\n \"seed\": 1, \"seed\": 2}", 0}, /* duplicate key after the array */
        {SIZE_MAX, "", "}", 60},                            /* the body cut inside a client */
        {SIZE_MAX, "", "}", 99},                            /* */
    };
    json_set_alloc_funcs(count_malloc, count_free);
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        sbuf b = big_body(20000, CASES[c].k, CASES[c].bad, CASES[c].tail);
        if (CASES[c].cut != 0) {
            b.len = b.len * CASES[c].cut / 100;
            while (b.p[b.len - 1] == ',' || b.p[b.len - 1] == '\n' || b.p[b.len - 1] == '}')
                b.len--; /* inside a client, not at its edge */
            b.p[b.len] = '\0';
        }
        char *copy = malloc(b.len);
        assert_non_null(copy);
        memcpy(copy, b.p, b.len);
        clients_json *cj = NULL;
        json_error_t e;
        live_bytes = peak_bytes = 0;
        assert_null(clients_json_load(copy, b.len, &cj, &e));
        size_t peak = peak_bytes;
        assert_null(cj);
        free(copy);
        if (peak >= b.len)
            fail_msg("case %zu: jansson peaked at %zu bytes for a body of %zu (%s)", c, peak, b.len,
                     e.text);
        assert_int_equal(check_same(b.p, b.len, 0), -1); /* and it is jansson's error */
        free(b.p);
    }
    json_set_alloc_funcs(malloc, free);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_bodies_use_spans_and_equal_jansson),
        cmocka_unit_test(unusual_bodies_take_the_tree_path_unchanged),
        cmocka_unit_test(every_error_is_jansson_s),
        cmocka_unit_test(deep_nesting_agrees_at_every_depth),
        cmocka_unit_test(random_and_mutated_bodies_agree_with_jansson),
        cmocka_unit_test(malformed_large_bodies_err_without_a_tree),
    };
    return cmocka_run_group_tests_name("service_clients_json", tests, NULL, NULL);
}
