/*
 * ledger/pld.c: PLD recomposition on a snapshot, for the PLD thread (PLD SILOS in ledger.c) and for
 * reads; the cache of eps_PLD per (silo, n_charges, delta).
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"
#include "common/dp_math.h"

/* ---- PLD recomposition (caller threads; see PLD SILOS) ---- */

/* Appends ev (stolen) to the composed node root; false when full or out of memory (ev freed). */
static bool compose_add(acct_event *root, size_t cap, acct_event *ev)
{
    if (ev == NULL || root->n_children >= cap) {
        acct_event_free(ev);
        return false;
    }
    root->children[root->n_children++] = ev;
    return true;
}

/* Parses a stored event into *out (owned by caller; NULL on failure); count > 1 wraps it in
 * self_composed. DP_OK; DP_ENOMEM when memory ran out (the text may be fine); DP_EINVAL when the
 * text is not an event this build reads. */
int lg_stored_event_parse(const char *text, int64_t count, acct_event **out)
{
    *out = NULL;
    if (text == NULL)
        return DP_EINVAL;
    json_error_t jerr;
    json_t *j = json_util_loads(text, 0, &jerr);
    if (j == NULL)
        return json_error_code(&jerr) == json_error_out_of_memory ? DP_ENOMEM : DP_EINVAL;
    acct_event *ev = NULL;
    dp_err e;
    dp_err_clear(&e);
    int rc = event_json_parse(j, false, "event", &ev, &e);
    json_decref(j);
    if (rc != DP_OK)
        return rc == DP_ENOMEM ? DP_ENOMEM : DP_EINVAL;
    if (count > 1) {
        acct_event *sc = acct_event_alloc(ACCT_EV_SELF_COMPOSED);
        if (sc == NULL) {
            acct_event_free(ev);
            return DP_ENOMEM;
        }
        sc->count = (uint64_t)count;
        sc->child = ev;
        ev = sc;
    }
    *out = ev;
    return DP_OK;
}

/* lg_stored_event_parse without the reason: NULL if the event cannot be used. */
acct_event *lg_stored_event(const char *text, int64_t count)
{
    acct_event *ev;
    lg_stored_event_parse(text, count, &ev);
    return ev;
}

/* eps_PLD (upper bound) at delta of silo's charges [+ its active claims] [+ extra], all under
 * relation nb, read on db (inside the caller's read transaction). +INFINITY when PLD cannot account
 * them: an unsupported event, another relation, too many distinct events. Never fails otherwise. */
double lg_pld_eps_of(sqlite3 *db, int64_t silo, double delta, bool with_claims,
                     const acct_event *extra, acct_neighboring nb, int64_t now)
{
    static const char charges_sql[] = "SELECT event, neighboring, count(*) FROM charges WHERE "
                                      "silo_id = :silo GROUP BY event, neighboring";
    static const char claims_sql[] =
        "SELECT event, neighboring, 1 FROM claims WHERE silo_id = :silo "
        "AND state = 'active' AND expires_at > :now";
    const size_t cap = ACCT_PLD_MAX_MECHANISMS;
    const char *nb_name = nb == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
    double eps = DP_INF;
    bool ok = true;
    acct_event *root = acct_event_alloc(ACCT_EV_COMPOSED);
    if (root == NULL || (root->children = dp_calloc(cap, sizeof *root->children)) == NULL)
        ok = false;
    for (int q = 0; ok && q < (with_claims ? 2 : 1); q++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, q == 0 ? charges_sql : claims_sql, -1, &st, NULL);
        if (rc == SQLITE_OK)
            rc = lg_b_i64(st, ":silo", silo);
        if (rc == SQLITE_OK && q == 1)
            rc = lg_b_i64(st, ":now", now);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            rc = SQLITE_OK;
            if (strcmp((const char *)sqlite3_column_text(st, 1), nb_name) != 0 ||
                !compose_add(root, cap,
                             lg_stored_event((const char *)sqlite3_column_text(st, 0),
                                             sqlite3_column_int64(st, 2))))
                ok = false;
            if (!ok)
                break;
        }
        if (rc != SQLITE_DONE && rc != SQLITE_OK)
            ok = false;
        sqlite3_finalize(st);
    }
    if (ok && extra != NULL)
        ok = compose_add(root, cap, acct_event_clone(extra));
    if (ok && root->n_children == 0) {
        eps = 0.0;
    } else if (ok) {
        acct_pld_opts o;
        acct_pld_opts_default(&o);
        acct_pld_result r;
        dp_err e;
        dp_err_clear(&e);
        if (acct_pld_epsilon(root, nb, delta, &o, &r, &e) == DP_OK && !isnan(r.epsilon_upper) &&
            r.epsilon_upper >= 0)
            eps = r.epsilon_upper;
    }
    acct_event_free(root);
    return eps;
}

/* Runs one statement without rows on a private connection (prepared per call: the connection lives
 * for one PLD snapshot only). */
static int step_once(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The cached eps_PLD of silo's log of n_charges charges at delta, or NAN (l->pld_cache). */
static double pld_cache_get(ledger *l, int64_t silo, int64_t n_charges, double delta)
{
    size_t slot = (size_t)silo % LEDGER_PLD_CACHE;
    double eps = DP_NAN;
    pthread_mutex_lock(&l->cache_mu);
    if (l->pld_cache[slot].silo == silo && l->pld_cache[slot].n_charges == n_charges &&
        memcmp(&l->pld_cache[slot].delta, &delta, sizeof delta) == 0)
        eps = l->pld_cache[slot].eps;
    pthread_mutex_unlock(&l->cache_mu);
    return eps;
}

static void pld_cache_put(ledger *l, int64_t silo, int64_t n_charges, double delta, double eps)
{
    size_t slot = (size_t)silo % LEDGER_PLD_CACHE;
    pthread_mutex_lock(&l->cache_mu);
    l->pld_cache[slot].silo = silo;
    l->pld_cache[slot].n_charges = n_charges;
    l->pld_cache[slot].eps = eps;
    l->pld_cache[slot].delta = delta;
    pthread_mutex_unlock(&l->cache_mu);
}

/* The neighbouring relation of the silo's newest charge (add_remove when it has none). */
static acct_neighboring log_relation(sqlite3 *db, int64_t silo)
{
    sqlite3_stmt *st = NULL;
    acct_neighboring nb = ACCT_NB_ADD_REMOVE;
    if (sqlite3_prepare_v2(db,
                           "SELECT neighboring FROM charges WHERE silo_id = :s ORDER BY seq DESC "
                           "LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK &&
        lg_b_i64(st, ":s", silo) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        strcmp((const char *)sqlite3_column_text(st, 0), "replace_one") == 0)
        nb = ACCT_NB_REPLACE_ONE;
    sqlite3_finalize(st);
    return nb;
}

/* The stored event and relation of claim id (event owned by the caller; NULL if unusable). */
static acct_event *claim_event(sqlite3 *db, int64_t id, acct_neighboring *nb)
{
    sqlite3_stmt *st = NULL;
    acct_event *ev = NULL;
    if (sqlite3_prepare_v2(db, "SELECT event, neighboring FROM claims WHERE id = :id", -1, &st,
                           NULL) == SQLITE_OK &&
        lg_b_i64(st, ":id", id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        ev = lg_stored_event((const char *)sqlite3_column_text(st, 0), 1);
        *nb = strcmp((const char *)sqlite3_column_text(st, 1), "replace_one") == 0
                  ? ACCT_NB_REPLACE_ONE
                  : ACCT_NB_ADD_REMOVE;
    }
    sqlite3_finalize(st);
    return ev;
}

/* Computes the PLD figures of item it against a fresh snapshot of its silo (one read transaction on
 * a private connection), for the committer to check. Runs on the ledger's PLD thread, never on an
 * HTTP worker (see PLD SILOS). Three kinds of item:
 *   - a charge or claim (req->event set): pld_spent (the log), pld_after (the log and the event),
 *     pld_wb (the log, the active claims and the event);
 *   - a claim's commit (claim_id set): pld_after (the log and the claim's event), pld_wb (the log
 * and every active claim, this one included);
 *   - a PATCH (neither): pld_wb (the log and the active claims) at want_delta (0: the silo's). */
int lg_pld_prepare(ledger *l, op_item *it, dp_err *err)
{
    dp_err oerr;
    dp_err_clear(&oerr);
    sqlite3 *db = store_db_open(l->path, STORE_DB_READ, &oerr);
    if (db == NULL) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: PLD snapshot: %s", oerr.msg);
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    }
    int rc;
    int64_t silo = it->req->silo_id, now = time_now_ms();
    double delta = DP_NAN;
    sqlite3_stmt *st = NULL;
    rc = step_once(db, "BEGIN");
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            db,
            "SELECT n_charges, delta, (SELECT coalesce(max(id), 0) FROM claims WHERE "
            "silo_id = :silo) FROM silos WHERE id = :silo",
            -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":silo", silo);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        it->snap_n_charges = sqlite3_column_int64(st, 0);
        delta = it->want_delta > 0 ? it->want_delta : lg_col_dbl(st, 1);
        it->snap_max_claim = sqlite3_column_int64(st, 2);
        it->snap_delta = delta;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && !isnan(delta)) {
        bool any_claim = true;
        sqlite3_stmt *cs = NULL;
        if (sqlite3_prepare_v2(db,
                               "SELECT count(*) FROM claims WHERE silo_id = :s AND state = "
                               "'active' AND expires_at > :now",
                               -1, &cs, NULL) == SQLITE_OK &&
            lg_b_i64(cs, ":s", silo) == SQLITE_OK && lg_b_i64(cs, ":now", now) == SQLITE_OK &&
            sqlite3_step(cs) == SQLITE_ROW)
            any_claim = sqlite3_column_int64(cs, 0) > (it->claim_id != 0 ? 1 : 0);
        sqlite3_finalize(cs);
        if (it->req->event != NULL) {
            acct_neighboring nb = it->req->neighboring;
            double spent = pld_cache_get(l, silo, it->snap_n_charges, delta);
            if (isnan(spent)) {
                spent = lg_pld_eps_of(db, silo, delta, false, NULL, nb, now);
                pld_cache_put(l, silo, it->snap_n_charges, delta, spent);
            }
            it->pld_spent = spent;
            it->pld_after = lg_pld_eps_of(db, silo, delta, false, it->req->event, nb, now);
            it->pld_wb = any_claim ? lg_pld_eps_of(db, silo, delta, true, it->req->event, nb, now)
                                   : it->pld_after;
        } else if (it->claim_id != 0) {
            acct_neighboring nb = ACCT_NB_ADD_REMOVE;
            acct_event *ev = claim_event(db, it->claim_id, &nb);
            it->pld_spent = DP_INF;
            it->pld_after =
                ev != NULL ? lg_pld_eps_of(db, silo, delta, false, ev, nb, now) : DP_INF;
            it->pld_wb =
                any_claim ? lg_pld_eps_of(db, silo, delta, true, NULL, nb, now) : it->pld_after;
            acct_event_free(ev);
        } else {
            acct_neighboring nb = log_relation(db, silo);
            it->pld_spent = it->pld_after = DP_INF;
            it->pld_wb = lg_pld_eps_of(db, silo, delta, true, NULL, nb, now);
        }
        it->pld_ready = true;
    }
    if (!sqlite3_get_autocommit(db) && step_once(db, "COMMIT") != SQLITE_OK)
        dp_log(DP_LOG_WARN, NULL, "ledger: ending a PLD snapshot failed");
    sqlite3_close(db);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    if (!it->pld_ready) /* silo gone or not an eps budget: let the committer say why */
        it->pld_give_up = true;
    return DP_OK;
}
