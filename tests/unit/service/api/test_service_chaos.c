/*
 * test_service_chaos.c: every route handler, with the Nth allocation failing, answers cleanly.
 *
 * SQLite's "fail the Nth malloc, repeat until the operation succeeds" loop (sqlite.org, How SQLite
 * Is Tested, section 3.1) and jansson's test_chaos.c, applied to the daemon's handlers. Before
 * anything else runs, main() routes every allocator the handlers reach through dp_alloc and its
 * countdown (common/dp_alloc.h):
 *   - jansson:  json_set_alloc_funcs(dp_malloc, dp_free);
 *   - SQLite:   sqlite3_config(SQLITE_CONFIG_MALLOC, ...) before sqlite3_initialize, with methods
 *               over dp_malloc that keep the block size in a 16-byte header (xSize);
 *   - our own:  dp_malloc and friends, directly.
 * Then for each route (tests/support/service_fixture.h call_route, no socket; the ledger runs its
 * committer thread, whose allocations count too) and N = 1, 2, ...: the Nth allocation inside the
 * handler fails. Every outcome must be either the route's normal answer or a JSON error body with
 * status 500 or 503 (never a 4xx blaming the client, never a crash or an abort); the loop ends at
 * the first N with no injected failure, which must be the normal answer. Under `make asan`
 * LeakSanitizer checks at exit that no failure path leaked.
 *
 * A request that changes state gets fresh inputs on every try (a new silo name, a fresh claim), so
 * a try is never refused because an earlier one half-succeeded; those are prepared with injection
 * off. A try with no injected failure must give the normal answer: that also catches damage an
 * earlier failure left behind (it caught a corrupted event text committed to the charges log).
 *
 * Not injected: jansson's parser (json_util_loadb/_loads exempt it, because jansson itself writes
 * out of bounds when an allocation fails inside it; service/json_util.h), and what the HTTP layer
 * does around a handler (framing, MHD), which call_route does not run.
 *
 * What it found (fixed in service/): json_dumps returning corrupted text under allocation failure
 * (json_util_dumps), a leak in POST /v1/tuning/plan and /v1/tuning/cost when one of two prepared
 * values was NULL (api/tuning.c), and jansson's parser corrupting the heap (json_util_loadb).
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>
#include <sqlite3.h>

#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "tests/support/service_fixture.h"

/* ---- SQLite over dp_alloc ---- */

#define SQ_HDR 16 /* keeps the 16-byte alignment malloc gives; holds the block's size */

static void *sq_malloc(int n)
{
    unsigned char *p = n > 0 ? dp_malloc((size_t)n + SQ_HDR) : NULL;
    if (p == NULL)
        return NULL;
    memcpy(p, &n, sizeof n);
    return p + SQ_HDR;
}

static void sq_free(void *p)
{
    if (p != NULL)
        dp_free((unsigned char *)p - SQ_HDR);
}

static void *sq_realloc(void *p, int n)
{
    if (p == NULL)
        return sq_malloc(n);
    unsigned char *q = dp_realloc((unsigned char *)p - SQ_HDR, (size_t)n + SQ_HDR);
    if (q == NULL)
        return NULL;
    memcpy(q, &n, sizeof n);
    return q + SQ_HDR;
}

static int sq_size(void *p)
{
    int n = 0;
    if (p != NULL)
        memcpy(&n, (unsigned char *)p - SQ_HDR, sizeof n);
    return n;
}

static int sq_roundup(int n)
{
    return (n + 7) & ~7;
}

static int sq_init(void *arg)
{
    (void)arg;
    return SQLITE_OK;
}

static void sq_shutdown(void *arg)
{
    (void)arg;
}

static const sqlite3_mem_methods SQ_METHODS = {sq_malloc,  sq_free, sq_realloc,  sq_size,
                                               sq_roundup, sq_init, sq_shutdown, NULL};

/* ---- the routes and their requests ---- */

enum { PREP_NONE, PREP_FRESH_SILO, PREP_FRESH_CLAIM, PREP_FRESH_DATASET, PREP_FRESH_JOB };

typedef struct scenario {
    const char *method;
    const char *path; /* may hold {id}: the silo A, run, draw or claim id, or a fresh one */
    const char *body; /* may hold {k}: the try number (a fresh name) */
    int want;         /* the normal answer's status */
    int prep;         /* PREP_*: what the {id} of path is when not a fixed id */
    char id; /* 'S' silo A, 'R' run, 'D' draw, 'C' claim, 'U' upload, 'J' job, 0 none (or prep) */
} scenario;

#define EV_SGM                                                                                     \
    "{\"type\":\"self_composed\",\"count\":100,\"event\":{\"type\":\"poisson_sampled\","           \
    "\"sampling_rate\":0.01,\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1.1}}}"
/* a private Beta run: a scenario, and the run the setup stores for GET /v1/runs/{id} */
#define BETA_RUN                                                                                   \
    "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12},"               \
    "{\"successes\":1,\"trials\":8}],\"privacy\":{\"epsilon0\":2}}"
#define BETA_RUN_KEPT                                                                              \
    "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12},"               \
    "{\"successes\":1,\"trials\":8}],\"privacy\":{\"epsilon0\":2},\"keep_results\":true}"
#define EV_G8 "{\"type\":\"gaussian\",\"noise_multiplier\":8}"
/* a small uploaded data set (two sites) and a job on it (the setup's upload is data set 1) */
#define CSV_SITES "site,x1,x2,y\na,1,2,0.5\na,2,1,0.25\na,0,1,1\nb,1,1,0\nb,3,2,1\nb,2,2,0.75\n"
#define JOB_SPEC                                                                                   \
    "{\"algorithm\":\"mrmtl\",\"lambda\":0.5,\"dataset\":1,\"model\":{\"type\":\"linear\"},"       \
    "\"rounds\":2,\"batch_size\":2,\"lr\":0.1,\"test_fraction\":0.3,\"privacy\":{\"target_"        \
    "epsilon\":4,\"delta\":1e-3,\"clip\":1}}"

/* the dry run of a job binding site a to silo A (id 1): its budget checked too */
#define JOB_PLAN_SPEC                                                                              \
    "{\"algorithm\":\"mrmtl\",\"lambda\":0.5,\"dataset\":1,\"model\":{\"type\":\"linear\"},"       \
    "\"rounds\":2,\"batch_size\":2,\"lr\":0.1,\"test_fraction\":0.3,\"privacy\":{\"target_"        \
    "epsilon\":4,\"delta\":1e-3,\"clip\":1},\"silos\":{\"a\":1}}"

static const scenario SCENARIOS[] = {
    {"GET", "/healthz?fresh=1", NULL, 200, PREP_NONE, 0},
    {"GET", "/v1/version", NULL, 200, PREP_NONE, 0},
    {"GET", "/v1/openapi.json", NULL, 200, PREP_NONE, 0},
    {"GET", "/metrics", NULL, 200, PREP_NONE, 0},
    {"POST", "/v1/echo", "{\"message\":\"hi\",\"count\":2}", 200, PREP_NONE, 0},
    {"POST", "/v1/accounting/epsilon", "{\"delta\":1e-5,\"event\":" EV_SGM "}", 200, PREP_NONE, 0},
    {"POST", "/v1/accounting/delta", "{\"epsilon\":3,\"event\":" EV_SGM "}", 200, PREP_NONE, 0},
    {"POST", "/v1/accounting/rdp", "{\"orders\":[2,4.5,32],\"event\":" EV_SGM "}", 200, PREP_NONE,
     0},
    {"POST", "/v1/accounting/calibrate",
     "{\"target_epsilon\":2,\"delta\":1e-5,\"event\":{\"type\":\"self_composed\",\"count\":100,"
     "\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":null}}}",
     200, PREP_NONE, 0},
    {"POST", "/v1/estimators/gaussian",
     "{\"clients\":[{\"id\":\"a\",\"mean\":0.31,\"n\":15},{\"id\":\"b\",\"mean\":0.12,\"n\":8},"
     "{\"id\":\"c\",\"mean\":0.55,\"n\":30}],\"noise_variance\":0.25}",
     201, PREP_NONE, 0},
    {"POST", "/v1/estimators/normal-means",
     "{\"x\":[1.2,-0.4,0.1,2.5,-1.8,0.3],\"s\":[1,0.8,1.1,0.9,1.2,1],"
     "\"prior_family\":\"point_normal\",\"draws\":2,\"seed\":3}",
     201, PREP_NONE, 0},
    {"POST", "/v1/estimators/beta", BETA_RUN, 201, PREP_NONE, 0},
    {"POST", "/v1/estimators/mixture",
     "{\"clients\":[{\"mean\":-1,\"n\":5},{\"mean\":-0.8,\"n\":5},{\"mean\":1,\"n\":5},"
     "{\"mean\":1.1,\"n\":5}],\"noise_variance\":0.5,\"components\":2}",
     201, PREP_NONE, 0},
    {"GET", "/v1/runs?limit=5", NULL, 200, PREP_NONE, 0},
    {"GET", "/v1/runs/{id}", NULL, 200, PREP_NONE, 'R'},
    {"GET", "/v1/runs/{id}/clients?limit=2&after=1", NULL, 200, PREP_NONE, 'R'},
    {"POST", "/v1/estimators/beta",
     "{\"clients\":[{\"successes\":3,\"trials\":10},{\"successes\":7,\"trials\":12}],"
     "\"results\":\"summary\"}",
     201, PREP_NONE, 0},
    {"POST", "/v1/tuning/cost",
     "{\"event\":" EV_G8 ",\"delta\":1e-5,\"distribution\":{\"logarithmic\":{\"mean\":10}}}", 200,
     PREP_NONE, 0},
    {"POST", "/v1/tuning/plan",
     "{\"epsilon\":1,\"delta\":1e-5,\"grid_size\":10,\"training\":{\"sampling_rate\":0.02,"
     "\"steps\":50},\"distribution\":{\"logarithmic\":{}}}",
     200, PREP_NONE, 0},
    {"POST", "/v1/tuning/draw",
     "{\"distribution\":{\"logarithmic\":{\"mean\":10}},\"grid_size\":10,\"label\":\"try {k}\"}",
     201, PREP_NONE, 0},
    {"GET", "/v1/tuning/draws/{id}", NULL, 200, PREP_NONE, 'D'},
    {"POST", "/v1/calculators/mrmtl",
     "{\"silos\":20,\"n\":200,\"sigma\":0.4,\"tau\":0.08,\"noise_multiplier\":14.5,"
     "\"clip\":1,\"lambda\":1}",
     200, PREP_NONE, 0},
    {"POST", "/v1/calculators/mrmtl",
     "{\"tau\":0.05,\"silos\":[{\"n\":50,\"sigma\":0.4},{\"n\":80,\"sigma\":0.5,"
     "\"sigma_dp\":3},{\"n\":20,\"sigma\":0.3,\"noise_multiplier\":2,\"clip\":1}]}",
     200, PREP_NONE, 0},
    {"POST", "/v1/calculators/fedhdp",
     "{\"alpha2\":1,\"tau2\":0.25,\"groups\":[{\"name\":\"opt-out\",\"clients\":5,"
     "\"per_client_noise\":0},{\"clients\":95,\"gamma2\":0.05}],\"r\":[1,0.5],"
     "\"lambda\":[4,3]}",
     200, PREP_NONE, 0},
    {"POST", "/v1/calculators/ppsgd",
     "{\"users\":1000,\"sigma\":1,\"epsilon\":1,\"delta\":1e-4,\"dim_w\":100,"
     "\"grad_bound\":10,\"n\":10,\"smoothness\":2,\"v_norm2\":1}",
     200, PREP_NONE, 0},
    {"POST", "/v1/silos", "{\"name\":\"chaos-{k}\",\"budget\":{\"epsilon\":5,\"delta\":1e-5}}", 201,
     PREP_NONE, 0},
    {"GET", "/v1/silos?limit=5", NULL, 200, PREP_NONE, 0},
    {"GET", "/v1/silos/{id}?verify=true", NULL, 200, PREP_NONE, 'S'},
    {"PATCH", "/v1/silos/{id}", "{\"budget\":{\"epsilon\":1000000}}", 200, PREP_NONE, 'S'},
    {"DELETE", "/v1/silos/{id}", NULL, 200, PREP_FRESH_SILO, 0},
    {"POST", "/v1/silos/{id}/token", "{}", 200, PREP_FRESH_SILO, 0},
    {"DELETE", "/v1/silos/{id}/token", NULL, 200, PREP_FRESH_SILO, 0},
    {"POST", "/v1/silos/{id}/charges", "{\"event\":" EV_G8 "}", 201, PREP_NONE, 'S'},
    {"GET", "/v1/silos/{id}/charges?limit=5", NULL, 200, PREP_NONE, 'S'},
    {"GET", "/v1/silos/{id}/claims?limit=5", NULL, 200, PREP_NONE, 'S'},
    {"POST", "/v1/charges", "{\"charges\":[{\"silo_id\":1,\"event\":" EV_G8 "}]}", 201, PREP_NONE,
     0},
    {"POST", "/v1/silos/{id}/claims", "{\"event\":" EV_G8 "}", 201, PREP_NONE, 'S'},
    {"GET", "/v1/claims/{id}", NULL, 200, PREP_NONE, 'C'},
    {"POST", "/v1/claims/{id}/commit", "{}", 200, PREP_FRESH_CLAIM, 0},
    {"POST", "/v1/claims/{id}/abort", "{}", 200, PREP_FRESH_CLAIM, 0},
    {"GET", "/v1/datasets?limit=5", NULL, 200, PREP_NONE, 0},
    {"POST", "/v1/datasets?label=y&silo=site&name=c{k}", CSV_SITES, 201, PREP_NONE, 0},
    {"GET", "/v1/datasets/{id}", NULL, 200, PREP_NONE, 'U'},
    {"DELETE", "/v1/datasets/{id}", NULL, 200, PREP_FRESH_DATASET, 0},
    {"POST", "/v1/jobs", JOB_SPEC, 202, PREP_NONE, 0},
    {"POST", "/v1/jobs/plan", JOB_PLAN_SPEC, 200, PREP_NONE, 0},
    {"GET", "/v1/jobs?limit=5&status=queued", NULL, 200, PREP_NONE, 0},
    {"GET", "/v1/jobs/{id}", NULL, 200, PREP_NONE, 'J'},
    {"POST", "/v1/jobs/{id}/cancel", "{}", 202, PREP_FRESH_JOB, 0},
    {"GET", "/v1/jobs/{id}/metrics", NULL, 200, PREP_NONE, 'J'},
    {"GET", "/v1/jobs/{id}/events", NULL, 200, PREP_NONE, 'J'},
    {"GET", "/v1/jobs/{id}/model", NULL, 404, PREP_NONE, 'J'}, /* no round yet: no model */
};
#define N_SCENARIOS (sizeof SCENARIOS / sizeof SCENARIOS[0])

/* Copies tmpl to out (n bytes) with every "{<key>}" replaced by v. */
static void subst(char *out, size_t n, const char *tmpl, const char *key, long long v)
{
    char pat[16];
    snprintf(pat, sizeof pat, "{%s}", key);
    size_t o = 0;
    for (const char *p = tmpl; *p != '\0' && o + 1 < n;) {
        if (strncmp(p, pat, strlen(pat)) == 0) {
            int w = snprintf(out + o, n - o, "%lld", v);
            o += w > 0 ? (size_t)w : 0;
            p += strlen(pat);
        } else {
            out[o++] = *p++;
        }
    }
    out[o < n ? o : n - 1] = '\0';
}

typedef struct fixture {
    service_fixture fx;
    long long silo, run, draw, claim, upload, job; /* made in setup, injection off */
    long n_made;                                   /* fresh silos made so far (for unique names) */
} fixture;

/* Calls method path body with injection off; the "id" of the answer, or -1 (with a message). */
static long long make(fixture *f, const char *method, const char *path, const char *body, int want)
{
    route_result out;
    long saved = f->fx.fail_nth;
    f->fx.fail_nth = 0;
    int st = call_route(&f->fx, method, path, body, NULL, &out);
    f->fx.fail_nth = saved;
    long long id = -1;
    if (st == want)
        id = json_integer_value(json_object_get(out.body, "id"));
    else
        print_error("setup %s %s: %d, want %d\n", method, path, st, want);
    if (st == want && id == 0) /* runs answer run_id */
        id = json_integer_value(json_object_get(out.body, "run_id"));
    route_result_clear(&out);
    return id;
}

static long long fresh_silo(fixture *f)
{
    char body[128];
    snprintf(body, sizeof body,
             "{\"name\":\"fresh-%ld\",\"budget\":{\"epsilon\":5,\"delta\":1e-5}}", f->n_made++);
    return make(f, "POST", "/v1/silos", body, 201);
}

static long long fresh_claim(fixture *f)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/silos/%lld/claims", f->silo);
    return make(f, "POST", path, "{\"event\":" EV_G8 "}", 201);
}

static long long fresh_dataset(fixture *f)
{
    return make(f, "POST", "/v1/datasets?label=y&silo=site", CSV_SITES, 201);
}

static long long fresh_job(fixture *f)
{
    return make(f, "POST", "/v1/jobs", JOB_SPEC, 202);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (f == NULL || service_fixture_open(&f->fx, "chaos", true) != 0)
        return -1;
    f->silo = make(f, "POST", "/v1/silos",
                   "{\"name\":\"a\",\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}", 201);
    f->run = make(f, "POST", "/v1/estimators/beta", BETA_RUN_KEPT, 201); /* its rows paged */
    f->draw = make(f, "POST", "/v1/tuning/draw",
                   "{\"distribution\":{\"logarithmic\":{\"mean\":10}},\"grid_size\":10}", 201);
    f->claim = fresh_claim(f);
    f->upload = fresh_dataset(f);
    f->job = fresh_job(f);
    return f->silo == 1 && f->run > 0 && f->draw > 0 && f->claim > 0 && f->upload == 1 && f->job > 0
               ? 0
               : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int rc = service_fixture_close(&f->fx);
    free(f);
    return rc;
}

/* One try of scenario s (try number k), the Nth allocation failing (0: none). Returns the status;
 * *injected tells whether an allocation was failed on purpose. */
static int try_once(fixture *f, const scenario *s, long k, long nth, bool *injected)
{
    long long id = s->id == 'S'   ? f->silo
                   : s->id == 'R' ? f->run
                   : s->id == 'D' ? f->draw
                   : s->id == 'C' ? f->claim
                   : s->id == 'U' ? f->upload
                   : s->id == 'J' ? f->job
                                  : 0;
    if (s->prep == PREP_FRESH_SILO)
        id = fresh_silo(f);
    else if (s->prep == PREP_FRESH_CLAIM)
        id = fresh_claim(f);
    else if (s->prep == PREP_FRESH_DATASET)
        id = fresh_dataset(f);
    else if (s->prep == PREP_FRESH_JOB)
        id = fresh_job(f);
    assert_true(id >= 0);
    char path[256], body[1024];
    subst(path, sizeof path, s->path, "id", id);
    if (s->body != NULL)
        subst(body, sizeof body, s->body, "k", k);
    long before = dp_alloc_failures();
    f->fx.fail_nth = nth;
    route_result out;
    int st = call_route(&f->fx, s->method, path, s->body ? body : NULL, NULL, &out);
    f->fx.fail_nth = 0;
    *injected = dp_alloc_failures() != before;
    if (!*injected && st != s->want)
        fail_msg("%s %s with no allocation failing: status %d (%s: %s), want %d", s->method, path,
                 st, out.err.field, out.err.msg, s->want);
    if (st != s->want) {
        const json_t *err = json_object_get(out.body, "error");
        if ((st != 500 && st != 503) || !json_is_string(json_object_get(err, "code")) ||
            !json_is_string(json_object_get(err, "message")))
            fail_msg("%s %s, allocation %ld failing: status %d (%s: %s), want %d or a JSON "
                     "500/503",
                     s->method, path, nth, st, out.err.field, out.err.msg, s->want);
    } else if (out.body == NULL && out.text == NULL) {
        fail_msg("%s %s: status %d with no body", s->method, path, st);
    }
    route_result_clear(&out);
    return st;
}

static void every_route_answers_normally_without_injection(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        bool injected;
        int st = try_once(f, &SCENARIOS[i], (long)i, 0, &injected);
        if (st != SCENARIOS[i].want)
            fail_msg("%s %s: %d, want %d", SCENARIOS[i].method, SCENARIOS[i].path, st,
                     SCENARIOS[i].want);
        assert_false(injected);
    }
    /* every route of the table is exercised */
    for (size_t r = 0; r < ROUTES_N; r++) {
        bool seen = false;
        for (size_t i = 0; i < N_SCENARIOS && !seen; i++) {
            route_match m;
            char path[256];
            subst(path, sizeof path, SCENARIOS[i].path, "id", 1);
            char *q = strchr(path, '?');
            if (q != NULL)
                *q = '\0';
            seen = http_route_match(ROUTES, ROUTES_N, SCENARIOS[i].method, path, &m) ==
                       HTTP_ROUTE_FOUND &&
                   m.index == r;
        }
        if (!seen)
            fail_msg("route %s %s has no chaos scenario", ROUTES[r].method, ROUTES[r].pattern);
    }
}

/* Upper bound on the allocations of one request (the largest, an estimator run with its SQL, is a
 * few thousand); reaching it means the loop never saw a try without an injected failure. */
#define CHAOS_MAX_NTH 50000

static void every_route_survives_each_allocation_failing(void **state)
{
    fixture *f = *state;
    long total_tries = 0;
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        const scenario *s = &SCENARIOS[i];
        long nth = 1, errors = 0;
        for (;; nth++) {
            assert_true(nth < CHAOS_MAX_NTH);
            bool injected;
            int st = try_once(f, s, 1000 + total_tries++, nth, &injected);
            if (!injected) {
                assert_int_equal(st, s->want);
                break;
            }
            errors += st != s->want;
        }
        printf("  %-6s %-32s %5ld allocations, %5ld clean errors\n", s->method, s->path, nth - 1,
               errors);
    }
}

/* A claim made ~80 allocations with or without other active claims on its silo, until the
 * writer's temporary store moved to memory: then SQLite's sort of the silo's active claims by id
 * (the held total) allocated once per claim, and a claim on a silo with C active claims made C
 * more; the loop above, whose failed tries leave claims behind, went from ~80 tries to ~1,500 for
 * the claims route (and ran for minutes). With 300 active claims a claim must still fit in
 * CLAIM_ALLOCATIONS_MAX. */
#define CLAIM_ALLOCATIONS_MAX 200
static void a_claim_makes_no_more_allocations_with_many_claims_active(void **state)
{
    fixture *f = *state;
    const scenario *s = NULL;
    for (size_t i = 0; i < N_SCENARIOS; i++)
        if (strcmp(SCENARIOS[i].method, "POST") == 0 &&
            strcmp(SCENARIOS[i].path, "/v1/silos/{id}/claims") == 0)
            s = &SCENARIOS[i];
    assert_non_null(s);
    for (int k = 0; k < 300; k++)
        assert_true(fresh_claim(f) > 0);
    bool injected;
    assert_int_equal(try_once(f, s, 7, CLAIM_ALLOCATIONS_MAX, &injected), s->want);
    assert_false(injected);
}

int main(void)
{
    /* Before any allocation of either library: the allocators cannot change afterwards. */
    json_set_alloc_funcs(dp_malloc, dp_free);
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &SQ_METHODS) != SQLITE_OK ||
        sqlite3_initialize() != SQLITE_OK) {
        fprintf(stderr, "cannot install the SQLite allocator\n");
        return 1;
    }
    gsl_set_error_handler_off();
    dp_log_set_level(DP_LOG_OFF); /* thousands of injected failures, each logged by its handler */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_route_answers_normally_without_injection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(every_route_survives_each_allocation_failing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_claim_makes_no_more_allocations_with_many_claims_active,
                                        setup, teardown),
    };
    return cmocka_run_group_tests_name("service_chaos", tests, NULL, NULL);
}
