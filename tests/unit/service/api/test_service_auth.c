/*
 * Unit tests for service/api/auth.c and the ledger's access rules, calling the routes by method
 * and path (no socket; tests/support/service_fixture.h call_route): bearer parsing, 401 without or
 * with an unknown token, 403 with another silo's token, admin-only endpoints, --auth off only on
 * loopback, the admin token file (generated once, mode 0600, read back unchanged; refused when it
 * is a link, another user's or writable by others; its real mode reported), the token strength
 * rule, admin token rotation at start and silo token rotation and revocation.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dp_math.h"
#include "common/dp_log.h"
#include "service/api/auth.h"
#include "service/base/cfg.h"
#include "service/api/routes.h"
#include "tests/support/service_fixture.h"

typedef struct fx {
    service_fixture f; /* f.r.c: default configuration, auth on */
    char admin[LEDGER_TOKEN_BUF];
    route_result out; /* the last answer; cleared by the next call and by teardown */
} fx;

static int setup(void **state)
{
    fx *x = calloc(1, sizeof *x);
    if (x == NULL || service_fixture_open(&x->f, "auth", false) != 0)
        return -1;
    dp_err e;
    dp_err_clear(&e);
    int64_t id;
    if (ledger_token_generate(x->admin, &e) != DP_OK ||
        ledger_token_register_admin(x->f.ledger, x->admin, &id, &e) != DP_OK)
        return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    route_result_clear(&x->out);
    service_fixture_close(&x->f);
    free(x);
    return 0;
}

/* Calls method path with an optional JSON body and bearer token; returns the status, the answer
 * is in x->out. */
static int call(fx *x, const char *method, const char *path, const char *body, const char *token)
{
    route_result_clear(&x->out);
    return call_route(&x->f, method, path, body, token, &x->out);
}

static void bearer_header_is_parsed_strictly(void **state)
{
    (void)state;
    assert_string_equal(http_bearer_from_header("Bearer abc"), "abc");
    assert_string_equal(http_bearer_from_header("bearer   xyz"), "xyz");
    assert_null(http_bearer_from_header(NULL));
    assert_null(http_bearer_from_header("Basic dXNlcjpwYXNz"));
    assert_null(http_bearer_from_header("Bearer "));
    char longtok[AUTH_TOKEN_MAX + 16] = "Bearer ";
    memset(longtok + 7, 'a', AUTH_TOKEN_MAX + 1);
    longtok[7 + AUTH_TOKEN_MAX + 1] = '\0';
    assert_null(http_bearer_from_header(longtok));
}

static void tokens_cannot_cross_silos(void **state)
{
    fx *x = *state;
    const char *create = "{\"name\":\"a\",\"budget\":{\"epsilon\":2,\"delta\":1e-5}}";
    /* No token: refused by the handler itself, behind the dispatcher's early 401. */
    x->f.handler_checks_token = true;
    assert_int_equal(call(x, "POST", "/v1/silos", create, NULL), 401);
    assert_int_equal(x->out.rc, DP_EUNAUTH);
    x->f.handler_checks_token = false;
    assert_int_equal(call(x, "POST", "/v1/silos", create, "dps_wrong"), 401);
    assert_int_equal(call(x, "POST", "/v1/silos", create, x->admin), 201);
    char ta[LEDGER_TOKEN_BUF], tb[LEDGER_TOKEN_BUF];
    snprintf(ta, sizeof ta, "%s", json_string_value(json_object_get(x->out.body, "token")));
    const char *create_b = "{\"name\":\"b\",\"budget\":{\"epsilon\":2,\"delta\":1e-5}}";
    assert_int_equal(call(x, "POST", "/v1/silos", create_b, x->admin), 201);
    snprintf(tb, sizeof tb, "%s", json_string_value(json_object_get(x->out.body, "token")));
    /* A silo token may not create silos, list them, patch or archive. */
    assert_int_equal(call(x, "POST", "/v1/silos", create, ta), 403);
    assert_int_equal(call(x, "GET", "/v1/silos", NULL, ta), 403);
    assert_int_equal(call(x, "PATCH", "/v1/silos/1", "{\"name\":\"x\"}", ta), 403);
    assert_int_equal(call(x, "DELETE", "/v1/silos/1", NULL, ta), 403);
    /* Its own silo only. */
    assert_int_equal(call(x, "GET", "/v1/silos/1", NULL, ta), 200);
    assert_int_equal(call(x, "GET", "/v1/silos/2", NULL, ta), 403);
    assert_int_equal(call(x, "GET", "/v1/silos/1", NULL, tb), 403);
    const char *charge = "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":4}}";
    assert_int_equal(call(x, "POST", "/v1/silos/1/charges", charge, tb), 403);
    assert_int_equal(call(x, "GET", "/v1/silos/1/charges", NULL, tb), 403);
    assert_int_equal(call(x, "POST", "/v1/silos/1/claims", charge, tb), 403);
    assert_int_equal(call(x, "POST", "/v1/silos/1/charges", charge, ta), 201);
    /* A batch with a silo token: only its own silo. */
    const char *batch = "{\"charges\":[{\"silo_id\":1,\"event\":{\"type\":\"zcdp\",\"rho\":0.001}},"
                        "{\"silo_id\":2,\"event\":{\"type\":\"zcdp\",\"rho\":0.001}}]}";
    assert_int_equal(call(x, "POST", "/v1/charges", batch, ta), 403);
    assert_int_equal(call(x, "POST", "/v1/charges", batch, x->admin), 201);
    /* Claims follow their silo. */
    assert_int_equal(call(x, "POST", "/v1/silos/1/claims", charge, ta), 201);
    char claim[64];
    snprintf(claim, sizeof claim, "/v1/claims/%lld",
             (long long)json_integer_value(json_object_get(x->out.body, "id")));
    char commit[80], abort_[80];
    snprintf(commit, sizeof commit, "%s/commit", claim);
    snprintf(abort_, sizeof abort_, "%s/abort", claim);
    assert_int_equal(call(x, "GET", claim, NULL, tb), 403);
    assert_int_equal(call(x, "POST", commit, NULL, tb), 403);
    assert_int_equal(call(x, "POST", abort_, NULL, tb), 403);
    assert_int_equal(call(x, "POST", commit, NULL, ta), 200);
    /* The actor of a charge is the token that made it. */
    dp_err e;
    dp_err_clear(&e);
    ledger_principal pa;
    assert_int_equal(ledger_token_lookup(x->f.r.db, ta, &pa, &e), DP_OK);
    ledger_charge_row *rows = NULL;
    size_t n = 0;
    ledger_charge_filter f = {.limit = 10, .since_ms = INT64_MIN, .until_ms = INT64_MAX};
    assert_int_equal(ledger_charges_list(x->f.r.db, 1, &f, &rows, &n, &e), DP_OK);
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
    assert_int_equal(
        call(x, "POST", "/v1/silos", "{\"name\":\"dev\",\"budget\":{\"private\":false}}", NULL),
        201);
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
    char db[200], tok1[AUTH_TOKEN_MAX + 1], tok2[AUTH_TOKEN_MAX + 1];
    snprintf(db, sizeof db, "%s/other.db", x->f.r.dir);
    auth_token_file tf;
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare("", db, tok1, sizeof tok1, &tf, &e), DP_OK);
    assert_true(tf.generated);
    assert_int_equal(tf.mode, 0600);
    struct stat sb;
    assert_int_equal(stat(tf.path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(auth_admin_token_prepare(NULL, db, tok2, sizeof tok2, &tf, &e), DP_OK);
    assert_false(tf.generated);
    assert_string_equal(tok1, tok2);
    /* An explicit file wins; a too-short token is refused naming the flag. */
    char f2[300];
    snprintf(f2, sizeof f2, "%s/short.token", x->f.r.dir);
    FILE *fp = fopen(f2, "w");
    assert_non_null(fp);
    fputs("short\n", fp);
    fclose(fp);
    assert_int_equal(chmod(f2, 0600), 0);
    assert_int_equal(auth_admin_token_prepare(f2, db, tok2, sizeof tok2, &tf, &e), DP_EINVAL);
    assert_string_equal(e.field, "--admin-token-file");
    unlink(f2);
    snprintf(f2, sizeof f2, "%s/admin.token", x->f.r.dir);
    unlink(f2);
}

/* Writes text into dir/name with mode, returns the path in out. */
static void write_file(const char *dir, const char *name, const char *text, mode_t mode, char *out,
                       size_t len)
{
    snprintf(out, len, "%s/%s", dir, name);
    unlink(out);
    FILE *fp = fopen(out, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(out, mode), 0);
}

/* D12: a planted or loosely protected admin token file is refused, and the mode found is reported
 * as it is (the log used to say 0600 whatever the file's mode). */
static void admin_token_file_is_refused_unless_private(void **state)
{
    fx *x = *state;
    const char *dir = x->f.r.dir;
    const char *good = "k3J9xQ2mZ7vB1nW8cT4yR6hL0pF5sD2aE9uG\n"; /* 36 base64url chars */
    char f[300], link[300], tok[AUTH_TOKEN_MAX + 1], db[200];
    snprintf(db, sizeof db, "%s/x.db", dir);
    auth_token_file tf;
    dp_err e;
    /* A private file is read, and its real mode reported (0400 too). */
    write_file(dir, "ok.token", good, 0400, f, sizeof f);
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare(f, db, tok, sizeof tok, &tf, &e), DP_OK);
    assert_string_equal(tok, "k3J9xQ2mZ7vB1nW8cT4yR6hL0pF5sD2aE9uG");
    assert_int_equal(tf.mode, 0400);
    /* Group- or world-readable: accepted (the log warns), mode reported. */
    assert_int_equal(chmod(f, 0644), 0);
    assert_int_equal(auth_admin_token_prepare(f, db, tok, sizeof tok, &tf, &e), DP_OK);
    assert_int_equal(tf.mode, 0644);
    /* Writable by group or by others: refused, naming the mode. */
    const mode_t loose[] = {0666, 0620, 0602, 0660};
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        assert_int_equal(chmod(f, loose[i]), 0);
        dp_err_clear(&e);
        assert_int_equal(auth_admin_token_prepare(f, db, tok, sizeof tok, &tf, &e), DP_EINVAL);
        assert_string_equal(e.field, "--admin-token-file");
        char want[16];
        snprintf(want, sizeof want, "mode %04o", (unsigned)loose[i]);
        assert_non_null(strstr(e.msg, want));
    }
    /* A symbolic link, even to a private file of ours: refused. */
    assert_int_equal(chmod(f, 0600), 0);
    snprintf(link, sizeof link, "%s/link.token", dir);
    unlink(link);
    assert_int_equal(symlink(f, link), 0);
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare(link, db, tok, sizeof tok, &tf, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "symbolic link"));
    /* ... also as the default <db dir>/admin.token (the planted-file repro). */
    char deflink[300];
    snprintf(deflink, sizeof deflink, "%s/admin.token", dir);
    unlink(deflink);
    assert_int_equal(symlink(f, deflink), 0);
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare("", db, tok, sizeof tok, &tf, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "symbolic link"));
    unlink(deflink);
    /* A dangling link is not followed to create a file either. */
    char nowhere[300];
    snprintf(nowhere, sizeof nowhere, "%s/nowhere", dir);
    assert_int_equal(symlink(nowhere, deflink), 0);
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare("", db, tok, sizeof tok, &tf, &e), DP_EINVAL);
    struct stat sb;
    assert_int_not_equal(lstat(nowhere, &sb), 0);
    unlink(deflink);
    unlink(link);
    /* Owned by another user: refused (as root, give it away; otherwise use a root-owned file). */
    const char *other = "/etc/passwd";
    if (geteuid() == 0) {
        assert_int_equal(chown(f, 65534, 65534), 0);
        other = f;
    }
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare(other, db, tok, sizeof tok, &tf, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "owned by uid"));
    /* A directory is not a token file. */
    dp_err_clear(&e);
    assert_int_equal(auth_admin_token_prepare(dir, db, tok, sizeof tok, &tf, &e), DP_EINVAL);
    unlink(f);
}

/* D12: tokens with less than 128 bits of (estimated) randomness are refused. */
static void weak_tokens_are_refused(void **state)
{
    (void)state;
    dp_err e;
    double bits = 0;
    static const char *const weak[] = {
        "aaaaaaaaaaaaaaaa",                               /* the report's repro: 16 bytes */
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* one repeated character */
        "abababababababababababababababababababab",       /* a repeated pattern */
        "0123456789abcdef0123456789abcde",                /* 31 hex digits: 124 bits */
        "abcdefghijklmnopqrstuv",                         /* 22 lower-case letters: 103 bits */
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",                     /* 26 upper-case letters: 122 bits */
        "has a space in it 0123456789ABCDEFabcdef",       /* not printable-without-space */
        "tab\there-0123456789ABCDEFabcdefXYZ",
    };
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++) {
        dp_err_clear(&e);
        if (auth_token_check_strength(weak[i], "t", &bits, &e) != DP_EINVAL)
            fail_msg("accepted weak token \"%s\" (%.1f bits)", weak[i], bits);
        assert_string_equal(e.field, "t");
    }
    char longtok[AUTH_TOKEN_MAX + 2];
    for (size_t i = 0; i < sizeof longtok - 1; i++)
        longtok[i] = "0123456789abcdefXYZ"[i % 19];
    longtok[sizeof longtok - 1] = '\0';
    dp_err_clear(&e);
    assert_int_equal(auth_token_check_strength(longtok, "t", NULL, &e), DP_EINVAL);
    static const char *const strong[] = {
        "0123456789abcdef0123456789abcdef",     /* 32 hex digits: 128 bits */
        "9F86D081884C7D659A2FEAA0C55AD015",     /* upper-case hex */
        "Zm9vYmFyYmF6cXV4MTIzNDU2",             /* 24 base64 characters */
        "k3J9xQ2mZ7vB1nW8cT4yR6",               /* 22 base64url characters */
        "correct-horse-battery-staple-9-Zebra", /* long mixed passphrase */
    };
    for (size_t i = 0; i < sizeof strong / sizeof strong[0]; i++) {
        dp_err_clear(&e);
        if (auth_token_check_strength(strong[i], "t", &bits, &e) != DP_OK)
            fail_msg("refused \"%s\": %s", strong[i], e.msg);
        assert_true(bits >= AUTH_TOKEN_MIN_BITS);
    }
    /* Every generated token passes. */
    for (int i = 0; i < 50; i++) {
        char t[LEDGER_TOKEN_BUF];
        dp_err_clear(&e);
        assert_int_equal(ledger_token_generate(t, &e), DP_OK);
        assert_int_equal(auth_token_check_strength(t, "t", NULL, &e), DP_OK);
    }
}

/* D2: installing the admin token from the file revokes every other admin token, for good. */
static void installing_the_admin_token_revokes_the_old_one(void **state)
{
    fx *x = *state;
    dp_err e;
    dp_err_clear(&e);
    char old[LEDGER_TOKEN_BUF], new1[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_token_generate(old, &e), DP_OK);
    assert_int_equal(ledger_token_generate(new1, &e), DP_OK);
    int64_t id_old = 0, id_new = 0, n = -1;
    assert_int_equal(ledger_token_install_admin(x->f.ledger, old, &id_old, &n, &e), DP_OK);
    assert_int_equal(n, 1); /* the fixture's admin token */
    ledger_principal p;
    assert_int_equal(ledger_token_lookup(x->f.r.db, x->admin, &p, &e), DP_EUNAUTH);
    dp_err_clear(&e);
    /* Installing the same token again (a restart without a change) revokes nothing. */
    int64_t id_again = 0;
    assert_int_equal(ledger_token_install_admin(x->f.ledger, old, &id_again, &n, &e), DP_OK);
    assert_int_equal(n, 0);
    assert_int_equal(id_again, id_old);
    assert_int_equal(ledger_token_lookup(x->f.r.db, old, &p, &e), DP_OK);
    assert_int_equal(p.role, LEDGER_ROLE_ADMIN);
    /* The file changes: the old token no longer resolves; the new one does. */
    assert_int_equal(ledger_token_install_admin(x->f.ledger, new1, &id_new, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ledger_token_lookup(x->f.r.db, old, &p, &e), DP_EUNAUTH);
    dp_err_clear(&e);
    assert_int_equal(ledger_token_lookup(x->f.r.db, new1, &p, &e), DP_OK);
    assert_int_equal(p.token_id, id_new);
    /* A revoked token cannot come back, neither installed nor registered. */
    assert_int_equal(ledger_token_install_admin(x->f.ledger, old, &id_old, &n, &e), DP_EINVAL);
    assert_non_null(strstr(e.msg, "revoked"));
    dp_err_clear(&e);
    assert_int_equal(ledger_token_register_admin(x->f.ledger, old, &id_old, &e), DP_EINVAL);
    dp_err_clear(&e);
    /* The rows stay (audit trail), with their revocation time; attribution still finds them. */
    int64_t tid = 0;
    assert_int_equal(ledger_token_id(x->f.r.db, old, &tid, &e), DP_OK);
    assert_int_equal(tid, id_old);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_conn_db(x->f.r.db),
                                        "SELECT count(*), count(revoked_at) FROM tokens WHERE "
                                        "role = 'admin'",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 3);
    assert_int_equal(sqlite3_column_int(st, 1), 2);
    sqlite3_finalize(st);
    /* A revocation is final: the schema refuses to un-revoke or to rewrite a token row. */
    assert_int_not_equal(sqlite3_exec(store_conn_db(x->f.r.db),
                                      "UPDATE tokens SET revoked_at = NULL", NULL, NULL, NULL),
                         SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(store_conn_db(x->f.r.db),
                                      "UPDATE tokens SET role = 'admin' WHERE id = 1", NULL, NULL,
                                      NULL),
                         SQLITE_OK);
}

/* Silo tokens: rotation issues a new one and revokes the old at once; revocation issues none. */
static void silo_tokens_rotate_and_revoke(void **state)
{
    fx *x = *state;
    dp_err e;
    dp_err_clear(&e);
    ledger_budget b = {
        .kind = LEDGER_BUDGET_RHO, .accountant = LEDGER_ACCT_ZCDP, .rho = 1, .delta = DP_NAN};
    ledger_silo_view v;
    char t1[LEDGER_TOKEN_BUF], t2[LEDGER_TOKEN_BUF], t3[LEDGER_TOKEN_BUF];
    assert_int_equal(ledger_silo_create(x->f.ledger, "s", &b, &v, t1, &e), DP_OK);
    int64_t tid = 0, n = -1;
    assert_int_equal(ledger_silo_token_rotate(x->f.ledger, v.id, t2, &tid, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_string_not_equal(t1, t2);
    ledger_principal p;
    assert_int_equal(ledger_token_lookup(x->f.r.db, t1, &p, &e), DP_EUNAUTH);
    dp_err_clear(&e);
    assert_int_equal(ledger_token_lookup(x->f.r.db, t2, &p, &e), DP_OK);
    assert_int_equal(p.role, LEDGER_ROLE_SILO);
    assert_int_equal(p.silo_id, v.id);
    assert_int_equal(p.token_id, tid);
    assert_int_equal(ledger_silo_token_revoke(x->f.ledger, v.id, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ledger_token_lookup(x->f.r.db, t2, &p, &e), DP_EUNAUTH);
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_token_revoke(x->f.ledger, v.id, &n, &e), DP_OK);
    assert_int_equal(n, 0);
    /* A revoked silo can be given a token again; unknown and archived silos cannot. */
    assert_int_equal(ledger_silo_token_rotate(x->f.ledger, v.id, t3, &tid, &n, &e), DP_OK);
    assert_int_equal(n, 0);
    assert_int_equal(ledger_token_lookup(x->f.r.db, t3, &p, &e), DP_OK);
    assert_int_equal(ledger_silo_token_rotate(x->f.ledger, 999, t2, &tid, &n, &e), DP_ENOTFOUND);
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_token_revoke(x->f.ledger, 999, &n, &e), DP_ENOTFOUND);
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_archive(x->f.ledger, v.id, &v, &e), DP_OK);
    assert_int_equal(ledger_silo_token_rotate(x->f.ledger, v.id, t2, &tid, &n, &e), DP_ECONFLICT);
    assert_int_equal(t2[0], '\0'); /* a refused token is wiped */
    dp_err_clear(&e);
    assert_int_equal(ledger_silo_token_revoke(x->f.ledger, v.id, &n, &e), DP_OK);
    assert_int_equal(n, 1);
    /* The admin token is untouched by all this. */
    assert_int_equal(ledger_token_lookup(x->f.r.db, x->admin, &p, &e), DP_OK);
    assert_int_equal(p.role, LEDGER_ROLE_ADMIN);
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
        cmocka_unit_test_setup_teardown(admin_token_file_is_refused_unless_private, setup,
                                        teardown),
        cmocka_unit_test(weak_tokens_are_refused),
        cmocka_unit_test_setup_teardown(installing_the_admin_token_revokes_the_old_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(silo_tokens_rotate_and_revoke, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_auth", tests, NULL, NULL);
}
