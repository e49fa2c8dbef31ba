/*
 * api/estimators.c: the empirical-Bayes estimator endpoints and the stored runs (issue #6).
 *
 *   POST /v1/estimators/gaussian   Gaussian prior (Ozkara et al. 2023, Thm 1, Thm 2)
 *   POST /v1/estimators/beta       Beta-Bernoulli (Ozkara et al. 2023, eq. 6-7, Thm 3-4)
 *   POST /v1/estimators/mixture    mixture prior (Ozkara et al. 2023, Thm 6, Alg 3)
 *   GET  /v1/runs/{id}, GET /v1/runs?limit=&after=
 *
 * Each POST is checked on its HTTP thread (work and size caps, the caller's token, the
 * Idempotency-Key), then parsed and validated into the estimators/ library's structs (400 naming
 * the field for bad input), computed by the library and rendered on a compute thread
 * (service/base/compute.h; inline when the request offers no deferral), and stored as a run
 * (service/db/runs.h; migrations 0004, 0007 for the key, 0008) in the same ledger transaction that
 * charges the silos its clients name. The answer is 201 with a Location of /v1/runs/{id} and the
 * result. Request and response shapes: docs/ESTIMATORS.md. The split, charging and idempotency are
 * described at "a run in the making" below.
 *
 * Privacy: "privacy" blocks simulate each client's local randomizer on the server (local DP per
 * client, user level). The noise comes from a seeded PRNG: simulation-grade, not a hardened release
 * mechanism (Mironov 2012, CCS, the least-significant-bits attack on floating-point noise).
 *
 * Memory: request values are borrowed from the job's reference to the body; every allocation is
 * freed at the single out: label of each compute function or in est_job_free. A large "clients"
 * array arrives as text spans (rq->clients, service/codec/clients_json.h: no jansson tree for it,
 * issue 10) and each pass over the clients parses one client at a time (cl_get; a flat client
 * without jansson, clients_json_flat_get). The per-client results are columns of doubles (j->cols,
 * codec/run_rows.h): stored as they are beside the run (migration 0015), and written as text once,
 * after the run is stored, around the small stored result (result_around_rows), so a run peaks at
 * a small multiple of its body (docs/ESTIMATORS.md "Request size", "Large runs"). Thread-safety: a
 * job belongs to one thread at a time (the HTTP thread, then a compute thread, then an HTTP
 * thread); the request's connection is used on the HTTP thread only.
 */
#include "service/api/routes.h"
#include "service/api/estimators_run.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/base/cfg.h"
#include "service/base/time.h"
#include "common/dp_log.h"
#include "common/dp_sha256.h"
#include "accounting/calibrate.h"
#include "accounting/zcdp.h"
#include "estimators/eb_beta.h"
#include "estimators/eb_gaussian.h"
#include "estimators/eb_mixture.h"
#include "service/api/auth.h"
#include "service/codec/clients_json.h"
#include "service/codec/event_json.h"
#include "service/codec/json_util.h"
#include "service/codec/run_rows.h"
#include "service/db/runs.h"
#include "service/db/writer.h"
#include "service/http/offload.h"
#include "service/ledger/ledger.h"

#define EST_DEFAULT_MAX_ITER      1000   /* solver iterations unless the request says otherwise */
#define RUNS_CLIENTS_PAGE_DEFAULT 1000   /* GET /v1/runs/{id}/clients rows per page */
#define RUNS_CLIENTS_PAGE_MAX     100000 /* and at most: a page of rows is ~100 bytes each */

/* ---- small parsing helpers ---- */

/* Prefixes err's field with "clients[i]". */
static int client_err(dp_err *err, size_t i)
{
    char p[32];
    snprintf(p, sizeof p, "clients[%zu]", i);
    dp_err_prefix_field(err, p);
    return err->code;
}

/* A number or an array of numbers. *d == 0 on entry: learns the dimension; else it must match.
 * out has room for EB_MAX_DIM values. *is_vec tells which form was sent. */
static int parse_vec(const json_t *v, const char *field, size_t *d, double *out, bool *is_vec,
                     dp_err *err)
{
    if (json_is_number(v)) {
        if (*d != 0 && *d != 1)
            return dp_err_set(err, DP_EINVAL, field, "%s must have %zu coordinates (got a number)",
                              field, *d);
        out[0] = json_number_value(v);
        *d = 1;
        *is_vec = false;
    } else if (json_is_array(v)) {
        size_t k = json_array_size(v);
        if (k < 1 || k > EB_MAX_DIM)
            return dp_err_set(err, DP_EINVAL, field, "%s must have 1..%d coordinates (got %zu)",
                              field, EB_MAX_DIM, k);
        if (*d != 0 && *d != k)
            return dp_err_set(err, DP_EINVAL, field, "%s must have %zu coordinates (got %zu)",
                              field, *d, k);
        for (size_t j = 0; j < k; j++) {
            const json_t *e = json_array_get(v, j);
            if (!json_is_number(e))
                return dp_err_set(err, DP_EINVAL, field, "%s[%zu] must be a number (got %s)", field,
                                  j, json_util_type_name(e));
            out[j] = json_number_value(e);
        }
        *d = k;
        *is_vec = true;
    } else {
        return dp_err_set(err, DP_EINVAL, field,
                          "%s must be a number or an array of numbers (got %s)", field,
                          json_util_type_name(v));
    }
    for (size_t j = 0; j < *d; j++)
        if (!isfinite(out[j]))
            return dp_err_set(err, DP_EINVAL, field, "%s must be finite", field);
    return DP_OK;
}

/* A value for each of d coordinates: d numbers, or one number (or [x]) that holds for all.
 * out has room for EB_MAX_DIM values. */
static int parse_vec_for(const json_t *v, const char *field, size_t d, double *out, dp_err *err)
{
    size_t k = 0;
    bool isv;
    if (parse_vec(v, field, &k, out, &isv, err) != DP_OK)
        return err->code;
    if (k != d && k != 1)
        return dp_err_set(err, DP_EINVAL, field, "%s must have 1 or %zu coordinates", field, d);
    for (size_t j = 1; j < d && k == 1; j++)
        out[j] = out[0];
    return DP_OK;
}

static json_t *vec_json(const double *x, size_t d, bool as_vec)
{
    if (!as_vec)
        return json_util_real(x[0]);
    json_t *a = json_array();
    if (a == NULL)
        return NULL;
    for (size_t j = 0; j < d; j++)
        if (json_array_append_new(a, json_util_real(x[j])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The client's id as sent (string or integer), or its index. New reference. */
static json_t *client_id(const json_t *c, size_t i)
{
    const json_t *id = json_object_get(c, "id");
    if (id != NULL && (json_is_string(id) || json_is_integer(id)))
        return json_incref((json_t *)id);
    return json_integer((json_int_t)i);
}

static int check_id(const json_t *c, dp_err *err)
{
    const json_t *id = json_object_get(c, "id");
    if (id != NULL && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id))
        return dp_err_set(err, DP_EINVAL, "id", "id must be a string or an integer (got %s)",
                          json_util_type_name(id));
    return DP_OK;
}

/* ---- the clients array: a tree inside the body, or text spans read by
 * service/codec/clients_json.h when the dispatcher streamed it (rq->clients; the body then holds
 * "clients": []). Either way a client is handed out as its own tree, one at a time, so the checks
 * below see the same values. */

/* Number of clients (0 when "clients" is missing or not an array). */
static size_t cl_count(const http_req *rq)
{
    if (rq->clients != NULL)
        return clients_json_count(rq->clients);
    return json_array_size(json_object_get(rq->body, "clients"));
}

/* Client i (< cl_count) as a new reference, owned by the caller; NULL when out of memory. */
static json_t *cl_get(const http_req *rq, size_t i)
{
    if (rq->clients != NULL)
        return clients_json_get(rq->clients, i);
    return json_incref(json_array_get(json_object_get(rq->body, "clients"), i));
}

/* Whether some client may have member key: false only when none has it for sure. */
static bool cl_may_have(const http_req *rq, const char *key)
{
    return rq->clients == NULL || clients_json_count_with(rq->clients, key) != 0;
}

/* The id of estimate row i (client_id of client i), a new reference; NULL when out of memory. */
static json_t *row_id(const http_req *rq, size_t i)
{
    if (!cl_may_have(rq, "id"))
        return json_integer((json_int_t)i);
    json_t *c = cl_get(rq, i);
    json_t *id = c != NULL ? client_id(c, i) : NULL;
    json_decref(c);
    return id;
}

/* silo_id (optional): a positive integer naming the silo whose data this client is. */
static int check_silo(const json_t *c, dp_err *err)
{
    const json_t *s = json_object_get(c, "silo_id");
    if (s != NULL && (!json_is_integer(s) || json_integer_value(s) <= 0))
        return dp_err_set(err, DP_EINVAL, "silo_id", "silo_id must be a positive integer (got %s)",
                          json_util_type_name(s));
    return DP_OK;
}

/* One allowed value of a string option and what it selects. */
typedef struct choice {
    const char *name;
    int value;
} choice;

/* A field of names[0..n-1] present in the privacy object pvj is a 400 naming it ("privacy.<name>":
 * "<name> belongs to <owner>"): the other privacy model's fields. */
static int refuse_fields(const json_t *pvj, const char *const *names, size_t n, const char *owner,
                         dp_err *err)
{
    for (size_t k = 0; k < n; k++)
        if (json_object_get(pvj, names[k]) != NULL) {
            char f[DP_ERR_FIELD_MAX];
            snprintf(f, sizeof f, "privacy.%s", names[k]);
            return dp_err_set(err, DP_EINVAL, f, "%s belongs to %s", names[k], owner);
        }
    return DP_OK;
}

/* s must be one of the n names in ch; *out gets its value. Otherwise a 400 naming field, e.g.
 * 'range must be "paper" or "safe" (got "x")' (the message names field's last part). */
static int pick(const char *s, const char *field, const choice *ch, size_t n, int *out, dp_err *err)
{
    char list[160];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, ch[i].name) == 0) {
            *out = ch[i].value;
            return DP_OK;
        }
        const char *sep = i == 0 ? "" : (i + 1 < n ? ", " : " or ");
        int w = snprintf(list + len, sizeof list - len, "%s\"%s\"", sep, ch[i].name);
        if (w > 0 && (size_t)w < sizeof list - len)
            len += (size_t)w;
    }
    const char *dot = strrchr(field, '.');
    return dp_err_set(err, DP_EINVAL, field, "%s must be %s (got \"%s\")", dot ? dot + 1 : field,
                      list, s);
}

/* privacy.model of the privacy object pvj: "local" (the default; *central = 0) or "central" (1);
 * else a 400 naming privacy.model. */
static int privacy_model(const json_t *pvj, int *central, dp_err *err)
{
    const char *model;
    if (json_util_opt_string(pvj, "model", "local", &model, err) != DP_OK) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    static const choice MODEL[] = {{"local", 0}, {"central", 1}};
    return pick(model, "privacy.model", MODEL, sizeof MODEL / sizeof MODEL[0], central, err);
}

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a run in the making (issue 10: off the HTTP threads, charged and stored together) ----
 *
 * A POST is split in three (service/base/compute.h). On its HTTP thread, est_start checks what is
 * cheap and must not wait: the work and size caps (before anything is allocated for the clients),
 * the caller's token when clients name silos, and the Idempotency-Key (a retry of a stored run is
 * answered from the database at once). The estimator itself (validation of every client, the
 * noise, the fits, the response) then runs on a compute thread (est_run), and an HTTP thread sends
 * the answer (est_render). The request body is HANDED OVER, not shared: the dispatcher keeps it for
 * the resume and touches it only after the wake-up, so the compute thread is its only user
 * meanwhile (the rule that a json_t never crosses threads is about sharing; jansson is safe for
 * one thread at a time). Nothing else from the request reaches the compute thread: the
 * principal is resolved and the key validated before.
 *
 * Charging: when clients name silos ("silo_id") the run must be private, and every participating
 * silo is charged through the ledger (service/ledger/ledger.h) in ONE all-or-nothing batch. A dry
 * run of that batch, before anything is computed, refuses a run that cannot be afforded (409
 * budget_exhausted, or 404 for an unknown silo) without drawing noise. The real charge and the
 * stored run then commit in ONE ledger transaction (ledger_charge_batch_with): a failure leaves
 * neither a charge nor a run (D7), and nothing computed is released. The event charged to a silo is
 * the per-client mechanism (the Gaussian channel as {"type": "gaussian", "noise_multiplier":
 * sigma/Delta}, or per coordinate composed d times; randomized response as "pure" epsilon0, two
 * bits at epsilon0/2 composed twice), self-composed over the silo's clients in the run:
 * conservative, it holds even if one person's data sit in several of the silo's clients. A silo
 * token may only charge its own silo (403 otherwise); the admin token any.
 *
 * Idempotency: with an Idempotency-Key header (1..EST_KEY_MAX printable ASCII characters) the run
 * row records the key (scoped to the caller's token) and a SHA-256 of the request; each silo's
 * charge carries the key too. A retry with the same key and the same request gets the first answer
 * with "replayed": true, and is charged nothing (the charges replay); the same key with another
 * request is a 409. */

#define EST_KEY_MAX 128 /* Idempotency-Key bytes */

/* One silo's charge for a run: built on the HTTP thread by plan_charges, owned by the job. */
typedef struct silo_charge {
    int64_t silo;
    size_t count;   /* the silo's clients in the run */
    size_t first;   /* index of its first client, for error fields */
    acct_event *ev; /* self_composed(count, the per-client event), or that event when count = 1 */
    char *json;     /* ev's canonical JSON (event_json_dumps): stored, hashed, and answered */
} silo_charge;

/* A growing text buffer (the estimates of a run, the charges' JSON). */
typedef run_text text_buf;

struct est_job {
    const char *kind; /* "gaussian", "beta", "mixture" (static) */
    est_compute_fn compute;
    http_req rq; /* the handler's request: body and clients held (incref); db only for an inline
                    run, else NULL; no defer or bearer; rq.app points to app below */
    app app;     /* the handler's app, without the compute pool and the metrics */
    char req_id[HTTP_REQ_ID_MAX];
    ledger_principal who; /* resolved on the HTTP thread when clients name silos */
    bool have_who;
    int64_t creator; /* the token that creates the run (0 with --auth off): who may read it */
    dp_err who_err;  /* why it could not be: reported when charging, after validation */
    const atomic_bool *cancel;  /* the compute pool's flag for this run (NULL inline); borrowed */
    char key[EST_KEY_MAX + 32]; /* the scoped Idempotency-Key ("a:<key>" admin, "s<silo id>:<key>"
                                   silo), "" = none */
    char charge_key[EST_KEY_MAX + 40];  /* "run:" + key, on each silo's charge */
    char hash[DP_SHA256_HEX_CHARS + 1]; /* SHA-256 of kind and request, with a key */
    /* the charge plan (plan_charges) */
    size_t n_silos;
    silo_charge *sc;           /* [n_silos], by silo id */
    ledger_charge_req *reqs;   /* [n_silos]: the batch as the ledger takes it (borrows sc) */
    ledger_charge_result *res; /* [n_silos] */
    /* the outcome */
    size_t n_rows;
    run_rows cols;     /* the per-client results, filled by the compute function (est_rows) */
    bool summary;      /* "results": "summary": no per-client results answered */
    bool keep_results; /* "keep_results": true: the per-client results stored with the run */
    /* a retry (Idempotency-Key) of a run that answered its rows without keeping them: they are
     * computed again and written into the stored result, after its fit is checked equal */
    bool replay_rows;
    char *stored;      /* that run's stored result (malloc), with its placeholder "estimates":[] */
    char *answer;      /* response JSON text (malloc), run_id included */
    size_t answer_len; /* its length when known (answer_in_place), else 0: strlen */
    /* or, when the answer holds the rows: the text around them (malloc; answer_parts), the rows
     * written from cols as the answer is sent (answer_stream) */
    char *head, *tail;
    int64_t run_id;
    bool replayed;
    bool charge_once; /* central DP: the run is one mechanism on the sums, charged once per silo
                         (privacy unit: a client), not self-composed over the silo's clients */
};

static int cmp_silo(const void *a, const void *b)
{
    int64_t x = ((const silo_charge *)a)->silo, y = ((const silo_charge *)b)->silo;
    return (x > y) - (x < y);
}

/* The client's error for a failed charge batch (dry or real): names the refused silo's first
 * client. */
static int charge_error(const est_job *j, int rc, const dp_err *e, dp_err *err)
{
    size_t n = j->n_silos, bad = 0;
    const ledger_charge_result *res = j->res;
    while (bad < n && res[bad].status == DP_OK)
        bad++;
    if (bad == n) { /* the batch failed as a whole (busy, internal): say so as it is */
        if (e->code != DP_OK)
            return dp_err_set(err, e->code, e->field[0] ? e->field : NULL, "%s", e->msg);
        return dp_err_set(err, rc, NULL, "charging the silos failed");
    }
    char f[48];
    snprintf(f, sizeof f, "clients[%zu].silo_id", j->sc[bad].first);
    if (res[bad].status == DP_EBUDGET)
        return dp_err_set(err, DP_EBUDGET, f,
                          "silo %lld cannot afford this run: %.6g spent + %.6g reserved + %.6g "
                          "requested would be %.6g > budget %.6g; nothing was charged or stored",
                          (long long)j->sc[bad].silo, res[bad].spent, res[bad].reserved,
                          res[bad].requested, res[bad].would_be, res[bad].budget);
    if (res[bad].status == DP_ENOTFOUND)
        return http_err_not_found(err, f, "silo", j->sc[bad].silo);
    if (res[bad].status == DP_ECONFLICT && strstr(e->msg, "idempotency") != NULL)
        return dp_err_set(err, DP_ECONFLICT, "Idempotency-Key",
                          "Idempotency-Key was already used for a different request");
    return dp_err_set(err, rc, f, "silo %lld: %s", (long long)j->sc[bad].silo, e->msg);
}

/* One silo's event, self_composed(count, ev) (ev itself for one client), checked as a request's
 * "event" would be, and its canonical JSON, serialised once here. */
static int silo_event(silo_charge *c, const acct_event *ev, bool once, dp_err *err)
{
    acct_event *one = acct_event_clone(ev);
    c->ev = c->count == 1 || once ? one : acct_event_self_composed((uint64_t)c->count, one);
    if (c->ev == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = acct_event_check(c->ev, false, err);
    if (rc != DP_OK) {
        dp_err_prefix_field(err, "event");
        return rc;
    }
    if ((c->json = event_json_dumps(c->ev)) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

/* Plans the charge of the silos named in body.clients for one run (ev: the per-client event,
 * borrowed), and checks it with a dry run, so a run that cannot be afforded is refused before
 * anything is computed. finish_run charges the plan together with the run's insert. */
static int plan_charges(est_job *j, bool priv, const acct_event *ev, dp_err *err)
{
    size_t m = cl_may_have(&j->rq, "silo_id") ? cl_count(&j->rq) : 0, named = 0;
    for (size_t i = 0; i < m; i++) {
        json_t *c = cl_get(&j->rq, i);
        if (c == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        named += json_object_get(c, "silo_id") != NULL;
        json_decref(c);
    }
    if (named == 0)
        return DP_OK;
    if (!priv || ev == NULL)
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "clients name silos (silo_id): a run on silo data must be private; add a "
                          "privacy block with a private mechanism");
    ledger *l = j->rq.app->ledger;
    if (l == NULL)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "this daemon has no budget ledger to charge silos");
    if (!j->have_who) { /* 401 or 403, now that the request itself is valid */
        if (j->who_err.code != DP_OK)
            return dp_err_set(err, j->who_err.code, j->who_err.field[0] ? j->who_err.field : NULL,
                              "%s", j->who_err.msg);
        return dp_err_set(err, DP_EINTERNAL, NULL, "the caller was not resolved");
    }
    silo_charge *sc = dp_calloc(named, sizeof *sc);
    if (sc == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    j->sc = sc;
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        json_t *c = cl_get(&j->rq, i);
        if (c == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        const json_t *s = json_object_get(c, "silo_id");
        if (s != NULL && k < named)
            sc[k++] = (silo_charge){json_integer_value(s), 1, i, NULL, NULL};
        json_decref(c);
    }
    qsort(sc, named, sizeof *sc, cmp_silo);
    size_t n = 0;
    for (size_t i = 0; i < named; i++) {
        if (n > 0 && sc[n - 1].silo == sc[i].silo) {
            sc[n - 1].count++;
            if (sc[i].first < sc[n - 1].first)
                sc[n - 1].first = sc[i].first;
        } else {
            sc[n++] = sc[i];
        }
    }
    if (n > LEDGER_MAX_BATCH)
        return dp_err_set(err, DP_EINVAL, "clients", "at most %d distinct silos per run (got %zu)",
                          LEDGER_MAX_BATCH, n);
    for (size_t i = 0; i < n; i++)
        if (j->who.role != LEDGER_ROLE_ADMIN && j->who.silo_id != sc[i].silo)
            return dp_err_set(err, DP_EFORBIDDEN, NULL, "this token may not charge silo %lld",
                              (long long)sc[i].silo);
    j->reqs = dp_calloc(n, sizeof *j->reqs);
    j->res = dp_calloc(n, sizeof *j->res);
    if (!j->reqs || !j->res)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    j->n_silos = n;
    static const char *const REASON[] = {"estimator run (gaussian)", "estimator run (beta)",
                                         "estimator run (mixture)"};
    const char *reason = strcmp(j->kind, "gaussian") == 0 ? REASON[0]
                         : strcmp(j->kind, "beta") == 0   ? REASON[1]
                                                          : REASON[2];
    for (size_t i = 0; i < n; i++) {
        int rc = silo_event(&sc[i], ev, j->charge_once, err);
        if (rc != DP_OK)
            return rc;
        j->reqs[i] = (ledger_charge_req){sc[i].silo,
                                         sc[i].ev,
                                         ACCT_NB_ADD_REMOVE,
                                         sc[i].json,
                                         j->charge_key[0] ? j->charge_key : NULL,
                                         reason,
                                         0,
                                         j->who.token_id};
    }
    dp_err e;
    dp_err_clear(&e);
    int rc = ledger_charge_batch(l, j->reqs, n, true, j->res, &e);
    return rc == DP_OK ? DP_OK : charge_error(j, rc, &e, err);
}

/* plan_charges for a route: ev (stolen) is the per-client event when priv, where NULL means
 * building it ran out of memory. */
static int charge_silos(est_job *j, bool priv, acct_event *ev, dp_err *err)
{
    int rc = priv && ev == NULL ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory")
                                : plan_charges(j, priv, ev, err);
    acct_event_free(ev);
    return rc;
}

/* The "charges" of a response before the commit: an empty array, which the commit replaces with
 * the outcome of each silo's charge (run_write). */
static json_t *charges_placeholder(void)
{
    return json_array();
}

/* The "charging" sentence of a response. */
static const char *charging_note(const est_job *j)
{
    return j->n_silos > 0 ? "charged through the ledger, all silos in one all-or-nothing batch "
                            "committed together with the stored run"
                          : "none: no client named a silo (silo_id)";
}

static int get_clients(const http_req *rq, size_t *m, dp_err *err)
{
    const json_t *cl = json_object_get(rq->body, "clients");
    if (rq->clients != NULL) {
        *m = clients_json_count(rq->clients);
    } else if (cl == NULL || json_is_null(cl)) {
        return dp_err_set(err, DP_EINVAL, "clients", "clients is required");
    } else if (!json_is_array(cl)) {
        return dp_err_set(err, DP_EINVAL, "clients", "clients must be an array (got %s)",
                          json_util_type_name(cl));
    } else {
        *m = json_array_size(cl);
    }
    if (*m < 1 || *m > EB_MAX_CLIENTS)
        return dp_err_set(err, DP_EINVAL, "clients", "clients must have 1..%d entries (got %zu)",
                          EB_MAX_CLIENTS, *m);
    return DP_OK;
}

/* A prior is estimated from the clients only when there are at least two of them. */
static int check_estimable(size_t m, dp_err *err)
{
    if (m < 2)
        return dp_err_set(err, DP_EINVAL, "clients",
                          "estimating the prior needs at least 2 clients (got %zu)", m);
    return DP_OK;
}

static int parse_seed(const json_t *body, uint64_t *seed, dp_err *err)
{
    int64_t s;
    if (json_util_opt_int(body, "seed", 1, &s, err) != DP_OK)
        return err->code;
    if (s < 0)
        return dp_err_set(err, DP_EINVAL, "seed", "seed must be >= 0 (got %lld)", (long long)s);
    *seed = (uint64_t)s;
    return DP_OK;
}

static int parse_max_iter(const json_t *body, unsigned *mi, dp_err *err)
{
    int64_t v;
    if (json_util_opt_int(body, "max_iter", EST_DEFAULT_MAX_ITER, &v, err) != DP_OK)
        return err->code;
    if (v < 1 || v > EB_MAX_ITER_CAP)
        return dp_err_set(err, DP_EINVAL, "max_iter", "max_iter must be in 1..%d (got %lld)",
                          EB_MAX_ITER_CAP, (long long)v);
    *mi = (unsigned)v;
    return DP_OK;
}

static int parse_calibration(const json_t *pv, eb_calibration *cal, dp_err *err)
{
    static const choice CAL[] = {{"classic", EB_CAL_CLASSIC}, {"analytic", EB_CAL_ANALYTIC}};
    const char *s;
    int v;
    if (json_util_opt_string(pv, "calibration", "classic", &s, err) != DP_OK ||
        pick(s, "calibration", CAL, N_ELEMS(CAL), &v, err) != DP_OK)
        return err->code;
    *cal = (eb_calibration)v;
    return DP_OK;
}

/* One key of a response and its value (a new reference, or NULL when building it failed). */
typedef struct field_val {
    const char *key;
    json_t *value;
} field_val;

/* Sets the n keys on o in order, continuing from rc: once rc is not DP_OK (on entry or after a
 * failure) the remaining values are only released. Every value is stolen, so a response under
 * construction never leaks its parts. */
static int set_fields(json_t *o, const field_val *f, size_t n, int rc, dp_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (rc == DP_OK)
            rc = json_util_set(o, f[i].key, f[i].value, err);
        else
            json_decref(f[i].value);
    }
    return rc;
}

/* What every estimator reports after its own fields. */
typedef struct run_outcome {
    double loglik;
    unsigned iterations;
    eb_status status;
    json_t *privacy;    /* stolen by finish_run; json_null() for a non-private run */
    const char *reason; /* the status in words (borrowed); NULL: nothing to add (converged) */
} run_outcome;

/* Appends one sentence (printf-style) to the status text in buf (size n), separated by a space;
 * a sentence that does not fit is cut (the status itself is in "status"). */
static void reason_add(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reason_add(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 2 >= n)
        return;
    if (len > 0)
        buf[len++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf + len, n - len, fmt, ap); /* truncation is acceptable here (see above) */
    va_end(ap);
}

/* The sentence for a private fit whose largest shrinkage is below EB_NO_POOLING_GAIN. */
static void reason_no_gain(char *buf, size_t n, double max_shr, bool quantized)
{
    reason_add(buf, n,
               "no_pooling_gain: the prior fitted to the %s messages moves no client by %g%% or "
               "more of the way to it (largest shrinkage %.3g), so pooling is predicted to cut no "
               "client's error by %g%%: these are essentially each client's own estimate; pooling "
               "through this channel needs more clients or %s.",
               quantized ? "quantized" : "privatized", 100.0 * EB_NO_POOLING_GAIN, max_shr,
               100.0 * EB_NO_POOLING_GAIN, quantized ? "more bits" : "a larger epsilon0");
}

/* ---- access (issue 10; docs/BUDGETS.md "Access control") ----
 * Runs are private data. Creating one needs a valid token (the admin's or a silo's; with --auth
 * off everyone is the admin), also when no client names a silo. Reading one needs the admin token,
 * the token that created it or another token of the same silo (a rotated silo keeps its runs), or
 * the token of a silo the run charged (estimator_run_silos, written with the run). Anyone else is
 * answered 404, as for a run that does not exist, so ids do not leak. The rule itself is in
 * service/db/runs.c, one condition for the read and the list. */

static int run_require_token(const http_req *rq, dp_err *err)
{
    ledger_principal who;
    return auth_resolve(rq, &who, err);
}

/* Resolves the caller (401 without a valid token) as a viewer of runs. */
static int run_viewer(const http_req *rq, runs_viewer *v, dp_err *err)
{
    return auth_viewer(rq, v, NULL, err);
}

/* ---- run storage ---- */

/* Makes room in b for extra more bytes and a NUL (codec/run_rows.h). A buffer grows by realloc,
 * which moves a large block by remapping its pages rather than by holding two copies. */
static int tb_reserve(text_buf *b, size_t extra)
{
    return run_text_reserve(b, extra);
}

__attribute__((format(printf, 2, 3))) static void tb_printf(text_buf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->s != NULL && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        if (tb_reserve(b, (size_t)n) != 0)
            return;
    }
}

/* Inserts n bytes of t at offset at (<= b->len), in place. -1 when out of memory. */
static int tb_insert(text_buf *b, size_t at, const char *t, size_t n)
{
    if (tb_reserve(b, n) != 0)
        return -1;
    memmove(b->s + at + n, b->s + at, b->len - at + 1);
    memcpy(b->s + at, t, n);
    b->len += n;
    return 0;
}

/* Removes n bytes at offset at (at + n <= b->len), in place. */
static void tb_erase(text_buf *b, size_t at, size_t n)
{
    memmove(b->s + at, b->s + at + n, b->len - at - n + 1);
    b->len -= n;
}

/* A JSON number with 17 significant digits (as jansson writes them), null when not finite. */
static void tb_real(text_buf *b, const char *key, double x)
{
    if (isfinite(x))
        tb_printf(b, ",\"%s\":%.17g", key, x);
    else
        tb_printf(b, ",\"%s\":null", key);
}

/* The response's privacy.charges from each silo's charge outcome. Owned text (malloc) or NULL. */
static char *charges_text(const est_job *j, const ledger_charge_result *res)
{
    text_buf b = {0};
    tb_printf(&b, "[");
    for (size_t i = 0; i < j->n_silos; i++) {
        tb_printf(&b, "%s{\"silo_id\":%lld,\"charge_id\":%lld,\"clients\":%zu,\"event\":%s",
                  i ? "," : "", (long long)j->sc[i].silo, (long long)res[i].charge_id,
                  j->sc[i].count, j->sc[i].json);
        tb_real(&b, "cost_eps", res[i].cost_eps);
        tb_real(&b, "cost_rho", res[i].cost_rho);
        tb_real(&b, "spent_eps_after", res[i].spent_eps_after);
        tb_real(&b, "remaining_after", res[i].remaining_after);
        tb_printf(&b, ",\"replayed\":%s}", res[i].replayed ? "true" : "false");
    }
    tb_printf(&b, "]");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The stored result (an object's text) with "run_id" (and "replayed": true) appended. */
static char *answer_text(const char *result, int64_t id, bool replayed)
{
    size_t len = strlen(result);
    while (len > 0 && result[len - 1] != '}')
        len--;
    if (len == 0)
        return NULL;
    text_buf b = {0};
    tb_printf(&b, "%.*s%s\"run_id\":%lld%s}", (int)(len - 1), result, len > 2 ? "," : "",
              (long long)id, replayed ? ",\"replayed\":true" : "");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The placeholder a result text holds where its rows go ("estimates":[], written by jansson's
 * compact dump of an empty "estimates" array; the only empty one, as a run has >= 2 clients). */
static const char EST_PH[] = "\"estimates\":[]";
#define EST_PH_LEN (sizeof EST_PH - 1)

/* The offset in result just past the placeholder's '[' (where the rows go), or 0 when it has
 * none. */
static size_t placeholder_rows_at(const char *result)
{
    const char *at = strstr(result, EST_PH);
    return at == NULL ? 0 : (size_t)(at - result) + EST_PH_LEN - 1;
}

/* Splits result (a result text holding the placeholder) into the answer's head (up to and
 * including its '[') and tail (from its ']' on, with "run_id" and, for a replay, "replayed":
 * true), between which the rows of j->cols go. */
static int answer_parts(est_job *j, const char *result, bool replayed, dp_err *err)
{
    size_t pre = placeholder_rows_at(result);
    if (pre == 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "the result has no place for its estimates");
    free(j->head);
    free(j->tail);
    j->head = strndup(result, pre);
    j->tail = answer_text(result + pre, j->run_id, replayed);
    if (j->head == NULL || j->tail == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

/* Member key of a flat client (clients_json_flat_get): its index, or -1. */
static int flat_find(const clients_json_flat *f, const char *key)
{
    size_t kl = strlen(key);
    for (size_t j = 0; j < f->n; j++)
        if (f->m[j].key_len == kl && memcmp(f->m[j].key, key, kl) == 0)
            return (int)j;
    return -1;
}

/* Whether a flat client's "id" (index k, or -1 for none) is one check_id accepts as it is: a
 * string or an integer. */
static bool flat_id_ok(const clients_json_flat *f, int k)
{
    return k < 0 || f->m[k].is_str || f->m[k].is_int;
}

/* The JSON text of client i's row id, as json_dumps writes client_id's value, read without
 * jansson when the client is flat (its "id" a plain string or an integer token other than "-0",
 * or absent: its index, written into buf); false when it is not, then row_id's path. */
static bool flat_row_id(const http_req *rq, size_t i, char *buf, size_t cap, const char **t,
                        size_t *len)
{
    clients_json_flat f;
    if (rq->clients == NULL || clients_json_flat_peek(rq->clients, i, &f) != 0)
        return false;
    int k = flat_find(&f, "id");
    if (k < 0) {
        *len = (size_t)snprintf(buf, cap, "%zu", i);
        *t = buf;
        return true;
    }
    if (f.m[k].is_str) { /* its quotes included: the body's text is jansson's */
        *t = f.m[k].text - 1;
        *len = f.m[k].text_len + 2;
        return true;
    }
    if (!f.m[k].is_int || (f.m[k].text_len == 2 && memcmp(f.m[k].text, "-0", 2) == 0))
        return false;
    *t = f.m[k].text; /* a JSON integer token is written back as it is read, but "-0" */
    *len = f.m[k].text_len;
    return true;
}

/* Starts the per-client results (j->cols, its fields added) for m rows: each with its client's
 * id (with_ids: the client's own as JSON text, or the index when no client sent one) or none. */
static int rows_begin(est_job *j, size_t m, bool with_ids, dp_err *err)
{
    run_ids ids = !with_ids                   ? RUN_IDS_NONE
                  : cl_may_have(&j->rq, "id") ? RUN_IDS_TEXT
                                              : RUN_IDS_INDEX;
    if (run_rows_alloc(&j->cols, m, ids) != 0)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; ids == RUN_IDS_TEXT && i < m; i++) {
        char num[32];
        const char *ft;
        size_t fl;
        if (flat_row_id(&j->rq, i, num, sizeof num, &ft, &fl)) {
            if (run_rows_push_id(&j->cols, i, ft, fl) != 0)
                return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            continue;
        }
        json_t *id = row_id(&j->rq, i);
        char *t = id ? json_util_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(id);
        bool bad = t == NULL || run_rows_push_id(&j->cols, i, t, strlen(t)) != 0;
        free(t);
        if (bad)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return DP_OK;
}

/* Adds the fields (names and widths; vec: written as arrays) of the per-client results. */
static int rows_fields(est_job *j, const char *const *names, const size_t *widths, const bool *vec,
                       size_t n, dp_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (run_rows_add_field(&j->cols, names[i], widths[i], vec[i]) != 0)
            return dp_err_set(err, DP_EINTERNAL, NULL, "too many per-client fields");
    return DP_OK;
}

/* Writes into b (empty) the result text result (with the placeholder "estimates":[]) with the
 * rows of r between its brackets, front to back: the rows, the largest text of a run, are written
 * once, where they stay. -1 when out of memory or the placeholder is missing. */
static int result_around_rows(const char *result, const run_rows *r, text_buf *b)
{
    size_t pre = placeholder_rows_at(result); /* up to and including '[' */
    if (pre == 0)
        return -1;
    const char *post = result + pre;
    size_t n_post = strlen(post);
    if (tb_reserve(b, pre) != 0)
        return -1;
    memcpy(b->s + b->len, result, pre);
    b->len += pre;
    if (run_rows_write(r, 0, r->m, false, false, b) != 0 ||
        tb_reserve(b, n_post + 64) != 0) /* 64: room for the run_id at the end */
        return -1;
    memcpy(b->s + b->len, post, n_post + 1);
    b->len += n_post;
    return 0;
}

/* The answer from the result text b: "run_id" appended in place. b is emptied; the text (owned)
 * is returned, or NULL when out of memory. */
static char *answer_in_place(text_buf *b, int64_t id, size_t *len)
{
    while (b->len > 0 && b->s[b->len - 1] != '}')
        b->len--;
    if (b->len == 0)
        return NULL;
    b->s[--b->len] = '\0';
    tb_printf(b, "%s\"run_id\":%lld}", b->len > 1 ? "," : "", (long long)id);
    if (b->failed)
        return NULL;
    char *t = b->s;
    *len = b->len;
    *b = (text_buf){0};
    return t;
}

/* What run_write stores. */
typedef struct run_row {
    est_job *j;
    bool priv;
    size_t m;
    const char *status;
    const char *params, *data; /* JSON text; data may be NULL */
    size_t data_len;           /* bytes of data */
    text_buf *result;          /* the result's text, its charges still to be written */
    size_t charges_at;         /* offset in it just past the '[' of privacy's "charges":[] */
    size_t charges_len;        /* bytes of charges the last run_write put there */
    const run_rows *rows;      /* the per-client results to store beside it; NULL: none */
} run_row;

/* Takes the placeholder "estimates":[] (and a comma beside it) out of b: the answer of a
 * "summary" run that keeps its rows, or a run whose rows were answered but not kept. */
static void erase_placeholder(text_buf *b)
{
    size_t end = b->s ? placeholder_rows_at(b->s) : 0;
    if (end == 0)
        return;
    size_t from = end + 1 - EST_PH_LEN, n = EST_PH_LEN;
    if (from + n < b->len && b->s[from + n] == ',')
        n++;
    else if (from > 0 && b->s[from - 1] == ',')
        from--, n++;
    tb_erase(b, from, n);
}

/* erase_placeholder on a NUL-terminated text (malloc'd), in place; returns s. */
static char *without_placeholder(char *s)
{
    text_buf b = {s, strlen(s), strlen(s) + 1, false};
    erase_placeholder(&b);
    return s;
}

/* The stored result text (owned: consumed) of run id with its per-client results (migration 0015)
 * written into its placeholder "estimates": []. A run that stored none is returned as it is (a
 * "summary" run, a run stored before 0015) or, when its rows were answered but not kept
 * ("keep_results" false: *unkept set), without its placeholder, or with it when keep_ph. The text
 * (owned), or NULL with err set. */
static char *result_with_rows(sqlite3 *db, int64_t id, char *result, const char *req_id,
                              bool keep_ph, bool *unkept, dp_err *err)
{
    run_rows r;
    size_t total = 0;
    bool found = false;
    *unkept = false;
    if (runs_rows_get(db, id, 0, SIZE_MAX, req_id, &r, &total, &found, err) != DP_OK) {
        free(result);
        return NULL;
    }
    if (!found) {
        *unkept = placeholder_rows_at(result) != 0;
        return *unkept && !keep_ph ? without_placeholder(result) : result;
    }
    text_buf b = {0};
    bool bad = result_around_rows(result, &r, &b) != 0;
    run_rows_clear(&r);
    free(result);
    if (bad) {
        free(b.s);
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    return b.s;
}

/* Looks up the run of key; *found = 0 (none), 1 (same request: j->run_id set, replayed, and
 * j->answer set, or j->replay_rows and j->stored when its rows must be computed again) or 2
 * (another request). */
static int run_by_key(sqlite3 *db, est_job *j, int *found, dp_err *err)
{
    char *result = NULL;
    int64_t id = 0;
    bool unkept = false;
    int rc = runs_find_key(db, j->key, j->hash, j->req_id, found, &id, &result, err);
    if (rc == DP_OK && *found == 1 && j->summary) /* the fit alone, as first answered */
        without_placeholder(result);
    else if (rc == DP_OK && *found == 1 &&
             (result = result_with_rows(db, id, result, j->req_id, true, &unkept, err)) == NULL)
        rc = err->code;
    if (rc == DP_OK && *found == 1 && unkept) { /* answered without keeping: computed again */
        j->run_id = id;
        j->replayed = true;
        j->replay_rows = true;
        free(j->stored);
        j->stored = result;
        return DP_OK;
    }
    if (rc == DP_OK && *found == 1) {
        j->run_id = id;
        j->replayed = true;
        free(j->answer);
        j->answer = answer_text(result, id, true);
        j->answer_len = 0;
        if (j->answer == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    free(result);
    return rc;
}

static int key_conflict(dp_err *err)
{
    return dp_err_set(err, DP_ECONFLICT, "Idempotency-Key",
                      "Idempotency-Key was already used for a different request");
}

/* Stores the run in the caller's transaction (ledger_write_fn): on the writer's connection, inside
 * the savepoint of the silos' charge, so both commit or neither, or of an operation of its own when
 * no silo is charged; on the request's connection only when there is no writer (unit tests). res:
 * each silo's charge (n = j->n_silos), written into the result text in place (again, after the
 * previous attempt's are taken out, when the committer runs the op twice). The text is stored as it
 * will be answered. */
static int run_write(sqlite3 *db, void *arg, const ledger_charge_result *res, size_t n, dp_err *err)
{
    run_row *w = arg;
    est_job *j = w->j;
    if (j->key[0] != '\0') {
        int found;
        if (run_by_key(db, j, &found, err) != DP_OK)
            return err->code;
        if (found == 2)
            return key_conflict(err);
        if (found == 1) {
            for (size_t i = 0; i < n; i++)
                if (!res[i].replayed) /* a charge made now: not the first request's */
                    return key_conflict(err);
            return DP_OK;
        }
    }
    text_buf *b = w->result;
    if (w->charges_len > 0) { /* a previous attempt's, rolled back */
        tb_erase(b, w->charges_at, w->charges_len);
        w->charges_len = 0;
    }
    int64_t *silos = NULL;
    if (n > 0) {
        if (w->charges_at == 0)
            return dp_err_set(err, DP_EINTERNAL, NULL, "the result has no charges to fill");
        char *c = charges_text(j, res);
        size_t cl = c ? strlen(c) : 0; /* "[...]": the elements go between the brackets */
        bool ok = cl >= 2 && tb_insert(b, w->charges_at, c + 1, cl - 2) == 0;
        free(c);
        silos = ok ? dp_calloc(n, sizeof *silos) : NULL;
        if (silos == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        w->charges_len = cl - 2;
        for (size_t i = 0; i < n; i++)
            silos[i] = j->sc[i].silo;
    }
    runs_new r = {j->kind,
                  time_now_ms(),
                  j->req_id[0] ? j->req_id : "-",
                  w->status,
                  w->priv,
                  (int64_t)w->m,
                  w->params,
                  w->data,
                  w->data_len,
                  b->s,
                  b->len,
                  j->key[0] ? j->key : NULL,
                  j->key[0] ? j->hash : NULL,
                  j->creator,
                  silos,
                  n,
                  w->rows};
    int64_t id = 0;
    int rc = runs_insert(db, &r, j->req_id, &id, err);
    dp_free(silos);
    if (rc != DP_OK)
        return rc;
    j->run_id = id;
    j->replayed = false;
    free(j->answer);
    j->answer = NULL;
    j->answer_len = 0;
    return DP_OK;
}

/* db/writer.h apply: the run of a job that charges no silo (run_row). */
static int run_write_alone(sqlite3 *db, void *arg, dp_err *err)
{
    return run_write(db, arg, NULL, 0, err);
}

/* Charges the planned silos and stores the run, in one transaction, through the database's writer:
 * with a ledger as its charge's operation (also with no silo to charge: the write alone, through
 * the ledger's committer, which is the writer); without one (app->writer alone) as an operation
 * of its own. Only a process with neither (unit tests) writes on the request's connection. */
static int commit_run(est_job *j, run_row *w, dp_err *err)
{
    ledger *l = j->rq.app->ledger;
    if (l != NULL) {
        dp_err e;
        dp_err_clear(&e);
        int rc = ledger_charge_batch_with(l, j->reqs, j->n_silos, run_write, w, j->res, &e);
        if (rc == DP_OK)
            return DP_OK;
        if (j->n_silos > 0 && e.code != DP_ECONFLICT)
            return charge_error(j, rc, &e, err);
        return dp_err_set(err, e.code ? e.code : rc, e.field[0] ? e.field : NULL, "%s", e.msg);
    }
    if (j->n_silos > 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no ledger to store the run with");
    if (j->rq.app->writer != NULL) /* no silo to charge: the run alone, through the writer */
        return db_writer_run(j->rq.app->writer, run_write_alone, w, err);
    if (j->rq.db == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no ledger to store the run with");
    return db_writer_run_conn(j->rq.db, run_write_alone, w, err); /* no writer: unit tests */
}

/* The answer of a retry whose first run answered its rows without keeping them: the stored result
 * (j->stored) with the rows computed again written into it, once the fit computed again (fresh:
 * the result text, with charges_len bytes of charges at charges_at when charges_at > 0, skipped:
 * the stored run's are answered) is checked to be the stored one: the fit, and the rows by their
 * digest (estimates_digest, run_rows_digest). The runs are deterministic (seeded), so on the same
 * build and machine they are the first answer's; a stored run that differs (stored by another
 * build, or where the fit's kernels or libm differ) is a 409, as nothing else could be answered. */
static int replay_answer(est_job *j, const text_buf *fresh, size_t charges_at, size_t charges_len,
                         dp_err *err)
{
    const char *st = j->stored;
    size_t sl = strlen(st), pre = charges_at ? charges_at : fresh->len;
    size_t post = fresh->len - pre - (charges_at ? charges_len : 0);
    bool same = sl >= pre + post && memcmp(st, fresh->s, pre) == 0 &&
                memcmp(st + sl - post, fresh->s + fresh->len - post, post) == 0 &&
                (charges_at > 0 || sl == pre);
    if (!same)
        return dp_err_set(err, DP_ECONFLICT, "Idempotency-Key",
                          "run %lld was stored under this Idempotency-Key without its per-client "
                          "results, and its fit or rows (estimates_digest) are not the ones "
                          "computed now (stored by another version of the daemon, or on another "
                          "machine?): its fit is GET /v1/runs/%lld%s",
                          (long long)j->run_id, (long long)j->run_id,
                          j->n_silos > 0 ? "; the same request under another key would charge "
                                           "the silos again"
                                         : "");
    return answer_parts(j, st, true, err);
}

/* Completes result (not NULL) with the route's fields, then log_likelihood, iterations, status,
 * converged ("status is not max_iter") and privacy, charges the planned silos and stores the run
 * (commit_run); j->answer gets the response text. result, the values in fields and oc->privacy are
 * stolen. Stored params = body without "clients", plus n_clients and dimension; data = clients if
 * keep_data. */
static int finish_run(est_job *j, bool priv, size_t m, size_t d, json_t *result,
                      const field_val *fields, size_t n_fields, const run_outcome *oc, dp_err *err)
{
    const json_t *body = j->rq.body;
    const field_val common[] = {
        {"log_likelihood", json_util_real(oc->loglik)},
        {"iterations", json_integer((json_int_t)oc->iterations)},
        {"status", json_string(eb_status_name(oc->status))},
        {"converged", json_boolean(oc->status != EB_STATUS_MAX_ITER)},
        {"status_reason",
         oc->reason != NULL && oc->reason[0] != '\0' ? json_string(oc->reason) : json_null()},
        {"privacy", oc->privacy},
    };
    json_t *params = NULL;
    char *ps = NULL, *rs = NULL, *ds = NULL;
    text_buf small = {0}; /* the result as stored: per-client rows left out */
    bool keep = false;
    int rc = set_fields(result, fields, n_fields, DP_OK, err);
    rc = set_fields(result, common, N_ELEMS(common), rc, err);
    if (rc == DP_OK && j->cancel != NULL && atomic_load(j->cancel)) /* deadline: charge nothing */
        rc = dp_err_set(err, DP_EBUSY, NULL, "the run was cancelled before it was charged");
    if (rc != DP_OK)
        goto out;
    rc = json_util_opt_bool(body, "keep_data", false, &keep, err);
    if (rc != DP_OK)
        goto out;
    params = json_copy((json_t *)body); /* shallow: the clients are dropped, not copied */
    if (params == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    json_object_del(params, "clients");
    json_object_del(params, "x"); /* normal-means observations (api/normal_means.c): data */
    json_object_del(params, "s");
    if (json_util_set(params, "n_clients", json_integer((json_int_t)m), err) != DP_OK ||
        json_util_set(params, "dimension", json_integer((json_int_t)d), err) != DP_OK) {
        rc = err->code;
        goto out;
    }
    ps = json_util_dumps(params, JSON_COMPACT);
    json_decref(params);
    params = NULL;
    if (j->summary && !j->keep_results) /* no per-client results: none answered, none stored */
        json_object_del(result, "estimates");
    if (json_util_set(result, "results", json_string(j->summary ? "summary" : "full"), err) !=
            DP_OK ||
        json_util_set(result, "keep_results", json_boolean(j->keep_results), err) != DP_OK) {
        rc = err->code;
        goto out;
    }
    if (j->cols.m > 0) { /* the rows' digest: what a retry that computes them again must match */
        char dg[17];
        run_rows_digest(&j->cols, dg);
        if (json_util_set(result, "estimates_digest", json_string(dg), err) != DP_OK) {
            rc = err->code;
            goto out;
        }
    }
    /* small: the estimates are stored as columns (j->cols) and written into the answer after */
    rs = json_util_dumps(result, JSON_COMPACT);
    json_decref(result);
    result = NULL;
    size_t charges_at = 0;
    if (rs != NULL)
        tb_printf(&small, "%s", rs);
    if (rs == NULL || small.failed) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (priv) { /* privacy's "charges":[], the only one in the result */
        static const char CH[] = "\"charges\":[]";
        const char *at = strstr(small.s, CH);
        charges_at = at ? (size_t)(at - small.s) + sizeof CH - 2 : 0;
    }
    if (keep)
        ds = j->rq.clients ? clients_json_dumps(j->rq.clients, JSON_COMPACT)
                           : json_util_dumps(json_object_get(body, "clients"), JSON_COMPACT);
    if (ps == NULL || (keep && ds == NULL)) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    bool rows = j->cols.m > 0; /* computed: answered unless "summary", stored when kept */
    const run_rows *kept = rows && j->keep_results ? &j->cols : NULL;
    run_row w = {
        j,          priv, m,   eb_status_name(oc->status), ps, ds, ds ? strlen(ds) : 0, &small,
        charges_at, 0,    kept};
    rc = commit_run(j, &w, err);
    if (rc == DP_OK && j->replayed && j->replay_rows && rows && !j->summary)
        rc = replay_answer(j, &small, charges_at, w.charges_len, err);
    else if (rc == DP_OK && j->replayed && j->replay_rows) { /* no rows now: the stored fit */
        free(j->answer);
        j->answer = answer_text(without_placeholder(j->stored), j->run_id, true);
        j->answer_len = 0;
        if (j->answer == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc != DP_OK || j->replayed)
        goto out;
    if (rows && !j->summary) { /* the rows are written as the answer is sent (answer_stream) */
        rc = answer_parts(j, small.s, false, err);
    } else { /* the fit alone ("summary"; its rows, when kept, are paged from the run) */
        erase_placeholder(&small);
        j->answer = answer_in_place(&small, j->run_id, &j->answer_len);
        if (j->answer == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
out:
    free(small.s);
    free(ps);
    free(rs);
    free(ds);
    json_decref(params);
    json_decref(result);
    return rc;
}

/* ---- the job: checks on the HTTP thread, the run on a compute thread ---- */

static void est_job_free(void *arg)
{
    est_job *j = arg;
    if (j == NULL)
        return;
    for (size_t i = 0; j->sc != NULL && i < j->n_silos; i++) {
        acct_event_free(j->sc[i].ev);
        free(j->sc[i].json);
    }
    dp_free(j->reqs);
    dp_free(j->res);
    dp_free(j->sc);
    free(j->answer);
    free(j->head);
    free(j->tail);
    free(j->stored);
    run_rows_clear(&j->cols);
    json_decref(j->rq.body);
    clients_json_decref(j->rq.clients);
    dp_free(j);
}

/* The integer value of key in o when it is a JSON integer in [lo, hi], else def. */
static double int_or(const json_t *o, const char *key, double def, double lo, double hi)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return def;
    double x = (double)json_integer_value(v);
    return x >= lo && x <= hi ? x : def;
}

/* The cost of a run, from the sizes in the body alone (nothing is parsed or allocated): refused
 * when clients x dims x components x n_init x max_iter exceeds --max-estimator-work (400), or when
 * the result's clients x (components + dims) values exceed --max-estimator-cells (413). Malformed
 * sizes are left to the full validation. */
static int est_check_work(const est_job *j, dp_err *err)
{
    const json_t *body = j->rq.body;
    if (cl_count(&j->rq) == 0)
        return DP_OK;
    double m = (double)cl_count(&j->rq), d = 1, k = 1, n_init = 1;
    json_t *c0 = cl_get(&j->rq, 0);
    if (c0 == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    const json_t *mean = json_object_get(c0, "mean"), *smp = json_object_get(c0, "samples");
    if (json_is_array(mean))
        d = (double)json_array_size(mean);
    else if (json_is_array(smp) && json_is_array(json_array_get(smp, 0)))
        d = (double)json_array_size(json_array_get(smp, 0));
    json_decref(c0);
    double max_iter = int_or(body, "max_iter", EST_DEFAULT_MAX_ITER, 1, EB_MAX_ITER_CAP);
    if (strcmp(j->kind, "mixture") == 0) {
        const json_t *pc = json_object_get(json_object_get(body, "prior"), "components");
        if (json_is_array(pc)) { /* a known prior: no fit */
            k = (double)json_array_size(pc);
            max_iter = 1;
        } else {
            k = int_or(body, "components", 1, 1, EB_MAX_COMPONENTS);
            n_init = int_or(body, "n_init", eb_mix_opts_default(1).n_init, 1, 100);
        }
    }
    const cfg *c = j->rq.app->cfg;
    double cap_work = c ? c->max_estimator_work : CFG_DEFAULT_MAX_EST_WORK;
    double cap_cells = c ? c->max_estimator_cells : CFG_DEFAULT_MAX_EST_CELLS;
    double cells = m * (k + d), work = m * d * k * n_init * max_iter;
    if (cells > cap_cells)
        return dp_err_set(err, DP_ETOOBIG, "clients",
                          "the result would hold clients x (components + dims) = %.0f x (%.0f + "
                          "%.0f) = %.3g values, above --max-estimator-cells %.3g; split the "
                          "clients over several runs",
                          m, k, d, cells, cap_cells);
    if (work > cap_work)
        return dp_err_set(err, DP_EINVAL, "max_iter",
                          "work of %.3g steps (clients x dims x components x n_init x max_iter = "
                          "%.0f x %.0f x %.0f x %.0f x %.0f) is above --max-estimator-work %.3g; "
                          "lower max_iter, n_init or components",
                          work, m, d, k, n_init, max_iter, cap_work);
    return DP_OK;
}

/* "results": "full" (the default: every client's estimate answered) or "summary" (the fit alone:
 * no per-client row answered), and "keep_results" (default false: the rows are stored with the
 * run, for GET /v1/runs/{id} and its pages, only when true). */
static int est_results(est_job *j, dp_err *err)
{
    const json_t *v = json_object_get(j->rq.body, "results");
    if (json_util_opt_bool(j->rq.body, "keep_results", false, &j->keep_results, err) != DP_OK)
        return err->code;
    if (v == NULL)
        return DP_OK;
    const char *t = json_string_value(v);
    if (t == NULL || (strcmp(t, "full") != 0 && strcmp(t, "summary") != 0))
        return dp_err_set(err, DP_EINVAL, "results",
                          "results must be \"full\" (every client's estimate answered) or "
                          "\"summary\" (the fit alone)");
    j->summary = strcmp(t, "summary") == 0;
    return DP_OK;
}

/* Resolves the caller when any client names a silo (charging needs it; a failure is kept for
 * plan_charges, so that invalid input is still answered 400 first) or an Idempotency-Key is sent
 * (its scope; a failure is answered now). */
static int est_resolve(const http_req *rq, est_job *j, dp_err *err)
{
    size_t m = cl_may_have(rq, "silo_id") ? cl_count(rq) : 0;
    bool named = false;
    for (size_t i = 0; i < m && !named; i++) {
        json_t *c = cl_get(rq, i);
        if (c == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        named = json_object_get(c, "silo_id") != NULL;
        json_decref(c);
    }
    if (!named && rq->idempotency_key == NULL)
        return DP_OK;
    if (!named && rq->bearer == NULL && (rq->app->cfg == NULL || !rq->app->cfg->auth_off))
        return DP_OK; /* an anonymous key: scoped to token 0 */
    dp_err_clear(&j->who_err);
    if (auth_resolve(rq, &j->who, &j->who_err) == DP_OK) {
        j->have_who = true;
        return DP_OK;
    }
    if (rq->idempotency_key == NULL)
        return DP_OK;
    *err = j->who_err;
    return err->code;
}

/* json_dump_callback's writer into a SHA-256 context. */
static int sha_cb(const char *buf, size_t size, void *data)
{
    dp_sha256_update(data, buf, size);
    return 0;
}

/* Validates the Idempotency-Key header and hashes the request it names. */
static int est_key(const http_req *rq, est_job *j, dp_err *err)
{
    const char *k = rq->idempotency_key;
    if (k == NULL)
        return DP_OK;
    size_t len = strlen(k);
    if (len < 1 || len > EST_KEY_MAX)
        return dp_err_set(err, DP_EINVAL, "Idempotency-Key",
                          "Idempotency-Key must have 1..%d characters (got %zu)", EST_KEY_MAX, len);
    for (size_t i = 0; i < len; i++)
        if (k[i] < 0x21 || k[i] > 0x7e)
            return dp_err_set(err, DP_EINVAL, "Idempotency-Key",
                              "Idempotency-Key must be printable ASCII without spaces");
    /* Scoped by principal, not by token: a silo that rotates its token keeps its keys (its retry
     * after a rotation is still the same request), and two silos never share a key space. */
    if (j->who.role == LEDGER_ROLE_ADMIN)
        snprintf(j->key, sizeof j->key, "a:%s", k);
    else
        snprintf(j->key, sizeof j->key, "s%lld:%s", (long long)j->who.silo_id, k);
    snprintf(j->charge_key, sizeof j->charge_key, "run:%s", j->key);
    /* The hash covers json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS), the same text whether the
     * clients came as a tree or as spans, fed to SHA-256 piece by piece (no copy of the body). */
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    dp_sha256_update(&c, j->kind, strlen(j->kind) + 1);
    if (rq->body != NULL &&
        (rq->clients != NULL
             ? clients_json_dump_body(rq->body, rq->clients, JSON_COMPACT | JSON_SORT_KEYS, sha_cb,
                                      &c)
             : json_dump_callback(rq->body, sha_cb, &c, JSON_COMPACT | JSON_SORT_KEYS)) != 0)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    uint8_t dg[DP_SHA256_DIGEST_BYTES];
    dp_sha256_final(&c, dg);
    dp_sha256_hex(dg, j->hash);
    return DP_OK;
}

static int est_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    est_job *j = arg;
    j->cancel = cancel;
    int rc = j->compute(j, err);
    if (rc == DP_OK && j->answer == NULL && j->head == NULL)
        rc = dp_err_set(err, DP_EINTERNAL, NULL, "the run produced no answer");
    return rc;
}

/* An answer with rows, written as it is sent (http/server.h http_stream): the head, the rows from
 * the columns a batch at a time, the tail. So the answer of 10^6 clients (~100 MB of text) is
 * never held whole: the socket takes each piece as it is written, and no page of it is touched
 * twice. */
typedef struct answer_stream {
    char *head, *tail; /* owned */
    run_rows cols;     /* owned: the job's */
    size_t next;       /* the next row to write */
    int part;          /* 0 head, 1 rows, 2 tail, 3 done */
    text_buf piece;    /* the piece being handed out */
    size_t off;        /* its bytes handed out so far */
} answer_stream;

#define ANSWER_BATCH 512 /* rows a piece (~50-80 kB of text) */

static long answer_read(void *cls, char *buf, size_t max)
{
    answer_stream *a = cls;
    size_t n = 0;
    while (n < max) {
        if (a->off < a->piece.len) {
            size_t k = a->piece.len - a->off < max - n ? a->piece.len - a->off : max - n;
            memcpy(buf + n, a->piece.s + a->off, k);
            a->off += k;
            n += k;
            continue;
        }
        a->piece.len = 0;
        a->off = 0;
        if (a->part == 0) {
            tb_printf(&a->piece, "%s", a->head);
            a->part = 1;
        } else if (a->part == 1 && a->next < a->cols.m) {
            size_t to = a->cols.m - a->next > ANSWER_BATCH ? a->next + ANSWER_BATCH : a->cols.m;
            if (run_rows_write(&a->cols, a->next, to, a->next > 0, false, &a->piece) != 0)
                return -1;
            a->next = to;
        } else if (a->part == 1) {
            a->part = 2;
        } else if (a->part == 2) {
            tb_printf(&a->piece, "%s", a->tail);
            a->part = 3;
        } else {
            break;
        }
        if (a->piece.failed)
            return -1;
    }
    return (long)n;
}

static void answer_free(void *cls)
{
    answer_stream *a = cls;
    free(a->head);
    free(a->tail);
    free(a->piece.s);
    run_rows_clear(&a->cols);
    dp_free(a);
}

/* 201 with the run's Location; the body is the stored text as is when it goes to a socket (or
 * written as it is sent, when it holds the rows). */
static int est_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)rq;
    est_job *j = arg;
    if (j->head != NULL) { /* the rows between head and tail */
        answer_stream *a = dp_calloc(1, sizeof *a);
        if (a == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        a->head = j->head;
        a->tail = j->tail;
        a->cols = j->cols;
        j->head = j->tail = NULL;
        memset(&j->cols, 0, sizeof j->cols);
        http_stream st = {answer_read, answer_free, a};
        if (http_resp_stream(rs, 201, "application/json", st, err) != DP_OK)
            return err->code;
        if (deferred) {
            snprintf(rs->location, sizeof rs->location, "/v1/runs/%lld", (long long)j->run_id);
            return DP_OK;
        }
        if (http_resp_drain(rs, err) != DP_OK) /* inline: the whole text, parsed below */
            return err->code;
        j->answer = rs->text;
        rs->text = NULL;
        http_resp_clear(rs);
    }
    if (deferred) {
        char *t = j->answer;
        size_t len = j->answer_len ? j->answer_len : strlen(t); /* 100 MB for 10^6 clients */
        j->answer = NULL;
        if (http_resp_text(rs, 201, "application/json", t, len, err) != DP_OK)
            return err->code;
        snprintf(rs->location, sizeof rs->location, "/v1/runs/%lld", (long long)j->run_id);
        return DP_OK;
    }
    json_error_t je;
    json_t *body = json_util_loads(j->answer, 0, &je);
    if (body == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return http_resp_created(rs, body, err, "/v1/runs/%lld", (long long)j->run_id);
}

/* A POST /v1/estimators/<kind>: checks on this thread, then the run on the compute pool. Also the
 * entry of routes in other files (api/estimators_run.h). */
int est_start(const http_req *rq, http_resp *rs, const char *kind, est_compute_fn compute,
              dp_err *err)
{
    int64_t creator = 0;
    if (run_require_token(rq, err) != DP_OK || /* issue 10: runs are private (401) */
        auth_creator_id(rq, &creator, err) != DP_OK)
        return err->code;
    est_job *j = dp_calloc(1, sizeof *j);
    if (j == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    j->kind = kind;
    j->creator = creator;
    j->compute = compute;
    j->rq = *rq;
    j->rq.body = json_incref(rq->body);
    j->rq.clients = clients_json_incref(rq->clients);
    snprintf(j->req_id, sizeof j->req_id, "%s", rq->req_id ? rq->req_id : "");
    j->rq.req_id = j->req_id;
    j->rq.defer = NULL;
    j->app = *rq->app; /* the job's own copy: no pool, no metrics off the HTTP thread */
    j->app.compute = NULL;
    j->app.metrics = NULL;
    j->rq.app = &j->app;
    j->rq.bearer = NULL;
    j->rq.idempotency_key = NULL;
    j->rq.params = NULL;
    j->rq.n_params = 0;
    j->rq.query = NULL;
    j->rq.n_query = 0;
    bool offload = rq->defer != NULL && rq->app->compute != NULL;
    if (offload)
        j->rq.db = NULL; /* the HTTP thread returns it: never used off that thread */
    int rc = est_results(j, err);
    if (rc == DP_OK)
        rc = est_check_work(j, err);
    if (rc == DP_OK)
        rc = est_resolve(rq, j, err);
    if (rc == DP_OK)
        rc = est_key(rq, j, err);
    if (rc == DP_OK && j->key[0] != '\0') { /* a retry of a stored run: its first answer */
        int found = 0;
        rc = run_by_key(store_conn_db(rq->db), j, &found, err);
        if (rc == DP_OK && found == 2)
            rc = key_conflict(err);
        if (rc == DP_OK && found == 1 && !j->replay_rows) {
            rc = est_render(j, rq, rs, offload, err);
            est_job_free(j);
            return rc;
        }
    }
    if (rc != DP_OK) {
        est_job_free(j);
        return rc;
    }
    compute_task t = {est_run, est_render, est_job_free, j, COMPUTE_TOKEN};
    return compute_offload(rq, rs, &t, err);
}

/* D16: numerical limits of the fits, reported as what they are (422 numerical_failure) rather
 * than as invalid input. Means whose squares overflow double precision cannot be fitted: the
 * likelihood sums squared deviations. */
static int check_scale(const double *x, size_t n, const char *kind, dp_err *err)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(x[i]));
    if (!isfinite(mx * mx * (double)n))
        return dp_err_set(err, DP_ENUMERIC, "clients",
                          "client means up to %.3g in magnitude overflow double precision in the "
                          "%s fit (their squares exceed 1.8e308); rescale the data",
                          mx, kind);
    return DP_OK;
}

/* A fit that failed on input that passed validation failed numerically: say so in words, without
 * the library's message (which names an internal quantity, possibly as "nan"). */
static int numeric_failure(int rc, const char *kind, dp_err *err)
{
    if (rc != DP_EINVAL)
        return rc;
    dp_log(DP_LOG_INFO, NULL, "%s fit: %s (field %s)", kind, err->msg, err->field);
    dp_err_clear(err);
    return dp_err_set(err, DP_ENUMERIC, "clients",
                      "the %s fit produced non-finite values from these clients (a numerical "
                      "failure, not invalid input); rescale the means and retry",
                      kind);
}

/* ---- POST /v1/estimators/gaussian ---- */

typedef struct gauss_req {
    size_t m, d;
    double *x, *n, *wv; /* m*d, m, m (NAN = not sent) */
    double *se;         /* m standard errors (NAN = not sent; then n was) */
    bool vec;           /* means sent as arrays */
    bool by_se;         /* the clients sent se, not n: noise_variance is not used */
} gauss_req;

static void gauss_req_free(gauss_req *g)
{
    dp_free(g->x);
    dp_free(g->n);
    dp_free(g->wv);
    dp_free(g->se);
}

/* Raw samples of one client: an array of numbers (d = 1) or of equal-length arrays (d coordinates).
 * Gives the mean (tmp, d values), the count and the within-client sample variance (divisor n - 1,
 * averaged over coordinates; NAN when n = 1), by Welford's update. m2 is d values of scratch. */
static int samples_summary(const json_t *sv, size_t *d, double *tmp, double *m2, double *n,
                           double *wv, bool *isv, dp_err *err)
{
    if (!json_is_array(sv) || json_array_size(sv) < 1)
        return dp_err_set(err, DP_EINVAL, "samples", "samples must be a non-empty array (got %s)",
                          json_util_type_name(sv));
    size_t cnt = json_array_size(sv);
    const json_t *first = json_array_get(sv, 0);
    bool vec = json_is_array(first);
    size_t dd = vec ? json_array_size(first) : 1;
    if (dd < 1 || dd > EB_MAX_DIM)
        return dp_err_set(err, DP_EINVAL, "samples", "samples must have 1..%d coordinates",
                          EB_MAX_DIM);
    if (*d != 0 && *d != dd)
        return dp_err_set(err, DP_EINVAL, "samples", "samples must have %zu coordinates (got %zu)",
                          *d, dd);
    for (size_t j = 0; j < dd; j++)
        tmp[j] = m2[j] = 0.0;
    for (size_t k = 0; k < cnt; k++) {
        const json_t *e = json_array_get(sv, k);
        if (vec && (!json_is_array(e) || json_array_size(e) != dd))
            return dp_err_set(err, DP_EINVAL, "samples",
                              "samples[%zu] must be an array of %zu numbers", k, dd);
        for (size_t j = 0; j < dd; j++) {
            const json_t *v = vec ? json_array_get(e, j) : e;
            if (!json_is_number(v))
                return dp_err_set(err, DP_EINVAL, "samples", "samples[%zu] must hold numbers", k);
            double x = json_number_value(v);
            if (!isfinite(x))
                return dp_err_set(err, DP_EINVAL, "samples", "samples[%zu] must be finite", k);
            double delta = x - tmp[j]; /* Welford */
            tmp[j] += delta / (double)(k + 1);
            m2[j] += delta * (x - tmp[j]);
        }
    }
    double v = 0.0;
    for (size_t j = 0; j < dd; j++)
        v += m2[j];
    *n = (double)cnt;
    *wv = cnt >= 2 ? v / ((double)dd * (double)(cnt - 1)) : DP_NAN;
    *d = dd;
    *isv = vec;
    return DP_OK;
}

/* One client of a Gaussian request: summary {id, mean, n, within_variance?}, {id, mean, se} (a
 * standard error, as ebnm's (x, s)) or raw {id, samples} (allow_wv: within_variance accepted).
 * *d as in parse_vec; the mean goes to tmp (tmp has 2 * EB_MAX_DIM values: mean + Welford
 * scratch); *se is NAN unless se was sent (then *n is 0). Errors name the field inside the
 * client. */
static int parse_gauss_client(const json_t *c, bool allow_wv, size_t *d, double *tmp, double *n,
                              double *wv, double *se, bool *isv, dp_err *err)
{
    static const char *const keys[] = {"id",      "mean",    "n", "within_variance",
                                       "samples", "silo_id", "se"};
    *se = DP_NAN;
    if (json_util_require_object(c, "", err) != DP_OK ||
        json_util_check_keys(c, keys, 7, err) != DP_OK || check_id(c, err) || check_silo(c, err))
        return err->code;
    if (!allow_wv && json_object_get(c, "within_variance") != NULL)
        return dp_err_set(err, DP_EINVAL, "within_variance", "within_variance is not used here");
    const json_t *mv = json_object_get(c, "mean"), *sv = json_object_get(c, "samples");
    *n = 0;
    *wv = DP_NAN;
    if (sv != NULL) {
        if (mv != NULL || json_object_get(c, "n") != NULL ||
            json_object_get(c, "within_variance") != NULL || json_object_get(c, "se") != NULL)
            return dp_err_set(err, DP_EINVAL, "samples",
                              "send either samples or a summary (mean with n or se), not both");
        return samples_summary(sv, d, tmp, tmp + EB_MAX_DIM, n, wv, isv, err);
    }
    if (mv == NULL || json_is_null(mv))
        return dp_err_set(err, DP_EINVAL, "mean", "mean (or samples) is required");
    if (parse_vec(mv, "mean", d, tmp, isv, err) != DP_OK)
        return err->code;
    if (json_object_get(c, "se") != NULL) {
        if (json_object_get(c, "n") != NULL || json_object_get(c, "within_variance") != NULL)
            return dp_err_set(err, DP_EINVAL, "se",
                              "send either se (the mean's standard error) or n (with the "
                              "request's noise_variance), not both");
        if (json_util_req_number(c, "se", se, err) != DP_OK)
            return err->code;
        if (!isfinite(*se) || *se <= 0 || *se > 1e150)
            return dp_err_set(err, DP_EINVAL, "se",
                              "se must be a finite number > 0 and <= 1e150 (got %g)", *se);
        return DP_OK;
    }
    if (json_util_req_number(c, "n", n, err) != DP_OK)
        return err->code;
    if (!isfinite(*n) || *n < 1)
        return dp_err_set(err, DP_EINVAL, "n",
                          "n must be a number >= 1 (got %g): a count or an effective sample size; "
                          "for a standard error send se instead",
                          *n);
    if (json_util_opt_number(c, "within_variance", DP_NAN, wv, err) != DP_OK)
        return err->code;
    if (!isnan(*wv) && (!isfinite(*wv) || *wv < 0))
        return dp_err_set(err, DP_EINVAL, "within_variance",
                          "within_variance must be >= 0 (got %g)", *wv);
    return DP_OK;
}

/* Client i of a streamed body read without jansson when it is the common summary {"mean": x, "n":
 * k} (or with "se", or "within_variance", and an "id" string or integer) whose values
 * parse_gauss_client would accept as they are: true with the values set; false for anything
 * else, which takes parse_gauss_client's path (the same values, or its error). */
static bool gauss_client_fast(const http_req *rq, size_t i, bool allow_wv, double *x, double *n,
                              double *wv, double *se)
{
    clients_json_flat f;
    if (rq->clients == NULL || clients_json_flat_get(rq->clients, i, &f) != 0)
        return false;
    int im = flat_find(&f, "mean"), in = flat_find(&f, "n"), is = flat_find(&f, "se"),
        iw = flat_find(&f, "within_variance"), ii = flat_find(&f, "id");
    size_t known = (im >= 0) + (in >= 0) + (is >= 0) + (iw >= 0) + (ii >= 0);
    if (im < 0 || known != f.n || (iw >= 0 && !allow_wv) || (is >= 0) == (in >= 0) ||
        (is >= 0 && iw >= 0) || !flat_id_ok(&f, ii))
        return false;
    for (size_t k = 0; k < f.n; k++)
        if ((int)k != ii && f.m[k].is_str) /* a string where a number goes: the error's path */
            return false;
    *x = f.m[im].v;
    *n = in >= 0 ? f.m[in].v : 0;
    *wv = iw >= 0 ? f.m[iw].v : DP_NAN;
    *se = is >= 0 ? f.m[is].v : DP_NAN;
    if (is >= 0)
        return *se > 0 && *se <= 1e150;
    return *n >= 1 && (iw < 0 || *wv >= 0);
}

/* Parses clients (see parse_gauss_client); every client must have the first one's form and
 * dimension. Errors are prefixed with "clients[i]". */
static int parse_gauss_clients(const http_req *rq, gauss_req *g, bool allow_wv, dp_err *err)
{
    memset(g, 0, sizeof *g);
    if (get_clients(rq, &g->m, err) != DP_OK)
        return err->code;
    double *tmp = dp_calloc(2 * EB_MAX_DIM, sizeof(double)); /* mean + Welford scratch */
    if (tmp == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = DP_OK;
    json_t *c = NULL;
    for (size_t i = 0; i < g->m && rc == DP_OK; i++) {
        double fx, fn, fwv, fse;
        if (i > 0 && g->d == 1 && !g->vec &&
            gauss_client_fast(rq, i, allow_wv, &fx, &fn, &fwv, &fse) &&
            g->by_se == !isnan(fse)) { /* the common case, without jansson */
            g->x[i] = fx;
            g->n[i] = fn;
            g->wv[i] = fwv;
            g->se[i] = fse;
            continue;
        }
        json_decref(c);
        if ((c = cl_get(rq, i)) == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            break;
        }
        bool isv = false;
        size_t d0 = g->d;
        double n, wv, se;
        if (parse_gauss_client(c, allow_wv, &g->d, tmp, &n, &wv, &se, &isv, err) != DP_OK) {
            rc = client_err(err, i);
            break;
        }
        if (i == 0) {
            g->vec = isv;
            g->x = dp_calloc(g->m * g->d, sizeof(double));
            g->n = dp_calloc(g->m, sizeof(double));
            g->wv = dp_calloc(g->m, sizeof(double));
            g->se = dp_calloc(g->m, sizeof(double));
            g->by_se = !isnan(se);
            if (!g->x || !g->n || !g->wv || !g->se) {
                rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
                break;
            }
        } else if (isv != g->vec || d0 != g->d) {
            dp_err_set(err, DP_EINVAL, json_object_get(c, "samples") ? "samples" : "mean",
                       "every client must have the same form and dimension");
            rc = client_err(err, i);
            break;
        }
        if (g->by_se != !isnan(se)) {
            dp_err_set(err, DP_EINVAL, g->by_se ? "se" : "n",
                       "every client must send se (a standard error) if the first one does, and "
                       "none if it does not");
            rc = client_err(err, i);
            break;
        }
        memcpy(g->x + i * g->d, tmp, g->d * sizeof(double));
        g->n[i] = n;
        g->wv[i] = wv;
        g->se[i] = se;
    }
    json_decref(c);
    dp_free(tmp);
    return rc;
}

/* noise_variance given, or pooled from within_variance; or, when the clients sent standard errors
 * (g->by_se), none: the library's s_i^2 = sigma_x^2/n_i is then made exact with sigma_x^2 =
 * max_i se_i^2 and n_i = sigma_x^2/se_i^2 >= 1 (only s_i^2 enters the fit and the posteriors; the
 * range b of a private run gets sigma_x/sqrt(n_min) = max se and ln(m^2 n_min) = ln m^2). */
static int gauss_noise(const json_t *body, gauss_req *g, double *sx2, bool *pooled, dp_err *err)
{
    *pooled = false;
    if (g->by_se) {
        if (json_object_get(body, "noise_variance") != NULL)
            return dp_err_set(err, DP_EINVAL, "noise_variance",
                              "noise_variance is not used when the clients send se (each mean's "
                              "standard error); drop one of them");
        double mx = 0.0;
        for (size_t i = 0; i < g->m; i++)
            mx = fmax(mx, g->se[i]);
        *sx2 = mx * mx;
        for (size_t i = 0; i < g->m; i++) {
            double r = mx / g->se[i];
            g->n[i] = r * r;
        }
        return DP_OK;
    }
    if (json_util_opt_number(body, "noise_variance", DP_NAN, sx2, err) != DP_OK)
        return err->code;
    if (!isnan(*sx2)) {
        if (!isfinite(*sx2) || *sx2 <= 0)
            return dp_err_set(err, DP_EINVAL, "noise_variance",
                              "noise_variance must be finite and > 0 (got %g)", *sx2);
        return DP_OK;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < g->m; i++)
        if (!isnan(g->wv[i]) && g->n[i] >= 2) {
            num += (g->n[i] - 1) * g->wv[i];
            den += g->n[i] - 1;
        }
    if (!(den > 0) || !(num > 0))
        return dp_err_set(err, DP_EINVAL, "noise_variance",
                          "noise_variance is required unless clients with n >= 2 send a positive "
                          "within_variance to pool");
    *sx2 = num / den; /* eb_gauss_pool_sigma_x2 over the clients that sent it */
    *pooled = true;
    return DP_OK;
}

/* A per-coordinate Gaussian prior as one: means and variances side by side, the log-likelihoods
 * summed, the most iterations and the worst status over the coordinates. */
typedef struct gauss_summary {
    double mu[EB_MAX_DIM], tau2[EB_MAX_DIM], loglik;
    unsigned iterations;
    eb_status status;
} gauss_summary;

static void gauss_summarize(const eb_gauss_coord *c, size_t d, gauss_summary *s)
{
    s->loglik = 0;
    s->iterations = 0;
    s->status = EB_STATUS_CONVERGED;
    for (size_t j = 0; j < d; j++) {
        s->mu[j] = c[j].mu;
        s->tau2[j] = c[j].tau2;
        s->loglik += c[j].loglik;
        s->iterations = c[j].iterations > s->iterations ? c[j].iterations : s->iterations;
        s->status = eb_status_worst(s->status, c[j].status);
    }
}

static json_t *gauss_fit_json(const eb_gauss_coord *c, size_t d, bool vec)
{
    gauss_summary s;
    gauss_summarize(c, d, &s);
    return json_pack("{s:o, s:o, s:o, s:I, s:s}", "mean", vec_json(s.mu, d, vec), "variance",
                     vec_json(s.tau2, d, vec), "log_likelihood", json_util_real(s.loglik),
                     "iterations", (json_int_t)s.iterations, "status", eb_status_name(s.status));
}

/* What a Gaussian request asks for, once parsed (gauss_parse). */
typedef struct gauss_spec {
    const char *ms; /* "mle" or "moments" (borrowed from the body) */
    int method;
    uint64_t seed;
    unsigned max_iter;
    double sx2; /* the noise variance */
    bool pooled;
    bool mu_known, var_known; /* the prior's mean / variance given */
    double pmu[EB_MAX_DIM], pvar[EB_MAX_DIM];
    bool priv;
    eb_gauss_private_opts po;
    double tau2_max; /* private: the public bound sigma_theta_bound^2 on the prior variance (inf:
                        none given); the fitted prior is projected onto it and onto |mu| <= r */
    bool central;    /* privacy.model "central": the service adds noise once to clipped sums */
    double c_eps, c_delta,
        c_z;                  /* central: target epsilon (NAN: noise_multiplier given), delta,
                                 and the noise multiplier (given, or calibrated in gauss_charge) */
    eb_gauss_central_opts co; /* central: set by gauss_charge */
} gauss_spec;

/* prior: {"mean"?, "variance"} */
static int gauss_parse_prior(const json_t *body, size_t d, gauss_spec *s, dp_err *err)
{
    const json_t *pj = json_object_get(body, "prior");
    if (pj == NULL || json_is_null(pj))
        return DP_OK;
    static const char *const prk[] = {"mean", "variance"};
    if (json_util_require_object(pj, "prior", err) != DP_OK ||
        json_util_check_keys(pj, prk, 2, err) != DP_OK) {
        dp_err_prefix_field(err, "prior");
        return err->code;
    }
    const json_t *vj = json_object_get(pj, "variance"), *mj = json_object_get(pj, "mean");
    if (vj == NULL || json_is_null(vj))
        return dp_err_set(err, DP_EINVAL, "prior.variance",
                          "prior.variance is required when a prior is given (omit prior to "
                          "estimate both)");
    int rc = parse_vec_for(vj, "prior.variance", d, s->pvar, err);
    if (rc != DP_OK)
        return rc;
    for (size_t j = 0; j < d; j++)
        if (s->pvar[j] < 0)
            return dp_err_set(err, DP_EINVAL, "prior.variance", "prior.variance must be >= 0");
    s->var_known = true;
    if (mj != NULL && !json_is_null(mj)) {
        if ((rc = parse_vec_for(mj, "prior.mean", d, s->pmu, err)) != DP_OK)
            return rc;
        s->mu_known = true;
    }
    return DP_OK;
}

/* The range b needs sigma_theta: the known prior's, or a public bound (never estimated from
 * data). */
static int gauss_parse_sigma_theta(const gauss_spec *s, size_t d, double stb, double b,
                                   eb_gauss_private_opts *po, dp_err *err)
{
    if (s->var_known) {
        double mx = 0;
        for (size_t j = 0; j < d; j++)
            mx = fmax(mx, s->pvar[j]);
        po->sigma_theta = sqrt(mx);
    } else if (!isnan(stb)) {
        if (!isfinite(stb) || stb < 0)
            return dp_err_set(err, DP_EINVAL, "privacy.sigma_theta_bound",
                              "sigma_theta_bound must be finite and >= 0 (got %g)", stb);
        po->sigma_theta = stb;
    } else if (isnan(b)) {
        return dp_err_set(err, DP_EINVAL, "privacy.sigma_theta_bound",
                          "with an estimated prior variance, the range b needs a public "
                          "sigma_theta_bound (or an explicit b)");
    }
    return DP_OK;
}

/* The channel's own parameters: epsilon0 and delta (gaussian) or bits (quantize). */
static int gauss_parse_channel(const json_t *pvj, const char *mech, int64_t bits,
                               eb_gauss_private_opts *po, dp_err *err)
{
    static const choice MECH[] = {{"gaussian", EB_CHANNEL_GAUSSIAN},
                                  {"quantize", EB_CHANNEL_QUANTIZE}};
    int ch, rc;
    if ((rc = pick(mech, "privacy.mechanism", MECH, N_ELEMS(MECH), &ch, err)) != DP_OK)
        return rc;
    po->channel = (eb_channel)ch;
    if (po->channel == EB_CHANNEL_GAUSSIAN) {
        if (json_util_req_number(pvj, "epsilon0", &po->eps0, err) ||
            json_util_req_number(pvj, "delta", &po->delta, err)) {
            dp_err_prefix_field(err, "privacy");
            return err->code;
        }
        return DP_OK;
    }
    if (bits < 1 || bits > 52)
        return dp_err_set(err, DP_EINVAL, "privacy.bits",
                          "bits must be in 1..52 for the quantizer (got %lld)", (long long)bits);
    po->bits = (unsigned)bits;
    return DP_OK;
}

/* Central DP's privacy inputs (Gaussian and Beta estimators): delta in (0, 1) and exactly one of
 * epsilon and noise_multiplier (NAN: not given), finite and > 0. */
static int central_check_noise(double eps, double delta, double z, dp_err *err)
{
    if (!(delta > 0 && delta < 1))
        return dp_err_set(err, DP_EINVAL, "privacy.delta", "delta must be in (0, 1) (got %g)",
                          delta);
    if (isnan(eps) == isnan(z))
        return dp_err_set(err, DP_EINVAL,
                          isnan(eps) ? "privacy.epsilon" : "privacy.noise_multiplier",
                          "give exactly one of epsilon (the noise is calibrated to it) and "
                          "noise_multiplier");
    if (!isnan(eps) && !(isfinite(eps) && eps > 0))
        return dp_err_set(err, DP_EINVAL, "privacy.epsilon",
                          "epsilon must be finite and > 0 (got %g)", eps);
    if (!isnan(z) && !(isfinite(z) && z > 0))
        return dp_err_set(err, DP_EINVAL, "privacy.noise_multiplier",
                          "noise_multiplier must be finite and > 0 (got %g)", z);
    return DP_OK;
}

/* privacy.model "central" (issue #15): r, b or sigma_theta_bound and range as the local model;
 * delta and exactly one of epsilon (calibrated in gauss_charge) or noise_multiplier. The local
 * randomizer's own fields are refused by name, as is method "mle" (the central release carries the
 * sums the moments estimate needs, not a likelihood). */
static int gauss_parse_central(const json_t *body, const json_t *pvj, size_t d, gauss_spec *s,
                               dp_err *err)
{
    static const char *const local_only[] = {"epsilon0", "per_coordinate", "bits", "calibration"};
    if (refuse_fields(pvj, local_only, N_ELEMS(local_only),
                      "the local model; privacy.model \"central\" takes epsilon (or "
                      "noise_multiplier) and delta",
                      err) != DP_OK)
        return err->code;
    const json_t *mj = json_object_get(body, "method");
    if (mj != NULL && json_is_string(mj) && strcmp(json_string_value(mj), "moments") != 0)
        return dp_err_set(err, DP_EINVAL, "method",
                          "central DP estimates the prior by moments from the noisy sums; use "
                          "method \"moments\" or omit method (got \"%s\")",
                          json_string_value(mj));
    s->ms = "moments";
    s->method = EB_GAUSS_MOMENTS;
    const char *mech, *range;
    double stb, b;
    eb_gauss_private_opts *po = &s->po;
    if (json_util_opt_string(pvj, "mechanism", "gaussian", &mech, err) ||
        json_util_req_number(pvj, "r", &po->r, err) ||
        json_util_opt_number(pvj, "sigma_theta_bound", DP_NAN, &stb, err) ||
        json_util_opt_number(pvj, "b", DP_NAN, &b, err) ||
        json_util_opt_string(pvj, "range", "paper", &range, err) ||
        json_util_req_number(pvj, "delta", &s->c_delta, err) ||
        json_util_opt_number(pvj, "epsilon", DP_NAN, &s->c_eps, err) ||
        json_util_opt_number(pvj, "noise_multiplier", DP_NAN, &s->c_z, err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    if (strcmp(mech, "gaussian") != 0)
        return dp_err_set(err, DP_EINVAL, "privacy.mechanism",
                          "privacy.model \"central\" adds Gaussian noise to the sums: mechanism "
                          "must be \"gaussian\" (got \"%s\")",
                          mech);
    if (!isfinite(po->r) || po->r < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.r", "r must be finite and >= 0 (got %g)", po->r);
    if (!isnan(b) && (!isfinite(b) || b <= 0 || b > 1e50))
        return dp_err_set(err, DP_EINVAL, "privacy.b", "b must be finite, > 0 and <= 1e50 (got %g)",
                          b);
    int rc0 = central_check_noise(s->c_eps, s->c_delta, s->c_z, err);
    if (rc0 != DP_OK)
        return rc0;
    po->b = b;
    po->seed = s->seed;
    po->channel = EB_CHANNEL_GAUSSIAN;
    s->tau2_max = isnan(stb) || !isfinite(stb) ? DP_INF : stb * stb;
    static const choice RANGE[] = {{"paper", EB_RANGE_PAPER}, {"safe", EB_RANGE_SAFE}};
    int rm, rc;
    if ((rc = pick(range, "privacy.range", RANGE, N_ELEMS(RANGE), &rm, err)) != DP_OK)
        return rc;
    po->range_mode = (eb_range_mode)rm;
    s->central = true;
    return gauss_parse_sigma_theta(s, d, stb, b, po, err);
}

/* privacy: the local randomizer of every client (Ozkara et al. 2023, Section 4), or the service's
 * noise on clipped sums (model "central", gauss_parse_central). */
static int gauss_parse_privacy(const json_t *body, size_t d, gauss_spec *s, dp_err *err)
{
    static const char *const pkeys[] = {"mechanism",         "epsilon0", "delta", "r",
                                        "sigma_theta_bound", "b",        "range", "calibration",
                                        "per_coordinate",    "bits",     "model", "epsilon",
                                        "noise_multiplier"};
    const json_t *pvj = json_object_get(body, "privacy");
    s->priv = pvj != NULL && !json_is_null(pvj);
    if (!s->priv)
        return DP_OK;
    eb_gauss_private_opts *po = &s->po;
    if (json_util_require_object(pvj, "privacy", err) != DP_OK ||
        json_util_check_keys(pvj, pkeys, sizeof pkeys / sizeof pkeys[0], err) != DP_OK) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    if (s->mu_known)
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "with a fully known prior no client sends anything; drop privacy or "
                          "prior.mean");
    int central;
    if (privacy_model(pvj, &central, err) != DP_OK)
        return err->code;
    if (central)
        return gauss_parse_central(body, pvj, d, s, err);
    static const char *const central_only[] = {"epsilon", "noise_multiplier"};
    if (refuse_fields(
            pvj, central_only, N_ELEMS(central_only),
            "privacy.model \"central\"; the local model takes epsilon0 and delta per client",
            err) != DP_OK)
        return err->code;
    const char *mech, *range;
    double stb, b;
    int64_t bits;
    bool pc;
    if (json_util_opt_string(pvj, "mechanism", "gaussian", &mech, err) ||
        json_util_req_number(pvj, "r", &po->r, err) ||
        json_util_opt_number(pvj, "sigma_theta_bound", DP_NAN, &stb, err) ||
        json_util_opt_number(pvj, "b", DP_NAN, &b, err) ||
        json_util_opt_string(pvj, "range", "paper", &range, err) ||
        parse_calibration(pvj, &po->cal, err) ||
        json_util_opt_bool(pvj, "per_coordinate", false, &pc, err) ||
        json_util_opt_int(pvj, "bits", 0, &bits, err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    if (!isfinite(po->r) || po->r < 0)
        return dp_err_set(err, DP_EINVAL, "privacy.r", "r must be finite and >= 0 (got %g)", po->r);
    po->per_coordinate = pc;
    po->b = b;
    po->seed = s->seed;
    s->tau2_max = isnan(stb) || !isfinite(stb) ? DP_INF : stb * stb;
    static const choice RANGE[] = {{"paper", EB_RANGE_PAPER}, {"safe", EB_RANGE_SAFE}};
    int rm, rc;
    if ((rc = pick(range, "privacy.range", RANGE, N_ELEMS(RANGE), &rm, err)) != DP_OK)
        return rc;
    po->range_mode = (eb_range_mode)rm;
    if ((rc = gauss_parse_sigma_theta(s, d, stb, b, po, err)) != DP_OK)
        return rc;
    return gauss_parse_channel(pvj, mech, bits, po, err);
}

/* Parse: the clients into g, everything else into s, with the checks in the order the API has
 * always made them (so the first error named is the same). */
static int gauss_parse(const http_req *rq, gauss_req *g, gauss_spec *s, dp_err *err)
{
    static const char *const keys[] = {"clients", "noise_variance", "prior",    "method",
                                       "privacy", "seed",           "max_iter", "keep_data",
                                       "results", "keep_results"};
    static const choice METHOD[] = {{"mle", EB_GAUSS_MLE}, {"moments", EB_GAUSS_MOMENTS}};
    int rc;
    if (json_util_check_keys(rq->body, keys, sizeof keys / sizeof keys[0], err) != DP_OK)
        return err->code;
    if ((rc = parse_gauss_clients(rq, g, true, err)) != DP_OK ||
        (rc = gauss_noise(rq->body, g, &s->sx2, &s->pooled, err)) != DP_OK ||
        (rc = json_util_opt_string(rq->body, "method", "mle", &s->ms, err)) != DP_OK ||
        (rc = pick(s->ms, "method", METHOD, N_ELEMS(METHOD), &s->method, err)) != DP_OK ||
        (rc = parse_seed(rq->body, &s->seed, err)) != DP_OK ||
        (rc = parse_max_iter(rq->body, &s->max_iter, err)) != DP_OK ||
        (rc = gauss_parse_prior(rq->body, g->d, s, err)) != DP_OK)
        return rc;
    if (!s->mu_known && (rc = check_estimable(g->m, err)) != DP_OK)
        return rc;
    return gauss_parse_privacy(rq->body, g->d, s, err);
}

/* Central DP's noise multiplier (Gaussian and Beta estimators): *z calibrated to (*eps, delta) by
 * the accounting library's bisection when *eps is given (not NAN), rounded towards more noise, *eps
 * then the epsilon delivered; else *eps at delta for the given *z. zCDP of the Gaussian mechanism
 * rho = 1/(2 z^2) (Bun & Steinke 2016 Prop. 1.6), converted by Canonne, Kamath & Steinke 2020
 * Cor. 13, the conversion the ledger's RDP accountant applies to one Gaussian event. */
static int central_noise(double *eps, double delta, double *z, dp_err *err)
{
    acct_calib_zcdp_ctx zc = {delta, ACCT_ZCDP_CKS2020};
    int rc;
    if (!isnan(*eps)) {
        acct_event *open = acct_event_gaussian(DP_NAN);
        if (open == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        acct_calib_result cr;
        rc = acct_calibrate(open, *eps, acct_calib_zcdp_eps, &zc, &cr, err);
        acct_event_free(open);
        if (rc != DP_OK) {
            if (err->field[0] == '\0')
                snprintf(err->field, sizeof err->field, "privacy.epsilon");
            return rc;
        }
        *z = cr.value;
        *eps = cr.epsilon;
    } else {
        double order;
        rc =
            acct_zcdp_to_epsilon(1.0 / (2.0 * *z * *z), delta, ACCT_ZCDP_CKS2020, eps, &order, err);
        if (rc != DP_OK) {
            dp_err_prefix_field(err, "privacy");
            return rc;
        }
    }
    return DP_OK;
}

/* Central DP: the clipping bound b (given, or Thm 2's range from the public bounds as the local
 * model's), the noise multiplier z (given, or calibrated to (epsilon, delta) with the accounting
 * library: zCDP of the Gaussian mechanism rho = 1/(2 z^2), Bun & Steinke 2016 Prop. 1.6, converted
 * by Canonne, Kamath & Steinke 2020 Cor. 13, the conversion the ledger's RDP accountant applies to
 * one Gaussian event) and the epsilon delivered at delta; *ev (owned by the caller) is the event
 * charged: one Gaussian mechanism with multiplier z. */
static int gauss_central_calibrate(const gauss_req *g, gauss_spec *s, acct_event **ev, dp_err *err)
{
    eb_gauss_private_opts *po = &s->po;
    double b = po->b;
    if (isnan(b)) {
        double nmin = DP_INF;
        for (size_t i = 0; i < g->m; i++)
            nmin = fmin(nmin, g->n[i]);
        int rc = eb_range_b(po->r, po->sigma_theta, s->sx2, nmin, g->m, po->range_mode, &b, err);
        if (rc != DP_OK) {
            dp_err_prefix_field(err, "privacy");
            return rc;
        }
    }
    int rc = central_noise(&s->c_eps, s->c_delta, &s->c_z, err);
    if (rc != DP_OK)
        return rc;
    s->co = (eb_gauss_central_opts){b, s->c_z, po->r, s->tau2_max, s->seed};
    eb_gauss_central_info ci;
    if ((rc = eb_gauss_central_calibrate(g->d, s->var_known, &s->co, &ci, err)) != DP_OK)
        return rc;
    if ((*ev = acct_event_gaussian(s->c_z)) == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

/* Charges the silos (if any) before anything is computed: calibrates the randomizer to know the
 * per-client event (central: the one event of the release, charged once per silo). */
static int gauss_charge(est_job *job, const gauss_req *g, gauss_spec *s,
                        eb_gauss_private_info *pinfo, dp_err *err)
{
    if (s->central) {
        acct_event *ev = NULL;
        int rc = gauss_central_calibrate(g, s, &ev, err);
        if (rc != DP_OK) {
            acct_event_free(ev);
            return rc;
        }
        job->charge_once = true;
        return charge_silos(job, true, ev, err);
    }
    eb_gauss_data raw0 = {g->m, g->d, g->x, g->n, s->sx2};
    bool dp = s->priv && s->po.channel == EB_CHANNEL_GAUSSIAN;
    acct_event *ev = NULL;
    if (dp) {
        int rc = eb_gauss_private_calibrate(&raw0, &s->po, pinfo, err);
        if (rc != DP_OK)
            return rc;
        if (pinfo->ldp.per_coordinate && g->d > 1)
            ev = acct_event_self_composed((uint64_t)g->d,
                                          acct_event_gaussian(pinfo->sigma_q / (2.0 * pinfo->b)));
        else
            ev = acct_event_gaussian(pinfo->sigma_q / pinfo->ldp.sensitivity);
    }
    return charge_silos(job, dp, ev, err);
}

/* What a Gaussian run computes (gauss_run); the arrays are owned (gauss_out_free). */
typedef struct gauss_out {
    double *pm, *pv, *sh;                      /* m*d posterior means, variances, shrinkage */
    eb_gauss_coord *fit_mle, *fit_mom, *prior; /* d each */
    size_t proj_mean, proj_var; /* coordinates of the used prior projected onto the public bounds */
    double max_shr;             /* largest shrinkage over clients and coordinates */
    eb_gauss_central_info ci;   /* central DP: what the release added */
} gauss_out;

static void gauss_out_free(gauss_out *o)
{
    dp_free(o->pm);
    dp_free(o->pv);
    dp_free(o->sh);
    dp_free(o->fit_mle);
    dp_free(o->fit_mom);
    dp_free(o->prior);
    memset(o, 0, sizeof *o);
}

/* Run: privatizes what the clients send (simulated), fits the prior, and computes every client's
 * posterior. The clients' inputs (g) are released at the end: the rows are written next. */
static int gauss_run(est_job *job, gauss_req *g, const gauss_spec *s, eb_gauss_private_info *pinfo,
                     gauss_out *o, dp_err *err)
{
    size_t m = g->m, d = g->d;
    double *msgs = NULL;
    int rc = DP_OK;
    o->pm = dp_calloc(m * d, sizeof(double));
    o->pv = dp_calloc(m * d, sizeof(double));
    o->sh = dp_calloc(m * d, sizeof(double));
    o->fit_mle = dp_calloc(d, sizeof *o->fit_mle);
    o->fit_mom = dp_calloc(d, sizeof *o->fit_mom);
    o->prior = dp_calloc(d, sizeof *o->prior);
    if (!o->pm || !o->pv || !o->sh || !o->fit_mle || !o->fit_mom || !o->prior)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    eb_gauss_data raw = {m, d, g->x, g->n, s->sx2};
    eb_gauss_data sent = raw; /* what the server sees */
    double extra = 0.0, wextra = 0.0;
    if (s->priv && !s->central) {
        msgs = dp_calloc(m * d, sizeof(double));
        if (msgs == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if ((rc = eb_gauss_privatize(&raw, &s->po, msgs, pinfo, err)) != DP_OK)
            goto out;
        sent.x = msgs;
        extra = pinfo->sigma_q * pinfo->sigma_q;
    }
    if (s->central) { /* the noisy sums, the prior from them, projected (eb_gauss_central_fit) */
        const double *tk = s->var_known ? s->pvar : NULL;
        if ((rc = eb_gauss_central_fit(&raw, tk, &s->co, o->prior, &o->ci, err)) != DP_OK) {
            rc = numeric_failure(rc, "gaussian", err);
            goto out;
        }
        o->proj_mean = o->ci.proj_mean;
        o->proj_var = o->ci.proj_var;
        wextra = o->ci.weight_extra;
    } else if (s->mu_known) {
        for (size_t j = 0; j < d; j++) {
            o->prior[j] = (eb_gauss_coord){s->pmu[j], s->pvar[j], 0.0, 0.0, 0, EB_STATUS_CONVERGED};
            o->prior[j].loglik = eb_gauss_loglik(&raw, j, s->pmu[j], s->pvar[j], 0.0);
        }
    } else {
        const double *tk = s->var_known ? s->pvar : NULL;
        /* the root-finding loops stop at the compute deadline, as the mixture's EM does */
        if ((rc = eb_gauss_fit_cancel(&sent, tk, extra, EB_GAUSS_MLE, s->max_iter, job->cancel,
                                      o->fit_mle, err)) != DP_OK ||
            (rc = eb_gauss_fit_cancel(&sent, tk, extra, EB_GAUSS_MOMENTS, s->max_iter, job->cancel,
                                      o->fit_mom, err)) != DP_OK) {
            rc = numeric_failure(rc, "gaussian", err);
            goto out;
        }
        if (s->priv) { /* post-processing onto the public bounds: costs no privacy */
            size_t pm[2], pv[2];
            eb_gauss_project(&sent, extra, s->po.r, s->tau2_max, o->fit_mle, &pm[0], &pv[0]);
            eb_gauss_project(&sent, extra, s->po.r, s->tau2_max, o->fit_mom, &pm[1], &pv[1]);
            int u = s->method == EB_GAUSS_MLE ? 0 : 1;
            o->proj_mean = pm[u];
            o->proj_var = pv[u];
        }
        memcpy(o->prior, s->method == EB_GAUSS_MLE ? o->fit_mle : o->fit_mom, d * sizeof *o->prior);
    }
    if (s->priv && !s->central) { /* Thm 2's weight, and tau2-hat's own noise (eb_gaussian.h) */
        double *w = dp_calloc(d, sizeof(double));
        if (w == NULL) {
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            goto out;
        }
        eb_gauss_ldp_weights(&sent, o->prior, extra, s->tau2_max, !s->var_known && !s->mu_known, w);
        rc = eb_gauss_posterior_w(&raw, o->prior, w, o->pm, o->pv, o->sh, err);
        dp_free(w);
    } else {
        rc = eb_gauss_posterior(&raw, o->prior, wextra, o->pm, o->pv, o->sh, err);
    }
    if (rc != DP_OK)
        rc = numeric_failure(rc, "gaussian", err);
    else
        o->max_shr = eb_max_shrinkage(o->sh, m * d);
out:
    dp_free(msgs);
    return rc;
}

/* Render, part 1: one row per client (streamed into the job's rows); the per-client arrays are
 * released once they are written. */
static int gauss_render_rows(est_job *job, const gauss_req *g, gauss_out *o, dp_err *err)
{
    size_t m = g->m, d = g->d;
    static const char *const names[] = {"posterior_mean", "posterior_sd", "shrinkage"};
    const size_t widths[] = {d, d, d};
    const bool vec[] = {g->vec, g->vec, g->vec};
    if (est_rows_wanted(job)) {
        if (rows_fields(job, names, widths, vec, 3, err) != DP_OK ||
            rows_begin(job, m, true, err) != DP_OK)
            return err->code;
        for (size_t i = 0; i < m; i++) {
            double *v = job->cols.vals + i * job->cols.w;
            for (size_t j = 0; j < d; j++) {
                v[j] = o->pm[i * d + j];
                v[d + j] = sqrt(o->pv[i * d + j]);
                v[2 * d + j] = o->sh[i * d + j];
            }
        }
    }
    dp_free(o->pm);
    dp_free(o->pv);
    dp_free(o->sh);
    o->pm = o->pv = o->sh = NULL;
    return DP_OK;
}

/* Render, part 2: the privacy object of the answer (null for a public run). */
static json_t *gauss_privacy_json(const est_job *job, const gauss_spec *s,
                                  const eb_gauss_private_info *pinfo, const gauss_out *o)
{
    const eb_gauss_private_opts *po = &s->po;
    if (!s->priv)
        return json_null();
    if (s->central) {
        const eb_gauss_central_info *ci = &o->ci;
        json_t *sens =
            json_pack("{s:o, s:o, s:o}", "sum", json_util_real(ci->sens_sum), "sum_of_squares",
                      json_util_real(ci->sens_sq), "l2_scaled", json_util_real(ci->l2_sens));
        json_t *sd = json_pack("{s:o, s:o}", "sum", json_util_real(ci->sd_sum), "sum_of_squares",
                               json_util_real(ci->sd_sq));
        return json_pack(
            "{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:I, s:s, s:o, "
            "s:s}",
            "model", "central", "mechanism", "gaussian", "privacy_unit", "client", "released",
            s->var_known ? "per coordinate, the sum over clients of the clipped means, noised once"
                         : "per coordinate, the sums over clients of the clipped means and of "
                           "their squares, noised once",
            "epsilon", json_util_real(s->c_eps), "delta", json_util_real(s->c_delta), "rho",
            json_util_real(ci->rho), "noise_multiplier", json_util_real(s->c_z), "accountant",
            "zcdp (Bun & Steinke 2016 Prop. 1.6; Canonne, Kamath & Steinke 2020 conversion)",
            "sensitivities", sens, "noise_std", sd, "b", json_util_real(s->co.b), "r",
            json_util_real(po->r), "clipped", (json_int_t)ci->n_clipped, "posterior_scope",
            "each client's posterior combines the private prior with that client's own data, "
            "un-noised: it is for that client alone and must be shown only to it",
            "charges", charges_placeholder(), "charging", charging_note(job));
    }
    if (po->channel != EB_CHANNEL_GAUSSIAN)
        return json_pack("{s:s, s:i, s:o, s:o, s:I, s:n}", "mechanism", "quantize", "bits",
                         (int)po->bits, "b", json_util_real(pinfo->b), "sigma_q",
                         json_util_real(pinfo->sigma_q), "clipped", (json_int_t)pinfo->n_clipped,
                         "epsilon0");
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:b, s:o, s:o, s:o, s:I, s:o, s:s}",
                     "mechanism", "gaussian", "model",
                     "local DP per client (user level), simulated on the server", "epsilon0",
                     json_util_real(pinfo->ldp.eps0), "delta", json_util_real(pinfo->ldp.delta),
                     "rho", json_util_real(pinfo->ldp.rho), "sensitivity",
                     json_util_real(pinfo->ldp.sensitivity), "calibration",
                     pinfo->ldp.analytic ? "analytic_gaussian (Balle & Wang 2018)"
                                         : "classic (paper eq. 26, log(2/delta))",
                     "per_coordinate", pinfo->ldp.per_coordinate, "b", json_util_real(pinfo->b),
                     "sigma_q", json_util_real(pinfo->sigma_q), "r", json_util_real(po->r),
                     "clipped", (json_int_t)pinfo->n_clipped, "charges", charges_placeholder(),
                     "charging", charging_note(job));
}

/* The status in words (and the status itself raised to no_pooling_gain for a private fit that
 * moves no client measurably). */
static void gauss_reason(const gauss_req *g, const gauss_spec *s, const gauss_out *o,
                         gauss_summary *ps, char *why, size_t n)
{
    size_t d = g->d, zero = 0;
    if (s->priv && o->max_shr < EB_NO_POOLING_GAIN)
        ps->status = eb_status_worst(ps->status, EB_STATUS_NO_POOLING_GAIN);
    for (size_t j = 0; j < d; j++)
        zero += !s->var_known && o->prior[j].tau2 == 0.0;
    if (ps->status == EB_STATUS_NO_POOLING_GAIN) {
        if (s->central)
            reason_add(why, n,
                       "no_pooling_gain: the prior estimated from the noisy sums moves no client "
                       "by %g%% or more of the way to it (largest shrinkage %.3g): these are "
                       "essentially each client's own estimate; pooling under central DP needs "
                       "more clients, a larger epsilon or a tighter public range b.",
                       100.0 * EB_NO_POOLING_GAIN, o->max_shr);
        else
            reason_no_gain(why, n, o->max_shr, s->po.channel == EB_CHANNEL_QUANTIZE);
    }
    if (o->proj_mean > 0)
        reason_add(why, n,
                   "boundary: the prior mean estimated from the %s fell outside "
                   "the public bound |mean| <= r = %g (in %zu of %zu coordinates) and was "
                   "projected onto it (post-processing: no privacy cost).",
                   s->central ? "noisy sums" : "privatized messages", s->po.r, o->proj_mean, d);
    if (o->proj_var > 0)
        reason_add(why, n,
                   "boundary: the prior variance estimated from the %s exceeded "
                   "the public bound sigma_theta_bound^2 = %g (in %zu of %zu coordinates) and was "
                   "projected onto it.",
                   s->central ? "noisy sums" : "privatized messages", s->tau2_max, o->proj_var, d);
    if (zero > 0)
        reason_add(why, n,
                   "boundary: the prior variance is estimated as 0 (in %zu of %zu coordinates): "
                   "the means vary no more than their %s noise explains, so %s.",
                   zero, d, s->priv ? "sampling and privacy" : "sampling",
                   s->priv ? "each client is shrunk toward the prior mean only as far as the "
                             "noise in that mean allows (Thm 2 weight)"
                           : "every client is pooled to the prior mean (posterior_sd is then the "
                             "uncertainty of that mean)");
    if (ps->status == EB_STATUS_UNIDENTIFIABLE)
        reason_add(why, n,
                   "unidentifiable: every client sent the same value, so the prior variance "
                   "cannot be estimated.");
    if (ps->status == EB_STATUS_MAX_ITER)
        reason_add(why, n,
                   "max_iter: the root search for the prior variance stopped at max_iter before "
                   "its tolerance; the last iterate is returned.");
}

/* Render, part 3: the rest of the answer, then the run is stored (finish_run). */
static int gauss_render(est_job *job, const gauss_req *g, const gauss_spec *s,
                        const eb_gauss_private_info *pinfo, const gauss_out *o, dp_err *err)
{
    size_t m = g->m, d = g->d;
    gauss_summary ps;
    gauss_summarize(o->prior, d, &ps);
    json_t *out = json_object(), *est = json_array();
    if (out == NULL || est == NULL) {
        json_decref(out);
        json_decref(est);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    json_t *privj = gauss_privacy_json(job, s, pinfo, o);
    json_t *fits = json_null();
    if (!s->mu_known && !s->central)
        fits = json_pack("{s:o, s:o}", "mle", gauss_fit_json(o->fit_mle, d, g->vec), "moments",
                         gauss_fit_json(o->fit_mom, d, g->vec));
    const char *source =
        s->mu_known ? "given" : (s->var_known ? "mean estimated, variance given" : "estimated");
    const field_val fields[] = {
        {"model", json_string("gaussian")},
        {"method", json_string(s->mu_known ? "known_prior" : s->ms)},
        {"prior", json_pack("{s:o, s:o, s:s}", "mean", vec_json(ps.mu, d, g->vec), "variance",
                            vec_json(ps.tau2, d, g->vec), "source", source)},
        {"fits", fits},
        {"noise_variance", g->by_se ? json_null() : json_util_real(s->sx2)},
        {"noise_variance_source",
         json_string(g->by_se ? "standard_errors" : (s->pooled ? "pooled" : "given"))},
        {"estimates", est},
    };
    char why[1200] = "";
    gauss_reason(g, s, o, &ps, why, sizeof why);
    run_outcome oc = {ps.loglik, ps.iterations, ps.status, privj, why};
    return finish_run(job, s->priv, m, d, out, fields, N_ELEMS(fields), &oc, err);
}

/* POST /v1/estimators/gaussian, on the compute pool: parse, charge, run, render. */
static int gaussian_compute(est_job *job, dp_err *err)
{
    gauss_req g = {0};
    gauss_spec s;
    memset(&s, 0, sizeof s);
    eb_gauss_private_info pinfo;
    memset(&pinfo, 0, sizeof pinfo);
    gauss_out o;
    memset(&o, 0, sizeof o);
    int rc = gauss_parse(&job->rq, &g, &s, err);
    if (rc == DP_OK)
        rc = gauss_charge(job, &g, &s, &pinfo, err);
    if (rc == DP_OK)
        rc = check_scale(g.x, g.m * g.d, "gaussian", err);
    if (rc == DP_OK)
        rc = gauss_run(job, &g, &s, &pinfo, &o, err);
    if (rc == DP_OK) {
        gauss_req_free(&g); /* the clients' inputs are not needed any more */
        g.x = g.n = g.wv = g.se = NULL;
        rc = gauss_render_rows(job, &g, &o, err);
    }
    if (rc == DP_OK)
        rc = gauss_render(job, &g, &s, &pinfo, &o, err);
    gauss_req_free(&g);
    gauss_out_free(&o);
    return rc;
}

/* ---- POST /v1/estimators/beta ---- */

static json_t *beta_prior_json(const eb_beta_prior *p, const char *source)
{
    json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:s}", "alpha", json_util_real(p->alpha), "beta",
                          json_util_real(p->beta), "mean", json_util_real(p->mu), "concentration",
                          json_util_real(p->s), "source", source);
    /* out of memory for the reason: no prior at all (the caller answers 503), never one without
     * the reason that explains its infinite concentration */
    if (o != NULL && isinf(p->s) &&
        json_object_set_new(o, "reason",
                            json_string("alpha + beta is unbounded: this prior has no spread "
                                        "beyond binomial noise (a point mass at its mean); how "
                                        "far each client was pooled toward it is its "
                                        "shrinkage")) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static json_t *beta_fit_json(const eb_beta_prior *p)
{
    return json_pack("{s:o, s:o, s:o, s:I, s:s}", "alpha", json_util_real(p->alpha), "beta",
                     json_util_real(p->beta), "log_likelihood", json_util_real(p->loglik),
                     "iterations", (json_int_t)p->iterations, "status", eb_status_name(p->status));
}

/* One client of a Beta-Bernoulli request: {id, successes, trials} or raw {id, samples} with 0/1 or
 * false/true outcomes. Errors name the field inside the client. */
static int parse_beta_client(const json_t *c, int64_t *zi, int64_t *ni, dp_err *err)
{
    static const char *const keys[] = {"id", "successes", "trials", "samples", "silo_id"};
    *zi = *ni = 0;
    if (json_util_require_object(c, "", err) || json_util_check_keys(c, keys, 5, err) ||
        check_id(c, err) || check_silo(c, err))
        return err->code;
    const json_t *sv = json_object_get(c, "samples");
    if (sv != NULL) {
        if (json_object_get(c, "successes") || json_object_get(c, "trials"))
            return dp_err_set(err, DP_EINVAL, "samples",
                              "send either samples or successes and trials, not both");
        if (!json_is_array(sv) || json_array_size(sv) < 1)
            return dp_err_set(err, DP_EINVAL, "samples",
                              "samples must be a non-empty array of 0/1");
        *ni = (int64_t)json_array_size(sv);
        for (size_t k = 0; k < (size_t)*ni; k++) {
            const json_t *e = json_array_get(sv, k);
            if (json_is_boolean(e))
                *zi += json_is_true(e) ? 1 : 0;
            else if (json_is_integer(e) &&
                     (json_integer_value(e) == 0 || json_integer_value(e) == 1))
                *zi += json_integer_value(e);
            else
                return dp_err_set(err, DP_EINVAL, "samples",
                                  "samples[%zu] must be 0, 1, true or false", k);
        }
    } else if (json_util_req_int(c, "successes", zi, err) ||
               json_util_req_int(c, "trials", ni, err)) {
        return err->code;
    }
    if (*ni < 1 || *ni > (int64_t)EB_BETA_MAX_TRIALS)
        return dp_err_set(err, DP_EINVAL, "trials", "trials must be in 1..1e9 (got %lld)",
                          (long long)*ni);
    if (*zi < 0 || *zi > *ni)
        return dp_err_set(err, DP_EINVAL, "successes",
                          "successes must be in 0..trials (got %lld of %lld)", (long long)*zi,
                          (long long)*ni);
    return DP_OK;
}

/* What a Beta request asks for, once parsed (beta_parse_options). */
typedef struct beta_spec {
    bool priv, known;    /* privacy given; the prior given */
    const char *ms, *vs; /* method and variant as sent (borrowed from the body) */
    int mle;             /* 1: maximum likelihood, 0: moments */
    eb_beta_variant v;
    bool loo;
    uint64_t seed;
    unsigned max_iter;
    double alpha, beta; /* the known prior */
    eb_beta_scheme scheme;
    double eps0;
    bool central;               /* privacy.model "central": the service noises two sums once */
    double c_eps, c_delta, c_z; /* central: target epsilon (NAN: noise_multiplier given), delta,
                                   noise multiplier (given, or calibrated in beta_charge) */
} beta_spec;

/* The clients' successes and trials. */
static int beta_parse_clients(const http_req *rq, size_t m, double *z, double *n, dp_err *err)
{
    for (size_t i = 0; i < m; i++) {
        int64_t zi, ni;
        clients_json_flat f;
        if (rq->clients != NULL && clients_json_flat_get(rq->clients, i, &f) == 0 && f.n >= 2) {
            int is = flat_find(&f, "successes"), it = flat_find(&f, "trials"),
                ii = flat_find(&f, "id");
            if (is >= 0 && it >= 0 && f.n == 2u + (ii >= 0) && flat_id_ok(&f, ii) &&
                f.m[is].is_int && f.m[it].is_int && f.m[it].v >= 1 &&
                f.m[it].v <= (double)EB_BETA_MAX_TRIALS && f.m[is].v >= 0 &&
                f.m[is].v <= f.m[it].v) { /* the common case, without jansson */
                z[i] = f.m[is].v;
                n[i] = f.m[it].v;
                continue;
            }
        }
        json_t *c = cl_get(rq, i);
        if (c == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        int rc = parse_beta_client(c, &zi, &ni, err);
        json_decref(c);
        if (rc != DP_OK)
            return client_err(err, i);
        z[i] = (double)zi;
        n[i] = (double)ni;
    }
    return DP_OK;
}

/* prior: {"alpha", "beta"}; a known prior leaves nothing to estimate or privatize. */
static int beta_parse_prior(const json_t *body, size_t m, beta_spec *s, dp_err *err)
{
    const json_t *pj = json_object_get(body, "prior");
    s->known = pj != NULL && !json_is_null(pj);
    if (!s->known)
        return check_estimable(m, err);
    static const char *const prk[] = {"alpha", "beta"};
    if (json_util_require_object(pj, "prior", err) || json_util_check_keys(pj, prk, 2, err) ||
        json_util_req_number(pj, "alpha", &s->alpha, err) ||
        json_util_req_number(pj, "beta", &s->beta, err)) {
        dp_err_prefix_field(err, "prior");
        return err->code;
    }
    if (s->priv)
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "with a known prior no client sends anything; drop privacy or prior");
    return DP_OK;
}

/* privacy.model "central" (issue #15): delta and exactly one of epsilon (calibrated in
 * beta_charge) or noise_multiplier. The prior is the moment estimate from two noisy sums over all
 * clients (eb_beta_central_fit), so the local randomizer's fields, method "mle", a variant other
 * than "unbiased" (its second moment is what the service sums) and leave_one_out (one release
 * serves every client) are refused by name. */
static int beta_parse_central(const json_t *body, const json_t *pvj, beta_spec *s, dp_err *err)
{
    static const char *const local_only[] = {"epsilon0", "scheme"};
    if (refuse_fields(pvj, local_only, N_ELEMS(local_only),
                      "the local model; privacy.model \"central\" takes epsilon (or "
                      "noise_multiplier) and delta",
                      err) != DP_OK)
        return err->code;
    if (s->mle)
        return dp_err_set(err, DP_EINVAL, "method",
                          "central DP estimates the prior by moments from the noisy sums; use "
                          "method \"moments\" or omit method");
    if (json_object_get(body, "variant") != NULL && s->v != EB_BETA_UNBIASED)
        return dp_err_set(err, DP_EINVAL, "variant",
                          "central DP sums each client's unbiased second moment Z(Z-1)/(n(n-1)): "
                          "use variant \"unbiased\" or omit variant (got \"%s\")",
                          s->vs);
    if (json_object_get(body, "leave_one_out") != NULL && s->loo)
        return dp_err_set(err, DP_EINVAL, "leave_one_out",
                          "central DP releases one prior for all clients: leave_one_out must be "
                          "false or omitted");
    if (json_util_req_number(pvj, "delta", &s->c_delta, err) ||
        json_util_opt_number(pvj, "epsilon", DP_NAN, &s->c_eps, err) ||
        json_util_opt_number(pvj, "noise_multiplier", DP_NAN, &s->c_z, err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    int rc = central_check_noise(s->c_eps, s->c_delta, s->c_z, err);
    if (rc != DP_OK)
        return rc;
    s->v = EB_BETA_UNBIASED;
    s->vs = "unbiased";
    s->loo = false;
    s->central = true;
    return DP_OK;
}

/* privacy: {"epsilon0", "scheme"?}, randomized response bits (Ozkara et al. 2023, Section 4), or
 * the service's noise on two sums (model "central", beta_parse_central). */
static int beta_parse_privacy(const json_t *body, beta_spec *s, dp_err *err)
{
    if (!s->priv)
        return DP_OK;
    const json_t *pvj = json_object_get(body, "privacy");
    static const char *const pk[] = {"epsilon0", "scheme", "model",
                                     "epsilon",  "delta",  "noise_multiplier"};
    const char *ss;
    if (json_util_require_object(pvj, "privacy", err) ||
        json_util_check_keys(pvj, pk, N_ELEMS(pk), err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    int central;
    if (privacy_model(pvj, &central, err) != DP_OK)
        return err->code;
    if (central)
        return beta_parse_central(body, pvj, s, err);
    static const char *const central_only[] = {"epsilon", "delta", "noise_multiplier"};
    if (refuse_fields(
            pvj, central_only, N_ELEMS(central_only),
            "privacy.model \"central\"; the local model takes epsilon0 (pure LDP per client)",
            err) != DP_OK)
        return err->code;
    if (json_util_req_number(pvj, "epsilon0", &s->eps0, err) ||
        json_util_opt_string(pvj, "scheme", "two_bit", &ss, err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    static const choice SCHEME[] = {{"two_bit", EB_BETA_PRIV_TWO_BIT},
                                    {"paper_1bit", EB_BETA_PRIV_PAPER_1BIT}};
    int si, rc;
    if ((rc = pick(ss, "privacy.scheme", SCHEME, N_ELEMS(SCHEME), &si, err)) != DP_OK)
        return rc;
    s->scheme = (eb_beta_scheme)si;
    if (s->mle)
        return dp_err_set(err, DP_EINVAL, "method",
                          "private runs use the moment estimator (the messages are randomized "
                          "response bits); use method \"moments\"");
    return DP_OK;
}

/* Parse: everything but the clients, in the order the API has always checked it. */
static int beta_parse_options(const json_t *body, size_t m, beta_spec *s, dp_err *err)
{
    static const choice METHOD[] = {{"mle", 1}, {"moments", 0}};
    static const choice VARIANT[] = {{"paper", EB_BETA_PAPER},
                                     {"paper_no_minus1", EB_BETA_PAPER_NO_MINUS1},
                                     {"unbiased", EB_BETA_UNBIASED}};
    const json_t *pvj = json_object_get(body, "privacy");
    s->priv = pvj != NULL && !json_is_null(pvj);
    s->alpha = s->beta = s->eps0 = DP_NAN;
    s->c_eps = s->c_delta = s->c_z = DP_NAN;
    s->scheme = EB_BETA_PRIV_TWO_BIT;
    int rc, vi;
    if ((rc = json_util_opt_string(body, "method", s->priv ? "moments" : "mle", &s->ms, err)) ||
        (rc = json_util_opt_string(body, "variant", "paper", &s->vs, err)) ||
        (rc = json_util_opt_bool(body, "leave_one_out", true, &s->loo, err)) ||
        (rc = parse_seed(body, &s->seed, err)) || (rc = parse_max_iter(body, &s->max_iter, err)))
        return rc;
    if ((rc = pick(s->ms, "method", METHOD, N_ELEMS(METHOD), &s->mle, err)) != DP_OK ||
        (rc = pick(s->vs, "variant", VARIANT, N_ELEMS(VARIANT), &vi, err)) != DP_OK)
        return rc;
    s->v = (eb_beta_variant)vi;
    if ((rc = beta_parse_prior(body, m, s, err)) != DP_OK)
        return rc;
    return beta_parse_privacy(body, s, err);
}

/* What a Beta run computes (beta_run). */
typedef struct beta_out {
    double *pm, *psd, *sh;        /* m each, owned */
    eb_beta_prior used, fm, fmle; /* the prior used; the moment and ML fits */
    eb_beta_counts cnt;
    eb_status st;
    eb_beta_private_info pinfo;
    eb_beta_central_info ci; /* central DP: what the release added */
    bool have_mle, have_mom;
    double max_shr; /* largest shrinkage */
} beta_out;

/* Run: the posterior under the known prior, the private moment fit, or both public fits. */
static int beta_run(est_job *job, const eb_beta_data *b, const beta_spec *s, beta_out *o,
                    dp_err *err)
{
    int rc;
    o->st = EB_STATUS_CONVERGED;
    if (s->known) {
        if ((rc = eb_beta_posterior_known(b, s->alpha, s->beta, o->pm, o->psd, o->sh, err)) !=
            DP_OK)
            return rc;
        o->used = (eb_beta_prior){s->alpha,
                                  s->beta,
                                  s->alpha / (s->alpha + s->beta),
                                  s->alpha + s->beta,
                                  eb_beta_loglik(b, s->alpha, s->beta),
                                  0,
                                  EB_STATUS_CONVERGED};
        return DP_OK;
    }
    if (s->central) { /* the noisy sums, the projected prior, each client's posterior */
        eb_beta_central_opts co = {s->c_z, s->seed};
        if ((rc = eb_beta_central_fit(b, &co, o->pm, o->psd, o->sh, &o->used, &o->cnt, &o->ci,
                                      &o->st, err)) != DP_OK)
            return rc;
        o->max_shr = eb_max_shrinkage(o->sh, b->m);
        return DP_OK;
    }
    if (s->priv) {
        if ((rc = eb_beta_private(b, s->scheme, s->v, s->eps0, s->loo, s->seed, o->pm, o->psd,
                                  o->sh, &o->used, &o->cnt, &o->pinfo, &o->st, err)) != DP_OK)
            return rc;
        o->st = eb_status_worst(o->st, o->used.status == EB_STATUS_BOUNDARY ? EB_STATUS_BOUNDARY
                                                                            : EB_STATUS_CONVERGED);
        o->max_shr = eb_max_shrinkage(o->sh, b->m);
        return DP_OK;
    }
    /* the Newton loop stops at the compute deadline, as the mixture's EM does */
    if ((rc = eb_beta_fit_mle_cancel(b, s->max_iter, job->cancel, &o->fmle, err)) != DP_OK)
        return rc;
    o->have_mle = true;
    if ((rc = eb_beta_fit_moments(b, s->v, &o->fm, err)) != DP_OK)
        return rc;
    o->have_mom = true;
    if (s->mle) {
        o->used = o->fmle;
        o->st = o->fmle.status;
        return eb_beta_posterior_prior(b, &o->fmle, o->pm, o->psd, o->sh, err);
    }
    o->used = o->fm;
    if ((rc = eb_beta_posterior_moments(b, s->v, s->loo, o->pm, o->psd, o->sh, &o->cnt, &o->st,
                                        err)) != DP_OK)
        return rc;
    o->st = eb_status_worst(o->st, o->fm.status);
    return DP_OK;
}

/* Render, part 1: one row per client; the per-client arrays are released once written. */
static int beta_render_rows(est_job *job, size_t m, beta_out *o, dp_err *err)
{
    static const char *const names[] = {"posterior_mean", "posterior_sd", "shrinkage"};
    static const size_t widths[] = {1, 1, 1};
    static const bool vec[] = {false, false, false};
    if (est_rows_wanted(job)) {
        if (rows_fields(job, names, widths, vec, 3, err) != DP_OK ||
            rows_begin(job, m, true, err) != DP_OK)
            return err->code;
        for (size_t i = 0; i < m; i++) {
            double *v = job->cols.vals + i * 3;
            v[0] = o->pm[i];
            v[1] = o->psd[i];
            v[2] = o->sh[i];
        }
    }
    dp_free(o->pm);
    dp_free(o->psd);
    dp_free(o->sh);
    o->pm = o->psd = o->sh = NULL;
    return DP_OK;
}

/* The status in words. */
/* The status in words of a central run (beta_reason). */
static void beta_reason_central(const beta_out *o, char *why, size_t n)
{
    if (o->st == EB_STATUS_NO_POOLING_GAIN)
        reason_add(why, n,
                   "no_pooling_gain: the prior estimated from the noisy sums moves no client by "
                   "%g%% or more of the way to it (largest shrinkage %.3g): these are essentially "
                   "each client's own rate; pooling under central DP needs more clients or a "
                   "larger epsilon.",
                   100.0 * EB_NO_POOLING_GAIN, o->max_shr);
    if (o->ci.proj_mean)
        reason_add(why, n,
                   "boundary: the prior mean estimated from the noisy sums fell outside [0, 1] and "
                   "was projected onto %g (post-processing: no privacy cost); the prior is a point "
                   "mass there, and each client keeps its own rate.",
                   o->used.mu);
    if (o->ci.proj_var_low && !o->ci.proj_mean)
        reason_add(why, n,
                   "boundary: the prior variance estimated from the noisy sums is <= 0 (%.3g), "
                   "projected onto 0 (alpha + beta unbounded); each client is shrunk toward the "
                   "prior mean only as far as the noise in the sums allows.",
                   o->ci.var_raw);
    if (o->ci.proj_var_high)
        reason_add(why, n,
                   "boundary: the prior variance estimated from the noisy sums (%.3g) is at least "
                   "mean (1 - mean), more than any Beta allows: alpha + beta is projected onto %g "
                   "and each client keeps (about) its own rate.",
                   o->ci.var_raw, EB_BETA_CENTRAL_S_MIN);
}

static void beta_reason(size_t m, const beta_spec *s, const beta_out *o, char *why, size_t n)
{
    if (s->central) {
        beta_reason_central(o, why, n);
        return;
    }
    bool two = s->priv && s->scheme == EB_BETA_PRIV_TWO_BIT;
    if (s->priv && o->max_shr < EB_NO_POOLING_GAIN)
        reason_no_gain(why, n, o->max_shr, false);
    if (two && o->cnt.prior_mean > 0)
        reason_add(why, n,
                   "%s the mean of all %zu clients' noisy messages fell outside [0, 1], so the "
                   "reported prior is a point mass at %g: the data, after this much noise, cannot "
                   "place the population mean. Clients whose own leave-one-out mean was clamped "
                   "(clamped.mean = %zu) keep their own estimate (shrinkage 0).",
                   o->st == EB_STATUS_DEGENERATE ? "degenerate:" : "The prior is degenerate:", m,
                   o->used.mu, o->cnt.mean);
    else if (o->st == EB_STATUS_DEGENERATE)
        reason_add(why, n,
                   "degenerate: for %zu clients the pooled mean of the noisy messages fell outside "
                   "[0, 1] and was clamped: their prior is a point mass there and a posterior_sd "
                   "of 0 is an artefact of the clamp, not certainty.",
                   o->cnt.mean);
    if (isinf(o->used.s))
        reason_add(why, n,
                   "boundary: the prior's alpha + beta is unbounded (no spread beyond binomial "
                   "noise); %s.",
                   two ? "each client is pooled toward its mean only as far as the noise in that "
                         "mean allows"
                       : "clients are pooled to its mean (see shrinkage and clamped)");
    else if (o->used.status == EB_STATUS_BOUNDARY || o->st == EB_STATUS_BOUNDARY)
        reason_add(why, n,
                   "boundary: the estimate sits on the edge of its range (a moment variance <= 0 "
                   "or alpha + beta <= 0, or alpha or beta at its lower limit); see clamped.");
    if (o->cnt.local > 0 && !two)
        reason_add(why, n,
                   "%zu of %zu clients kept their own estimate: their moments showed more spread "
                   "than any Beta prior allows (clamped.local).",
                   o->cnt.local, m);
    if (o->st == EB_STATUS_UNIDENTIFIABLE)
        reason_add(why, n,
                   "unidentifiable: the data cannot identify the prior (every client has the same "
                   "rate, all rates 0 or 1, or two clients with leave-one-out).");
    if (o->st == EB_STATUS_MAX_ITER)
        reason_add(why, n,
                   "max_iter: Newton's method stopped at max_iter before its tolerance; the last "
                   "iterate is returned.");
}

/* The privacy object of a central run (as the Gaussian's, gauss_privacy_json). */
static json_t *beta_central_privacy_json(const est_job *job, const beta_spec *s,
                                         const eb_beta_central_info *ci)
{
    json_t *sens =
        json_pack("{s:o, s:o, s:o}", "sum", json_util_real(ci->sens_sum), "sum_of_squares",
                  json_util_real(ci->sens_sq), "l2_scaled", json_util_real(ci->l2_sens));
    json_t *sd = json_pack("{s:o, s:o}", "sum", json_util_real(ci->sd_sum), "sum_of_squares",
                           json_util_real(ci->sd_sq));
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:s, s:o, s:s}", "model",
        "central", "mechanism", "gaussian", "privacy_unit", "client", "released",
        "the sums over clients of each client's rate successes/trials and of its unbiased square "
        "successes (successes - 1) / (trials (trials - 1)), both in [0, 1], noised once",
        "bounds", "[0, 1] for both contributions: the range of a rate, so nothing is clipped",
        "epsilon", json_util_real(s->c_eps), "delta", json_util_real(s->c_delta), "rho",
        json_util_real(ci->rho), "noise_multiplier", json_util_real(s->c_z), "accountant",
        "zcdp (Bun & Steinke 2016 Prop. 1.6; Canonne, Kamath & Steinke 2020 conversion)",
        "sensitivities", sens, "noise_std", sd, "weight_noise", json_util_real(ci->weight_extra),
        "posterior_scope",
        "each client's posterior combines the private prior with that client's own data, "
        "un-noised: it is for that client alone and must be shown only to it",
        "charges", charges_placeholder(), "charging", charging_note(job));
}

/* Render, part 2: the rest of the answer, then the run is stored (finish_run). */
static int beta_render(est_job *job, size_t m, const beta_spec *s, const beta_out *o, dp_err *err)
{
    json_t *out = json_object(), *est = json_array();
    if (out == NULL || est == NULL) {
        json_decref(out);
        json_decref(est);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    const char *source = s->known     ? "given"
                         : s->central ? "moments from the noisy sums (central DP)"
                         : s->mle     ? "mle"
                                      : "moments (all clients)";
    json_t *fits = json_null();
    if (o->have_mle || o->have_mom)
        fits = json_pack("{s:o, s:o}", "mle", o->have_mle ? beta_fit_json(&o->fmle) : json_null(),
                         "moments", o->have_mom ? beta_fit_json(&o->fm) : json_null());
    json_t *privj = json_null();
    if (s->central)
        privj = beta_central_privacy_json(job, s, &o->ci);
    else if (s->priv)
        privj = json_pack(
            "{s:s, s:s, s:o, s:o, s:i, s:o, s:s, s:o, s:s}", "mechanism", "randomized_response",
            "scheme", s->scheme == EB_BETA_PRIV_TWO_BIT ? "two_bit" : "paper_1bit", "epsilon0",
            json_util_real(o->pinfo.eps0), "epsilon_per_bit", json_util_real(o->pinfo.eps_per_bit),
            "bits", (int)o->pinfo.bits, "rho", json_util_real(o->pinfo.rho), "model",
            "pure local DP per client (user level), simulated on the server", "charges",
            charges_placeholder(), "charging", charging_note(job));
    const field_val fields[] = {
        {"model", json_string("beta")},
        {"method", json_string(s->known ? "known_prior" : s->ms)},
        {"variant", json_string(s->vs)},
        {"leave_one_out", json_boolean(s->loo)},
        {"prior", beta_prior_json(&o->used, source)},
        {"fits", fits},
        {"clamped", json_pack("{s:I, s:I, s:I}", "pooled", (json_int_t)o->cnt.pooled, "local",
                              (json_int_t)o->cnt.local, "mean", (json_int_t)o->cnt.mean)},
        {"estimates", est},
    };
    char why[800] = "";
    beta_reason(m, s, o, why, sizeof why);
    run_outcome oc = {o->used.loglik, o->used.iterations, o->st, privj, why};
    return finish_run(job, s->priv, m, 1, out, fields, N_ELEMS(fields), &oc, err);
}

/* Charges the silos (if any) before anything is computed: the per-client event of the local
 * randomizer, or (central) the one Gaussian event of the release with its noise multiplier
 * calibrated here, charged once per silo (privacy unit: a client). */
static int beta_charge(est_job *job, beta_spec *s, dp_err *err)
{
    acct_event *ev = NULL;
    if (s->central) {
        int rc = central_noise(&s->c_eps, s->c_delta, &s->c_z, err);
        eb_beta_central_opts co = {s->c_z, s->seed};
        eb_beta_central_info ci;
        if (rc == DP_OK)
            rc = eb_beta_central_calibrate(&co, &ci, err);
        if (rc != DP_OK)
            return rc;
        job->charge_once = true;
        return charge_silos(job, true, acct_event_gaussian(s->c_z), err);
    }
    if (s->priv)
        ev = s->scheme == EB_BETA_PRIV_TWO_BIT
                 ? acct_event_self_composed(2, acct_event_pure(s->eps0 / 2.0))
                 : acct_event_pure(s->eps0);
    return charge_silos(job, s->priv, ev, err);
}

/* POST /v1/estimators/beta, on the compute pool: parse, charge, run, render. */
static int beta_compute(est_job *job, dp_err *err)
{
    static const char *const keys[] = {"clients",       "prior",   "method",      "variant",
                                       "leave_one_out", "privacy", "seed",        "max_iter",
                                       "keep_data",     "results", "keep_results"};
    const http_req *rq = &job->rq;
    size_t m = 0;
    if (json_util_check_keys(rq->body, keys, sizeof keys / sizeof keys[0], err) != DP_OK)
        return err->code;
    int rc = get_clients(rq, &m, err);
    if (rc != DP_OK)
        return rc;
    beta_spec s;
    memset(&s, 0, sizeof s);
    beta_out o;
    memset(&o, 0, sizeof o);
    double *z = dp_calloc(m, sizeof(double)), *n = dp_calloc(m, sizeof(double));
    o.pm = dp_calloc(m, sizeof(double));
    o.psd = dp_calloc(m, sizeof(double));
    o.sh = dp_calloc(m, sizeof(double));
    if (!z || !n || !o.pm || !o.psd || !o.sh)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK && (rc = beta_parse_clients(rq, m, z, n, err)) == DP_OK &&
        (rc = beta_parse_options(rq->body, m, &s, err)) == DP_OK) {
        rc = beta_charge(job, &s, err);
    }
    eb_beta_data b = {m, z, n};
    if (rc == DP_OK)
        rc = beta_run(job, &b, &s, &o, err);
    dp_free(z); /* the clients' inputs are not needed any more */
    dp_free(n);
    if (rc == DP_OK)
        rc = beta_render_rows(job, m, &o, err);
    if (rc == DP_OK)
        rc = beta_render(job, m, &s, &o, err);
    dp_free(o.pm);
    dp_free(o.psd);
    dp_free(o.sh);
    return rc;
}

/* ---- POST /v1/estimators/mixture ---- */

/* What a mixture request asks for, once parsed (mix_parse, mix_parse_privacy). */
typedef struct mix_spec {
    double sx2; /* the noise variance */
    bool pooled;
    uint64_t seed;
    unsigned max_iter;
    bool known, fit;     /* a known prior (prior.components) or k components to fit */
    size_t k;            /* components */
    eb_mix_opts o;       /* the fit's options */
    const json_t *comps; /* the known prior's components (borrowed from the body) */
    bool priv;
    eb_mix_private_opts po;
    double var_max; /* private: sigma_theta_bound^2 when given (inf: not given) */
    size_t n_proj;  /* private: components projected onto the public bounds */
    double max_shr; /* largest shrinkage */
} mix_spec;

/* components, method, tol, n_init, variance_floor: the fit of k components. */
static int mix_parse_fit(const json_t *body, size_t m, mix_spec *s, dp_err *err)
{
    static const choice METHOD[] = {{"em", EB_MIX_EM}, {"altmin", EB_MIX_ALTMIN}};
    int64_t kk, ni;
    int rc;
    if ((rc = json_util_req_int(body, "components", &kk, err)) != DP_OK)
        return rc;
    if (kk < 1 || (uint64_t)kk > m || kk > EB_MAX_COMPONENTS)
        return dp_err_set(err, DP_EINVAL, "components",
                          "components must be in 1..min(clients, %d) (got %lld with %zu clients)",
                          EB_MAX_COMPONENTS, (long long)kk, m);
    s->k = (size_t)kk;
    s->o.k = s->k;
    const char *meth;
    double fl;
    if ((rc = json_util_opt_string(body, "method", "em", &meth, err)) ||
        (rc = json_util_opt_number(body, "tol", s->o.tol, &s->o.tol, err)) ||
        (rc = json_util_opt_int(body, "n_init", s->o.n_init, &ni, err)) ||
        (rc = json_util_opt_number(body, "variance_floor", DP_NAN, &fl, err)))
        return rc;
    int mi;
    if ((rc = pick(meth, "method", METHOD, N_ELEMS(METHOD), &mi, err)) != DP_OK)
        return rc;
    s->o.method = (eb_mix_method)mi;
    if (ni < 1 || ni > 100)
        return dp_err_set(err, DP_EINVAL, "n_init", "n_init must be in 1..100 (got %lld)",
                          (long long)ni);
    s->o.n_init = (unsigned)ni;
    s->o.var_floor = fl;
    return check_estimable(m, err);
}

/* prior: {"components": [...]}, a known prior (its components are read by mix_parse_components). */
static int mix_parse_known(const json_t *pj, mix_spec *s, dp_err *err)
{
    static const char *const prk[] = {"components"};
    if (json_util_require_object(pj, "prior", err) || json_util_check_keys(pj, prk, 1, err)) {
        dp_err_prefix_field(err, "prior");
        return err->code;
    }
    s->comps = json_object_get(pj, "components");
    if (!json_is_array(s->comps) || json_array_size(s->comps) < 1 ||
        json_array_size(s->comps) > EB_MAX_COMPONENTS)
        return dp_err_set(err, DP_EINVAL, "prior.components",
                          "prior.components must be an array of 1..%d components",
                          EB_MAX_COMPONENTS);
    s->k = json_array_size(s->comps);
    return DP_OK;
}

/* Parse: the clients into g; the fit or the known prior's size into s (its components, once the
 * arrays exist, by mix_parse_components). */
static int mix_parse(est_job *job, gauss_req *g, mix_spec *s, dp_err *err)
{
    static const char *const keys[] = {
        "clients", "noise_variance", "components",     "prior",   "method", "max_iter",
        "tol",     "n_init",         "variance_floor", "privacy", "seed",   "keep_data",
        "results", "keep_results"};
    const json_t *body = job->rq.body;
    int rc;
    if (json_util_check_keys(body, keys, sizeof keys / sizeof keys[0], err) != DP_OK)
        return err->code;
    if ((rc = parse_gauss_clients(&job->rq, g, false, err)) != DP_OK ||
        (rc = gauss_noise(body, g, &s->sx2, &s->pooled, err)) != DP_OK)
        return rc;
    if ((rc = parse_seed(body, &s->seed, err)) || (rc = parse_max_iter(body, &s->max_iter, err)))
        return rc;
    const json_t *pj = json_object_get(body, "prior");
    const json_t *kj = json_object_get(body, "components");
    s->known = pj != NULL && !json_is_null(pj);
    s->fit = kj != NULL && !json_is_null(kj);
    if (s->known == s->fit)
        return dp_err_set(err, DP_EINVAL, "components",
                          "give either components (to fit k components) or prior.components (a "
                          "known prior), not %s",
                          s->known ? "both" : "neither");
    s->o = eb_mix_opts_default(1);
    s->o.seed = s->seed;
    s->o.max_iter = s->max_iter;
    s->o.cancel = job->cancel; /* the EM / Alg 3 loops stop at the compute deadline */
    return s->fit ? mix_parse_fit(body, g->m, s, err) : mix_parse_known(pj, s, err);
}

/* The arrays of a mixture run (mix_alloc; mix_out_free). */
typedef struct mix_out {
    double *w, *mu, *var;   /* k, k*d, k: the prior */
    double *resp, *pm, *pv; /* m*k responsibilities, m*d posterior means and variances */
    double *sh;             /* m shrinkage */
} mix_out;

static int mix_alloc(size_t m, size_t d, size_t k, mix_out *o, dp_err *err)
{
    o->w = dp_calloc(k, sizeof(double));
    o->mu = dp_calloc(k * d, sizeof(double));
    o->var = dp_calloc(k, sizeof(double));
    o->resp = dp_calloc(m * k, sizeof(double));
    o->pm = dp_calloc(m * d, sizeof(double));
    o->pv = dp_calloc(m * d, sizeof(double));
    o->sh = dp_calloc(m, sizeof(double));
    if (!o->w || !o->mu || !o->var || !o->resp || !o->pm || !o->pv || !o->sh)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

static void mix_out_free(mix_out *o)
{
    dp_free(o->w);
    dp_free(o->mu);
    dp_free(o->var);
    dp_free(o->resp);
    dp_free(o->pm);
    dp_free(o->pv);
    dp_free(o->sh);
    memset(o, 0, sizeof *o);
}

/* The known prior's components: {"weight", "mean", "variance"} each. */
static int mix_parse_components(const mix_spec *s, size_t d, mix_out *o, dp_err *err)
{
    static const char *const ck[] = {"weight", "mean", "variance"};
    for (size_t l = 0; l < s->k; l++) {
        const json_t *c = json_array_get(s->comps, l);
        char pfx[48];
        snprintf(pfx, sizeof pfx, "prior.components[%zu]", l);
        size_t dd = d;
        bool isv;
        const json_t *mj = c ? json_object_get(c, "mean") : NULL;
        if (json_util_require_object(c, "", err) || json_util_check_keys(c, ck, 3, err) ||
            json_util_req_number(c, "weight", &o->w[l], err) ||
            json_util_req_number(c, "variance", &o->var[l], err)) {
            dp_err_prefix_field(err, pfx);
            return err->code;
        }
        if (mj == NULL || parse_vec(mj, "mean", &dd, o->mu + l * d, &isv, err) != DP_OK) {
            if (mj == NULL)
                dp_err_set(err, DP_EINVAL, "mean", "mean is required");
            dp_err_prefix_field(err, pfx);
            return err->code;
        }
    }
    return DP_OK;
}

/* privacy: the clients' clipped, noised messages (Ozkara et al. 2023, Section 4); calibrated here,
 * so that the charge knows the per-client event. */
static int mix_parse_privacy(const json_t *body, const eb_gauss_data *raw, mix_spec *s,
                             eb_mix_private_info *pinfo, dp_err *err)
{
    static const char *const pk[] = {"epsilon0",          "delta",  "r",
                                     "sigma_theta_bound", "radius", "calibration"};
    const json_t *pvj = json_object_get(body, "privacy");
    s->priv = pvj != NULL && !json_is_null(pvj);
    if (!s->priv)
        return DP_OK;
    eb_mix_private_opts *po = &s->po;
    if (s->known)
        return dp_err_set(err, DP_EINVAL, "privacy",
                          "with a known prior no client sends anything; drop privacy or prior");
    if (json_util_require_object(pvj, "privacy", err) || json_util_check_keys(pvj, pk, 6, err) ||
        json_util_req_number(pvj, "epsilon0", &po->eps0, err) ||
        json_util_req_number(pvj, "delta", &po->delta, err) ||
        json_util_req_number(pvj, "r", &po->r, err) ||
        json_util_opt_number(pvj, "sigma_theta_bound", DP_NAN, &po->sigma_theta, err) ||
        json_util_opt_number(pvj, "radius", DP_NAN, &po->radius, err) ||
        parse_calibration(pvj, &po->cal, err)) {
        dp_err_prefix_field(err, "privacy");
        return err->code;
    }
    s->var_max = isnan(po->sigma_theta) || !isfinite(po->sigma_theta)
                     ? DP_INF
                     : po->sigma_theta * po->sigma_theta;
    if (isnan(po->sigma_theta))
        po->sigma_theta = 0.0; /* R of Lemma 3 with the discrete prior's 0 */
    po->seed = s->seed;
    return eb_mix_private_calibrate(raw, po, pinfo, err);
}

/* Run: privatizes what the clients send (simulated), fits the prior (or checks the known one),
 * and computes every client's posterior. */
static int mix_run(const eb_gauss_data *raw, mix_spec *s, eb_mix_private_info *pinfo,
                   eb_mix_prior *prior, mix_out *o, eb_mix_fit_info *info, dp_err *err)
{
    size_t m = raw->m, d = raw->d;
    eb_gauss_data sent = *raw;
    double extra = 0.0, *msgs = NULL, mu_var[EB_MAX_COMPONENTS];
    int rc = DP_OK;
    if (s->priv) {
        msgs = dp_calloc(m * d, sizeof(double));
        if (msgs == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        if ((rc = eb_mix_privatize(raw, &s->po, msgs, pinfo, err)) != DP_OK)
            goto out;
        sent.x = msgs;
        extra = pinfo->sigma * pinfo->sigma;
    }
    if (s->fit) {
        if ((rc = eb_mix_fit(&sent, extra, &s->o, prior, info, err)) != DP_OK) {
            rc = numeric_failure(rc, "mixture", err);
            goto out;
        }
        /* post-processing onto the public bounds (|mu_l| <= r, var_l <= sigma_theta_bound^2) */
        if (s->priv && (s->n_proj = eb_mix_project(prior, s->po.r, s->var_max, info)) > 0)
            info->loglik = eb_mix_loglik(&sent, extra, prior);
        if ((rc = eb_mix_mean_var(&sent, extra, prior, mu_var, err)) != DP_OK) {
            rc = numeric_failure(rc, "mixture", err);
            goto out;
        }
    } else {
        if ((rc = eb_mix_prior_check(prior, err)) != DP_OK)
            goto out;
        info->loglik = eb_mix_loglik(raw, 0.0, prior);
    }
    if ((rc = eb_mix_posterior_fitted(raw, prior, s->fit ? mu_var : NULL, o->resp, o->pm, o->pv,
                                      o->sh, err)) != DP_OK)
        rc = numeric_failure(rc, "mixture", err);
    else
        s->max_shr = eb_max_shrinkage(o->sh, m);
out:
    dp_free(msgs);
    return rc;
}

/* Render, part 1: one row per client; the per-client arrays are released once written. */
static int mix_render_rows(est_job *job, const gauss_req *g, size_t k, mix_out *o, dp_err *err)
{
    size_t m = g->m, d = g->d;
    static const char *const names[] = {"posterior_mean", "posterior_sd", "shrinkage",
                                        "responsibilities"};
    const size_t widths[] = {d, d, 1, k};
    const bool vec[] = {g->vec, g->vec, false, true};
    if (est_rows_wanted(job)) {
        if (rows_fields(job, names, widths, vec, 4, err) != DP_OK ||
            rows_begin(job, m, true, err) != DP_OK)
            return err->code;
        for (size_t i = 0; i < m; i++) {
            double *v = job->cols.vals + i * job->cols.w;
            for (size_t j = 0; j < d; j++) {
                v[j] = o->pm[i * d + j];
                v[d + j] = sqrt(o->pv[i * d + j]);
            }
            v[2 * d] = o->sh[i];
            memcpy(v + 2 * d + 1, o->resp + i * k, k * sizeof(double));
        }
    }
    dp_free(o->resp);
    dp_free(o->pm);
    dp_free(o->pv);
    dp_free(o->sh);
    o->resp = o->pm = o->pv = o->sh = NULL;
    return DP_OK;
}

/* Render, part 2: the privacy object of the answer (null for a public run). */
static json_t *mix_privacy_json(const est_job *job, const mix_spec *s,
                                const eb_mix_private_info *pinfo)
{
    if (!s->priv)
        return json_null();
    return json_pack(
        "{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:o, s:s}", "mechanism", "gaussian",
        "model",
        "local DP per client (user level): clip to an L2 ball of radius R, add "
        "Gaussian noise; one message per client",
        "epsilon0", json_util_real(s->po.eps0), "delta", json_util_real(s->po.delta), "rho",
        json_util_real(pinfo->rho), "radius", json_util_real(pinfo->radius), "sensitivity",
        json_util_real(pinfo->sensitivity), "sigma", json_util_real(pinfo->sigma), "calibration",
        pinfo->analytic ? "analytic_gaussian (Balle & Wang 2018)" : "classic (log(2/delta))",
        "clipped", (json_int_t)pinfo->n_clipped, "charges", charges_placeholder(), "charging",
        charging_note(job));
}

/* Render, part 3: the prior's components and the rest of the answer, then the run is stored. */
static int mix_render(est_job *job, const gauss_req *g, const mix_spec *s,
                      const eb_mix_private_info *pinfo, const mix_out *o,
                      const eb_mix_fit_info *info, dp_err *err)
{
    size_t d = g->d;
    json_t *out = json_object(), *est = json_array(), *cj = json_array();
    bool ok = out != NULL && est != NULL && cj != NULL;
    for (size_t l = 0; ok && l < s->k; l++) {
        json_t *c =
            json_pack("{s:o, s:o, s:o}", "weight", json_util_real(o->w[l]), "mean",
                      vec_json(o->mu + l * d, d, g->vec), "variance", json_util_real(o->var[l]));
        ok = c != NULL && json_array_append_new(cj, c) == 0;
    }
    if (!ok) {
        json_decref(out);
        json_decref(est);
        json_decref(cj);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    json_t *privj = mix_privacy_json(job, s, pinfo);
    const char *meth_name = s->known ? "known_prior" : (s->o.method == EB_MIX_EM ? "em" : "altmin");
    const field_val fields[] = {
        {"model", json_string("mixture")},
        {"method", json_string(meth_name)},
        {"prior",
         json_pack("{s:o, s:s}", "components", cj, "source", s->known ? "given" : "fitted")},
        {"noise_variance", g->by_se ? json_null() : json_util_real(s->sx2)},
        {"noise_variance_source",
         json_string(g->by_se ? "standard_errors" : (s->pooled ? "pooled" : "given"))},
        {"estimates", est},
    };
    char why[800] = "";
    eb_status st = info->status;
    if (s->priv && s->max_shr < EB_NO_POOLING_GAIN)
        st = eb_status_worst(st, EB_STATUS_NO_POOLING_GAIN);
    if (st == EB_STATUS_NO_POOLING_GAIN)
        reason_no_gain(why, sizeof why, s->max_shr, false);
    if (s->n_proj > 0)
        reason_add(why, sizeof why,
                   "boundary: %zu component(s) fitted to the privatized messages had a mean "
                   "outside the public bound |mean| <= r = %g or a variance above "
                   "sigma_theta_bound^2 and were projected onto them (post-processing: no "
                   "privacy cost).",
                   s->n_proj, s->po.r);
    if (info->n_floor > 0)
        reason_add(why, sizeof why,
                   "boundary: %zu component variance(s) sit at the floor %g (the fit wanted less: "
                   "the clients' means in that component vary no more than their noise "
                   "explains), so that component is a point mass; its clients' posterior_sd "
                   "reflects the floor and the responsibilities, not uncertainty about the "
                   "component itself.",
                   info->n_floor, info->var_floor);
    if (st == EB_STATUS_DEGENERATE)
        reason_add(why, sizeof why,
                   "degenerate: a component emptied (weight 0) during the fit; fewer components "
                   "may describe these clients.");
    if (st == EB_STATUS_UNIDENTIFIABLE)
        reason_add(why, sizeof why, "unidentifiable: fewer distinct client means than components.");
    if (st == EB_STATUS_MAX_ITER)
        reason_add(why, sizeof why,
                   "max_iter: the fit stopped at max_iter before its tolerance; the last "
                   "iterate is returned.");
    run_outcome oc = {info->loglik, info->iterations, st, privj, why};
    return finish_run(job, s->priv, g->m, d, out, fields, N_ELEMS(fields), &oc, err);
}

/* POST /v1/estimators/mixture, on the compute pool: parse, charge, run, render. */
static int mixture_compute(est_job *job, dp_err *err)
{
    gauss_req g = {0};
    mix_spec s;
    memset(&s, 0, sizeof s);
    mix_out o;
    memset(&o, 0, sizeof o);
    eb_mix_private_info pinfo = {0};
    eb_mix_fit_info info = {0, 0, EB_STATUS_CONVERGED, 0, 0};
    int rc = mix_parse(job, &g, &s, err);
    if (rc == DP_OK)
        rc = mix_alloc(g.m, g.d, s.k, &o, err);
    if (rc == DP_OK && s.known)
        rc = mix_parse_components(&s, g.d, &o, err);
    eb_gauss_data raw = {g.m, g.d, g.x, g.n, s.sx2};
    eb_mix_prior prior = {s.k, g.d, o.w, o.mu, o.var};
    if (rc == DP_OK)
        rc = mix_parse_privacy(job->rq.body, &raw, &s, &pinfo, err);
    if (rc == DP_OK) /* charge the silos (if any) before anything is computed */
        rc = charge_silos(
            job, s.priv, s.priv ? acct_event_gaussian(pinfo.sigma / pinfo.sensitivity) : NULL, err);
    if (rc == DP_OK)
        rc = check_scale(g.x, g.m * g.d, "mixture", err);
    if (rc == DP_OK)
        rc = mix_run(&raw, &s, &pinfo, &prior, &o, &info, err);
    if (rc == DP_OK) {
        gauss_req_free(&g); /* the clients' inputs are not needed any more */
        g.x = g.n = g.wv = g.se = NULL;
        rc = mix_render_rows(job, &g, s.k, &o, err);
    }
    if (rc == DP_OK)
        rc = mix_render(job, &g, &s, &pinfo, &o, &info, err);
    gauss_req_free(&g);
    mix_out_free(&o);
    return rc;
}

/* ---- for routes in other files (api/estimators_run.h) ---- */

const json_t *est_job_body(const est_job *j)
{
    return j->rq.body;
}

const struct clients_json *est_job_arrays(const est_job *j)
{
    return j->rq.clients;
}

const cfg *est_job_cfg(const est_job *j)
{
    return j->rq.app->cfg;
}

const atomic_bool *est_job_cancel(const est_job *j)
{
    return j->cancel;
}

bool est_rows_wanted(const est_job *j)
{
    return !j->summary || j->keep_results;
}

int est_rows_begin(est_job *j, const char *const *names, const size_t *widths, const bool *vec,
                   size_t n_fields, size_t m, double **vals, size_t *w, dp_err *err)
{
    if (rows_fields(j, names, widths, vec, n_fields, err) != DP_OK ||
        rows_begin(j, m, false, err) != DP_OK)
        return err->code;
    *vals = j->cols.vals;
    *w = j->cols.w;
    return DP_OK;
}

int est_finish(est_job *j, size_t m, json_t *result, double loglik, unsigned iterations,
               eb_status status, const char *reason, dp_err *err)
{
    run_outcome oc = {loglik, iterations, status, json_null(), reason};
    return finish_run(j, false, m, 1, result, NULL, 0, &oc, err);
}

/* ---- the routes ---- */

int route_estimators_gaussian(const http_req *rq, http_resp *rs, dp_err *err)
{
    return est_start(rq, rs, "gaussian", gaussian_compute, err);
}

int route_estimators_beta(const http_req *rq, http_resp *rs, dp_err *err)
{
    return est_start(rq, rs, "beta", beta_compute, err);
}

int route_estimators_mixture(const http_req *rq, http_resp *rs, dp_err *err)
{
    return est_start(rq, rs, "mixture", mixture_compute, err);
}

/* ---- runs ---- */

int route_runs_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    runs_viewer v;
    if (run_require_token(rq, err) != DP_OK || /* 401 before anything is said about the id */
        http_req_param_id(rq, "id", &id, err) != DP_OK || run_viewer(rq, &v, err) != DP_OK)
        return err->code;
    runs_run r;
    bool found = false;
    if (runs_get(rq->db, id, &v, rq->req_id, &r, &found, err) != DP_OK)
        return err->code;
    if (!found)
        return http_err_not_found(err, "id", "run", id);
    bool unkept;
    if ((r.result = result_with_rows(store_conn_db(rq->db), id, r.result, rq->req_id, false,
                                     &unkept, err)) == NULL) {
        runs_run_clear(&r);
        return err->code;
    }
    int rc = DP_OK;
    json_error_t je;
    json_t *params = json_util_loads(r.params, 0, &je);
    json_t *data = r.data == NULL ? NULL : json_util_loads(r.data, 0, &je);
    json_t *result = json_util_loads(r.result, 0, &je);
    if (params == NULL || result == NULL || (r.data != NULL && data == NULL)) {
        json_decref(params);
        json_decref(data);
        json_decref(result);
        runs_run_clear(&r);
        dp_log(DP_LOG_ERROR, rq->req_id, "stored run %lld has unreadable JSON", (long long)id);
        return dp_err_set(err, DP_EINTERNAL, NULL, "stored run is unreadable");
    }
    bool kept = data != NULL;
    if (data != NULL && json_object_set_new(params, "clients", data) != 0)
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    json_t *o = json_pack("{s:I, s:s, s:o, s:s, s:b, s:I, s:b, s:o, s:o}", "id", (json_int_t)id,
                          "kind", r.kind, "created_at", json_util_time(r.created_at_ms), "status",
                          r.status, "private", r.priv, "n_clients", (json_int_t)r.n_clients,
                          "data_kept", kept, "inputs", params, "outputs", result);
    runs_run_clear(&r);
    if (rc != DP_OK) {
        json_decref(o);
        return rc;
    }
    return http_resp_json(rs, 200, o, err);
}

int route_runs_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t limit, after;
    runs_viewer v;
    if (http_req_page(rq, &limit, &after, err) != DP_OK ||
        run_viewer(rq, &v, err) != DP_OK) /* each caller lists only what it may read */
        return err->code;
    runs_summary *page = dp_calloc((size_t)limit, sizeof *page);
    if (page == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    size_t n = 0;
    bool more = false;
    if (runs_list(rq->db, &v, after, (size_t)limit, rq->req_id, page, &n, &more, err) != DP_OK) {
        dp_free(page);
        return err->code;
    }
    json_t *arr = json_array();
    int rc = arr == NULL ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : DP_OK;
    for (size_t i = 0; i < n && rc == DP_OK; i++) {
        json_t *r = json_pack("{s:I, s:s, s:o, s:s, s:b, s:I}", "id", (json_int_t)page[i].id,
                              "kind", page[i].kind, "created_at",
                              json_util_time(page[i].created_at_ms), "status", page[i].status,
                              "private", page[i].priv, "n_clients", (json_int_t)page[i].n_clients);
        if (r == NULL || json_array_append_new(arr, r) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    int64_t last = n > 0 ? page[n - 1].id : 0;
    dp_free(page);
    if (rc != DP_OK) {
        json_decref(arr);
        return rc;
    }
    json_t *o = json_pack("{s:o, s:o}", "runs", arr, "next_after",
                          more ? json_integer((json_int_t)last) : json_null());
    return http_resp_json(rs, 200, o, err);
}

/* GET /v1/runs/{id}/clients?after=&limit=: a page of a run's per-client results, read from the
 * stored columns (migration 0015) without reading the rest; each row has "position", its 1-based
 * place in the request's clients, and after is the last position seen (docs/ESTIMATORS.md). */
int route_runs_clients(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id, limit, after;
    runs_viewer v;
    if (run_require_token(rq, err) != DP_OK || http_req_param_id(rq, "id", &id, err) != DP_OK ||
        http_req_query_int(rq, "limit", RUNS_CLIENTS_PAGE_DEFAULT, 1, RUNS_CLIENTS_PAGE_MAX, &limit,
                           err) != DP_OK ||
        http_req_query_int(rq, "after", 0, 0, INT64_MAX, &after, err) != DP_OK ||
        run_viewer(rq, &v, err) != DP_OK)
        return err->code;
    bool found = false;
    if (runs_visible(rq->db, id, &v, rq->req_id, &found, err) != DP_OK)
        return err->code;
    if (!found)
        return http_err_not_found(err, "id", "run", id);
    run_rows r;
    size_t total = 0;
    if (runs_rows_get(store_conn_db(rq->db), id, (size_t)after, (size_t)limit, rq->req_id, &r,
                      &total, &found, err) != DP_OK)
        return err->code;
    if (!found)
        return dp_err_set(err, DP_ENOTFOUND, "id",
                          "run %lld stored no per-client results (they are kept when the "
                          "request says \"keep_results\": true; its fit is GET /v1/runs/%lld)",
                          (long long)id, (long long)id);
    text_buf b = {0};
    tb_printf(&b, "{\"run_id\":%lld,\"total\":%zu,\"clients\":[", (long long)id, total);
    if (!b.failed && run_rows_write(&r, 0, r.m, false, true, &b) != 0)
        b.failed = true;
    size_t end = r.base + r.m;
    if (end < total)
        tb_printf(&b, "],\"next_after\":%zu}", end);
    else
        tb_printf(&b, "],\"next_after\":null}");
    run_rows_clear(&r);
    if (b.failed) {
        free(b.s);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_text(rs, 200, "application/json", b.s, b.len, err);
}
