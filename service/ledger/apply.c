/*
 * ledger/apply.c: the committer's ops: what each kind of ledger_op does inside its savepoint
 * (lg_apply_op and the appliers it dispatches to).
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"
#include "common/dp_math.h"

/* ---- committer: ops ---- */

/* For a PLD silo: whether it's PLD figures hold for the silo's current state at delta. Sets
 * need_pld when not (the PLD thread recomputes and submits again). Always true for other silos. */
static int pld_current_at(ledger *l, ledger_op *op, const silo_row *s, op_item *it, double delta,
                          bool *ok, dp_err *err)
{
    *ok = true;
    if (s->b.accountant != LEDGER_ACCT_PLD || s->b.kind != LEDGER_BUDGET_EPS_DELTA ||
        it->pld_give_up)
        return DP_OK;
    sqlite3_stmt *st = l->st[ST_CLAIM_MAX];
    int rc = lg_b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int64_t max_claim = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    lg_st_done(st);
    if (rc != SQLITE_ROW)
        return lg_sql_fail(l, rc, "highest claim", err);
    /* A PATCH of delta between snapshot and commit must not let a figure at the old delta through.
     */
    if (!it->pld_ready || it->snap_n_charges != s->n_charges || it->snap_max_claim != max_claim ||
        memcmp(&it->snap_delta, &delta, sizeof delta) != 0) {
        it->pld_ready = false;
        it->need_pld = true;
        op->need_pld = true;
        *ok = false;
    }
    return DP_OK;
}

static int pld_current(ledger *l, ledger_op *op, const silo_row *s, op_item *it, bool *ok,
                       dp_err *err)
{
    return pld_current_at(l, op, s, it, s->b.delta, ok, err);
}

/* The batch key of op (D11): 0 unknown, 1 recorded with this batch; another batch is
 * DP_ECONFLICT. */
static int batch_lookup(ledger *l, const ledger_op *op, int *known, dp_err *err)
{
    *known = 0;
    sqlite3_stmt *st = l->st[ST_BATCH_GET];
    int rc = lg_b_i64(st, ":actor", op->batch_actor);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":key", op->batch_key);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    bool other = false;
    if (rc == SQLITE_ROW) {
        const void *h = sqlite3_column_blob(st, 0);
        other = h == NULL || sqlite3_column_bytes(st, 0) != DP_SHA256_DIGEST_BYTES ||
                memcmp(h, op->batch_hash, DP_SHA256_DIGEST_BYTES) != 0;
        *known = 1;
        rc = SQLITE_DONE;
    }
    lg_st_done(st);
    if (rc != SQLITE_DONE)
        return lg_sql_fail(l, rc, "find batch by key", err);
    if (other)
        return dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                          "idempotency_key was already used for a different batch (another set of "
                          "silos or events)");
    return DP_OK;
}

/* After the items of a batch with a key were applied: a batch is replayed whole or charged whole.
 * Some items replayed and others charged means the key was used before for another request on one
 * of these silos: DP_ECONFLICT. A new batch is recorded under its key. */
static int batch_record(ledger *l, const ledger_op *op, int known, int64_t now, dp_err *err)
{
    size_t n_keyed = 0, n_replayed = 0;
    for (size_t i = 0; i < op->n_items; i++) {
        const op_item *it = &op->items[i];
        if (it->req->idempotency_key == NULL || strcmp(it->req->idempotency_key, op->batch_key))
            continue;
        n_keyed++;
        n_replayed += it->res->replayed ? 1 : 0;
    }
    if (n_replayed != 0 && n_replayed != n_keyed)
        return dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                          "idempotency_key was already used for a different batch (another set of "
                          "silos or events)");
    if (known || op->dry_run)
        return DP_OK;
    sqlite3_stmt *st = l->st[ST_BATCH_INSERT];
    int rc = lg_b_i64(st, ":actor", op->batch_actor);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":key", op->batch_key);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":hash", op->batch_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    return lg_st_write(l, st, rc, "insert batch", err);
}

static int apply_charge(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    bool stale = false;
    for (size_t i = 0; i < op->n_items; i++)
        memset(op->items[i].res, 0, sizeof *op->items[i].res);
    int batch_known = 0;
    if (op->batch_key != NULL && batch_lookup(l, op, &batch_known, err) != DP_OK)
        return err->code;
    for (size_t i = 0; i < op->n_items; i++) {
        op_item *it = &op->items[i];
        const ledger_charge_req *req = it->req;
        ledger_charge_result *res = it->res;
        char field[32];
        lg_item_field(op, i, field, sizeof field);
        res->silo_id = req->silo_id;
        res->dry_run = op->dry_run;
        silo_row s;
        int rc = lg_silo_load(l, req->silo_id, &s, err);
        if (rc != DP_OK) {
            res->status = rc;
            dp_err_prefix_field(err, field);
            return rc;
        }
        if (req->idempotency_key != NULL) {
            int found = 0;
            if (lg_charge_by_key(l, &s, req->idempotency_key, it->req_hash, res, &found, err) !=
                DP_OK)
                return err->code;
            if (found == 1) {
                res->dry_run = op->dry_run;
                continue; /* the first answer; nothing charged now */
            }
            if (found == 2 && op->batch_key != NULL &&
                strcmp(req->idempotency_key, op->batch_key) == 0) {
                res->status = DP_ECONFLICT;
                return dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                                  "idempotency_key was already used for a different batch "
                                  "(another set of silos or events)");
            }
            if (found == 2) {
                res->status = DP_ECONFLICT;
                dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                           "idempotency_key was already used for a different request on silo %lld",
                           (long long)s.id);
                dp_err_prefix_field(err, field);
                return DP_ECONFLICT;
            }
        }
        /* after the key lookup: a retry of a charge acknowledged before the archive still gets its
         * first answer */
        if (s.archived_at_ms != 0) {
            res->status = DP_ECONFLICT;
            dp_err_set(err, DP_ECONFLICT, "silo_id", "silo %lld is archived: it takes no charges",
                       (long long)s.id);
            dp_err_prefix_field(err, field);
            return DP_ECONFLICT;
        }
        bool current = true;
        if (pld_current(l, op, &s, it, &current, err) != DP_OK)
            return err->code;
        if (!current || stale) { /* gather every stale PLD item, then fail the op once */
            stale = stale || !current;
            continue;
        }
        double held_rdp[LEDGER_MAX_ORDERS], held_rho;
        int64_t n_active;
        if (lg_held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
            return err->code;
        bool fits = false;
        double e_wb_rdp = DP_NAN;
        refine_set rf;
        lg_refine_set_load(l, &s, now, 0, n_active, req->event, req->neighboring, &rf);
        rc = lg_admit(l, &s, held_rdp, held_rho, n_active, it, &rf, res, &fits, &e_wb_rdp, err);
        if (rc == DP_OK && fits && op->dry_run) {
            double nr[LEDGER_MAX_ORDERS], nrho;
            rc = lg_totals_after(l, &s, it->cost_rdp, it->cost_rho, held_rdp, held_rho, n_active,
                                 e_wb_rdp, it, &rf, nr, &nrho, res, err);
        } else if (rc == DP_OK && fits) {
            rc = lg_charge_append(l, &s, req, it->req_hash, req->idempotency_key, 0, it->cost_rdp,
                                  it->have_key ? it->ev_key : NULL, it->cost_rho, held_rdp,
                                  held_rho, n_active, e_wb_rdp, it, &rf, now, res, err);
        }
        lg_refine_set_free(&rf);
        if (rc != DP_OK) {
            res->status = err->code;
            if (err->code != DP_EBUSY && err->code != DP_EINTERNAL && err->code != DP_ENOMEM)
                dp_err_prefix_field(err, field);
            return err->code;
        }
        if (!fits) {
            res->status = DP_EBUDGET;
            dp_err_set(err, DP_EBUDGET, "",
                       "silo %lld: budget exhausted (spent %.6g, reserved %.6g, "
                       "requested %.6g, would be %.6g > budget %.6g %s)",
                       (long long)s.id, res->spent, res->reserved, res->requested, res->would_be,
                       res->budget, s.b.kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon");
            dp_err_prefix_field(err, field);
            return DP_EBUDGET;
        }
    }
    if (stale)
        return dp_err_set(err, DP_EBUSY, NULL, "PLD figures are stale; recomputing");
    if (op->batch_key != NULL)
        return batch_record(l, op, batch_known, now, err);
    return DP_OK;
}

static void claim_from_row(ledger *l, sqlite3_stmt *st, const ledger_budget *b,
                           ledger_claim_view *c, double *cost_rdp)
{
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(st, 0);
    c->silo_id = sqlite3_column_int64(st, 1);
    c->created_at_ms = sqlite3_column_int64(st, 2);
    c->expires_at_ms = sqlite3_column_int64(st, 3);
    c->closed_at_ms = sqlite3_column_type(st, 4) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 4);
    c->state = lg_claim_state_parse((const char *)sqlite3_column_text(st, 5));
    c->job_id = sqlite3_column_type(st, 6) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 6);
    c->cost_rho = sqlite3_column_double(st, 8);
    c->cost_eps = DP_NAN;
    if (cost_rdp != NULL && lg_col_vec(st, 7, cost_rdp, l->n_orders) && b != NULL) {
        double e = DP_NAN;
        if (lg_loss_of(l, b, cost_rdp, c->cost_rho, &e, NULL, NULL) == DP_OK)
            c->cost_eps = e;
    }
}

static int apply_claim_create(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    op_item *it = &op->items[0];
    const ledger_charge_req *req = it->req;
    ledger_charge_result *res = it->res;
    memset(res, 0, sizeof *res);
    memset(op->claim, 0, sizeof *op->claim);
    silo_row s;
    if (lg_silo_load(l, req->silo_id, &s, err) != DP_OK)
        return err->code;
    if (req->idempotency_key != NULL) {
        sqlite3_stmt *st = l->st[ST_CLAIM_BY_KEY];
        int rc = lg_b_i64(st, ":silo", s.id);
        if (rc == SQLITE_OK)
            rc = lg_b_text(st, ":key", req->idempotency_key);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        int64_t existing = 0;
        bool same = false;
        if (rc == SQLITE_ROW) {
            existing = sqlite3_column_int64(st, 0);
            const void *h = sqlite3_column_blob(st, 1);
            same = h != NULL && sqlite3_column_bytes(st, 1) == DP_SHA256_DIGEST_BYTES &&
                   memcmp(h, it->req_hash, DP_SHA256_DIGEST_BYTES) == 0;
            rc = SQLITE_DONE;
        }
        lg_st_done(st);
        if (rc != SQLITE_DONE)
            return lg_sql_fail(l, rc, "find claim by key", err);
        if (existing != 0 && !same)
            return dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                              "idempotency_key was already used for a different claim on silo %lld",
                              (long long)s.id);
        if (existing != 0) {
            st = l->st[ST_CLAIM_GET];
            rc = lg_b_i64(st, ":id", existing);
            if (rc == SQLITE_OK)
                rc = sqlite3_step(st);
            if (rc == SQLITE_ROW) {
                double v[LEDGER_MAX_ORDERS];
                claim_from_row(l, st, &s.b, op->claim, v);
                rc = SQLITE_DONE;
            }
            lg_st_done(st);
            if (rc != SQLITE_DONE)
                return lg_sql_fail(l, rc, "load claim", err);
            op->claim->replayed = true;
            res->silo_id = s.id;
            res->kind = s.b.kind;
            return DP_OK;
        }
    }
    /* after the key lookup: a retried claim gets its claim back, whatever happened since */
    if (s.archived_at_ms != 0)
        return dp_err_set(err, DP_ECONFLICT, "silo_id", "silo %lld is archived: it takes no claims",
                          (long long)s.id);
    bool current = true;
    if (pld_current(l, op, &s, it, &current, err) != DP_OK)
        return err->code;
    if (!current)
        return dp_err_set(err, DP_EBUSY, NULL, "PLD figures are stale; recomputing");
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if (lg_held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
        return err->code;
    bool fits = false;
    double e_wb_rdp = DP_NAN;
    refine_set rf;
    lg_refine_set_load(l, &s, now, 0, n_active, req->event, req->neighboring, &rf);
    int arc = lg_admit(l, &s, held_rdp, held_rho, n_active, it, &rf, res, &fits, &e_wb_rdp, err);
    lg_refine_set_free(&rf);
    if (arc != DP_OK)
        return err->code;
    if (!fits) {
        res->status = DP_EBUDGET;
        return dp_err_set(err, DP_EBUDGET, "",
                          "silo %lld: budget exhausted (spent %.6g, reserved %.6g, requested %.6g, "
                          "would be %.6g > budget %.6g %s)",
                          (long long)s.id, res->spent, res->reserved, res->requested, res->would_be,
                          res->budget, s.b.kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon");
    }
    if (op->dry_run)
        return DP_OK;
    sqlite3_stmt *st = l->st[ST_CLAIM_INSERT];
    const char *nb = req->neighboring == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
    int rc = lg_b_i64(st, ":silo", s.id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":exp", now + op->timeout_ms);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":actor", req->actor_token_id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":job", req->job_id);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":key", req->idempotency_key);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":hash", it->req_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":reason", req->reason);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":event", req->event_json);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":nb", nb);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":rdp", it->cost_rdp, l->n_orders * sizeof(double));
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":rho", it->cost_rho);
    int werr = lg_st_write(l, st, rc, "insert claim", err);
    if (werr != DP_OK)
        return werr;
    ledger_claim_view *c = op->claim;
    c->id = sqlite3_last_insert_rowid(l->db);
    c->silo_id = s.id;
    c->created_at_ms = now;
    c->expires_at_ms = now + op->timeout_ms;
    c->state = LEDGER_CLAIM_ACTIVE;
    c->job_id = req->job_id;
    c->cost_eps = res->cost_eps;
    c->cost_rho = it->cost_rho;
    return DP_OK;
}

/* Loads a claim for commit/abort with its scope check. */
static int claim_load(ledger *l, const ledger_op *op, ledger_claim_view *c, double *cost_rdp,
                      silo_row *s, char *event, size_t event_len, char *reason, size_t reason_len,
                      bool *replace_one, int64_t *actor, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_CLAIM_GET];
    int rc = lg_b_i64(st, ":id", op->id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        lg_st_done(st);
        return dp_err_set(err, DP_ENOTFOUND, "claim_id", "claim %lld does not exist",
                          (long long)op->id);
    }
    if (rc != SQLITE_ROW) {
        lg_st_done(st);
        return lg_sql_fail(l, rc, "load claim", err);
    }
    claim_from_row(l, st, NULL, c, cost_rdp);
    int64_t silo_id = c->silo_id;
    bool too_long = false;
    if (event != NULL) {
        const char *e = (const char *)sqlite3_column_text(st, 9);
        const char *r = (const char *)sqlite3_column_text(st, 11);
        too_long = e == NULL || strlen(e) >= event_len || (r != NULL && strlen(r) >= reason_len);
        if (!too_long) {
            snprintf(event, event_len, "%s", e);
            if (r == NULL)
                reason[0] = '\0';
            else
                snprintf(reason, reason_len, "%s", r);
        }
        *replace_one = strcmp((const char *)sqlite3_column_text(st, 10), "replace_one") == 0;
        *actor = sqlite3_column_type(st, 12) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 12);
    }
    lg_st_done(st);
    if (too_long)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    if (op->scope_silo_id != 0 && op->scope_silo_id != silo_id)
        return dp_err_set(err, DP_EFORBIDDEN, "claim_id", "this token may not act on claim %lld",
                          (long long)op->id);
    if (lg_silo_load(l, silo_id, s, err) != DP_OK)
        return err->code;
    double v[LEDGER_MAX_ORDERS];
    memcpy(v, cost_rdp, l->n_orders * sizeof(double));
    double e = DP_NAN;
    if (lg_loss_of(l, &s->b, v, c->cost_rho, &e, NULL, NULL) == DP_OK)
        c->cost_eps = e;
    return DP_OK;
}

static int claim_close(ledger *l, int64_t id, const char *state, int64_t now, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_CLAIM_CLOSE];
    int rc = lg_b_text(st, ":state", state);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":id", id);
    return lg_st_write(l, st, rc, "close claim", err);
}

#define LEDGER_EVENT_TEXT_MAX (1024 * 1024) /* longest event JSON a claim may hold (body cap) */

static int apply_claim_commit(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    ledger_claim_view *c = op->claim;
    ledger_charge_result *res = op->figures;
    memset(res, 0, sizeof *res);
    double cost_rdp[LEDGER_MAX_ORDERS];
    silo_row s;
    char *event = dp_malloc(LEDGER_EVENT_TEXT_MAX);
    char reason[LEDGER_REASON_MAX + 1];
    bool replace_one = false;
    int64_t actor = 0;
    int rc = DP_OK;
    acct_event *claim_ev = NULL; /* the claim's event, for the refined figures */
    refine_set rf;
    memset(&rf, 0, sizeof rf);
    if (event == NULL) {
        rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = claim_load(l, op, c, cost_rdp, &s, event, LEDGER_EVENT_TEXT_MAX, reason, sizeof reason,
                    &replace_one, &actor, err);
    if (rc != DP_OK)
        goto out;
    if (c->state == LEDGER_CLAIM_COMMITTED) {
        sqlite3_stmt *st = l->st[ST_CHARGE_BY_CLAIM];
        int src = lg_b_i64(st, ":claim", c->id);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            lg_result_from_row(st, &s, res);
            src = SQLITE_DONE;
        }
        lg_st_done(st);
        if (src != SQLITE_DONE) {
            rc = lg_sql_fail(l, src, "find charge of claim", err);
            goto out;
        }
        c->charge_id = res->charge_id;
        c->replayed = true;
        goto out;
    }
    if (c->state != LEDGER_CLAIM_ACTIVE || c->expires_at_ms <= now) {
        rc = dp_err_set(err, DP_ECONFLICT, "claim_id", "claim %lld is %s and cannot be committed",
                        (long long)c->id,
                        c->state == LEDGER_CLAIM_ACTIVE ? "expired"
                                                        : ledger_claim_state_name(c->state));
        goto out;
    }
    /* D10: the row's cumulative figure follows the admission rule of the silo, min(RDP, PLD) for a
     * PLD silo, whose figures (the log plus this claim's event) the PLD thread computes. */
    op_item *pit = NULL;
    if (op->n_items == 1 && s.b.accountant == LEDGER_ACCT_PLD &&
        s.b.kind == LEDGER_BUDGET_EPS_DELTA) {
        pit = &op->items[0];
        pit->req_copy.silo_id = s.id;
        pit->claim_id = c->id;
        bool current = true;
        if ((rc = pld_current(l, op, &s, pit, &current, err)) != DP_OK)
            goto out;
        if (!current) {
            rc = dp_err_set(err, DP_EBUSY, NULL, "PLD figures are stale; recomputing");
            goto out;
        }
    }
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if ((rc = lg_held_load(l, s.id, now, c->id, held_rdp, &held_rho, &n_active, err)) != DP_OK)
        goto out;
    /* The claim's own budget was held at admission; its charge moves it from held to spent. */
    ledger_charge_req req = {.silo_id = s.id,
                             .neighboring = replace_one ? ACCT_NB_REPLACE_ONE : ACCT_NB_ADD_REMOVE,
                             .event_json = event,
                             .reason = reason[0] ? reason : NULL,
                             .job_id = c->job_id,
                             .actor_token_id = op->actor != 0 ? op->actor : actor};
    uint8_t hash[DP_SHA256_DIGEST_BYTES];
    char what[48];
    snprintf(what, sizeof what, "claim:%lld", (long long)c->id);
    dp_sha256(what, strlen(what), hash);
    double e = DP_NAN;
    res->silo_id = s.id;
    res->kind = s.b.kind;
    if ((rc = lg_loss_of(l, &s.b, cost_rdp, c->cost_rho, &e, NULL, err)) != DP_OK)
        goto out;
    claim_ev = lg_stored_event(event, 1);
    lg_refine_set_load(l, &s, now, c->id, n_active, claim_ev, req.neighboring, &rf);
    e = lg_refined_eps(l, &s.b, cost_rdp, claim_ev, req.neighboring, e);
    res->cost_eps = e;
    c->cost_eps = e;
    res->cost_rho = c->cost_rho;
    res->requested = lg_unit_value(&s.b, e, c->cost_rho);
    res->budget = lg_cap_of(&s.b);
    res->spent = res->reserved = res->would_be = DP_NAN;
    if ((rc = lg_charge_append(l, &s, &req, hash, NULL, c->id, cost_rdp, NULL, c->cost_rho,
                               held_rdp, held_rho, n_active, DP_NAN, pit, &rf, now, res, err)) !=
        DP_OK)
        goto out;
    if ((rc = claim_close(l, c->id, "committed", now, err)) != DP_OK)
        goto out;
    c->state = LEDGER_CLAIM_COMMITTED;
    c->closed_at_ms = now;
    c->charge_id = res->charge_id;
out:
    lg_refine_set_free(&rf);
    acct_event_free(claim_ev);
    dp_free(event);
    return rc;
}

static int apply_claim_abort(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    ledger_claim_view *c = op->claim;
    double cost_rdp[LEDGER_MAX_ORDERS];
    silo_row s;
    if (claim_load(l, op, c, cost_rdp, &s, NULL, 0, NULL, 0, NULL, NULL, err) != DP_OK)
        return err->code;
    if (c->state == LEDGER_CLAIM_COMMITTED)
        return dp_err_set(err, DP_ECONFLICT, "claim_id",
                          "claim %lld is committed and cannot be aborted", (long long)c->id);
    if (c->state != LEDGER_CLAIM_ACTIVE) {
        c->replayed = true;
        return DP_OK;
    }
    const char *state = c->expires_at_ms <= now ? "expired" : "aborted";
    if (claim_close(l, c->id, state, now, err) != DP_OK)
        return err->code;
    c->state = lg_claim_state_parse(state);
    c->closed_at_ms = now;
    return DP_OK;
}

static int bind_budget(sqlite3_stmt *st, const ledger_budget *b)
{
    int rc = lg_b_dbl(st, ":eps", b->kind == LEDGER_BUDGET_EPS_DELTA ? b->epsilon : DP_NAN);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":delta", b->kind == LEDGER_BUDGET_NONE ? DP_NAN : b->delta);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":rho", b->kind == LEDGER_BUDGET_RHO ? b->rho : DP_NAN);
    return rc;
}

/* DP_ECONFLICT (field "name") when an active silo other than `except` (0 = none) is named name.
 * Names are unique among active silos; an archived silo's name may be taken again (archiving is
 * final, and a silo whose token leaked is archived and recreated under its name). The committer
 * serialises every write, so this check and the following write cannot race. */
static int name_check(ledger *l, const char *name, int64_t except, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_NAME_TAKEN];
    int rc = lg_b_text(st, ":name", name);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":id", except);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int64_t other = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    lg_st_done(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return lg_sql_fail(l, rc, "find silo by name", err);
    if (other != 0)
        return dp_err_set(err, DP_ECONFLICT, "name", "the name is already used by active silo %lld",
                          (long long)other);
    return DP_OK;
}

/* Inserts a silo token row (its SHA-256 only) on the committer's connection. */
static int token_insert_silo(ledger *l, const unsigned char *hash, int64_t silo_id, int64_t now,
                             dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_TOKEN_INSERT];
    int rc = lg_b_blob(st, ":hash", hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":role", "silo");
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":silo", silo_id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    lg_st_done(st);
    if (rc != SQLITE_DONE || sqlite3_changes(l->db) != 1)
        return rc != SQLITE_DONE ? lg_sql_fail(l, rc, "insert token", err)
                                 : dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    return DP_OK;
}

static int apply_silo_create(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    const ledger_budget *b = op->budget;
    if (name_check(l, op->name, 0, err) != DP_OK)
        return err->code;
    double zero[LEDGER_MAX_ORDERS] = {0};
    sqlite3_stmt *st = l->st[ST_SILO_INSERT];
    int rc = lg_b_text(st, ":name", op->name);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":kind", lg_kind_name(b->kind));
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":acct", ledger_accountant_name(b->accountant));
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":conv", acct_conversion_name(b->conversion));
    if (rc == SQLITE_OK)
        rc = bind_budget(st, b);
    int werr = lg_st_write(l, st, rc, "insert silo", err);
    if (werr != DP_OK)
        return werr;
    int64_t id = sqlite3_last_insert_rowid(l->db);
    st = l->st[ST_TOTALS_INSERT];
    rc = lg_b_i64(st, ":id", id);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":zero", zero, l->n_orders * sizeof(double));
    if ((werr = lg_st_write(l, st, rc, "insert silo totals", err)) != DP_OK)
        return werr;
    if (token_insert_silo(l, op->token_hash, id, now, err) != DP_OK)
        return err->code;
    silo_row s;
    if (lg_silo_load(l, id, &s, err) != DP_OK)
        return err->code;
    return lg_view_of(l, &s, now, op->view, err);
}

static int apply_silo_patch(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    silo_row s;
    if (lg_silo_load(l, op->id, &s, err) != DP_OK)
        return err->code;
    if (s.archived_at_ms != 0)
        return dp_err_set(err, DP_ECONFLICT, "id", "silo %lld is archived", (long long)s.id);
    const ledger_patch *p = op->patch;
    ledger_budget nb = s.b;
    if (!isnan(p->epsilon)) {
        if (nb.kind != LEDGER_BUDGET_EPS_DELTA)
            return dp_err_set(err, DP_EINVAL, "budget.epsilon",
                              "this silo's budget has no epsilon");
        nb.epsilon = p->epsilon;
    }
    if (!isnan(p->delta)) {
        if (nb.kind == LEDGER_BUDGET_NONE)
            return dp_err_set(err, DP_EINVAL, "budget.delta", "this silo has opted out of DP");
        nb.delta = p->delta;
    }
    if (!isnan(p->rho)) {
        if (nb.kind != LEDGER_BUDGET_RHO)
            return dp_err_set(err, DP_EINVAL, "budget.rho", "this silo's budget has no rho");
        nb.rho = p->rho;
    }
    if (ledger_budget_check(&nb, err) != DP_OK)
        return err->code;
    if (p->name != NULL && name_check(l, p->name, s.id, err) != DP_OK)
        return err->code;
    /* A rename, an unchanged budget or a raise (same delta, cap not lower) is always accepted: what
     * is held was admitted under a cap at most as high. A lower cap or another delta is checked
     * with the admission rule: what is held (spent plus active claims) at the new delta must not
     * exceed the new cap, with min(RDP, PLD) for a PLD silo. Refused: 409. */
    bool lowers = memcmp(&nb.delta, &s.b.delta, sizeof nb.delta) != 0 ||
                  (nb.kind != LEDGER_BUDGET_NONE && lg_cap_of(&nb) < lg_cap_of(&s.b));
    if (!lowers || nb.kind == LEDGER_BUDGET_NONE)
        goto write;
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if (lg_held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
        return err->code;
    lg_vec_add_up(held_rdp, s.spent_rdp, l->n_orders);
    held_rho = ledger_sum_up(held_rho, s.spent_rho);
    double e_held = DP_NAN;
    if (lg_loss_of(l, &nb, held_rdp, held_rho, &e_held, NULL, err) != DP_OK)
        return err->code;
    if (!(e_held <= lg_cap_of(&nb))) { /* the refined figure (continuous order, pure events) */
        refine_set rf;
        lg_refine_set_load(l, &s, now, 0, n_active, NULL, ACCT_NB_ADD_REMOVE, &rf);
        e_held = lg_refined_of(l, &nb, &rf, n_active > 0, false, held_rdp, e_held);
        lg_refine_set_free(&rf);
    }
    double held = lg_unit_value(&nb, e_held, held_rho);
    if (!(held <= lg_cap_of(&nb)) && nb.accountant == LEDGER_ACCT_PLD &&
        nb.kind == LEDGER_BUDGET_EPS_DELTA && op->n_items == 1 && !op->items[0].pld_give_up) {
        op_item *it = &op->items[0];
        it->want_delta = nb.delta;
        bool current = true;
        if (pld_current_at(l, op, &s, it, nb.delta, &current, err) != DP_OK)
            return err->code;
        if (!current)
            return dp_err_set(err, DP_EBUSY, NULL, "PLD figures are stale; recomputing");
        held = fmin(held, it->pld_wb); /* the admission rule of a PLD silo (PLD SILOS above) */
    }
    if (!(held <= lg_cap_of(&nb)))
        return dp_err_set(
            err, DP_ECONFLICT, nb.kind == LEDGER_BUDGET_RHO ? "budget.rho" : "budget.epsilon",
            "the new budget %.6g is below what silo %lld has already spent or reserved "
            "(%.6g %s)",
            lg_cap_of(&nb), (long long)s.id, held,
            nb.kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon at the new delta");
write:;
    sqlite3_stmt *st = l->st[ST_SILO_PATCH];
    int rc = lg_b_text(st, ":name", p->name != NULL ? p->name : s.name);
    if (rc == SQLITE_OK)
        rc = bind_budget(st, &nb);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":id", s.id);
    int werr = lg_st_write(l, st, rc, "patch silo", err);
    if (werr != DP_OK)
        return werr;
    if (lg_silo_load(l, s.id, &s, err) != DP_OK)
        return err->code;
    return lg_view_of(l, &s, now, op->view, err);
}

static int apply_silo_archive(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    silo_row s;
    if (lg_silo_load(l, op->id, &s, err) != DP_OK)
        return err->code;
    if (s.archived_at_ms == 0) {
        sqlite3_stmt *st = l->st[ST_SILO_ARCHIVE];
        int rc = lg_b_i64(st, ":now", now);
        if (rc == SQLITE_OK)
            rc = lg_b_i64(st, ":id", s.id);
        int werr = lg_st_write(l, st, rc, "archive silo", err);
        if (werr != DP_OK)
            return werr;
        st = l->st[ST_CLAIMS_ABORT_SILO];
        rc = lg_b_i64(st, ":now", now);
        if (rc == SQLITE_OK)
            rc = lg_b_i64(st, ":silo", s.id);
        werr = lg_st_write(l, st, rc, "abort claims of archived silo", err);
        if (werr != DP_OK)
            return werr;
        if (lg_silo_load(l, s.id, &s, err) != DP_OK)
            return err->code;
    }
    return lg_view_of(l, &s, now, op->view, err);
}

/* Revokes the admin tokens other than keep (silo 0), or the tokens of silo; *n gets the count. */
static int token_revoke(ledger *l, int64_t silo, int64_t keep, int64_t now, int64_t *n, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_TOKEN_REVOKE];
    int rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":keep", keep);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":silo", silo);
    int werr = lg_st_write(l, st, rc, "revoke tokens", err);
    if (werr != DP_OK)
        return werr;
    if (n != NULL)
        *n = sqlite3_changes(l->db);
    return DP_OK;
}

static int apply_token_admin(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_TOKEN_INSERT];
    int rc = lg_b_blob(st, ":hash", op->token_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":role", "admin");
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_null(st, lg_bind_idx(st, ":silo"));
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    int werr = lg_st_write(l, st, rc, "insert admin token", err);
    if (werr != DP_OK)
        return werr;
    st = l->st[ST_TOKEN_ID];
    rc = lg_b_blob(st, ":hash", op->token_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    bool admin = false, revoked = false;
    int64_t id = 0;
    if (rc == SQLITE_ROW) {
        id = sqlite3_column_int64(st, 0);
        admin = strcmp((const char *)sqlite3_column_text(st, 1), "admin") == 0;
        revoked = sqlite3_column_type(st, 2) != SQLITE_NULL;
        rc = SQLITE_DONE;
    }
    lg_st_done(st);
    if (rc != SQLITE_DONE)
        return lg_sql_fail(l, rc, "find admin token", err);
    if (!admin)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token is already a silo's token");
    if (revoked)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token was revoked by an earlier rotation; a revoked token "
                          "stays revoked: write a new token into the file");
    *op->token_id_out = id;
    return op->revoked_out != NULL ? token_revoke(l, 0, id, now, op->revoked_out, err) : DP_OK;
}

/* TOKEN_ROTATE and TOKEN_REVOKE: the silo must exist (and, to get a new token, be active). */
static int apply_token_silo(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    silo_row s;
    if (lg_silo_load(l, op->id, &s, err) != DP_OK)
        return err->code;
    if (op->kind == OP_TOKEN_ROTATE && s.archived_at_ms != 0)
        return dp_err_set(err, DP_ECONFLICT, "id", "silo %lld is archived: it gets no new token",
                          (long long)s.id);
    if (token_revoke(l, s.id, 0, now, op->revoked_out, err) != DP_OK)
        return err->code;
    if (op->kind != OP_TOKEN_ROTATE)
        return DP_OK;
    if (token_insert_silo(l, op->token_hash, s.id, now, err) != DP_OK)
        return err->code;
    *op->token_id_out = sqlite3_last_insert_rowid(l->db);
    return DP_OK;
}

static int apply_sweep(ledger *l, int64_t now, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_CLAIMS_EXPIRE];
    int rc = lg_b_i64(st, ":now", now);
    if (rc != SQLITE_OK) {
        lg_st_done(st);
        return lg_sql_fail(l, rc, "bind sweep", err);
    }
    return lg_exec_st(l, ST_CLAIMS_EXPIRE, err);
}

int lg_apply_op(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    switch (op->kind) {
        case OP_CHARGE: {
            int rc = apply_charge(l, op, now, err);
            if (rc == DP_OK && op->write != NULL && !op->dry_run) /* ledger_charge_batch_with */
                rc = op->write(l->db, op->write_arg, op->n_items ? op->items[0].res : NULL,
                               op->n_items, err);
            return rc;
        }
        case OP_CLAIM_CREATE:
            return apply_claim_create(l, op, now, err);
        case OP_CLAIM_COMMIT:
            return apply_claim_commit(l, op, now, err);
        case OP_CLAIM_ABORT:
            return apply_claim_abort(l, op, now, err);
        case OP_SILO_CREATE:
            return apply_silo_create(l, op, now, err);
        case OP_SILO_PATCH:
            return apply_silo_patch(l, op, now, err);
        case OP_SILO_ARCHIVE:
            return apply_silo_archive(l, op, now, err);
        case OP_TOKEN_ADMIN:
            return apply_token_admin(l, op, now, err);
        case OP_TOKEN_ROTATE:
        case OP_TOKEN_REVOKE:
            return apply_token_silo(l, op, now, err);
        case OP_SWEEP:
            return apply_sweep(l, now, err);
    }
    return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
}
