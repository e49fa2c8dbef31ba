/*
 * ledger/reads.c: views and reads on the caller's pool connection: silos, lists, verification,
 * charges, claims, tokens.
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"
#include "common/dp_math.h"

/* ---- views and reads ---- */

static int view_fill(const ledger *l, const silo_row *s, const double *held_rdp, double held_rho,
                     int64_t n_active, ledger_silo_view *v, dp_err *err)
{
    memset(v, 0, sizeof *v);
    v->id = s->id;
    snprintf(v->name, sizeof v->name, "%s", s->name);
    v->budget = s->b;
    v->created_at_ms = s->created_at_ms;
    v->archived_at_ms = s->archived_at_ms;
    v->n_charges = s->n_charges;
    v->n_active_claims = n_active;
    v->spent_rho = s->spent_rho;
    double h_rdp[LEDGER_MAX_ORDERS];
    memcpy(h_rdp, s->spent_rdp, l->n_orders * sizeof(double));
    lg_vec_add_up(h_rdp, held_rdp, l->n_orders);
    v->held_rho = ledger_sum_up(s->spent_rho, held_rho);
    if (lg_loss_of(l, &s->b, s->spent_rdp, s->spent_rho, &v->spent_eps, &v->spent_order, err) !=
            DP_OK ||
        lg_loss_of(l, &s->b, h_rdp, v->held_rho, &v->held_eps, NULL, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    v->remaining = lg_remaining_of(&s->b, lg_unit_value(&s->b, v->held_eps, v->held_rho));
    return DP_OK;
}

/* An rdp or pld silo's view: spent = the refined figure of its log (continuous order, basic
 * composition; see "continuous order" above), built on db (the committer's connection or a
 * reader's, inside its transaction) and cached per (silo, n_charges, delta). With active claims the
 * held total keeps its grid value (conservative). */
static void rdp_refine_view(ledger *l, sqlite3 *db, const silo_row *s, ledger_silo_view *v)
{
    const ledger_budget *b = &s->b;
    if (b->kind != LEDGER_BUDGET_EPS_DELTA ||
        (b->accountant != LEDGER_ACCT_RDP && b->accountant != LEDGER_ACCT_PLD) || s->n_charges == 0)
        return;
    size_t slot = (size_t)s->id % LEDGER_PLD_CACHE;
    double eps = DP_NAN, order = DP_NAN;
    pthread_mutex_lock(&l->cache_mu);
    if (l->rdp_cache[slot].silo == s->id && l->rdp_cache[slot].n_charges == s->n_charges &&
        memcmp(&l->rdp_cache[slot].delta, &b->delta, sizeof b->delta) == 0) {
        eps = l->rdp_cache[slot].eps;
        order = l->rdp_cache[slot].order;
    }
    pthread_mutex_unlock(&l->cache_mu);
    if (isnan(eps)) {
        log_tree *t = dp_calloc(1, sizeof *t);
        if (t == NULL)
            return;
        lg_log_tree_build(db, s->id, s->n_charges, t);
        /* a build that failed (out of memory, an SQL error) leaves the slot empty (silo 0) */
        bool oom = t->silo != s->id;
        refine_set rf;
        memset(&rf, 0, sizeof rf);
        rf.log = t;
        rf.claims_ok = true;
        order = v->spent_order;
        eps =
            lg_refined_of_order(l, b, &rf, false, false, s->spent_rdp, v->spent_eps, &order, &oom);
        lg_log_tree_clear(t);
        dp_free(t);
        if (!oom) { /* a grid figure for lack of memory is not this log's: not kept */
            pthread_mutex_lock(&l->cache_mu);
            l->rdp_cache[slot].silo = s->id;
            l->rdp_cache[slot].n_charges = s->n_charges;
            l->rdp_cache[slot].delta = b->delta;
            l->rdp_cache[slot].eps = eps;
            l->rdp_cache[slot].order = order;
            pthread_mutex_unlock(&l->cache_mu);
        }
    }
    if (eps < v->spent_eps) {
        v->spent_eps = eps;
        v->spent_order = order;
        if (v->n_active_claims == 0)
            v->held_eps = eps;
        v->remaining = lg_remaining_of(b, v->held_eps);
    }
}

int lg_view_of(ledger *l, const silo_row *s, int64_t now, ledger_silo_view *v, dp_err *err)
{
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if (lg_held_load(l, s->id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
        return err->code;
    int rc = view_fill(l, s, held_rdp, held_rho, n_active, v, err);
    if (rc == DP_OK)
        rdp_refine_view(l, l->db, s, v);
    return rc;
}

/* A PLD silo's view: spent = min(RDP, PLD) of its log (cached per n_charges), inside the caller's
 * read transaction. With active claims the held total keeps its RDP value (conservative). */
static void pld_refine_view(ledger *l, store_conn *c, ledger_silo_view *v)
{
    static const char nb_sql[] =
        "SELECT neighboring FROM charges WHERE silo_id = :s ORDER BY seq DESC LIMIT 1";
    const ledger_budget *b = &v->budget;
    if (b->accountant != LEDGER_ACCT_PLD || b->kind != LEDGER_BUDGET_EPS_DELTA || v->n_charges == 0)
        return;
    size_t slot = (size_t)v->id % LEDGER_PLD_CACHE;
    double eps = DP_NAN;
    pthread_mutex_lock(&l->cache_mu);
    if (l->pld_cache[slot].silo == v->id && l->pld_cache[slot].n_charges == v->n_charges &&
        memcmp(&l->pld_cache[slot].delta, &b->delta, sizeof b->delta) == 0)
        eps = l->pld_cache[slot].eps;
    pthread_mutex_unlock(&l->cache_mu);
    if (isnan(eps)) {
        acct_neighboring nb = ACCT_NB_ADD_REMOVE;
        dp_err e;
        dp_err_clear(&e);
        sqlite3_stmt *st = store_conn_prepare(c, nb_sql, &e);
        if (st != NULL && lg_b_i64(st, ":s", v->id) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW &&
            strcmp((const char *)sqlite3_column_text(st, 0), "replace_one") == 0)
            nb = ACCT_NB_REPLACE_ONE;
        lg_st_done(st);
        /* PLD recomposition prepares its statements per call: milliseconds of FFT dominate */
        eps = lg_pld_eps_of(store_conn_db(c), v->id, b->delta, false, NULL, nb, time_now_ms());
        pthread_mutex_lock(&l->cache_mu);
        l->pld_cache[slot].silo = v->id;
        l->pld_cache[slot].n_charges = v->n_charges;
        l->pld_cache[slot].eps = eps;
        l->pld_cache[slot].delta = b->delta;
        pthread_mutex_unlock(&l->cache_mu);
    }
    if (eps < v->spent_eps) {
        v->spent_eps = eps;
        v->spent_order = DP_NAN; /* PLD has no RDP order */
        if (v->n_active_claims == 0)
            v->held_eps = eps;
        v->remaining = lg_remaining_of(b, v->held_eps);
    }
}

/* A statement cached on the caller's pooled connection (db/store.h; sql must have static storage).
 * Reset it with lg_st_done after use; never finalise it. */
static int prep(store_conn *c, const char *sql, sqlite3_stmt **st, dp_err *err)
{
    *st = store_conn_prepare(c, sql, err);
    return *st != NULL ? DP_OK : err->code;
}

/* A view read on a caller's connection, in one read transaction (consistent snapshot). */
static int view_read(ledger *l, store_conn *c, sqlite3_stmt *silo_st, sqlite3_stmt *held_st,
                     int64_t id, int64_t now, ledger_silo_view *v, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    silo_row *s = dp_malloc(sizeof *s);
    if (s == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    int rc = lg_silo_load_st(db, silo_st, NULL, l->n_orders, id, s, err);
    if (rc == DP_OK)
        rc = lg_held_load_st(db, held_st, l->n_orders, id, now, 0, held_rdp, &held_rho, &n_active,
                             err);
    if (rc == DP_OK)
        rc = view_fill(l, s, held_rdp, held_rho, n_active, v, err);
    if (rc == DP_OK)
        rdp_refine_view(l, db, s, v);
    if (rc == DP_OK)
        pld_refine_view(l, c, v);
    dp_free(s);
    return rc;
}

/* A read transaction on the caller's connection: one consistent snapshot for several SELECTs. */
static int read_begin(store_conn *c, dp_err *err)
{
    static const char begin_sql[] = "BEGIN";
    sqlite3_stmt *st = NULL;
    if (prep(c, begin_sql, &st, err) != DP_OK)
        return err->code;
    int rc = sqlite3_step(st);
    lg_st_done(st);
    return rc == SQLITE_DONE ? DP_OK : lg_read_fail(store_conn_db(c), rc, "BEGIN", err);
}

static void read_end(store_conn *c)
{
    static const char commit_sql[] = "COMMIT";
    if (sqlite3_get_autocommit(store_conn_db(c)))
        return;
    dp_err e;
    dp_err_clear(&e);
    sqlite3_stmt *st = NULL;
    if (prep(c, commit_sql, &st, &e) == DP_OK) {
        int rc = sqlite3_step(st);
        lg_st_done(st);
        if (rc != SQLITE_DONE)
            dp_log(DP_LOG_WARN, NULL, "ledger: ending a read transaction failed (%d)", rc);
    }
}

int ledger_silo_get(ledger *l, store_conn *c, int64_t id, ledger_silo_view *out, dp_err *err)
{
    sqlite3_stmt *a = NULL, *b = NULL;
    int rc = prep(c, lg_sql[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, lg_sql[ST_CLAIMS_HELD], &b, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK)
        rc = view_read(l, c, a, b, id, time_now_ms(), out, err);
    read_end(c);
    lg_st_done(a);
    lg_st_done(b);
    return rc;
}

void ledger_views_free(ledger_silo_view *v)
{
    dp_free(v);
}

int ledger_silo_list(ledger *l, store_conn *c, int64_t after, size_t limit, bool include_archived,
                     ledger_silo_view **out, size_t *n_out, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    *out = NULL;
    *n_out = 0;
    if (limit == 0 || limit > LEDGER_LIST_MAX)
        return dp_err_set(err, DP_EINVAL, "limit", "limit must be in [1, %d]", LEDGER_LIST_MAX);
    static const char ids_sql[] =
        "SELECT id FROM silos WHERE id > :after AND (:all OR archived_at IS "
        "NULL) ORDER BY id LIMIT :limit";
    sqlite3_stmt *ids = NULL, *a = NULL, *b = NULL;
    ledger_silo_view *v = dp_calloc(limit, sizeof *v);
    int64_t *idv = dp_calloc(limit, sizeof *idv);
    size_t n = 0;
    int rc = v != NULL && idv != NULL ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = prep(c, ids_sql, &ids, err);
    if (rc == DP_OK)
        rc = prep(c, lg_sql[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, lg_sql[ST_CLAIMS_HELD], &b, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK) {
        int src = lg_b_i64(ids, ":after", after);
        if (src == SQLITE_OK)
            src = lg_b_i64(ids, ":all", include_archived ? 1 : 0);
        if (src == SQLITE_OK)
            src = lg_b_i64(ids, ":limit", (int64_t)limit);
        while (src == SQLITE_OK && n < limit && (src = sqlite3_step(ids)) == SQLITE_ROW) {
            idv[n++] = sqlite3_column_int64(ids, 0);
            src = SQLITE_OK;
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = lg_read_fail(db, src, "list silos", err);
        lg_st_done(ids);
    }
    int64_t now = time_now_ms();
    for (size_t i = 0; rc == DP_OK && i < n; i++)
        rc = view_read(l, c, a, b, idv[i], now, &v[i], err);
    read_end(c);
    lg_st_done(ids);
    lg_st_done(a);
    lg_st_done(b);
    dp_free(idv);
    if (rc != DP_OK) {
        dp_free(v);
        return rc;
    }
    *out = v;
    *n_out = n;
    return DP_OK;
}

int ledger_silo_verify(const ledger *l, store_conn *c, int64_t id, ledger_verify *out, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    memset(out, 0, sizeof *out);
    static const char log_sql[] =
        "SELECT coalesce(k.cost_rdp, c.cost_rdp), c.cost_rho, c.seq FROM charges AS c LEFT JOIN "
        "charge_curves AS k ON k.event_key = c.curve_key WHERE c.silo_id = :silo ORDER BY c.seq";
    sqlite3_stmt *a = NULL, *lg = NULL;
    silo_row *s = dp_malloc(sizeof *s);
    double sum[LEDGER_MAX_ORDERS] = {0}, v[LEDGER_MAX_ORDERS], rho = 0;
    int64_t n = 0;
    bool seq_ok = true, vec_ok = true;
    int rc = s != NULL ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = prep(c, lg_sql[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, log_sql, &lg, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK)
        rc = lg_silo_load_st(db, a, NULL, l->n_orders, id, s, err);
    if (rc == DP_OK) {
        int src = lg_b_i64(lg, ":silo", id);
        while (src == SQLITE_OK && (src = sqlite3_step(lg)) == SQLITE_ROW) {
            src = SQLITE_OK;
            if (!lg_col_vec(lg, 0, v, l->n_orders)) {
                vec_ok = false;
                continue;
            }
            lg_vec_add_up(sum, v, l->n_orders);
            rho = ledger_sum_up(rho, sqlite3_column_double(lg, 1));
            n++;
            if (sqlite3_column_int64(lg, 2) != n) /* seq numbers 1..n in log order */
                seq_ok = false;
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = lg_read_fail(db, src, "read log", err);
        lg_st_done(lg);
    }
    read_end(c);
    if (rc == DP_OK) {
        out->n_charges_log = n;
        out->n_charges_cached = s->n_charges;
        out->spent_rho_log = rho;
        out->spent_rho_cached = s->spent_rho;
        bool same =
            vec_ok && seq_ok && n == s->n_charges && memcmp(&rho, &s->spent_rho, sizeof rho) == 0;
        for (size_t i = 0; i < l->n_orders; i++) {
            double d = fabs(sum[i] - s->spent_rdp[i]);
            if (isnan(d)) /* inf - inf: equal infinities are consistent */
                d = sum[i] == s->spent_rdp[i] ? 0 : DP_INF;
            if (d > out->max_abs_diff_rdp)
                out->max_abs_diff_rdp = d;
            if (memcmp(&sum[i], &s->spent_rdp[i], sizeof(double)) != 0)
                same = false;
        }
        out->consistent = same;
    }
    lg_st_done(a);
    lg_st_done(lg);
    dp_free(s);
    return rc;
}

static char *col_strdup(sqlite3_stmt *st, int c, bool *oom)
{
    if (sqlite3_column_type(st, c) == SQLITE_NULL)
        return NULL;
    char *p = dp_strdup((const char *)sqlite3_column_text(st, c));
    if (p == NULL)
        *oom = true;
    return p;
}

void ledger_charge_rows_free(ledger_charge_row *rows, size_t n)
{
    if (rows == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        dp_free(rows[i].idempotency_key);
        dp_free(rows[i].reason);
        dp_free(rows[i].event);
    }
    dp_free(rows);
}

int ledger_charges_list(store_conn *c, int64_t silo_id, const ledger_charge_filter *f,
                        ledger_charge_row **out, size_t *n_out, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    *out = NULL;
    *n_out = 0;
    if (f->limit == 0 || f->limit > LEDGER_LIST_MAX)
        return dp_err_set(err, DP_EINVAL, "limit", "limit must be in [1, %d]", LEDGER_LIST_MAX);
    static const char sql[] = "SELECT id, silo_id, created_at, actor_token_id, job_id, claim_id, "
                              "seq, idempotency_key, reason, "
                              "event, neighboring, cost_eps, cost_rho, eps_after, rho_after, "
                              "remaining_after FROM charges "
                              "WHERE silo_id = :silo AND id > :after AND created_at >= :since AND "
                              "created_at < :until AND "
                              "(:job = 0 OR job_id = :job) ORDER BY seq LIMIT :limit";
    sqlite3_stmt *st = NULL;
    ledger_charge_row *rows = dp_calloc(f->limit, sizeof *rows);
    size_t n = 0;
    bool oom = rows == NULL;
    int rc = oom ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = lg_b_i64(st, ":silo", silo_id);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":after", f->after);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":since", f->since_ms);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":until", f->until_ms);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":job", f->job_id);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":limit", (int64_t)f->limit);
        while (src == SQLITE_OK && n < f->limit && (src = sqlite3_step(st)) == SQLITE_ROW) {
            src = SQLITE_OK;
            ledger_charge_row *r = &rows[n++];
            r->id = sqlite3_column_int64(st, 0);
            r->silo_id = sqlite3_column_int64(st, 1);
            r->created_at_ms = sqlite3_column_int64(st, 2);
            r->actor_token_id = sqlite3_column_int64(st, 3); /* NULL reads as 0 */
            r->job_id = sqlite3_column_int64(st, 4);
            r->claim_id = sqlite3_column_int64(st, 5);
            r->seq = sqlite3_column_int64(st, 6);
            r->idempotency_key = col_strdup(st, 7, &oom);
            r->reason = col_strdup(st, 8, &oom);
            r->event = col_strdup(st, 9, &oom);
            snprintf(r->neighboring, sizeof r->neighboring, "%s",
                     (const char *)sqlite3_column_text(st, 10));
            r->cost_eps = lg_col_dbl(st, 11);
            r->cost_rho = lg_col_dbl(st, 12);
            r->eps_after = lg_col_dbl(st, 13);
            r->rho_after = lg_col_dbl(st, 14);
            r->remaining_after = lg_col_dbl(st, 15);
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = lg_read_fail(db, src, "list charges", err);
        else if (oom)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        lg_st_done(st);
    }
    lg_st_done(st);
    if (rc != DP_OK) {
        ledger_charge_rows_free(rows, n);
        return rc;
    }
    *out = rows;
    *n_out = n;
    return DP_OK;
}

int ledger_claim_get(store_conn *c, int64_t claim_id, ledger_claim_view *out, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    static const char sql[] =
        "SELECT c.id, c.silo_id, c.created_at, c.expires_at, c.closed_at, c.state, "
        "c.job_id, c.cost_rho, (SELECT id FROM charges WHERE claim_id = c.id) "
        "FROM claims c WHERE c.id = :id";
    sqlite3_stmt *st = NULL;
    int rc = prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = lg_b_i64(st, ":id", claim_id);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            memset(out, 0, sizeof *out);
            out->id = sqlite3_column_int64(st, 0);
            out->silo_id = sqlite3_column_int64(st, 1);
            out->created_at_ms = sqlite3_column_int64(st, 2);
            out->expires_at_ms = sqlite3_column_int64(st, 3);
            out->closed_at_ms = sqlite3_column_int64(st, 4);
            out->state = lg_claim_state_parse((const char *)sqlite3_column_text(st, 5));
            out->job_id = sqlite3_column_int64(st, 6);
            out->cost_rho = sqlite3_column_double(st, 7);
            out->cost_eps = DP_NAN;
            out->charge_id = sqlite3_column_int64(st, 8);
            /* An active claim past its expiry is released: report it as expired. */
            if (out->state == LEDGER_CLAIM_ACTIVE && out->expires_at_ms <= time_now_ms())
                out->state = LEDGER_CLAIM_EXPIRED;
        } else if (src == SQLITE_DONE) {
            rc = dp_err_set(err, DP_ENOTFOUND, "claim_id", "claim %lld does not exist",
                            (long long)claim_id);
        } else {
            rc = lg_read_fail(db, src, "get claim", err);
        }
        lg_st_done(st);
    }
    lg_st_done(st);
    return rc;
}

int ledger_claims_list(ledger *l, store_conn *c, int64_t silo_id, const ledger_budget *b,
                       int64_t after, size_t limit, ledger_claim_view **out, size_t *n_out,
                       bool *more, dp_err *err)
{
    *out = NULL;
    *n_out = 0;
    *more = false;
    if (limit == 0 || limit > LEDGER_LIST_MAX)
        return dp_err_set(err, DP_EINVAL, "limit", "limit must be in [1, %d]", LEDGER_LIST_MAX);
    /* one row past the page says whether another follows */
    static const char sql[] = "SELECT id, silo_id, created_at, expires_at, job_id, cost_rdp, "
                              "cost_rho FROM claims WHERE silo_id = :silo AND id > :after AND "
                              "state = 'active' AND expires_at > :now ORDER BY id LIMIT :limit";
    sqlite3_stmt *st = NULL;
    ledger_claim_view *rows = dp_calloc(limit, sizeof *rows);
    size_t n = 0;
    int rc =
        rows == NULL ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = lg_b_i64(st, ":silo", silo_id);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":after", after);
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":now", time_now_ms());
        if (src == SQLITE_OK)
            src = lg_b_i64(st, ":limit", (int64_t)limit + 1);
        while (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
            src = SQLITE_OK;
            if (n == limit) {
                *more = true;
                break;
            }
            ledger_claim_view *r = &rows[n++];
            r->id = sqlite3_column_int64(st, 0);
            r->silo_id = sqlite3_column_int64(st, 1);
            r->created_at_ms = sqlite3_column_int64(st, 2);
            r->expires_at_ms = sqlite3_column_int64(st, 3);
            r->job_id = sqlite3_column_int64(st, 4); /* NULL reads as 0 */
            r->state = LEDGER_CLAIM_ACTIVE;
            r->cost_rho = sqlite3_column_double(st, 6);
            r->cost_eps = DP_NAN;
            double rdp[LEDGER_MAX_ORDERS];
            double e = DP_NAN;
            if (b != NULL && lg_col_vec(st, 5, rdp, l->n_orders) &&
                lg_loss_of(l, b, rdp, r->cost_rho, &e, NULL, NULL) == DP_OK)
                r->cost_eps = e;
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = lg_read_fail(store_conn_db(c), src, "list claims", err);
    }
    lg_st_done(st);
    if (rc != DP_OK) {
        dp_free(rows);
        return rc;
    }
    if (n == 0) {
        dp_free(rows);
        rows = NULL;
    }
    *out = rows;
    *n_out = n;
    return DP_OK;
}

int ledger_token_id(store_conn *c, const char *token, int64_t *token_id, dp_err *err)
{
    *token_id = 0;
    if (token == NULL || token[0] == '\0')
        return DP_OK;
    uint8_t h[DP_SHA256_DIGEST_BYTES];
    dp_sha256(token, strlen(token), h);
    static const char sql[] = "SELECT id FROM tokens WHERE hash = :hash";
    sqlite3_stmt *st = NULL;
    int rc = prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = lg_b_blob(st, ":hash", h, sizeof h);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW)
            *token_id = sqlite3_column_int64(st, 0);
        else if (src != SQLITE_DONE)
            rc = lg_read_fail(store_conn_db(c), src, "token id", err);
    }
    lg_st_done(st);
    return rc;
}

int ledger_token_lookup(store_conn *c, const char *token, ledger_principal *out, dp_err *err)
{
    sqlite3 *db = store_conn_db(c);
    memset(out, 0, sizeof *out);
    if (token == NULL || token[0] == '\0')
        return dp_err_set(err, DP_EUNAUTH, NULL, "a bearer token is required");
    uint8_t h[DP_SHA256_DIGEST_BYTES];
    dp_sha256(token, strlen(token), h);
    static const char sql[] =
        "SELECT id, role, silo_id FROM tokens WHERE hash = :hash AND revoked_at IS NULL";
    sqlite3_stmt *st = NULL;
    int rc = prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = lg_b_blob(st, ":hash", h, sizeof h);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            out->token_id = sqlite3_column_int64(st, 0);
            out->role = strcmp((const char *)sqlite3_column_text(st, 1), "admin") == 0
                            ? LEDGER_ROLE_ADMIN
                            : LEDGER_ROLE_SILO;
            out->silo_id = sqlite3_column_int64(st, 2);
        } else if (src == SQLITE_DONE) {
            rc = dp_err_set(err, DP_EUNAUTH, NULL, "the bearer token is not valid");
        } else {
            rc = lg_read_fail(db, src, "token lookup", err);
        }
        lg_st_done(st);
    }
    lg_st_done(st);
    return rc;
}
