/*
 * ledger/admit.c: accounting and admission: the cost of an event, the committer's reads of a
 * silo and its claims, the continuous-order refinement (log trees), the admission rule and the
 * append of a charge. The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"
#include "common/dp_math.h"

/* ---- accounting ---- */

/* Privacy loss of a total (RDP vector and rho) in the silo's budget unit and as eps at its delta.
 * eps: DP_NAN when the silo has no delta. lg_unit_value: eps (EPS_DELTA), rho (RHO), DP_NAN
 * (NONE). */
int lg_loss_of(const ledger *l, const ledger_budget *b, const double *rdp, double rho, double *eps,
               double *order, dp_err *err)
{
    *eps = DP_NAN;
    if (order != NULL)
        *order = DP_NAN;
    double opt = DP_NAN;
    if (b->kind == LEDGER_BUDGET_NONE || isnan(b->delta))
        return DP_OK;
    /* the same figures with or without the table (curves.c); NULL: convert without one */
    const acct_conv_table *t = lg_conv_table(l->convs, b->delta, b->conversion);
    if (b->accountant == LEDGER_ACCT_ZCDP) {
        /* rho-zCDP is (alpha, rho*alpha)-RDP for every alpha > 1 (Bun & Steinke 2016, Def. 1.1), so
         * the silo's RDP conversion applies to that curve. The product is rounded up. */
        double curve[LEDGER_MAX_ORDERS];
        for (size_t i = 0; i < l->n_orders; i++) {
            double v = rho * l->orders[i];
            curve[i] = isfinite(v) && v > 0 ? nextafter(v, DP_INF) : v;
        }
        if ((t != NULL ? acct_rdp_to_epsilon_table(t, curve, eps, &opt, err)
                       : acct_rdp_to_epsilon(l->orders, curve, l->n_orders, b->delta, b->conversion,
                                             eps, &opt, err)) != DP_OK)
            return err ? err->code : DP_EINTERNAL;
    } else if ((t != NULL ? acct_rdp_to_epsilon_table(t, rdp, eps, &opt, err)
                          : acct_rdp_to_epsilon(l->orders, rdp, l->n_orders, b->delta,
                                                b->conversion, eps, &opt, err)) != DP_OK) {
        return err ? err->code : DP_EINTERNAL;
    }
    if (order != NULL)
        *order = opt;
    return DP_OK;
}

double lg_unit_value(const ledger_budget *b, double eps, double rho)
{
    return b->kind == LEDGER_BUDGET_EPS_DELTA ? eps : b->kind == LEDGER_BUDGET_RHO ? rho : DP_NAN;
}

double lg_cap_of(const ledger_budget *b)
{
    return b->kind == LEDGER_BUDGET_EPS_DELTA ? b->epsilon
           : b->kind == LEDGER_BUDGET_RHO     ? b->rho
                                              : DP_NAN;
}

/* cap - held, never negative. */
double lg_remaining_of(const ledger_budget *b, double held)
{
    double cap = lg_cap_of(b);
    if (isnan(cap))
        return DP_NAN;
    if (isnan(held) || held >= cap)
        return 0.0;
    return cap - held;
}

void lg_vec_add_up(double *acc, const double *x, size_t n)
{
    dp_vec_sum_up(acc, x, n); /* ledger_sum_up per element (one rounding rule, logmath.h) */
}

/* Computes the cost of a request (RDP at the ledger's orders, and rho) and its request hash. Runs
 * in the caller's thread, before the op is queued, so the write transaction never waits for
 * numerics. */
int lg_item_prepare(const ledger *l, const ledger_charge_req *req, const char *what, op_item *it,
                    dp_err *err)
{
    if (req->event == NULL)
        return dp_err_set(err, DP_EINVAL, "event", "event is required");
    uint8_t *key = it->ev_key;
    bool use_cache = lg_curve_cache_enabled(l->curves), cached = false, json_hit = false;
    it->have_key = use_cache;
    if (use_cache)
        lg_event_key(req->event, req->neighboring, key);
    if (req->event_json == NULL) { /* a C caller (a job): the ledger writes the canonical JSON */
        if (use_cache)             /* the same text as event_json_dumps (curves.c) */
            json_hit = (it->own_json = lg_curve_cache_get_json(l->curves, key)) != NULL;
        if (!json_hit)
            it->own_json = event_json_dumps(req->event);
        if (it->own_json == NULL)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        it->req_copy = *req;
        it->req_copy.event_json = it->own_json;
        req = &it->req_copy;
    }
    if (req->idempotency_key != NULL &&
        (req->idempotency_key[0] == '\0' || strlen(req->idempotency_key) > LEDGER_KEY_MAX))
        return dp_err_set(err, DP_EINVAL, "idempotency_key",
                          "idempotency_key must have 1 to %d bytes", LEDGER_KEY_MAX);
    if (req->reason != NULL && strlen(req->reason) > LEDGER_REASON_MAX)
        return dp_err_set(err, DP_EINVAL, "reason", "reason must have at most %d bytes",
                          LEDGER_REASON_MAX);
    if (req->silo_id <= 0)
        return dp_err_set(err, DP_EINVAL, "silo_id", "silo_id must be a positive integer");
    if (req->job_id < 0)
        return dp_err_set(err, DP_EINVAL, "job_id", "job_id must be a positive integer");
    it->req = req;
    /* The cost: a pure function of (event, relation) on the fixed grid, so an event seen before
     * takes it from the cache (curves.c), bit for bit what the computation below returned then. */
    if (use_cache)
        cached = lg_curve_cache_get(l->curves, key, it->cost_rdp, &it->cost_rho);
    if (!cached) {
        if (acct_rdp_eval(req->event, req->neighboring, l->orders, l->n_orders, it->cost_rdp,
                          err) != DP_OK) {
            dp_err_prefix_field(err, "event");
            return err ? err->code : DP_EINVAL;
        }
        for (size_t i = 0; i < l->n_orders; i++)
            if (isnan(it->cost_rdp[i]) || it->cost_rdp[i] < 0)
                return dp_err_set(err, DP_ENUMERIC, "event",
                                  "the event's RDP curve is not a valid loss");
        /* zCDP: an event with no finite zCDP bound (e.g. a sampled mechanism) has rho = +inf; only
         * zCDP silos refuse it, others record it. */
        dp_err zerr;
        dp_err_clear(&zerr);
        double rho = DP_INF;
        if (acct_zcdp_eval(req->event, &rho, &zerr) != DP_OK || isnan(rho) || rho < 0)
            rho = DP_INF;
        it->cost_rho = rho;
        if (use_cache)
            lg_curve_cache_put(l->curves, key, it->cost_rdp, it->cost_rho);
    }
    if (use_cache && it->own_json != NULL && !json_hit)
        lg_curve_cache_put_json(l->curves, key, it->own_json);
    /* Request hash: what, event, relation and job; a retry with another body is a conflict. */
    char job[32];
    snprintf(job, sizeof job, "%lld", (long long)req->job_id);
    dp_sha256_ctx c;
    dp_sha256_init(&c);
    dp_sha256_update(&c, what, strlen(what) + 1);
    dp_sha256_update(&c, req->event_json, strlen(req->event_json) + 1);
    const char *nb = req->neighboring == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
    dp_sha256_update(&c, nb, strlen(nb) + 1);
    dp_sha256_update(&c, job, strlen(job) + 1);
    dp_sha256_final(&c, it->req_hash);
    return DP_OK;
}

/* ---- committer: reading state ---- */

/* Reads silo id's row with st (a statement of lg_sql[ST_SILO_GET] prepared on db): s->spent_rdp
 * is then its totals checkpoint, the sum of rows 1..*ck_seq (migration 0013). */
static int silo_row_read(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t id, silo_row *s,
                         int64_t *ck_seq, dp_err *err)
{
    int rc = lg_b_i64(st, ":id", id);
    if (rc != SQLITE_OK) {
        lg_st_done(st);
        return lg_read_fail(db, rc, "bind silo", err);
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        lg_st_done(st);
        return dp_err_set(err, DP_ENOTFOUND, "silo_id", "silo %lld does not exist", (long long)id);
    }
    if (rc != SQLITE_ROW) {
        lg_st_done(st);
        return lg_read_fail(db, rc, "load silo", err);
    }
    memset(s, 0, sizeof *s);
    s->id = sqlite3_column_int64(st, 0);
    snprintf(s->name, sizeof s->name, "%s", (const char *)sqlite3_column_text(st, 1));
    s->created_at_ms = sqlite3_column_int64(st, 2);
    s->archived_at_ms = sqlite3_column_type(st, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 3);
    bool ok = lg_kind_parse((const char *)sqlite3_column_text(st, 4), &s->b.kind) == 0;
    ok = ok && (s->b.kind == LEDGER_BUDGET_NONE
                    ? (s->b.accountant = LEDGER_ACCT_NONE, true)
                    : ledger_accountant_parse((const char *)sqlite3_column_text(st, 5),
                                              &s->b.accountant, NULL) == DP_OK);
    acct_conversion conv = ACCT_CONV_BALLE2020;
    ok =
        ok && acct_conversion_parse((const char *)sqlite3_column_text(st, 6), &conv, NULL) == DP_OK;
    s->b.conversion = conv;
    s->b.epsilon = lg_col_dbl(st, 7);
    s->b.delta = lg_col_dbl(st, 8);
    s->b.rho = lg_col_dbl(st, 9);
    s->n_charges = sqlite3_column_int64(st, 10);
    ok = ok && lg_col_vec(st, 11, s->spent_rdp, n_orders);
    s->spent_rho = sqlite3_column_double(st, 12);
    *ck_seq = sqlite3_column_int64(st, 13);
    lg_st_done(st);
    if (!ok) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: silo %lld has a malformed row", (long long)id);
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    }
    return DP_OK;
}

/* Completes s->spent_rdp, the checkpoint of rows 1..from, with the curves of the silo's rows
 * after it in seq order: one lg_vec_add_up per row, the additions lg_totals_after made when each
 * row was appended, so the total is the same bits as if it had been stored after every charge.
 * replay: LG_TOTALS_REPLAY_SQL prepared on db, or NULL (prepared here). Rows missing or beyond
 * n_charges (a damaged database) are not an error here: ledger_silo_verify reports them. */
static int totals_replay(sqlite3 *db, sqlite3_stmt *replay, size_t n_orders, silo_row *s,
                         int64_t from, dp_err *err)
{
    sqlite3_stmt *st = replay;
    int rc = st != NULL ? SQLITE_OK : sqlite3_prepare_v2(db, LG_TOTALS_REPLAY_SQL, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":from", from);
    bool ok = true;
    double v[LEDGER_MAX_ORDERS];
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (!lg_col_vec(st, 0, v, n_orders)) {
            ok = false;
            rc = SQLITE_DONE;
            break;
        }
        lg_vec_add_up(s->spent_rdp, v, n_orders);
    }
    if (replay != NULL)
        lg_st_done(st);
    else
        sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return lg_read_fail(db, rc, "replay silo totals", err);
    if (!ok) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: silo %lld has a malformed charge curve",
               (long long)s->id);
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    }
    return DP_OK;
}

/* Loads silo id with st (a statement of lg_sql[ST_SILO_GET] prepared on db) and its totals (the
 * checkpoint and the rows after it; replay as for totals_replay). */
int lg_silo_load_st(sqlite3 *db, sqlite3_stmt *st, sqlite3_stmt *replay, size_t n_orders,
                    int64_t id, silo_row *s, dp_err *err)
{
    int64_t ck_seq = 0;
    int rc = silo_row_read(db, st, n_orders, id, s, &ck_seq, err);
    if (rc == DP_OK && ck_seq < s->n_charges)
        rc = totals_replay(db, replay, n_orders, s, ck_seq, err);
    return rc;
}

/* The committer's load: the totals come from l->totals when the slot holds this silo's current
 * ones (it appended the newest row itself), else from the checkpoint and the rows after it. */
int lg_silo_load(ledger *l, int64_t id, silo_row *s, dp_err *err)
{
    int64_t ck_seq = 0;
    int rc = silo_row_read(l->db, l->st[ST_SILO_GET], l->n_orders, id, s, &ck_seq, err);
    if (rc != DP_OK || ck_seq >= s->n_charges)
        return rc;
    size_t k = (size_t)id % LEDGER_TREE_CACHE;
    if (l->totals[k].silo == id && l->totals[k].n_charges == s->n_charges) {
        memcpy(s->spent_rdp, l->totals_rdp + k * l->n_orders, l->n_orders * sizeof(double));
        return DP_OK;
    }
    rc = totals_replay(l->db, l->st[ST_TOTALS_REPLAY], l->n_orders, s, ck_seq, err);
    if (rc == DP_OK) { /* remembered for the next charge of the silo */
        l->totals[k].silo = id;
        l->totals[k].n_charges = s->n_charges;
        l->totals[k].gen = l->tree_gen;
        memcpy(l->totals_rdp + k * l->n_orders, s->spent_rdp, l->n_orders * sizeof(double));
    }
    return rc;
}

/* Orders rows of held_sorted (an int64_t id in the first 8 bytes) by ascending id. */
static int cmp_held_id(const void *a, const void *b)
{
    int64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return (x > y) - (x < y);
}

/* lg_held_load_st's second pass, for rows that did not come in ascending id order: st (bound,
 * reset) is read again into one buffer of rows (id, rho, rdp[n_orders]) sorted by id, then summed.
 */
static int held_sorted(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t except, double *rdp,
                       double *rho, int64_t *n_active, dp_err *err)
{
    const size_t stride = n_orders + 2; /* doubles per row */
    size_t n = 0, cap = 0;
    double *buf = NULL;
    int rc = SQLITE_DONE, code = DP_OK;
    while (code == DP_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (id == except)
            continue;
        if (n == cap) {
            size_t want = cap == 0 ? 16 : 2 * cap;
            double *grown = want <= SIZE_MAX / (stride * sizeof *buf)
                                ? dp_realloc(buf, want * stride * sizeof *buf)
                                : NULL;
            if (grown == NULL) {
                code = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
                break;
            }
            buf = grown;
            cap = want;
        }
        double *row = buf + n * stride;
        memcpy(row, &id, sizeof id);
        row[1] = sqlite3_column_double(st, 2);
        if (!lg_col_vec(st, 1, row + 2, n_orders))
            code = dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
        n++;
    }
    lg_st_done(st);
    if (code == DP_OK && rc != SQLITE_DONE)
        code = lg_read_fail(db, rc, "sum claims", err);
    if (code == DP_OK) {
        qsort(buf, n, stride * sizeof *buf, cmp_held_id);
        for (size_t i = 0; i < n; i++) {
            lg_vec_add_up(rdp, buf + i * stride + 2, n_orders);
            *rho = ledger_sum_up(*rho, buf[i * stride + 1]);
        }
        *n_active = (int64_t)n;
    }
    dp_free(buf);
    return code;
}

/* Sum of the silo's active, unexpired claims (ascending id), excluding claim `except` (0 = none).
 * The sums are rounded up, so their bits depend on the order: always ascending id. The statement
 * has no ORDER BY: its index (claims_active: silo, state, expires_at) gives the rows by expiry, and
 * an ORDER BY id sorted them in a temporary B-tree, which on the writer's connection (temp_store =
 * MEMORY) allocates once per row: an admission on a silo with C active claims made C allocations
 * (and a chaos test, whose failed tries leave claims behind, thousands per try). Rows that come in
 * ascending id (claims of one time-to-live, made in turn: the usual case) are summed as they come;
 * otherwise the statement runs again into one sorted buffer (held_sorted). */
int lg_held_load_st(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t silo_id, int64_t now,
                    int64_t except, double *rdp, double *rho, int64_t *n_active, dp_err *err)
{
    memset(rdp, 0, n_orders * sizeof *rdp);
    *rho = 0;
    *n_active = 0;
    int rc = lg_b_i64(st, ":silo", silo_id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc != SQLITE_OK) {
        lg_st_done(st);
        return lg_read_fail(db, rc, "bind claims", err);
    }
    double v[LEDGER_MAX_ORDERS];
    int64_t last = INT64_MIN;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (id == except)
            continue;
        if (id <= last) {      /* not in id order: start again, sorted */
            sqlite3_reset(st); /* keeps the bindings */
            memset(rdp, 0, n_orders * sizeof *rdp);
            *rho = 0;
            *n_active = 0;
            return held_sorted(db, st, n_orders, except, rdp, rho, n_active, err);
        }
        last = id;
        if (!lg_col_vec(st, 1, v, n_orders)) {
            lg_st_done(st);
            return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
        }
        lg_vec_add_up(rdp, v, n_orders);
        *rho = ledger_sum_up(*rho, sqlite3_column_double(st, 2));
        (*n_active)++;
    }
    lg_st_done(st);
    return rc == SQLITE_DONE ? DP_OK : lg_read_fail(db, rc, "sum claims", err);
}

int lg_held_load(ledger *l, int64_t silo_id, int64_t now, int64_t except, double *rdp, double *rho,
                 int64_t *n_active, dp_err *err)
{
    return lg_held_load_st(l->db, l->st[ST_CLAIMS_HELD], l->n_orders, silo_id, now, except, rdp,
                           rho, n_active, err);
}

/* The RDP figure of an (eps, delta) rdp or pld silo: min(grid, acct_rdp_epsilon_curve(tree)) where
 * tree (borrowed, may be NULL: grid only) composes what vec sums. Any failure keeps grid_eps. */
static double refined_eps_order(const ledger *l, const ledger_budget *b, const double *vec,
                                const acct_event *tree, acct_neighboring nb, double grid_eps,
                                double *order, bool *oom)
{
    if (tree == NULL || b->kind != LEDGER_BUDGET_EPS_DELTA ||
        (b->accountant != LEDGER_ACCT_RDP && b->accountant != LEDGER_ACCT_PLD) || isnan(grid_eps))
        return grid_eps;
    acct_rdp_answer a;
    dp_err e;
    dp_err_clear(&e);
    const acct_conv_table *t = lg_conv_table(l->convs, b->delta, b->conversion);
    int rc = t != NULL ? acct_rdp_epsilon_curve_table(tree, nb, t, b->conversion, vec, &a, &e)
                       : acct_rdp_epsilon_curve(tree, nb, b->delta, b->conversion, l->orders, vec,
                                                l->n_orders, &a, &e);
    if (rc == DP_ENOMEM && oom != NULL)
        *oom = true;
    if (rc != DP_OK || isnan(a.value) || !(a.value < grid_eps))
        return grid_eps;
    if (order != NULL)
        *order = a.optimal_order;
    return a.value;
}

double lg_refined_eps(const ledger *l, const ledger_budget *b, const double *vec,
                      const acct_event *tree, acct_neighboring nb, double grid_eps)
{
    return refined_eps_order(l, b, vec, tree, nb, grid_eps, NULL, NULL);
}

bool lg_refinable(const ledger_budget *b)
{
    return b->kind == LEDGER_BUDGET_EPS_DELTA &&
           (b->accountant == LEDGER_ACCT_RDP || b->accountant == LEDGER_ACCT_PLD);
}

/* lg_refined_eps of the item's own event (its cost_eps): a function of the event, its relation,
 * the silo's delta and conversion alone (grid_eps is the grid conversion of it->cost_rdp at them),
 * so it is kept with the event's curve in the cost cache (curves.c) and computed once per (event,
 * delta, conversion): the caller (lg_admit) has looked it up there first, before converting the
 * cost on the grid, and calls this on a miss. Silos the refinement does not apply to get grid_eps,
 * as from lg_refined_eps. */
double lg_cost_eps(const ledger *l, const ledger_budget *b, const op_item *it, double grid_eps)
{
    bool refinable = lg_refinable(b) && !isnan(grid_eps);
    if (!refinable || !it->have_key)
        return lg_refined_eps(l, b, it->cost_rdp, it->req->event, it->req->neighboring, grid_eps);
    bool oom = false;
    double e = refined_eps_order(l, b, it->cost_rdp, it->req->event, it->req->neighboring, grid_eps,
                                 NULL, &oom);
    if (!oom) /* the grid figure of a refinement that ran out of memory is not the event's */
        lg_curve_cache_put_refined(l->curves, it->ev_key, b->delta, b->conversion, e);
    return e;
}

void lg_log_tree_clear(log_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        dp_free(t->text[i]);
        acct_event_free(t->node[i]);
    }
    memset(t, 0, sizeof *t);
}

/* Adds count rows of the stored event text under relation nb_text. What the tree cannot hold (a
 * ninth distinct event, a second relation, an event this build cannot read) is a property of the
 * log: the tree becomes unusable and stays so, cached (its figures are the grid's). Running out of
 * memory is not: then the tree is cleared (lg_log_tree_clear: an empty slot), so that the next
 * admission on the silo builds it again rather than converting on the grid until the silo's next
 * charge (as a failed build did before: "current" by silo and n_charges, but unusable). */
static void log_tree_add(log_tree *t, const char *text, const char *nb_text, int64_t count)
{
    if (!t->usable || text == NULL || nb_text == NULL || count < 1)
        return;
    acct_neighboring nb =
        strcmp(nb_text, "replace_one") == 0 ? ACCT_NB_REPLACE_ONE : ACCT_NB_ADD_REMOVE;
    if (t->have_nb && nb != t->nb) {
        t->usable = false;
        return;
    }
    t->nb = nb;
    t->have_nb = true;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->text[i], text) == 0) {
            t->node[i]->count += (uint64_t)count;
            return;
        }
    acct_event *ev = NULL;
    int rc = t->n < LEDGER_REFINE_MAX_EVENTS ? lg_stored_event_parse(text, 1, &ev) : DP_EINVAL;
    acct_event *sc = ev != NULL ? acct_event_alloc(ACCT_EV_SELF_COMPOSED) : NULL;
    char *dup = sc != NULL ? dp_strdup(text) : NULL;
    if (dup == NULL) {
        acct_event_free(sc);
        acct_event_free(ev);
        if (rc == DP_EINVAL)
            t->usable = false;
        else
            lg_log_tree_clear(t);
        return;
    }
    sc->count = (uint64_t)count;
    sc->child = ev;
    t->text[t->n] = dup;
    t->node[t->n] = sc;
    t->n++;
}

/* Rebuilds t from the silo's log read on db (prepared per call: a rebuild is rare). The rows are
 * read one by one (log_tree_add merges equal texts) and the distinct events are then put in the
 * order a GROUP BY event gave them before (SQLite's BINARY collation: strcmp order for these
 * NUL-free texts; a usable tree has one relation), which the figures' rounded-up sums depend on.
 * No GROUP BY: SQLite sorted every row of the log in a temporary B-tree, which on the writer's
 * connection (temp_store = MEMORY) made one allocation per row; a rebuild after a failed one (out
 * of memory) cost as many allocations as the silo has charges. */
void lg_log_tree_build(sqlite3 *db, int64_t silo, int64_t n_charges, log_tree *t)
{
    lg_log_tree_clear(t);
    t->silo = silo;
    t->n_charges = n_charges;
    t->usable = true;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT event, neighboring FROM charges WHERE silo_id = :silo",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":silo", silo);
    while (rc == SQLITE_OK && t->usable && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        log_tree_add(t, (const char *)sqlite3_column_text(st, 0),
                     (const char *)sqlite3_column_text(st, 1), 1);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK && rc != SQLITE_DONE) { /* out of memory, busy, I/O: not kept either */
        lg_log_tree_clear(t);
        return;
    }
    for (size_t i = 1; t->usable && i < t->n; i++) /* insertion sort of <= 8 by text */
        for (size_t j = i; j > 0 && strcmp(t->text[j - 1], t->text[j]) > 0; j--) {
            char *tx = t->text[j];
            acct_event *nd = t->node[j];
            t->text[j] = t->text[j - 1];
            t->node[j] = t->node[j - 1];
            t->text[j - 1] = tx;
            t->node[j - 1] = nd;
        }
}

/* The committer's tree of silo s's log (l->trees): the cached one, advanced by the newest row when
 * it is one charge behind, else rebuilt. Committer thread only. */
static log_tree *log_tree_get(ledger *l, const silo_row *s)
{
    log_tree *t = &l->trees[(size_t)s->id % LEDGER_TREE_CACHE];
    if (t->silo == s->id && t->n_charges == s->n_charges)
        return t;
    if (t->silo == s->id && t->n_charges + 1 == s->n_charges && t->usable) {
        sqlite3_stmt *st = l->st[ST_ROW_EVENT];
        int rc = lg_b_i64(st, ":silo", s->id);
        if (rc == SQLITE_OK)
            rc = lg_b_i64(st, ":seq", s->n_charges);
        if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
            log_tree_add(t, (const char *)sqlite3_column_text(st, 0),
                         (const char *)sqlite3_column_text(st, 1), 1);
            lg_st_done(st);
            if (t->silo == s->id) { /* else cleared for lack of memory: rebuilt next time */
                t->n_charges = s->n_charges;
                t->gen = l->tree_gen;
                t->have_prev = false; /* read by lg_charge_append when it needs it */
            }
            return t;
        }
        lg_st_done(st);
    }
    lg_log_tree_build(l->db, s->id, s->n_charges, t);
    t->gen = l->tree_gen;
    return t;
}

/* Forgets the trees built or advanced since generation gen (their rows were rolled back). */
void lg_log_trees_forget(ledger *l, uint64_t gen)
{
    for (size_t i = 0; i < LEDGER_TREE_CACHE; i++) {
        if (l->trees[i].silo != 0 && l->trees[i].gen >= gen)
            lg_log_tree_clear(&l->trees[i]);
        if (l->totals[i].silo != 0 && l->totals[i].gen >= gen)
            l->totals[i].silo = 0;
        if (l->wb_memo[i].silo != 0 && l->wb_memo[i].gen >= gen)
            l->wb_memo[i].silo = 0;
    }
}

void lg_refine_set_free(refine_set *r)
{
    for (size_t i = 0; i < r->n_claims; i++)
        acct_event_free(r->claims[i]);
    r->n_claims = 0;
}

/* Fills r for silo s: its log tree, its active claims other than `except` (n_active of them) and
 * event (borrowed, may be NULL). Committer thread only. */
void lg_refine_set_load(ledger *l, const silo_row *s, int64_t now, int64_t except, int64_t n_active,
                        const acct_event *event, acct_neighboring nb, refine_set *r)
{
    memset(r, 0, sizeof *r);
    r->event = event;
    r->event_nb = nb;
    r->claims_ok = n_active == 0;
    if (s->b.kind != LEDGER_BUDGET_EPS_DELTA ||
        (s->b.accountant != LEDGER_ACCT_RDP && s->b.accountant != LEDGER_ACCT_PLD))
        return;
    r->log = log_tree_get(l, s);
    if (n_active == 0 || n_active > LEDGER_REFINE_MAX_EVENTS)
        return;
    sqlite3_stmt *st = l->st[ST_CLAIMS_EVENTS];
    int rc = lg_b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":except", except);
    bool ok = rc == SQLITE_OK;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW && r->n_claims < LEDGER_REFINE_MAX_EVENTS) {
        const char *nbt = (const char *)sqlite3_column_text(st, 1);
        acct_event *ev = lg_stored_event((const char *)sqlite3_column_text(st, 0), 1);
        if (ev == NULL || nbt == NULL ||
            (strcmp(nbt, "replace_one") == 0 ? ACCT_NB_REPLACE_ONE : ACCT_NB_ADD_REMOVE) != nb) {
            acct_event_free(ev);
            ok = false;
            break;
        }
        r->claims[r->n_claims++] = ev;
    }
    lg_st_done(st);
    r->claims_ok = ok && (int64_t)r->n_claims == n_active;
}

/* lg_refined_eps of what r composes: the log (always), the claims (with_claims) and the event
 * (with_event). vec must be the matching per-order sum, grid_eps its grid conversion. *oom (may be
 * NULL) is set when the refinement ran out of memory (the answer is then grid_eps, not to be kept
 * as the figure of this log). */
double lg_refined_of_order(const ledger *l, const ledger_budget *b, const refine_set *r,
                           bool with_claims, bool with_event, const double *vec, double grid_eps,
                           double *order, bool *oom)
{
    if (r->log == NULL || !r->log->usable || (with_claims && !r->claims_ok) ||
        (with_event && r->event == NULL))
        return grid_eps;
    if (with_event && r->log->have_nb && r->log->nb != r->event_nb)
        return grid_eps;
    acct_neighboring nb = r->log->have_nb ? r->log->nb : r->event_nb;
    acct_event *kids[2 * LEDGER_REFINE_MAX_EVENTS + 1];
    size_t k = 0;
    for (size_t i = 0; i < r->log->n; i++)
        kids[k++] = r->log->node[i];
    for (size_t i = 0; with_claims && i < r->n_claims; i++)
        kids[k++] = r->claims[i];
    if (with_event)
        kids[k++] = (acct_event *)r->event; /* borrowed: the root below is never freed */
    if (k == 0)
        return grid_eps;
    acct_event root;
    memset(&root, 0, sizeof root);
    root.type = ACCT_EV_COMPOSED;
    root.children = kids;
    root.n_children = k;
    return refined_eps_order(l, b, vec, k == 1 ? kids[0] : &root, nb, grid_eps, order, oom);
}

double lg_refined_of(const ledger *l, const ledger_budget *b, const refine_set *r, bool with_claims,
                     bool with_event, const double *vec, double grid_eps)
{
    return lg_refined_of_order(l, b, r, with_claims, with_event, vec, grid_eps, NULL, NULL);
}

/* lg_refined_of the would-be total wb_rdp (grid conversion grid_eps) of s's log and its event,
 * without claims, through l->wb_memo (see wb_memo): the same function of the same state, so the
 * same bits as computing it again. Used only when this admission refines on a usable tree: one
 * that is not (a silo not refined, too many distinct events, or a tree cleared when memory ran
 * out, built again on a later charge) gives the grid figure at no cost, as computing it does; and a
 * value computed while out of memory (the grid figure) is not kept. */
static double refined_wb_memo(ledger *l, const silo_row *s, const op_item *it, const refine_set *rf,
                              const double *wb_rdp, double grid_eps)
{
    const ledger_budget *b = &s->b;
    if (!lg_refinable(b) || rf->log == NULL || !rf->log->usable) /* the grid figure: no memo */
        return lg_refined_of_order(l, b, rf, false, true, wb_rdp, grid_eps, NULL, NULL);
    wb_memo *m = &l->wb_memo[(size_t)s->id % LEDGER_TREE_CACHE];
    if (m->silo == s->id && m->n_charges == s->n_charges &&
        memcmp(m->ev_key, it->ev_key, sizeof m->ev_key) == 0 && m->conversion == b->conversion &&
        memcmp(&m->delta, &b->delta, sizeof m->delta) == 0 &&
        memcmp(&m->grid, &grid_eps, sizeof m->grid) == 0) {
        atomic_fetch_add_explicit(&l->wb_hits, 1, memory_order_relaxed);
        return m->value;
    }
    bool oom = false;
    double e = lg_refined_of_order(l, b, rf, false, true, wb_rdp, grid_eps, NULL, &oom);
    if (oom) { /* the grid figure, not this log's */
        m->silo = 0;
        return e;
    }
    m->silo = s->id;
    m->n_charges = s->n_charges;
    m->gen = l->tree_gen;
    memcpy(m->ev_key, it->ev_key, sizeof m->ev_key);
    m->conversion = b->conversion;
    m->delta = b->delta;
    m->grid = grid_eps;
    m->value = e;
    return e;
}

/* Figures of an admission decision; sets *fits. n_active: active claims (held_* is their sum).
 * *e_wb_rdp: the RDP would-be epsilon, reused by lg_totals_after. To save conversions (each is a
 * min over the order grid), `spent` and `reserved` are computed only for a refusal or when claims
 * are active; they are NAN otherwise. */
int lg_admit(ledger *l, const silo_row *s, const double *held_rdp, double held_rho,
             int64_t n_active, const op_item *it, const refine_set *rf, ledger_charge_result *res,
             bool *fits, double *e_wb_rdp, dp_err *err)
{
    const ledger_budget *b = &s->b;
    double wb_rdp[LEDGER_MAX_ORDERS], h_rdp[LEDGER_MAX_ORDERS];
    double e_spent = DP_NAN, e_held = DP_NAN, e_cost, e_wb;
    memcpy(h_rdp, s->spent_rdp, l->n_orders * sizeof(double));
    if (n_active > 0)
        lg_vec_add_up(h_rdp, held_rdp, l->n_orders);
    memcpy(wb_rdp, h_rdp, l->n_orders * sizeof(double));
    lg_vec_add_up(wb_rdp, it->cost_rdp, l->n_orders);
    double h_rho = n_active > 0 ? ledger_sum_up(s->spent_rho, held_rho) : s->spent_rho;
    double wb_rho = ledger_sum_up(h_rho, it->cost_rho);
    if ((b->accountant == LEDGER_ACCT_ZCDP) && !isfinite(it->cost_rho))
        return dp_err_set(err, DP_ENUMERIC, "event",
                          "the event has no finite zCDP bound, and this silo is accounted by zCDP");
    /* the event's own refined epsilon, when the cost cache has it, needs no grid conversion (on a
     * miss lg_cost_eps computes and keeps it) */
    bool cost_cached =
        it->have_key && lg_refinable(b) &&
        lg_curve_cache_get_refined(l->curves, it->ev_key, b->delta, b->conversion, &e_cost);
    if ((!cost_cached &&
         lg_loss_of(l, b, it->cost_rdp, it->cost_rho, &e_cost, NULL, err) != DP_OK) ||
        lg_loss_of(l, b, wb_rdp, wb_rho, &e_wb, NULL, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    if (!cost_cached)
        e_cost = lg_cost_eps(l, b, it, e_cost);
    e_wb = n_active == 0 && it->have_key
               ? refined_wb_memo(l, s, it, rf, wb_rdp, e_wb)
               : lg_refined_of(l, b, rf, n_active > 0, true, wb_rdp, e_wb);
    *e_wb_rdp = e_wb;
    bool pld = b->accountant == LEDGER_ACCT_PLD && it->pld_ready && !it->pld_give_up;
    if (pld) /* min of two upper bounds is an upper bound (PLD SILOS above) */
        e_wb = fmin(e_wb, it->pld_wb);
    res->silo_id = s->id;
    res->kind = b->kind;
    res->cost_eps = e_cost;
    res->cost_rho = it->cost_rho;
    res->requested = lg_unit_value(b, e_cost, it->cost_rho);
    res->would_be = lg_unit_value(b, e_wb, wb_rho);
    res->budget = lg_cap_of(b);
    /* The rule: conv(spent + reserved + cost) <= cap, no tolerance in the permissive direction. NaN
     * never fits.
     */
    *fits = b->kind == LEDGER_BUDGET_NONE || (res->would_be <= res->budget);
    res->spent = res->reserved = DP_NAN;
    if (*fits && n_active == 0)
        return DP_OK;
    if (lg_loss_of(l, b, s->spent_rdp, s->spent_rho, &e_spent, NULL, err) != DP_OK ||
        (n_active > 0 && lg_loss_of(l, b, h_rdp, h_rho, &e_held, NULL, err) != DP_OK))
        return err ? err->code : DP_EINTERNAL;
    e_spent = lg_refined_of(l, b, rf, false, false, s->spent_rdp, e_spent);
    if (n_active > 0)
        e_held = lg_refined_of(l, b, rf, true, false, h_rdp, e_held);
    if (n_active == 0)
        e_held = e_spent;
    res->reserved =
        b->kind == LEDGER_BUDGET_NONE
            ? DP_NAN
            : fmax(0.0, lg_unit_value(b, e_held, h_rho) - lg_unit_value(b, e_spent, s->spent_rho));
    if (pld)
        e_spent = fmin(e_spent, it->pld_spent);
    res->spent = lg_unit_value(b, e_spent, s->spent_rho);
    return DP_OK;
}

/* Totals after appending cost (excluding held claims except in `remaining`). pld (may be NULL)
 * carries PLD figures for a PLD silo. */
int lg_totals_after(ledger *l, const silo_row *s, const double *cost_rdp, double cost_rho,
                    const double *held_rdp, double held_rho, int64_t n_active, double e_wb_rdp,
                    const op_item *pld, const refine_set *rf, double *new_rdp, double *new_rho,
                    ledger_charge_result *res, dp_err *err)
{
    memcpy(new_rdp, s->spent_rdp, l->n_orders * sizeof(double));
    lg_vec_add_up(new_rdp, cost_rdp, l->n_orders);
    *new_rho = ledger_sum_up(s->spent_rho, cost_rho);
    double h_rdp[LEDGER_MAX_ORDERS], e_new, e_held;
    double h_rho = n_active > 0 ? ledger_sum_up(*new_rho, held_rho) : *new_rho;
    if (n_active == 0 && !isnan(e_wb_rdp)) {
        /* no claims: spent + cost is exactly the would-be sum lg_admit() converted */
        e_new = e_held = e_wb_rdp;
    } else {
        memcpy(h_rdp, new_rdp, l->n_orders * sizeof(double));
        if (n_active > 0)
            lg_vec_add_up(h_rdp, held_rdp, l->n_orders);
        if (lg_loss_of(l, &s->b, new_rdp, *new_rho, &e_new, NULL, err) != DP_OK ||
            lg_loss_of(l, &s->b, h_rdp, h_rho, &e_held, NULL, err) != DP_OK)
            return err ? err->code : DP_EINTERNAL;
        if (rf != NULL) {
            e_new = lg_refined_of(l, &s->b, rf, false, true, new_rdp, e_new);
            e_held = lg_refined_of(l, &s->b, rf, true, true, h_rdp, e_held);
        }
    }
    if (s->b.accountant == LEDGER_ACCT_PLD && pld != NULL && pld->pld_ready && !pld->pld_give_up) {
        e_new = fmin(e_new, pld->pld_after);
        e_held = fmin(e_held, pld->pld_wb); /* after the append, held = the would-be total */
    }
    res->spent_eps_after = e_new;
    res->spent_rho_after = *new_rho;
    res->remaining_after = lg_remaining_of(&s->b, lg_unit_value(&s->b, e_held, h_rho));
    return DP_OK;
}

/* Appends a charge row and updates the silo's cached totals. curve_key (may be NULL): the event's
 * key (lg_event_key) when cost_rdp is that event's curve; the curve is then stored once per key in
 * charge_curves and the row names it (migration 0012), else the row holds it inline. */
int lg_charge_append(ledger *l, const silo_row *s, const ledger_charge_req *req,
                     const uint8_t *hash, const char *key, int64_t claim_id, const double *cost_rdp,
                     const uint8_t *curve_key, double cost_rho, const double *held_rdp,
                     double held_rho, int64_t n_active, double e_wb_rdp, const op_item *pld,
                     const refine_set *rf, int64_t now, ledger_charge_result *res, dp_err *err)
{
    double new_rdp[LEDGER_MAX_ORDERS], new_rho;
    if (lg_totals_after(l, s, cost_rdp, cost_rho, held_rdp, held_rho, n_active, e_wb_rdp, pld, rf,
                        new_rdp, &new_rho, res, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    /* The cumulative figure of the log never goes down from one row to the next at one delta
     * (D10): each figure is an upper bound on the loss of the rows so far, so the larger of this
     * one and the previous row's is one too. (A PLD figure may come out below an earlier row's
     * RDP fallback, or a later composition round differently.) */
    log_tree *t = &l->trees[(size_t)s->id % LEDGER_TREE_CACHE];
    bool t_current = t->silo == s->id && t->n_charges == s->n_charges;
    if (s->n_charges > 0 && !isnan(s->b.delta) && !isnan(res->spent_eps_after) && t_current &&
        t->have_prev) { /* the previous row, as this committer wrote it */
        double prev = t->prev_eps_after, prev_delta = t->prev_delta_after;
        if (!isnan(prev) && memcmp(&prev_delta, &s->b.delta, sizeof prev_delta) == 0 &&
            prev > res->spent_eps_after)
            res->spent_eps_after = prev;
    } else if (s->n_charges > 0 && !isnan(s->b.delta) && !isnan(res->spent_eps_after)) {
        sqlite3_stmt *pv = l->st[ST_PREV_AFTER];
        int prc = lg_b_i64(pv, ":silo", s->id);
        if (prc == SQLITE_OK)
            prc = lg_b_i64(pv, ":seq", s->n_charges);
        if (prc == SQLITE_OK)
            prc = sqlite3_step(pv);
        if (prc == SQLITE_ROW) {
            double prev = lg_col_dbl(pv, 0), prev_delta = lg_col_dbl(pv, 1);
            if (!isnan(prev) && memcmp(&prev_delta, &s->b.delta, sizeof prev_delta) == 0 &&
                prev > res->spent_eps_after)
                res->spent_eps_after = prev;
            prc = SQLITE_DONE;
        }
        lg_st_done(pv);
        if (prc != SQLITE_DONE)
            return lg_sql_fail(l, prc, "previous row", err);
    }
    static const uint8_t no_bytes[1] = {0}; /* a zero-length blob needs a non-NULL pointer */
    if (curve_key != NULL) {
        sqlite3_stmt *cv = l->st[ST_CURVE_INSERT];
        int crc = lg_b_blob(cv, ":k", curve_key, DP_SHA256_DIGEST_BYTES);
        if (crc == SQLITE_OK)
            crc = lg_b_blob(cv, ":rdp", cost_rdp, l->n_orders * sizeof(double));
        int werr = lg_st_write(l, cv, crc, "insert charge curve", err);
        if (werr != DP_OK)
            return werr;
    }
    sqlite3_stmt *st = l->st[ST_CHARGE_INSERT];
    int64_t seq = s->n_charges + 1;
    const char *nb = req->neighboring == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
    int rc = lg_b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":actor", req->actor_token_id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":job", req->job_id);
    if (rc == SQLITE_OK)
        rc = lg_b_i64_or_null(st, ":claim", claim_id);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":key", key);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":hash", hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":reason", req->reason);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":event", req->event_json);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":nb", nb);
    if (rc == SQLITE_OK)
        rc = curve_key != NULL ? lg_b_blob(st, ":rdp", no_bytes, 0)
                               : lg_b_blob(st, ":rdp", cost_rdp, l->n_orders * sizeof(double));
    if (rc == SQLITE_OK)
        rc = curve_key != NULL ? lg_b_blob(st, ":curve", curve_key, DP_SHA256_DIGEST_BYTES)
                               : SQLITE_OK; /* unbound: NULL */
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":rho", cost_rho);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":eps", res->cost_eps);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":seq", seq);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":eps_after", res->spent_eps_after);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":rho_after", new_rho);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":remaining", res->remaining_after);
    double delta_after = isnan(res->spent_eps_after) ? DP_NAN : s->b.delta;
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":delta_after", delta_after);
    int werr = lg_st_write(l, st, rc, "insert charge", err);
    if (werr != DP_OK)
        return werr;
    res->charge_id = sqlite3_last_insert_rowid(l->db);
    res->created_at_ms = now;
    res->seq = seq;
    st = l->st[ST_SILO_TOTALS];
    rc = lg_b_i64(st, ":n", seq);
    if (rc == SQLITE_OK)
        rc = lg_b_dbl(st, ":rho", new_rho);
    if (rc == SQLITE_OK)
        rc = lg_b_i64(st, ":id", s->id);
    werr = lg_st_write(l, st, rc, "update silo totals", err);
    if (werr != DP_OK)
        return werr;
    /* The per-order total: a checkpoint every LEDGER_TOTALS_EVERY rows of the silo (staggered by
     * its id), kept in memory between them (migration 0013). */
    if ((seq + s->id) % LEDGER_TOTALS_EVERY == 0) {
        st = l->st[ST_TOTALS_SAVE];
        rc = lg_b_i64(st, ":n", seq);
        if (rc == SQLITE_OK)
            rc = lg_b_blob(st, ":rdp", new_rdp, l->n_orders * sizeof(double));
        if (rc == SQLITE_OK)
            rc = lg_b_i64(st, ":id", s->id);
        werr = lg_st_write(l, st, rc, "save silo totals", err);
        if (werr != DP_OK)
            return werr;
    }
    size_t k = (size_t)s->id % LEDGER_TREE_CACHE;
    l->totals[k].silo = s->id;
    l->totals[k].n_charges = seq;
    l->totals[k].gen = l->tree_gen;
    memcpy(l->totals_rdp + k * l->n_orders, new_rdp, l->n_orders * sizeof(double));
    /* The silo's log tree, when it is current, takes the new row now (what log_tree_get would
     * read back from it on the next charge), stamped with this op's generation so that a rollback
     * forgets it (lg_log_trees_forget). An unusable tree stays unusable with one more row. */
    if (t_current && t->usable)
        log_tree_add(t, req->event_json, nb, 1);
    if (t_current && t->silo == s->id) { /* else cleared for lack of memory */
        t->n_charges = seq;
        t->gen = l->tree_gen;
        t->have_prev = true;
        t->prev_eps_after = res->spent_eps_after;
        t->prev_delta_after = delta_after;
    }
    return DP_OK;
}

/* Fills res from an existing charge row found by st (already stepped to SQLITE_ROW). */
void lg_result_from_row(sqlite3_stmt *st, const silo_row *s, ledger_charge_result *res)
{
    res->replayed = true;
    res->silo_id = s->id;
    res->kind = s->b.kind;
    res->charge_id = sqlite3_column_int64(st, 0);
    res->created_at_ms = sqlite3_column_int64(st, 1);
    res->seq = sqlite3_column_int64(st, 3);
    res->cost_eps = lg_col_dbl(st, 4);
    res->cost_rho = lg_col_dbl(st, 5);
    res->spent_eps_after = lg_col_dbl(st, 6);
    res->spent_rho_after = lg_col_dbl(st, 7);
    res->remaining_after = lg_col_dbl(st, 8);
    res->requested = lg_unit_value(&s->b, res->cost_eps, res->cost_rho);
    res->budget = lg_cap_of(&s->b);
    res->spent = res->reserved = res->would_be = DP_NAN;
}

/* Looks up (silo, key) in charges. found: 0 none, 1 same request (res filled), 2 other request. */
int lg_charge_by_key(ledger *l, const silo_row *s, const char *key, const uint8_t *hash,
                     ledger_charge_result *res, int *found, dp_err *err)
{
    *found = 0;
    sqlite3_stmt *st = l->st[ST_CHARGE_BY_KEY];
    int rc = lg_b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = lg_b_text(st, ":key", key);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const void *h = sqlite3_column_blob(st, 2);
        if (h != NULL && sqlite3_column_bytes(st, 2) == DP_SHA256_DIGEST_BYTES &&
            memcmp(h, hash, DP_SHA256_DIGEST_BYTES) == 0) {
            *found = 1;
            lg_result_from_row(st, s, res);
        } else {
            *found = 2;
        }
        rc = SQLITE_DONE;
    }
    lg_st_done(st);
    return rc == SQLITE_DONE ? DP_OK : lg_sql_fail(l, rc, "find charge by key", err);
}

void lg_item_field(const ledger_op *op, size_t i, char *buf, size_t len)
{
    if (op->batch_fields)
        snprintf(buf, len, "charges[%zu]", i);
    else
        buf[0] = '\0';
}
