/*
 * ledger/sql.c: the statements of the write connection and the SQLite helpers of every ledger file
 * (binders by name, column copies, the error mapping).
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"
#include "common/dp_math.h"

const char *const lg_sql[ST_N] = {
    [ST_SILO_GET] =
        "SELECT s.id, s.name, s.created_at, s.archived_at, s.budget_kind, s.accountant, "
        "s.conversion, s.epsilon, s.delta, s.rho, s.n_charges, t.spent_rdp, s.spent_rho, t.seq "
        "FROM silos AS s JOIN silo_totals AS t ON t.silo_id = s.id WHERE s.id = :id",
    [ST_SILO_INSERT] =
        "INSERT INTO silos (name, created_at, budget_kind, accountant, conversion, epsilon, "
        "delta, rho) VALUES (:name, :now, :kind, :acct, :conv, :eps, :delta, :rho)",
    [ST_SILO_TOTALS] = "UPDATE silos SET n_charges = :n, spent_rho = :rho WHERE id = :id",
    [ST_TOTALS_INSERT] = "INSERT INTO silo_totals (silo_id, seq, spent_rdp) VALUES (:id, 0, :zero)",
    [ST_TOTALS_SAVE] = "UPDATE silo_totals SET seq = :n, spent_rdp = :rdp WHERE silo_id = :id",
    [ST_TOTALS_REPLAY] = LG_TOTALS_REPLAY_SQL,
    [ST_SILO_PATCH] = "UPDATE silos SET name = :name, epsilon = :eps, delta = :delta, rho = :rho "
                      "WHERE id = :id",
    [ST_SILO_ARCHIVE] =
        "UPDATE silos SET archived_at = :now WHERE id = :id AND archived_at IS NULL",
    [ST_TOKEN_INSERT] =
        "INSERT INTO tokens (hash, role, silo_id, created_at) VALUES (:hash, :role, "
        ":silo, :now) ON CONFLICT (hash) DO NOTHING",
    [ST_TOKEN_ID] = "SELECT id, role, revoked_at FROM tokens WHERE hash = :hash",
    /* :silo NULL: every admin token but :keep; else every token of that silo but :keep */
    [ST_TOKEN_REVOKE] =
        "UPDATE tokens SET revoked_at = :now WHERE revoked_at IS NULL AND id <> :keep AND "
        "CASE WHEN :silo IS NULL THEN role = 'admin' ELSE silo_id = :silo END",
    [ST_CLAIMS_HELD] =
        "SELECT id, cost_rdp, cost_rho FROM claims WHERE silo_id = :silo AND state = "
        "'active' AND expires_at > :now", /* no ORDER BY: lg_held_load_st */
    [ST_CHARGE_BY_KEY] = "SELECT id, created_at, request_hash, seq, cost_eps, cost_rho, eps_after, "
                         "rho_after, remaining_after FROM charges WHERE silo_id = :silo AND "
                         "idempotency_key = :key",
    [ST_CHARGE_BY_CLAIM] =
        "SELECT id, created_at, request_hash, seq, cost_eps, cost_rho, eps_after, "
        "rho_after, remaining_after FROM charges WHERE claim_id = :claim",
    [ST_CHARGE_INSERT] =
        "INSERT INTO charges (silo_id, created_at, actor_token_id, job_id, claim_id, "
        "idempotency_key, "
        "request_hash, reason, event, neighboring, cost_rdp, cost_rho, cost_eps, seq, eps_after, "
        "rho_after, remaining_after, delta_after, curve_key) VALUES (:silo, :now, :actor, :job, "
        ":claim, :key, :hash, :reason, :event, :nb, :rdp, :rho, :eps, :seq, :eps_after, "
        ":rho_after, :remaining, :delta_after, :curve)",
    [ST_CLAIM_BY_KEY] = "SELECT id, request_hash FROM claims WHERE silo_id = :silo AND "
                        "idempotency_key = :key",
    [ST_CLAIM_GET] =
        "SELECT id, silo_id, created_at, expires_at, closed_at, state, job_id, cost_rdp, "
        "cost_rho, event, neighboring, reason, actor_token_id FROM claims WHERE id = :id",
    [ST_CLAIM_INSERT] =
        "INSERT INTO claims (silo_id, created_at, expires_at, actor_token_id, job_id, "
        "idempotency_key, "
        "request_hash, reason, event, neighboring, cost_rdp, cost_rho) VALUES (:silo, :now, :exp, "
        ":actor, :job, :key, :hash, :reason, :event, :nb, :rdp, :rho)",
    [ST_CLAIM_CLOSE] =
        "UPDATE claims SET state = :state, closed_at = :now WHERE id = :id AND state = "
        "'active'",
    [ST_CLAIMS_ABORT_SILO] =
        "UPDATE claims SET state = 'aborted', closed_at = :now WHERE silo_id = :silo "
        "AND state = 'active'",
    [ST_CLAIMS_EXPIRE] =
        "UPDATE claims SET state = 'expired', closed_at = :now WHERE state = 'active' "
        "AND expires_at <= :now",
    [ST_CLAIMS_OVERDUE] =
        "SELECT EXISTS (SELECT 1 FROM claims WHERE state = 'active' AND expires_at <= "
        ":now)",
    [ST_CLAIM_MAX] = "SELECT coalesce(max(id), 0) FROM claims WHERE silo_id = :silo",
    [ST_NAME_TAKEN] = "SELECT id FROM silos WHERE name = :name AND archived_at IS NULL AND id <> "
                      ":id ORDER BY id LIMIT 1",
    [ST_PREV_AFTER] = "SELECT eps_after, delta_after FROM charges WHERE silo_id = :silo AND seq = "
                      ":seq",
    [ST_BATCH_GET] = "SELECT request_hash FROM charge_batches WHERE actor_token_id = :actor AND "
                     "idempotency_key = :key",
    [ST_ROW_EVENT] = "SELECT event, neighboring FROM charges WHERE silo_id = :silo AND seq = :seq",
    [ST_CLAIMS_EVENTS] = "SELECT event, neighboring FROM claims WHERE silo_id = :silo AND state = "
                         "'active' AND expires_at > :now AND id <> :except ORDER BY id",
    [ST_CURVE_INSERT] =
        "INSERT OR IGNORE INTO charge_curves (event_key, cost_rdp) VALUES (:k, :rdp)",
    [ST_BATCH_INSERT] =
        "INSERT INTO charge_batches (actor_token_id, idempotency_key, request_hash, "
        "created_at) VALUES (:actor, :key, :hash, :now)",
};

/* SQLite failure on the write connection: log the detail, give the client a generic error. */
int lg_sql_fail(ledger *l, int rc, const char *what, dp_err *err)
{
    dp_log(DP_LOG_ERROR, NULL, "ledger: %s: %s (%d)", what, sqlite3_errmsg(l->db), rc);
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? DP_EBUSY
               : (rc & 0xff) == SQLITE_NOMEM                              ? DP_ENOMEM
                                                                          : DP_EINTERNAL;
    return dp_err_set(err, code, NULL,
                      code == DP_EBUSY ? "the ledger is busy; retry later"
                                       : "internal ledger error");
}

int lg_read_fail(sqlite3 *db, int rc, const char *what, dp_err *err)
{
    dp_log(DP_LOG_ERROR, NULL, "ledger: %s: %s (%d)", what, sqlite3_errmsg(db), rc);
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? DP_EBUSY : DP_EINTERNAL;
    return dp_err_set(err, code, NULL,
                      code == DP_EBUSY ? "the ledger is busy; retry later"
                                       : "internal ledger error");
}

void lg_st_done(sqlite3_stmt *st)
{
    if (st != NULL) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
}

/* Finishes a write statement whose parameters were bound (rc is the binding result): steps it if
 * binding went well, resets it either way, and returns DP_OK when it ran to SQLITE_DONE, else the
 * logged lg_sql_fail code. One place for the bind-step-reset-check sequence every write repeats. */
int lg_st_write(ledger *l, sqlite3_stmt *st, int rc, const char *what, dp_err *err)
{
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    lg_st_done(st);
    return rc == SQLITE_DONE ? DP_OK : lg_sql_fail(l, rc, what, err);
}

/* Binding helpers: the parameter name must exist (a typo is a programmer error caught by the
 * tests). */
int lg_bind_idx(sqlite3_stmt *st, const char *name)
{
    int i = sqlite3_bind_parameter_index(st, name);
    return i > 0 ? i : -1;
}
int lg_b_i64(sqlite3_stmt *st, const char *name, int64_t v)
{
    int i = lg_bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : sqlite3_bind_int64(st, i, v);
}
int lg_b_i64_or_null(sqlite3_stmt *st, const char *name, int64_t v)
{
    int i = lg_bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : v == 0 ? sqlite3_bind_null(st, i) : sqlite3_bind_int64(st, i, v);
}
/* DP_NAN is bound as NULL (SQLite would turn it into NULL anyway); infinities are stored as REAL.
 */
int lg_b_dbl(sqlite3_stmt *st, const char *name, double v)
{
    int i = lg_bind_idx(st, name);
    return i < 0      ? SQLITE_RANGE
           : isnan(v) ? sqlite3_bind_null(st, i)
                      : sqlite3_bind_double(st, i, v);
}
int lg_b_text(sqlite3_stmt *st, const char *name, const char *v)
{
    int i = lg_bind_idx(st, name);
    return i < 0    ? SQLITE_RANGE
           : v == 0 ? sqlite3_bind_null(st, i)
                    : sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}
int lg_b_blob(sqlite3_stmt *st, const char *name, const void *p, size_t n)
{
    int i = lg_bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : sqlite3_bind_blob(st, i, p, (int)n, SQLITE_STATIC);
}
double lg_col_dbl(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? DP_NAN : sqlite3_column_double(st, c);
}
/* Copies an RDP vector column (native doubles) into out; false if its length does not match. */
bool lg_col_vec(sqlite3_stmt *st, int c, double *out, size_t n)
{
    const void *p = sqlite3_column_blob(st, c);
    int len = sqlite3_column_bytes(st, c);
    if (p == NULL || len < 0 || (size_t)len != n * sizeof(double))
        return false;
    memcpy(out, p, n * sizeof(double));
    return true;
}

/* Runs a statement that returns no rows. */
int lg_exec_st(ledger *l, int which, dp_err *err)
{
    int rc = sqlite3_step(l->st[which]);
    lg_st_done(l->st[which]);
    return rc == SQLITE_DONE ? DP_OK : lg_sql_fail(l, rc, lg_sql[which], err);
}

/* Prepares every statement of l->st on the write connection (at open, before the first op). */
int lg_statements_prepare(ledger *l, dp_err *err)
{
    for (int i = 0; i < ST_N; i++) {
        int rc =
            sqlite3_prepare_v3(l->db, lg_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &l->st[i], NULL);
        if (rc != SQLITE_OK)
            return lg_sql_fail(l, rc, lg_sql[i], err);
    }
    return DP_OK;
}

/* Finalizes l->st (after the writer stopped; NULL entries are skipped). */
void lg_statements_finalize(ledger *l)
{
    for (int i = 0; i < ST_N; i++) {
        sqlite3_finalize(l->st[i]);
        l->st[i] = NULL;
    }
}
