/*
 * ledger/ledger.c: per-silo privacy budgets on SQLite, written through db/writer's group commits.
 * The contract, the admission rule and the threading design are in ledger/ledger.h; the schema and
 * its invariants in migrations/0003_ledger.sql. This comment covers the implementation.
 *
 * FILES. ledger.c (this essay, names and budgets, open and free), internal.h (the shared types:
 * ledger, ledger_op, op_item, silo_row, log_tree), sql.c (the statements and SQLite helpers),
 * admit.c (costs, the committer's reads, continuous-order refinement, admission, the append),
 * apply.c (what each op does in its savepoint), commit.c (the ledger as a client of db/writer:
 * apply and done, the PLD thread, the idle sweep, the blocking submit), writes.c (tokens and
 * silos), charge.c (charges and claims, blocking and asynchronous), pld.c (PLD recomposition on a
 * snapshot), reads.c (views and reads on the caller's pool connection), curves.c (the cache of
 * event costs: an event's RDP curve and rho, computed once per distinct event and relation).
 *
 * COMMITTER. The ledger writes through db/writer (db/writer.h), whose thread is "the committer": it
 * owns the write connection l->db, on which ledger_open prepares every statement of l->st before
 * the first op, and it runs each op in a SAVEPOINT of its own inside one BEGIN IMMEDIATE per group,
 * COMMITs with synchronous=FULL and only then calls each op's done. Queue, gathering of groups,
 * savepoints, the wake-up order and the background PASSIVE checkpointer are all described there;
 * the ledger is one client of it (others, on the same writer: ledger_writer, app->writer: tuning
 * draws; job state and per-round metrics to come). Public write calls build a ledger_op on their
 * own stack (inputs borrowed from the caller, outputs written into caller memory) whose db_write_op
 * has apply op_apply (lg_apply_op, the only ledger-specific part) and done op_done, submit it
 * (lg_submit), and wait on op->cv until op->done. op_done runs on the committer after the COMMIT:
 * under l->mu it records the outcome, marks the op done and signals it. Nothing is acknowledged
 * before COMMIT returned SQLITE_OK with synchronous=FULL, so an acknowledged charge survives a
 * crash (the WAL frame was fsynced); an op whose group failed to commit reports an error and was
 * not recorded. Nobody touches an op after it was marked done (the waiter may return and pop its
 * stack frame).
 *
 * ASYNCHRONOUS CHARGES. ledger_charge_start builds the op on the heap (struct ledger_pending) with
 * a wake-up callback and returns without waiting. op_done copies (wake, arg) under l->mu while it
 * marks the op done, and calls wake after releasing it (the HTTP dispatcher resumes a suspended
 * connection there: a thread-safe MHD call that takes MHD's own lock, never l->mu).
 * ledger_pending_finish then reads the outcome under l->mu. So no thread waits per charge, and the
 * number of charges that can share a group is not bounded by a thread pool.
 *
 * A WRITE WITH A CHARGE. ledger_charge_batch_with runs a caller's write (ledger_write_fn) in the
 * charge's savepoint after admission: the way a job round's metrics will commit with its charge
 * in one transaction (db/writer.h, COMPOSITE OPERATIONS).
 *
 * LOG TREES AND ROLLBACK. The committer's cache of log trees (l->trees) is stamped with the
 * generation of the op that built it (op->gen); op_apply forgets what an op built when the op fails
 * (its savepoint is rolled back), op_done when its group did not commit.
 *
 * TOTALS. A silo's per-order RDP total is not rewritten with every charge (migration 0013): its
 * row holds n_charges and spent_rho, and silo_totals a checkpoint (the total of rows 1..seq),
 * rewritten when (seq + silo id) is a multiple of LEDGER_TOTALS_EVERY. A reader completes it with
 * the curves of the rows after it, in seq order, with the same upward-rounded additions the
 * charges made (lg_silo_load_st), so the total is the same bits; the committer keeps the current
 * totals of the silos it charged in l->totals (keyed by n_charges, forgotten like the trees). The
 * checkpoint and the rows are written in one transaction: a crash never separates them.
 *
 * CLAIM EXPIRY. Admission ignores claims whose expires_at has passed, so expiry needs no timer for
 * correctness. The writer's idle hook (lg_idle_sweep, every LEDGER_SWEEP_MS without an op) submits
 * a sweep op that marks overdue claims 'expired' so that their state is visible.
 *
 * PLD SILOS. A silo whose accountant is "pld" is admitted on min(eps_RDP, eps_PLD): both are valid
 * upper bounds on the true privacy loss (the RDP conversion for any mechanism with that curve,
 * Balle et al. 2020 Thm. 21; the PLD one by its pessimistic "connect-the-dots" discretisation,
 * accounting/pld.h), so their minimum is one too, and PLD is usually much tighter. A PLD
 * composition of the silo's whole log costs milliseconds to seconds (hundreds of distinct events),
 * far too slow for the write transaction and for an HTTP worker, so it runs on the ledger's own PLD
 * thread on a snapshot: the committer, meeting a PLD silo without PLD figures for its current state
 * (n_charges, the highest claim id and the delta), fails that op alone with need_pld and, instead
 * of answering it, hands it to the PLD thread (pld_handoff); that thread recomposes on its own read
 * connection (lg_pld_prepare: the log grouped into self_composed(count, event) per distinct event,
 * plus active claims, plus the new event; the log's own figure is cached per (silo, n_charges,
 * delta)) and queues the op again. The caller keeps waiting (a blocking call) or stays suspended (a
 * deferred HTTP charge: wake is called only once the op is done), so no HTTP thread composes PLDs.
 * After LEDGER_PLD_RETRIES stale snapshots, or while stopping, the RDP bound decides alone for that
 * request (conservative). The same figures serve claim commits (so that the audit row records
 * min(RDP, PLD), D10) and a PATCH lowering a PLD silo's cap (checked with min(RDP, PLD), D8).
 * Events PLD does not support (zcdp, sampling without replacement), mixed neighbouring relations or
 * more than ACCT_PLD_MAX_MECHANISMS distinct events give eps_PLD = +inf, i.e. the RDP bound. Reads
 * (ledger_silo_get/list) refine the spent epsilon the same way. Verification (ledger_silo_verify)
 * checks the RDP sums, which are always kept.
 *
 * AUDIT ROWS. Each row's eps_after is the cumulative epsilon under the silo's admission rule, at
 * the silo's delta then (delta_after, migrations/0005_ledger_rules.sql), raised to the previous
 * row's figure at the same delta when it came out lower: within one delta the column never
 * decreases.
 *
 * BATCH KEYS. A batch with its own idempotency key (ledger_charge_batch_keyed) is recorded whole in
 * charge_batches, (actor, key) -> hash of every item; the same key with another batch is a
 * conflict, and a batch whose items would partly replay is one too.
 *
 * STOPPING. ledger_free closes the writer (new ops fail with DP_EBUSY), stops the PLD thread (it
 * gives up on what it holds: the RDP bound decides, and it submits those ops again), then stops the
 * writer, which runs every queued op first (also those submitted again), so every op accepted
 * before the stop is answered.
 *
 * LOCKS. l->mu guards the PLD queue and pld_busy, l->stop and every op's `done`; it is never held
 * across SQLite or a composition. It may be held while submitting to the writer (l->mu, then the
 * writer's own lock; the writer never calls back with its lock held). The cost cache (l->curves,
 * curves.c) has a mutex of its own, taken by the callers' threads (lg_item_prepare) and the
 * committer (lg_admit, lg_cost_eps) only inside its get and put: never with another lock, never
 * across an evaluation.
 *
 * COST CACHE. An event's cost (its RDP curve on the grid, its rho, its own refined epsilon at a
 * silo's delta and conversion) depends on nothing but the event and its relation, and a training
 * job charges the same round event every round: l->curves keeps the costs of the last
 * LEDGER_CURVE_CACHE distinct events (curves.c), bit-identical to a fresh computation.
 *
 * WOULD-BE MEMO. The refined epsilon of a charge's would-be total (lg_admit, ~21 us of Brent steps
 * on the sampled Gaussian for a DP-SGD round event) is a function of the silo's log (its first
 * n_charges rows), the event and the silo's delta and conversion. A job round asks for it twice on
 * the same log, in its dry run before the round trains and in the charge after it
 * (service/jobs/runner.c one_round), so the committer keeps the last figure per silo (wb_memo,
 * internal.h) and the charge takes it. Like the log trees and totals it is stamped with the op's
 * generation and forgotten on rollback; it is used only without active claims, with the cost cache
 * on, for a silo refined on a usable tree.
 */
#include "service/ledger/internal.h"

/* ---- small helpers ---- */

double ledger_sum_up(double a, double b)
{
    return dp_sum_up(a, b); /* one rounding-up rule with the accountant's sums (logmath.h) */
}

const char *ledger_accountant_name(ledger_accountant a)
{
    switch (a) {
        case LEDGER_ACCT_RDP:
            return "rdp";
        case LEDGER_ACCT_ZCDP:
            return "zcdp";
        case LEDGER_ACCT_PLD:
            return "pld";
        case LEDGER_ACCT_NONE:
            return "none";
    }
    return "none";
}

int ledger_accountant_parse(const char *s, ledger_accountant *out, dp_err *err)
{
    static const ledger_accountant all[] = {LEDGER_ACCT_RDP, LEDGER_ACCT_ZCDP, LEDGER_ACCT_PLD};
    for (size_t i = 0; s != NULL && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, ledger_accountant_name(all[i])) == 0) {
            *out = all[i];
            return DP_OK;
        }
    return dp_err_set(err, DP_EINVAL, "budget.accountant",
                      "budget.accountant must be \"rdp\", \"zcdp\" or \"pld\"");
}

const char *lg_kind_name(ledger_budget_kind k)
{
    return k == LEDGER_BUDGET_EPS_DELTA ? "eps_delta" : k == LEDGER_BUDGET_RHO ? "rho" : "none";
}

int lg_kind_parse(const char *s, ledger_budget_kind *k)
{
    if (strcmp(s, "eps_delta") == 0)
        *k = LEDGER_BUDGET_EPS_DELTA;
    else if (strcmp(s, "rho") == 0)
        *k = LEDGER_BUDGET_RHO;
    else if (strcmp(s, "none") == 0)
        *k = LEDGER_BUDGET_NONE;
    else
        return -1;
    return 0;
}

const char *ledger_claim_state_name(ledger_claim_state s)
{
    switch (s) {
        case LEDGER_CLAIM_ACTIVE:
            return "active";
        case LEDGER_CLAIM_COMMITTED:
            return "committed";
        case LEDGER_CLAIM_ABORTED:
            return "aborted";
        case LEDGER_CLAIM_EXPIRED:
            return "expired";
    }
    return "active";
}

ledger_claim_state lg_claim_state_parse(const char *s)
{
    if (strcmp(s, "committed") == 0)
        return LEDGER_CLAIM_COMMITTED;
    if (strcmp(s, "aborted") == 0)
        return LEDGER_CLAIM_ABORTED;
    if (strcmp(s, "expired") == 0)
        return LEDGER_CLAIM_EXPIRED;
    return LEDGER_CLAIM_ACTIVE;
}

int ledger_budget_check(const ledger_budget *b, dp_err *err)
{
    switch (b->kind) {
        case LEDGER_BUDGET_EPS_DELTA:
            if (!(isfinite(b->epsilon) && b->epsilon >= 0))
                return dp_err_set(err, DP_EINVAL, "budget.epsilon",
                                  "budget.epsilon must be finite and >= 0 (got %g)", b->epsilon);
            if (!(isfinite(b->delta) && b->delta > 0 && b->delta < 1))
                return dp_err_set(err, DP_EINVAL, "budget.delta",
                                  "budget.delta must be in (0, 1) (got %g)", b->delta);
            if (b->accountant != LEDGER_ACCT_RDP && b->accountant != LEDGER_ACCT_ZCDP &&
                b->accountant != LEDGER_ACCT_PLD)
                return dp_err_set(err, DP_EINVAL, "budget.accountant",
                                  "budget.accountant must be \"rdp\", \"zcdp\" or \"pld\"");
            break;
        case LEDGER_BUDGET_RHO:
            if (!(isfinite(b->rho) && b->rho >= 0))
                return dp_err_set(err, DP_EINVAL, "budget.rho",
                                  "budget.rho must be finite and >= 0 (got %g)", b->rho);
            if (!isnan(b->delta) && !(b->delta > 0 && b->delta < 1))
                return dp_err_set(err, DP_EINVAL, "budget.delta",
                                  "budget.delta must be in (0, 1) (got %g)", b->delta);
            if (b->accountant != LEDGER_ACCT_ZCDP)
                return dp_err_set(err, DP_EINVAL, "budget.accountant",
                                  "a rho budget is accounted by \"zcdp\"");
            break;
        case LEDGER_BUDGET_NONE:
            if (b->accountant != LEDGER_ACCT_NONE)
                return dp_err_set(err, DP_EINVAL, "budget.accountant",
                                  "a silo that opted out of DP has no accountant");
            break;
        default:
            return dp_err_set(err, DP_EINVAL, "budget", "unknown budget kind");
    }
    if (b->kind != LEDGER_BUDGET_NONE &&
        (b->conversion < ACCT_CONV_MIRONOV2017 || b->conversion > ACCT_CONV_OPTIMAL))
        return dp_err_set(err, DP_EINVAL, "budget.conversion", "unknown conversion");
    return DP_OK;
}

void ledger_stats(const ledger *l, uint64_t *groups, uint64_t *ops)
{
    db_writer_stats(l->w, groups, ops);
}

db_writer *ledger_writer(ledger *l)
{
    return l->w;
}

const double *ledger_orders(const ledger *l, size_t *n_orders)
{
    *n_orders = l->n_orders;
    return l->orders;
}

/* ---- open / free ---- */

/* Fixes the order grid at first start; later starts use the stored grid. */
static int orders_load(ledger *l, dp_err *err)
{
    const double *def = NULL;
    size_t n_def = acct_rdp_default_orders(&def);
    if (n_def == 0 || n_def > LEDGER_MAX_ORDERS)
        return dp_err_set(err, DP_EINTERNAL, NULL, "the default RDP grid does not fit the ledger");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(l->db,
                                "INSERT INTO ledger_orders (id, orders) VALUES (1, :o) "
                                "ON CONFLICT (id) DO NOTHING",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = lg_b_blob(st, ":o", def, n_def * sizeof(double));
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE)
        return lg_sql_fail(l, rc, "store order grid", err);
    rc = sqlite3_prepare_v2(l->db, "SELECT orders FROM ledger_orders WHERE id = 1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        return lg_sql_fail(l, rc, "load order grid", err);
    }
    int len = sqlite3_column_bytes(st, 0);
    const void *p = sqlite3_column_blob(st, 0);
    if (p == NULL || len <= 0 || len % (int)sizeof(double) != 0 ||
        (size_t)len / sizeof(double) > LEDGER_MAX_ORDERS) {
        sqlite3_finalize(st);
        return dp_err_set(err, DP_EINTERNAL, NULL, "the stored RDP grid is malformed");
    }
    l->n_orders = (size_t)len / sizeof(double);
    memcpy(l->orders, p, (size_t)len);
    sqlite3_finalize(st);
    dp_err cerr;
    dp_err_clear(&cerr);
    if (acct_rdp_check_orders(l->orders, l->n_orders, &cerr) != DP_OK)
        return dp_err_set(err, DP_EINTERNAL, NULL, "the stored RDP grid is invalid: %s", cerr.msg);
    return DP_OK;
}

ledger *ledger_open(const char *db_path, dp_err *err)
{
    ledger *l = dp_calloc(1, sizeof *l);
    if (l == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    bool mu_ok = false, cache_ok = false, pcv_ok = false;
    if (pthread_mutex_init(&l->cache_mu, NULL) != 0 || !(cache_ok = true) ||
        pthread_mutex_init(&l->mu, NULL) != 0 || !(mu_ok = true) ||
        pthread_cond_init(&l->cv_pld, NULL) != 0 || !(pcv_ok = true)) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        goto fail;
    }
    l->trees = dp_calloc(LEDGER_TREE_CACHE, sizeof *l->trees);
    l->totals = dp_calloc(LEDGER_TREE_CACHE, sizeof *l->totals);
    l->totals_rdp = dp_calloc((size_t)LEDGER_TREE_CACHE * LEDGER_MAX_ORDERS, sizeof(double));
    l->wb_memo = dp_calloc(LEDGER_TREE_CACHE, sizeof *l->wb_memo);
    atomic_init(&l->wb_hits, 0);
    if (l->trees == NULL || l->totals == NULL || l->totals_rdp == NULL || l->wb_memo == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    if (db_path == NULL || strlen(db_path) >= sizeof l->path) {
        dp_err_set(err, DP_EINVAL, "db", "database path too long");
        goto fail;
    }
    snprintf(l->path, sizeof l->path, "%s", db_path);
    /* The writer (db/writer.h) is the committer: its thread runs every op of the ledger, on its
     * connection, on which the ledger prepares its statements before the first op. */
    if ((l->w = db_writer_open(db_path, err)) == NULL)
        goto fail;
    l->db = db_writer_db(l->w);
    if (orders_load(l, err) != DP_OK)
        goto fail;
    if (lg_statements_prepare(l, err) != DP_OK)
        goto fail;
    if ((l->curves = lg_curve_cache_alloc(LEDGER_CURVE_CACHE, l->n_orders)) == NULL ||
        (l->convs = lg_conv_tables_alloc(l->orders, l->n_orders)) == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    if (pthread_create(&l->pld_thread, NULL, lg_pld_main, l) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the ledger PLD thread");
        goto fail;
    }
    l->pld_started = true;
    db_writer_set_idle(l->w, LEDGER_SWEEP_MS, lg_idle_sweep, l);
    return l;
fail:
    if (l->pld_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->cv_pld);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->pld_thread, NULL);
    }
    if (l->w != NULL)
        db_writer_stop(l->w);
    lg_statements_finalize(l);
    db_writer_free(l->w);
    if (pcv_ok)
        pthread_cond_destroy(&l->cv_pld);
    if (mu_ok)
        pthread_mutex_destroy(&l->mu);
    if (cache_ok)
        pthread_mutex_destroy(&l->cache_mu);
    lg_curve_cache_free(l->curves);
    lg_conv_tables_free(l->convs);
    dp_free(l->trees);
    dp_free(l->totals);
    dp_free(l->totals_rdp);
    dp_free(l->wb_memo);
    dp_free(l);
    return NULL;
}

void ledger_free(ledger *l)
{
    if (l == NULL)
        return;
    /* 1. No new op (they fail with DP_EBUSY); ops owed an answer may still be submitted again. */
    db_writer_close(l->w);
    /* 2. The PLD thread gives up on what it holds (the RDP bound decides: conservative), hands it
     * back and ends; from now on an op meeting a stale PLD figure is queued again at once. */
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv_pld);
    pthread_mutex_unlock(&l->mu);
    if (l->pld_started)
        pthread_join(l->pld_thread, NULL);
    /* 3. The writer finishes every queued op, then its threads end. */
    db_writer_stop(l->w);
    lg_statements_finalize(l);
    db_writer_free(l->w);
    pthread_cond_destroy(&l->cv_pld);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->cache_mu);
    for (size_t i = 0; i < LEDGER_TREE_CACHE; i++)
        lg_log_tree_clear(&l->trees[i]);
    lg_curve_cache_free(l->curves);
    lg_conv_tables_free(l->convs);
    dp_free(l->trees);
    dp_free(l->totals);
    dp_free(l->totals_rdp);
    dp_free(l->wb_memo);
    dp_free(l);
}
