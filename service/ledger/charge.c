/*
 * ledger/charge.c: charges and claims: preparing a batch (costs computed on the caller's thread),
 * the blocking and asynchronous charge calls, claims.
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"

/* Checks a batch and computes every item's cost. On DP_OK *items_out (owned; free with
 * items_free) holds n prepared items whose results go to out[i]. */
static int charge_prepare(const ledger *l, const ledger_charge_req *reqs, size_t n,
                          bool batch_fields, ledger_charge_result *out, op_item **items_out,
                          dp_err *err)
{
    *items_out = NULL;
    if (n == 0 || n > LEDGER_MAX_BATCH)
        return dp_err_set(err, DP_EINVAL, "charges", "a batch charges 1 to %d silos (got %zu)",
                          LEDGER_MAX_BATCH, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (reqs[i].silo_id == reqs[j].silo_id) {
                char f[48];
                snprintf(f, sizeof f, "charges[%zu].silo_id", i);
                return dp_err_set(err, DP_EINVAL, f, "silo %lld appears twice in one batch",
                                  (long long)reqs[i].silo_id);
            }
    op_item *items = dp_calloc(n, sizeof *items);
    if (items == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].silo_id = reqs[i].silo_id;
        items[i].res = &out[i];
    }
    for (size_t i = 0; i < n; i++) {
        int rc = lg_item_prepare(l, &reqs[i], "charge", &items[i], err);
        if (rc != DP_OK) {
            out[i].status = rc;
            if (batch_fields) {
                char f[32];
                snprintf(f, sizeof f, "charges[%zu]", i);
                dp_err_prefix_field(err, f);
            }
            for (size_t k = 0; k <= i; k++)
                free(items[k].own_json); /* jansson's allocator: malloc */
            dp_free(items);
            return rc;
        }
    }
    *items_out = items;
    return DP_OK;
}

static int cmp_item_silo(const void *a, const void *b)
{
    int64_t x = (*(const op_item *const *)a)->req->silo_id;
    int64_t y = (*(const op_item *const *)b)->req->silo_id;
    return (x > y) - (x < y);
}

/* For a batch with a batch key: fills op's batch fields with the key, its scope (the sender's
 * token) and the hash of the whole batch: every item's silo, request hash (event, relation, job)
 * and own key, in silo order, so that the same set sent in another order is the same batch. */
static int batch_prepare(const ledger_charge_req *reqs, op_item *items, size_t n,
                         const char *batch_key, ledger_op *op, dp_err *err)
{
    if (batch_key == NULL)
        return DP_OK;
    if (batch_key[0] == '\0' || strlen(batch_key) > LEDGER_KEY_MAX)
        return dp_err_set(err, DP_EINVAL, "idempotency_key",
                          "idempotency_key must have 1 to %d bytes", LEDGER_KEY_MAX);
    const op_item **sorted = dp_calloc(n, sizeof *sorted);
    if (sorted == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = &items[i];
    qsort(sorted, n, sizeof *sorted, cmp_item_silo);
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    dp_sha256_update(&c, "batch", 6);
    for (size_t i = 0; i < n; i++) {
        char silo[32];
        snprintf(silo, sizeof silo, "%lld", (long long)sorted[i]->req->silo_id);
        dp_sha256_update(&c, silo, strlen(silo) + 1);
        dp_sha256_update(&c, sorted[i]->req_hash, DP_SHA256_DIGEST_BYTES);
        const char *k = sorted[i]->req->idempotency_key;
        if (k == NULL)
            k = "";
        dp_sha256_update(&c, k, strlen(k) + 1);
    }
    dp_sha256_final(&c, op->batch_hash);
    dp_free(sorted);
    op->batch_key = batch_key;
    op->batch_actor = reqs[0].actor_token_id;
    return DP_OK;
}

static void items_free(op_item *items, size_t n)
{
    for (size_t i = 0; items != NULL && i < n; i++)
        free(items[i].own_json); /* jansson's allocator: malloc */
    dp_free(items);
}

/* The outcome of a charge op: a failed (non-dry) batch wrote nothing. */
static int charge_finish(ledger_op *op, ledger_charge_result *out, size_t n, bool dry_run,
                         dp_err *err)
{
    int rc = lg_finish(op, err);
    if (rc != DP_OK && !dry_run)
        for (size_t i = 0; i < n; i++) { /* nothing was written */
            out[i].charge_id = 0;
            out[i].replayed = false;
        }
    return rc;
}

/* Batch charge; batch_fields names failing items "charges[i]". */
static int charge_batch(ledger *l, const ledger_charge_req *reqs, size_t n, const char *batch_key,
                        bool dry_run, bool batch_fields, ledger_charge_result *out, dp_err *err)
{
    op_item *items = NULL;
    int rc = charge_prepare(l, reqs, n, batch_fields, out, &items, err);
    if (rc != DP_OK)
        return rc;
    ledger_op op = {.kind = OP_CHARGE,
                    .items = items,
                    .n_items = n,
                    .dry_run = dry_run,
                    .batch_fields = batch_fields};
    if ((rc = batch_prepare(reqs, items, n, batch_key, &op, err)) != DP_OK) {
        items_free(items, n);
        return rc;
    }
    lg_submit(l, &op);
    rc = charge_finish(&op, out, n, dry_run, err);
    items_free(items, n);
    return rc;
}

/* ---- asynchronous charges (the HTTP dispatcher's path; contract in ledger/ledger.h) ---- */

int ledger_charge_start(ledger *l, const ledger_charge_req *reqs, size_t n, const char *batch_key,
                        bool dry_run, bool batch_fields, ledger_charge_result *out,
                        void (*wake)(void *arg), void *wake_arg, ledger_pending **pending,
                        dp_err *err)
{
    *pending = NULL;
    if (wake == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: no wake-up for a charge");
    ledger_pending *p = dp_calloc(1, sizeof *p);
    if (p == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = charge_prepare(l, reqs, n, batch_fields, out, &p->items, err);
    if (rc != DP_OK) {
        dp_free(p);
        return rc;
    }
    p->l = l;
    p->n = n;
    p->dry_run = dry_run;
    p->out = out;
    p->op = (ledger_op){.kind = OP_CHARGE,
                        .items = p->items,
                        .n_items = n,
                        .dry_run = dry_run,
                        .batch_fields = batch_fields,
                        .wake = wake,
                        .wake_arg = wake_arg};
    if ((rc = batch_prepare(reqs, p->items, n, batch_key, &p->op, err)) != DP_OK) {
        items_free(p->items, n);
        dp_free(p);
        return rc;
    }
    lg_pld_flags_clear(&p->op);
    if (lg_op_init(&p->op) != DP_OK) {
        rc = lg_finish(&p->op, err);
        items_free(p->items, n);
        dp_free(p);
        return rc;
    }
    if (lg_enqueue(l, &p->op) != DP_OK) { /* stopping: wake will never be called */
        pthread_cond_destroy(&p->op.cv);
        rc = lg_finish(&p->op, err);
        items_free(p->items, n);
        dp_free(p);
        return rc;
    }
    *pending = p; /* from here the committer may call wake at any time */
    return DP_OK;
}

int ledger_pending_finish(ledger_pending *p, dp_err *err)
{
    lg_op_wait(p->l, &p->op); /* normally done already: called after wake */
    pthread_cond_destroy(&p->op.cv);
    int rc = charge_finish(&p->op, p->out, p->n, p->dry_run, err);
    items_free(p->items, p->n);
    dp_free(p);
    return rc;
}

void ledger_pending_free(ledger_pending *p)
{
    if (p == NULL)
        return;
    lg_op_wait(p->l, &p->op);
    pthread_cond_destroy(&p->op.cv);
    items_free(p->items, p->n);
    dp_free(p);
}

int ledger_charge_batch(ledger *l, const ledger_charge_req *reqs, size_t n, bool dry_run,
                        ledger_charge_result *out, dp_err *err)
{
    return charge_batch(l, reqs, n, NULL, dry_run, true, out, err);
}

int ledger_charge_batch_keyed(ledger *l, const ledger_charge_req *reqs, size_t n,
                              const char *batch_key, bool dry_run, ledger_charge_result *out,
                              dp_err *err)
{
    return charge_batch(l, reqs, n, batch_key, dry_run, true, out, err);
}

int ledger_charge_batch_with(ledger *l, const ledger_charge_req *reqs, size_t n,
                             ledger_write_fn write, void *write_arg, ledger_charge_result *out,
                             dp_err *err)
{
    if (write == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal error: no write for a charge");
    op_item *items = NULL;
    int rc = n == 0 ? DP_OK : charge_prepare(l, reqs, n, true, out, &items, err);
    if (rc != DP_OK)
        return rc;
    ledger_op op = {.kind = OP_CHARGE,
                    .items = items,
                    .n_items = n,
                    .batch_fields = true,
                    .write = write,
                    .write_arg = write_arg};
    if (n > 0 && (rc = batch_prepare(reqs, items, n, NULL, &op, err)) != DP_OK) {
        items_free(items, n);
        return rc;
    }
    lg_submit(l, &op);
    rc = charge_finish(&op, out, n, false, err);
    items_free(items, n);
    return rc;
}

int ledger_charge(ledger *l, const ledger_charge_req *req, bool dry_run, ledger_charge_result *out,
                  dp_err *err)
{
    return charge_batch(l, req, 1, NULL, dry_run, false, out, err);
}

int ledger_claim_create(ledger *l, const ledger_charge_req *req, int64_t timeout_ms,
                        ledger_claim_view *out, ledger_charge_result *figures, dp_err *err)
{
    if (timeout_ms < 1 || timeout_ms > LEDGER_CLAIM_MAX_MS)
        return dp_err_set(err, DP_EINVAL, "timeout_ms",
                          "timeout_ms must be in [1, %lld] (got %lld)",
                          (long long)LEDGER_CLAIM_MAX_MS, (long long)timeout_ms);
    ledger_charge_result local;
    ledger_charge_result *res = figures != NULL ? figures : &local;
    memset(res, 0, sizeof *res);
    op_item *it = dp_calloc(1, sizeof *it);
    if (it == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    it->res = res;
    int rc = lg_item_prepare(l, req, "claim", it, err);
    if (rc == DP_OK) {
        ledger_op op = {.kind = OP_CLAIM_CREATE,
                        .items = it,
                        .n_items = 1,
                        .timeout_ms = timeout_ms,
                        .claim = out};
        lg_submit(l, &op);
        rc = lg_finish(&op, err);
    }
    free(it->own_json);
    dp_free(it);
    return rc;
}

int ledger_claim_commit(ledger *l, int64_t claim_id, int64_t scope_silo_id, int64_t actor_token_id,
                        ledger_claim_view *out, ledger_charge_result *charge, dp_err *err)
{
    ledger_charge_result local;
    /* one item: the PLD figures of a PLD silo's commit (apply_claim_commit) */
    op_item *it = dp_calloc(1, sizeof *it);
    if (it == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    it->req = &it->req_copy;
    it->res = charge != NULL ? charge : &local;
    ledger_op op = {.kind = OP_CLAIM_COMMIT,
                    .id = claim_id,
                    .scope_silo_id = scope_silo_id,
                    .actor = actor_token_id,
                    .claim = out,
                    .figures = charge != NULL ? charge : &local,
                    .items = it,
                    .n_items = 1};
    lg_submit(l, &op);
    dp_free(it);
    return lg_finish(&op, err);
}

int ledger_claim_abort(ledger *l, int64_t claim_id, int64_t scope_silo_id, ledger_claim_view *out,
                       dp_err *err)
{
    ledger_op op = {
        .kind = OP_CLAIM_ABORT, .id = claim_id, .scope_silo_id = scope_silo_id, .claim = out};
    lg_submit(l, &op);
    return lg_finish(&op, err);
}
