/*
 * Unit tests for service/auth.c and the ledger's access rules, calling the route handlers directly
 * (no socket): bearer parsing, 401 without or with an unknown token, 403 with another silo's token,
 * admin-only endpoints, --auth off only on loopback, and the admin token file (generated once, mode
 * 0600, read back unchanged).
 */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dp_log.h"
#include "service/auth.h"
#include "service/cfg.h"
#include "service/routes.h"
#include "tests/unit/ledger_fixture.h"

typedef struct fx {
    ledger_fixture f; /* f.r.c: default configuration */
    char admin[LEDGER_TOKEN_BUF];
} fx;

static int setup(void **state)
{
    fx *x = calloc(1, sizeof *x);
    if (x == NULL || ledger_fixture_open(&x->f) != 0)
        return -1;
    dp_err e;
    dp_err_clear(&e);
    int64_t id;
    if (ledger_token_generate(x->admin, &e) != DP_OK ||
        ledger_token_register_admin(x->f.l, x->admin, &id, &e) != DP_OK)
        return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    ledger_fixture_close(&x->f);
    free(x);
    return 0;
}

/* Runs a handler with an optional bearer token, path parameter id and JSON body. */
static int call(fx *x, route_fn fn, const char *token, const char *id, const char *body_json,
                http_resp *rs, dp_err *e)
{
    http_param p = {"id", id};
    json_t *body = body_json ? json_loads(body_json, 0, NULL) : NULL;
    http_req rq = route_fixture_req(&x->f.r, "POST", "/test");
    rq.body = body;
    rq.params = id ? &p : NULL;
    rq.n_params = id ? 1 : 0;
    rq.bearer = token;
    rq.ledger = x->f.l;
    memset(rs, 0, sizeof *rs);
    dp_err_clear(e);
    int rc = fn(&rq, rs, e);
    json_decref(body);
    return rc;
}

static void bearer_header_is_parsed_strictly(void **state)
{
    (void)state;
    assert_string_equal(auth_bearer_from_header("Bearer abc"), "abc");
    assert_string_equal(auth_bearer_from_header("bearer   xyz"), "xyz");
    assert_null(auth_bearer_from_header(NULL));
    assert_null(auth_bearer_from_header("Basic dXNlcjpwYXNz"));
    assert_null(auth_bearer_from_header("Bearer "));
    char longtok[AUTH_TOKEN_MAX + 16] = "Bearer ";
    memset(longtok + 7, 'a', AUTH_TOKEN_MAX + 1);
    longtok[7 + AUTH_TOKEN_MAX + 1] = '\0';
    assert_null(auth_bearer_from_header(longtok));
}

static void tokens_cannot_cross_silos(void **state)
{
    fx *x = *state;
    http_resp rs;
    dp_err e;
    const char *create = "{\"name\":\"a\",\"budget\":{\"epsilon\":2,\"delta\":1e-5}}";
    assert_int_equal(call(x, route_silos_create, NULL, NULL, create, &rs, &e), DP_EUNAUTH);
    assert_int_equal(call(x, route_silos_create, "dps_wrong", NULL, create, &rs, &e), DP_EUNAUTH);
    assert_int_equal(call(x, route_silos_create, x->admin, NULL, create, &rs, &e), DP_OK);
    assert_int_equal(rs.status, 201);
    char ta[LEDGER_TOKEN_BUF], tb[LEDGER_TOKEN_BUF];
    snprintf(ta, sizeof ta, "%s", json_string_value(json_object_get(rs.body, "token")));
    http_resp_clear(&rs);
    const char *create_b = "{\"name\":\"b\",\"budget\":{\"epsilon\":2,\"delta\":1e-5}}";
    assert_int_equal(call(x, route_silos_create, x->admin, NULL, create_b, &rs, &e), DP_OK);
    snprintf(tb, sizeof tb, "%s", json_string_value(json_object_get(rs.body, "token")));
    http_resp_clear(&rs);
    /* A silo token may not create silos, list them, patch or archive. */
    assert_int_equal(call(x, route_silos_create, ta, NULL, create, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silos_list, ta, NULL, NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_patch, ta, "1", "{\"name\":\"x\"}", &rs, &e),
                     DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_delete, ta, "1", NULL, &rs, &e), DP_EFORBIDDEN);
    /* Its own silo only. */
    assert_int_equal(call(x, route_silo_get, ta, "1", NULL, &rs, &e), DP_OK);
    http_resp_clear(&rs);
    assert_int_equal(call(x, route_silo_get, ta, "2", NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_get, tb, "1", NULL, &rs, &e), DP_EFORBIDDEN);
    const char *charge = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":4}}";
    assert_int_equal(call(x, route_silo_charge, tb, "1", charge, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_charges_list, tb, "1", NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_claim, tb, "1", charge, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_silo_charge, ta, "1", charge, &rs, &e), DP_OK);
    assert_int_equal(rs.status, 201);
    http_resp_clear(&rs);
    /* A batch with a silo token: only its own silo. */
    const char *batch = "{\"charges\":[{\"silo_id\":1,\"event\":{\"type\":\"zcdp\",\"rho\":0.001}},"
                        "{\"silo_id\":2,\"event\":{\"type\":\"zcdp\",\"rho\":0.001}}]}";
    assert_int_equal(call(x, route_charges_batch, ta, NULL, batch, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_charges_batch, x->admin, NULL, batch, &rs, &e), DP_OK);
    http_resp_clear(&rs);
    /* Claims follow their silo. */
    assert_int_equal(call(x, route_silo_claim, ta, "1", charge, &rs, &e), DP_OK);
    char cid[32];
    snprintf(cid, sizeof cid, "%lld",
             (long long)json_integer_value(json_object_get(rs.body, "id")));
    http_resp_clear(&rs);
    assert_int_equal(call(x, route_claim_get, tb, cid, NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_claim_commit, tb, cid, NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_claim_abort, tb, cid, NULL, &rs, &e), DP_EFORBIDDEN);
    assert_int_equal(call(x, route_claim_commit, ta, cid, NULL, &rs, &e), DP_OK);
    http_resp_clear(&rs);
    /* The actor of a charge is the token that made it. */
    ledger_principal pa;
    assert_int_equal(ledger_token_lookup(x->f.conn, ta, &pa, &e), DP_OK);
    ledger_charge_row *rows = NULL;
    size_t n = 0;
    ledger_charge_filter f = {.limit = 10, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    assert_int_equal(ledger_charges_list(x->f.conn, 1, &f, &rows, &n, &e), DP_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].actor_token_id, pa.token_id);
    assert_int_not_equal(rows[1].actor_token_id, pa.token_id); /* the admin's batch */
    assert_int_equal(rows[2].actor_token_id, pa.token_id);     /* the claim's commit */
    ledger_charge_rows_free(rows, n);
}

static void auth_off_treats_everyone_as_admin(void **state)
{
    fx *x = *state;
    x->f.r.c.auth_off = true;
    http_resp rs;
    dp_err e;
    assert_int_equal(call(x, route_silos_create, NULL, NULL,
                          "{\"name\":\"dev\",\"budget\":{\"private\":false}}", &rs, &e),
                     DP_OK);
    http_resp_clear(&rs);
}

static void auth_off_only_on_loopback(void **state)
{
    (void)state;
    cfg c;
    dp_err e;
    dp_err_clear(&e);
    char *ok[] = {"dpsilod", "--listen", "127.0.0.1:0", "--auth", "off"};
    assert_int_equal(cfg_parse(&c, 5, ok, NULL, &e), DP_OK);
    assert_true(c.auth_off);
    char *bad[] = {"dpsilod", "--listen", "0.0.0.0:8080", "--auth", "off"};
    assert_int_equal(cfg_parse(&c, 5, bad, NULL, &e), DP_EINVAL);
    assert_string_equal(e.field, "--auth");
    dp_err_clear(&e);
    char *typo[] = {"dpsilod", "--auth", "maybe"};
    assert_int_equal(cfg_parse(&c, 3, typo, NULL, &e), DP_EINVAL);
    assert_string_equal(e.field, "--auth");
    dp_err_clear(&e);
    char *on[] = {"dpsilod", "--listen", "0.0.0.0:8080", "--admin-token-file", "/x/y"};
    assert_int_equal(cfg_parse(&c, 5, on, NULL, &e), DP_OK);
    assert_false(c.auth_off);
    assert_string_equal(c.admin_token_file, "/x/y");
}

static void admin_token_file_is_made_once_with_mode_0600(void **state)
{
    fx *x = *state;
    char db[200], tok1[AUTH_TOKEN_MAX + 1], tok2[AUTH_TOKEN_MAX + 1], path[300];
    snprintf(db, sizeof db, "%s/other.db", x->f.r.dir);
    bool gen = false;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(
        auth_admin_token_prepare("", db, tok1, sizeof tok1, path, sizeof path, &gen, &e), DP_OK);
    assert_true(gen);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(
        auth_admin_token_prepare(NULL, db, tok2, sizeof tok2, path, sizeof path, &gen, &e), DP_OK);
    assert_false(gen);
    assert_string_equal(tok1, tok2);
    /* An explicit file wins; a too-short token is refused naming the flag. */
    char f2[300];
    snprintf(f2, sizeof f2, "%s/short.token", x->f.r.dir);
    FILE *fp = fopen(f2, "w");
    assert_non_null(fp);
    fputs("short\n", fp);
    fclose(fp);
    assert_int_equal(
        auth_admin_token_prepare(f2, db, tok2, sizeof tok2, path, sizeof path, &gen, &e),
        DP_EINVAL);
    assert_string_equal(e.field, "--admin-token-file");
    unlink(f2);
    snprintf(f2, sizeof f2, "%s/admin.token", x->f.r.dir);
    unlink(f2);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN); /* no start-up chatter from the store */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bearer_header_is_parsed_strictly),
        cmocka_unit_test_setup_teardown(tokens_cannot_cross_silos, setup, teardown),
        cmocka_unit_test_setup_teardown(auth_off_treats_everyone_as_admin, setup, teardown),
        cmocka_unit_test(auth_off_only_on_loopback),
        cmocka_unit_test_setup_teardown(admin_token_file_is_made_once_with_mode_0600, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("service_auth", tests, NULL, NULL);
}
