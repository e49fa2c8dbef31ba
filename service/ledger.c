/*
 * ledger.c: per-silo privacy budgets on SQLite, with a group-committing writer thread.
 * The contract, the admission rule and the threading design are in ledger.h; the schema and its
 * invariants in migrations/0003_ledger.sql. This comment covers the implementation.
 *
 * COMMITTER. ledger_open starts one thread (committer_main) that owns l->db, the only connection
 * that writes ledger tables, and every prepared statement in l->st. Public write calls build a
 * ledger_op on their own stack (inputs borrowed from the caller, outputs written into caller
 * memory), append it to the FIFO under l->mu, signal l->cv_work and wait on op->cv until op->done.
 * The committer detaches the whole queue (at most LEDGER_MAX_GROUP ops), and without holding the
 * lock runs:
 *     BEGIN IMMEDIATE
 *     for each op: SAVEPOINT; apply; on success RELEASE, else ROLLBACK TO and RELEASE
 *     COMMIT
 * and then, under the lock, marks each op done and signals it. Nothing is
 * acknowledged before COMMIT returned SQLITE_OK with synchronous=FULL, so an acknowledged charge
 * survives a crash (the WAL frame was fsynced); an op whose group failed to commit reports an error
 * and was not recorded. The committer touches an op only before it sets op->done (the waiter may
 * return and pop its stack frame after).
 *
 * ASYNCHRONOUS CHARGES. ledger_charge_start builds the op on the heap (struct ledger_pending) with
 * a wake-up callback and returns without waiting. The committer copies (wake, arg) of such ops
 * while it marks the group done under l->mu, and calls them after releasing it (the HTTP dispatcher
 * resumes a suspended connection there: a thread-safe MHD call that takes MHD's own lock, never
 * l->mu). ledger_pending_finish then reads the outcome under l->mu. So no thread waits per charge,
 * and the number of charges that can share a group is not bounded by a thread pool.
 *
 * GATHERING. Waiters of a group are woken together and re-submit almost together; a committer that
 * started the next group on the first arrival would split them into ever smaller groups. So when
 * fewer ops are queued than half the previous group, the committer waits up to LEDGER_GATHER_US for
 * the queue to reach the previous group's size (the group-commit delay of PostgreSQL's
 * commit_delay). A lone client never waits: its previous group had one op.
 *
 * CHECKPOINTS. With the default auto-checkpoint, every ~1000 WAL pages one COMMIT of the committer
 * would also copy the WAL into the database and fsync it, stalling the whole group (hundreds of ms
 * here). Instead a WAL hook on the committer's connection (which replaces auto-checkpointing on it)
 * wakes a checkpointer thread with its own connection once the WAL holds LEDGER_CKPT_FRAMES frames;
 * it runs PASSIVE checkpoints, which never block the writer (SQLite WAL docs, "Checkpointing").
 * Durability is unchanged: a transaction is durable once its WAL frames are synced, checkpointed or
 * not.
 *
 * CLAIM EXPIRY. Admission ignores claims whose expires_at has passed, so expiry needs no timer for
 * correctness. The committer also wakes every LEDGER_SWEEP_MS when idle and marks overdue claims
 * 'expired' so that their state is visible.
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
 * connection (pld_prepare: the log grouped into self_composed(count, event) per distinct event,
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
 * LOCKS. l->mu guards the queue, the PLD queue and pld_busy, l->stop, l->ckpt_wanted and every
 * op's `done`; it is never held across SQLite or a composition.
 */
#include "service/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accounting/logmath.h"
#include "accounting/pld.h"
#include "accounting/zcdp.h"
#include "common/dp_alloc.h"
#include "common/dp_log.h"
#include "common/dp_sha256.h"
#include "service/event_json.h"
#include "service/tuning_json.h"
#include "common/dp_math.h"

#define LEDGER_SWEEP_MS    1000 /* idle wake-up period of the committer to mark expired claims */
#define LEDGER_BUSY_MS     5000 /* sqlite3_busy_timeout of the write connection (STYLE.md 2.5) */
#define LEDGER_CKPT_FRAMES 1000 /* WAL frames that trigger a background PASSIVE checkpoint */
#define LEDGER_GATHER_US                                                                           \
    500 /* longest wait for a group to fill up to the previous group's size                        \
         */
#define LEDGER_PLD_RETRIES                                                                         \
    4                       /* stale PLD snapshots tolerated before the RDP bound decides alone    \
                             */
#define LEDGER_PLD_CACHE 64 /* remembered eps_PLD of (silo, n_charges) for reads */

/* ---- small helpers
 * ------------------------------------------------------------------------------------ */

double ledger_sum_up(double a, double b)
{
    return dp_sum_up(a, b); /* one rounding-up rule with the accountant's sums (logmath.h) */
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static const char *kind_name(ledger_budget_kind k)
{
    return k == LEDGER_BUDGET_EPS_DELTA ? "eps_delta" : k == LEDGER_BUDGET_RHO ? "rho" : "none";
}

static int kind_parse(const char *s, ledger_budget_kind *k)
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

static ledger_claim_state claim_state_parse(const char *s)
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

/* ---- statements of the write connection
 * ---------------------------------------------------------------- */

enum {
    ST_BEGIN = 0,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_SILO_GET,
    ST_SILO_INSERT,
    ST_SILO_TOTALS,
    ST_SILO_PATCH,
    ST_SILO_ARCHIVE,
    ST_TOKEN_INSERT,
    ST_TOKEN_ID,
    ST_TOKEN_REVOKE,
    ST_CLAIMS_HELD,
    ST_CHARGE_BY_KEY,
    ST_CHARGE_BY_CLAIM,
    ST_CHARGE_INSERT,
    ST_CLAIM_BY_KEY,
    ST_CLAIM_GET,
    ST_CLAIM_INSERT,
    ST_CLAIM_CLOSE,
    ST_CLAIMS_ABORT_SILO,
    ST_CLAIMS_EXPIRE,
    ST_CLAIMS_OVERDUE,
    ST_CLAIM_MAX,
    ST_NAME_TAKEN,
    ST_PREV_AFTER,
    ST_BATCH_GET,
    ST_BATCH_INSERT,
    ST_ROW_EVENT,
    ST_CLAIMS_EVENTS,
    ST_N
};

static const char *const SQL[ST_N] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT ledger_op",
    [ST_RELEASE] = "RELEASE ledger_op",
    [ST_ROLLBACK_TO] = "ROLLBACK TO ledger_op",
    [ST_SILO_GET] =
        "SELECT id, name, created_at, archived_at, budget_kind, accountant, conversion, "
        "epsilon, delta, rho, n_charges, spent_rdp, spent_rho FROM silos WHERE id = :id",
    [ST_SILO_INSERT] =
        "INSERT INTO silos (name, created_at, budget_kind, accountant, conversion, epsilon, "
        "delta, rho, spent_rdp) VALUES (:name, :now, :kind, :acct, :conv, :eps, :delta, "
        ":rho, :zero)",
    [ST_SILO_TOTALS] =
        "UPDATE silos SET n_charges = :n, spent_rdp = :rdp, spent_rho = :rho WHERE id = :id",
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
        "'active' AND expires_at > :now ORDER BY id",
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
        "rho_after, remaining_after, delta_after) VALUES (:silo, :now, :actor, :job, :claim, :key, "
        ":hash, :reason, :event, :nb, :rdp, :rho, :eps, :seq, :eps_after, :rho_after, :remaining, "
        ":delta_after)",
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
    [ST_BATCH_INSERT] =
        "INSERT INTO charge_batches (actor_token_id, idempotency_key, request_hash, "
        "created_at) VALUES (:actor, :key, :hash, :now)",
};

/* ---- the ledger
 * ----------------------------------------------------------------------------------------- */

typedef enum op_kind {
    OP_CHARGE = 0,
    OP_CLAIM_CREATE,
    OP_CLAIM_COMMIT,
    OP_CLAIM_ABORT,
    OP_SILO_CREATE,
    OP_SILO_PATCH,
    OP_SILO_ARCHIVE,
    OP_TOKEN_ADMIN,
    OP_TOKEN_ROTATE, /* a silo's: revoke its tokens, issue one */
    OP_TOKEN_REVOKE, /* a silo's: revoke its tokens */
    OP_SWEEP
} op_kind;

/* One silo's part of a charge or claim: the request and its cost, computed before enqueueing. */
typedef struct op_item {
    const ledger_charge_req *req;       /* borrowed from the caller, or &req_copy */
    ledger_charge_req req_copy;         /* the request with own_json, when event_json was NULL */
    char *own_json;                     /* owned (jansson allocator): the serialised event */
    double cost_rdp[LEDGER_MAX_ORDERS]; /* RDP of the event at l->orders */
    double cost_rho;                    /* zCDP rho, INFINITY if the event has none */
    uint8_t req_hash[DP_SHA256_DIGEST_BYTES]; /* identifies the request for idempotent retries */
    ledger_charge_result *res;                /* caller-owned output */
    /* PLD silos only (see PLD SILOS above) */
    bool need_pld;          /* set by the committer: compute the figures below and submit again */
    bool pld_ready;         /* the figures below hold for the snapshot */
    bool pld_give_up;       /* too many stale snapshots: the RDP bound decides alone */
    int64_t snap_n_charges; /* snapshot: the silo's n_charges ... */
    int64_t snap_max_claim; /* ... its highest claim id ... */
    double snap_delta;      /* ... and the delta the PLD figures were computed at */
    double pld_spent;       /* eps_PLD of the charges */
    double pld_after;       /* eps_PLD of the charges and this event */
    double pld_wb;          /* eps_PLD of the charges, the active claims and this event */
    double want_delta;      /* PATCH: the delta of the figures (the new one); 0 = the silo's */
    int64_t claim_id;       /* CLAIM_COMMIT: the claim whose event the figures add */
} op_item;

typedef struct ledger_op {
    op_kind kind;
    struct ledger_op *next; /* queue link, guarded by l->mu */
    bool done;         /* guarded by l->mu; the committer never touches the op after setting it */
    pthread_cond_t cv; /* signalled when done */
    /* Asynchronous ops (ledger_charge_start): called once, from the committer thread without l->mu,
     * after done was set; the committer copies both under l->mu and never reads op afterwards. */
    void (*wake)(void *arg);
    void *wake_arg;
    int rc; /* result code; err holds the message */
    dp_err err;
    /* inputs (borrowed) and outputs (caller memory), by kind */
    op_item *items;
    size_t n_items;
    bool dry_run;
    bool batch_fields;     /* name failing items "charges[i]" */
    bool need_pld;         /* some item needs PLD figures (the op failed with DP_EBUSY) */
    int pld_attempts;      /* PLD figure computations so far (PLD thread only) */
    int64_t timeout_ms;    /* CLAIM_CREATE */
    int64_t id;            /* claim or silo id */
    int64_t scope_silo_id; /* CLAIM_COMMIT/ABORT: 0 = any */
    int64_t actor;         /* CLAIM_COMMIT */
    const char *batch_key; /* CHARGE: the batch's idempotency key (ledger_charge_req), or NULL */
    int64_t batch_actor;   /* CHARGE: the token the batch key is scoped by (0 = none) */
    uint8_t batch_hash[DP_SHA256_DIGEST_BYTES]; /* CHARGE with batch_key: the whole batch */
    const char *name;                           /* SILO_CREATE */
    const ledger_budget *budget;
    const ledger_patch *patch;
    uint8_t token_hash[DP_SHA256_DIGEST_BYTES]; /* SILO_CREATE, TOKEN_ADMIN, TOKEN_ROTATE */
    int64_t *token_id_out;
    int64_t *revoked_out; /* TOKEN_ADMIN (non-NULL: revoke the other admin tokens), TOKEN_ROTATE,
                             TOKEN_REVOKE: how many tokens were revoked */
    ledger_silo_view *view;
    ledger_claim_view *claim;
    ledger_charge_result *figures;
    ledger_write_fn write; /* CHARGE: the caller's write, in the charge's savepoint; NULL = none */
    void *write_arg;
} ledger_op;

struct ledger {
    char path[1024];                  /* database file, for the PLD snapshots' read connections */
    sqlite3 *db;                      /* write connection: committer thread only (after open) */
    sqlite3_stmt *st[ST_N];           /* prepared on db; committer thread only */
    double orders[LEDGER_MAX_ORDERS]; /* RDP grid of every vector; immutable after open */
    size_t n_orders;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* signalled when an op is queued or stop is set */
    ledger_op *head, *tail; /* FIFO, guarded by mu */
    size_t n_queued;        /* ops in the FIFO, guarded by mu */
    size_t last_group;      /* size of the previous group; committer thread only */
    bool stop;              /* guarded by mu */
    pthread_t thread;
    bool thread_started;
    sqlite3 *ck_db;         /* checkpointer's connection: checkpointer thread only */
    pthread_cond_t cv_ckpt; /* signalled when a checkpoint is wanted or stop is set */
    bool ckpt_wanted;       /* guarded by mu */
    pthread_t ck_thread;
    bool ck_started;
    pthread_cond_t cv_pld; /* signalled when an op is handed to the PLD thread or stop is set */
    ledger_op *pld_head, *pld_tail; /* ops waiting for PLD figures (FIFO), guarded by mu */
    size_t pld_busy; /* ops held by the PLD thread, queued or being computed; guarded by mu */
    pthread_t pld_thread;
    bool pld_started;
    pthread_mutex_t
        cache_mu; /* guards pld_cache and rdp_cache; never held with mu or across SQLite */
    struct {
        int64_t silo, n_charges; /* key: a silo's log up to n_charges charges */
        double eps;              /* its eps_PLD at the silo's delta then */
        double delta;
    } pld_cache[LEDGER_PLD_CACHE];
    struct {
        int64_t silo, n_charges;   /* key: a silo's log up to n_charges charges ... */
        double delta;              /* ... at this delta */
        double eps, order;         /* its refined RDP epsilon (rdp_refine_view) and order */
    } rdp_cache[LEDGER_PLD_CACHE]; /* guarded by cache_mu */
    struct log_tree *trees;        /* LEDGER_TREE_CACHE slots: committer thread only */
    uint64_t tree_gen;      /* incremented per op the committer applies; committer thread only */
    atomic_ullong n_groups; /* group commits so far (statistics) */
    atomic_ullong n_ops;    /* ops committed or refused so far */
};

void ledger_stats(const ledger *l, uint64_t *groups, uint64_t *ops)
{
    *groups = atomic_load(&((ledger *)l)->n_groups);
    *ops = atomic_load(&((ledger *)l)->n_ops);
}

const double *ledger_orders(const ledger *l, size_t *n_orders)
{
    *n_orders = l->n_orders;
    return l->orders;
}

/* SQLite failure on the write connection: log the detail, give the client a generic error. */
static int sql_fail(ledger *l, int rc, const char *what, dp_err *err)
{
    dp_log(DP_LOG_ERROR, NULL, "ledger: %s: %s (%d)", what, sqlite3_errmsg(l->db), rc);
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? DP_EBUSY
               : (rc & 0xff) == SQLITE_NOMEM                              ? DP_ENOMEM
                                                                          : DP_EINTERNAL;
    return dp_err_set(err, code, NULL,
                      code == DP_EBUSY ? "the ledger is busy; retry later"
                                       : "internal ledger error");
}

static int read_fail(sqlite3 *db, int rc, const char *what, dp_err *err)
{
    dp_log(DP_LOG_ERROR, NULL, "ledger: %s: %s (%d)", what, sqlite3_errmsg(db), rc);
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? DP_EBUSY : DP_EINTERNAL;
    return dp_err_set(err, code, NULL,
                      code == DP_EBUSY ? "the ledger is busy; retry later"
                                       : "internal ledger error");
}

static void st_done(sqlite3_stmt *st)
{
    if (st != NULL) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
}

/* Finishes a write statement whose parameters were bound (rc is the binding result): steps it if
 * binding went well, resets it either way, and returns DP_OK when it ran to SQLITE_DONE, else the
 * logged sql_fail code. One place for the bind-step-reset-check sequence every write repeats. */
static int st_write(ledger *l, sqlite3_stmt *st, int rc, const char *what, dp_err *err)
{
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    st_done(st);
    return rc == SQLITE_DONE ? DP_OK : sql_fail(l, rc, what, err);
}

/* Binding helpers: the parameter name must exist (a typo is a programmer error caught by the
 * tests). */
static int bind_idx(sqlite3_stmt *st, const char *name)
{
    int i = sqlite3_bind_parameter_index(st, name);
    return i > 0 ? i : -1;
}
static int b_i64(sqlite3_stmt *st, const char *name, int64_t v)
{
    int i = bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : sqlite3_bind_int64(st, i, v);
}
static int b_i64_or_null(sqlite3_stmt *st, const char *name, int64_t v)
{
    int i = bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : v == 0 ? sqlite3_bind_null(st, i) : sqlite3_bind_int64(st, i, v);
}
/* DP_NAN is bound as NULL (SQLite would turn it into NULL anyway); infinities are stored as REAL.
 */
static int b_dbl(sqlite3_stmt *st, const char *name, double v)
{
    int i = bind_idx(st, name);
    return i < 0      ? SQLITE_RANGE
           : isnan(v) ? sqlite3_bind_null(st, i)
                      : sqlite3_bind_double(st, i, v);
}
static int b_text(sqlite3_stmt *st, const char *name, const char *v)
{
    int i = bind_idx(st, name);
    return i < 0    ? SQLITE_RANGE
           : v == 0 ? sqlite3_bind_null(st, i)
                    : sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}
static int b_blob(sqlite3_stmt *st, const char *name, const void *p, size_t n)
{
    int i = bind_idx(st, name);
    return i < 0 ? SQLITE_RANGE : sqlite3_bind_blob(st, i, p, (int)n, SQLITE_STATIC);
}
static double col_dbl(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? DP_NAN : sqlite3_column_double(st, c);
}
/* Copies an RDP vector column (native doubles) into out; false if its length does not match. */
static bool col_vec(sqlite3_stmt *st, int c, double *out, size_t n)
{
    const void *p = sqlite3_column_blob(st, c);
    int len = sqlite3_column_bytes(st, c);
    if (p == NULL || len < 0 || (size_t)len != n * sizeof(double))
        return false;
    memcpy(out, p, n * sizeof(double));
    return true;
}

/* Runs a statement that returns no rows. */
static int exec_st(ledger *l, int which, dp_err *err)
{
    int rc = sqlite3_step(l->st[which]);
    st_done(l->st[which]);
    return rc == SQLITE_DONE ? DP_OK : sql_fail(l, rc, SQL[which], err);
}

/* ---- accounting
 * ------------------------------------------------------------------------------------------ */

/* A silo row as the committer sees it. */
typedef struct silo_row {
    int64_t id;
    char name[LEDGER_NAME_MAX + 1];
    int64_t created_at_ms, archived_at_ms;
    ledger_budget b;
    int64_t n_charges;
    double spent_rdp[LEDGER_MAX_ORDERS];
    double spent_rho;
} silo_row;

/* Privacy loss of a total (RDP vector and rho) in the silo's budget unit and as eps at its delta.
 * eps: DP_NAN when the silo has no delta. unit_value: eps (EPS_DELTA), rho (RHO), DP_NAN (NONE). */
static int loss_of(const ledger *l, const ledger_budget *b, const double *rdp, double rho,
                   double *eps, double *order, dp_err *err)
{
    *eps = DP_NAN;
    if (order != NULL)
        *order = DP_NAN;
    double opt = DP_NAN;
    if (b->kind == LEDGER_BUDGET_NONE || isnan(b->delta))
        return DP_OK;
    if (b->accountant == LEDGER_ACCT_ZCDP) {
        /* rho-zCDP is (alpha, rho*alpha)-RDP for every alpha > 1 (Bun & Steinke 2016, Def. 1.1), so
         * the silo's RDP conversion applies to that curve. The product is rounded up. */
        double curve[LEDGER_MAX_ORDERS];
        for (size_t i = 0; i < l->n_orders; i++) {
            double v = rho * l->orders[i];
            curve[i] = isfinite(v) && v > 0 ? nextafter(v, DP_INF) : v;
        }
        if (acct_rdp_to_epsilon(l->orders, curve, l->n_orders, b->delta, b->conversion, eps, &opt,
                                err) != DP_OK)
            return err ? err->code : DP_EINTERNAL;
    } else if (acct_rdp_to_epsilon(l->orders, rdp, l->n_orders, b->delta, b->conversion, eps, &opt,
                                   err) != DP_OK) {
        return err ? err->code : DP_EINTERNAL;
    }
    if (order != NULL)
        *order = opt;
    return DP_OK;
}

static double unit_value(const ledger_budget *b, double eps, double rho)
{
    return b->kind == LEDGER_BUDGET_EPS_DELTA ? eps : b->kind == LEDGER_BUDGET_RHO ? rho : DP_NAN;
}

static double cap_of(const ledger_budget *b)
{
    return b->kind == LEDGER_BUDGET_EPS_DELTA ? b->epsilon
           : b->kind == LEDGER_BUDGET_RHO     ? b->rho
                                              : DP_NAN;
}

/* cap - held, never negative. */
static double remaining_of(const ledger_budget *b, double held)
{
    double cap = cap_of(b);
    if (isnan(cap))
        return DP_NAN;
    if (isnan(held) || held >= cap)
        return 0.0;
    return cap - held;
}

static void vec_add_up(double *acc, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = ledger_sum_up(acc[i], x[i]);
}

/* Computes the cost of a request (RDP at the ledger's orders, and rho) and its request hash. Runs
 * in the caller's thread, before the op is queued, so the write transaction never waits for
 * numerics. */
/* A new JSON value for an event tree in the grammar of service/event_json.h (the inverse of
 * event_json_parse); NULL on allocation failure or an open parameter. */
static json_t *event_to_json(const acct_event *ev)
{
    json_t *o = json_object(), *child = NULL;
    bool ok = o != NULL &&
              json_object_set_new(o, "type", json_string(acct_event_type_name(ev->type))) == 0;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE:
            ok = ok &&
                 json_object_set_new(o, "noise_multiplier", json_real(ev->noise_multiplier)) == 0;
            break;
        case ACCT_EV_ZCDP:
            ok = ok && json_object_set_new(o, "rho", json_real(ev->rho)) == 0;
            break;
        case ACCT_EV_PURE:
            ok = ok && json_object_set_new(o, "epsilon", json_real(ev->epsilon)) == 0;
            break;
        case ACCT_EV_POISSON:
            ok = ok && json_object_set_new(o, "sampling_rate", json_real(ev->sampling_rate)) == 0;
            break;
        case ACCT_EV_SWOR:
            ok = ok &&
                 json_object_set_new(o, "source_size", json_integer((json_int_t)ev->source_size)) ==
                     0 &&
                 json_object_set_new(o, "sample_size", json_integer((json_int_t)ev->sample_size)) ==
                     0;
            break;
        case ACCT_EV_SELF_COMPOSED:
            ok = ok && !ev->count_open &&
                 json_object_set_new(o, "count", json_integer((json_int_t)ev->count)) == 0;
            break;
        case ACCT_EV_COMPOSED: {
            json_t *arr = json_array();
            ok = ok && arr != NULL;
            for (size_t i = 0; ok && i < ev->n_children; i++) {
                json_t *c = event_to_json(ev->children[i]);
                ok = c != NULL && json_array_append_new(arr, c) == 0;
            }
            ok = ok && json_object_set_new(o, "events", arr) == 0;
            if (!ok && json_object_get(o, "events") != arr)
                json_decref(arr);
            break;
        }
        case ACCT_EV_REPEAT_SELECT:
            ok = ok && json_object_set_new(o, "distribution", tuning_json_dist(&ev->dist)) == 0;
            break;
    }
    if (ok && ev->child != NULL) {
        child = event_to_json(ev->child);
        ok = child != NULL && json_object_set_new(o, "event", child) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int item_prepare(const ledger *l, const ledger_charge_req *req, const char *what,
                        op_item *it, dp_err *err)
{
    if (req->event == NULL)
        return dp_err_set(err, DP_EINVAL, "event", "event is required");
    if (req->event_json == NULL) { /* a C caller (a job): the ledger writes the canonical JSON */
        json_t *j = event_to_json(req->event);
        it->own_json = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
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
    if (acct_rdp_eval(req->event, req->neighboring, l->orders, l->n_orders, it->cost_rdp, err) !=
        DP_OK) {
        dp_err_prefix_field(err, "event");
        return err ? err->code : DP_EINVAL;
    }
    for (size_t i = 0; i < l->n_orders; i++)
        if (isnan(it->cost_rdp[i]) || it->cost_rdp[i] < 0)
            return dp_err_set(err, DP_ENUMERIC, "event",
                              "the event's RDP curve is not a valid loss");
    /* zCDP: an event with no finite zCDP bound (e.g. a sampled mechanism) has rho = +inf; only zCDP
     * silos refuse it, others record it. */
    dp_err zerr;
    dp_err_clear(&zerr);
    double rho = DP_INF;
    if (acct_zcdp_eval(req->event, &rho, &zerr) != DP_OK || isnan(rho) || rho < 0)
        rho = DP_INF;
    it->cost_rho = rho;
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

/* ---- committer: reading state
 * ------------------------------------------------------------------------------ */

/* Loads silo id with st (a statement of SQL[ST_SILO_GET] prepared on db). */
static int silo_load_st(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t id, silo_row *s,
                        dp_err *err)
{
    int rc = b_i64(st, ":id", id);
    if (rc != SQLITE_OK) {
        st_done(st);
        return read_fail(db, rc, "bind silo", err);
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        st_done(st);
        return dp_err_set(err, DP_ENOTFOUND, "silo_id", "silo %lld does not exist", (long long)id);
    }
    if (rc != SQLITE_ROW) {
        st_done(st);
        return read_fail(db, rc, "load silo", err);
    }
    memset(s, 0, sizeof *s);
    s->id = sqlite3_column_int64(st, 0);
    snprintf(s->name, sizeof s->name, "%s", (const char *)sqlite3_column_text(st, 1));
    s->created_at_ms = sqlite3_column_int64(st, 2);
    s->archived_at_ms = sqlite3_column_type(st, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 3);
    bool ok = kind_parse((const char *)sqlite3_column_text(st, 4), &s->b.kind) == 0;
    ok = ok && (s->b.kind == LEDGER_BUDGET_NONE
                    ? (s->b.accountant = LEDGER_ACCT_NONE, true)
                    : ledger_accountant_parse((const char *)sqlite3_column_text(st, 5),
                                              &s->b.accountant, NULL) == DP_OK);
    acct_conversion conv = ACCT_CONV_BALLE2020;
    ok =
        ok && acct_conversion_parse((const char *)sqlite3_column_text(st, 6), &conv, NULL) == DP_OK;
    s->b.conversion = conv;
    s->b.epsilon = col_dbl(st, 7);
    s->b.delta = col_dbl(st, 8);
    s->b.rho = col_dbl(st, 9);
    s->n_charges = sqlite3_column_int64(st, 10);
    ok = ok && col_vec(st, 11, s->spent_rdp, n_orders);
    s->spent_rho = sqlite3_column_double(st, 12);
    st_done(st);
    if (!ok) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: silo %lld has a malformed row", (long long)id);
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    }
    return DP_OK;
}

static int silo_load(ledger *l, int64_t id, silo_row *s, dp_err *err)
{
    return silo_load_st(l->db, l->st[ST_SILO_GET], l->n_orders, id, s, err);
}

/* Sum of the silo's active, unexpired claims (ascending id), excluding claim `except` (0 = none).
 */
static int held_load_st(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t silo_id,
                        int64_t now, int64_t except, double *rdp, double *rho, int64_t *n_active,
                        dp_err *err)
{
    memset(rdp, 0, n_orders * sizeof *rdp);
    *rho = 0;
    *n_active = 0;
    int rc = b_i64(st, ":silo", silo_id);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc != SQLITE_OK) {
        st_done(st);
        return read_fail(db, rc, "bind claims", err);
    }
    double v[LEDGER_MAX_ORDERS];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_int64(st, 0) == except)
            continue;
        if (!col_vec(st, 1, v, n_orders)) {
            st_done(st);
            return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
        }
        vec_add_up(rdp, v, n_orders);
        *rho = ledger_sum_up(*rho, sqlite3_column_double(st, 2));
        (*n_active)++;
    }
    st_done(st);
    return rc == SQLITE_DONE ? DP_OK : read_fail(db, rc, "sum claims", err);
}

static int held_load(ledger *l, int64_t silo_id, int64_t now, int64_t except, double *rdp,
                     double *rho, int64_t *n_active, dp_err *err)
{
    return held_load_st(l->db, l->st[ST_CLAIMS_HELD], l->n_orders, silo_id, now, except, rdp, rho,
                        n_active, err);
}

/* ---- continuous order and basic composition (issue #10)
 * ------------------------------------------------------------------------
 *
 * The calculators answer acct_rdp_epsilon of a tree: the grid minimum, refined on a continuous
 * order with conversion "optimal", and min(that, sum eps_i) for an all-pure tree
 * (accounting/rdp.h). The ledger reports the same figures for the same events: every epsilon of an
 * (eps, delta) silo accounted by rdp or pld is acct_rdp_epsilon_curve of the tree of what it
 * composes (the silo's log grouped by distinct event, active claims, the new event) on the ledger's
 * upward-rounded per-order sums, the same code path and rounding rule. Admission keeps summing
 * vectors on the grid; only the conversion at the end evaluates the tree, near the grid minimum (a
 * few evaluations per distinct event). The log's tree is cached per silo in the committer
 * (log_tree, keyed by n_charges, advanced by one row on the next charge); a log with more than
 * LEDGER_REFINE_MAX_EVENTS distinct events, mixed neighbouring relations or an unparsable event is
 * converted on the grid alone (an upper bound, at most ~1e-4 relative above). */
#define LEDGER_REFINE_MAX_EVENTS 8 /* distinct events of a log refined on the continuous order */
#define LEDGER_TREE_CACHE        64

static acct_event *stored_event(const char *text, int64_t count);

/* The RDP figure of an (eps, delta) rdp or pld silo: min(grid, acct_rdp_epsilon_curve(tree)) where
 * tree (borrowed, may be NULL: grid only) composes what vec sums. Any failure keeps grid_eps. */
static double refined_eps_order(const ledger *l, const ledger_budget *b, const double *vec,
                                const acct_event *tree, acct_neighboring nb, double grid_eps,
                                double *order)
{
    if (tree == NULL || b->kind != LEDGER_BUDGET_EPS_DELTA ||
        (b->accountant != LEDGER_ACCT_RDP && b->accountant != LEDGER_ACCT_PLD) || isnan(grid_eps))
        return grid_eps;
    acct_rdp_answer a;
    dp_err e;
    dp_err_clear(&e);
    if (acct_rdp_epsilon_curve(tree, nb, b->delta, b->conversion, l->orders, vec, l->n_orders, &a,
                               &e) != DP_OK ||
        isnan(a.value) || !(a.value < grid_eps))
        return grid_eps;
    if (order != NULL)
        *order = a.optimal_order;
    return a.value;
}

static double refined_eps(const ledger *l, const ledger_budget *b, const double *vec,
                          const acct_event *tree, acct_neighboring nb, double grid_eps)
{
    return refined_eps_order(l, b, vec, tree, nb, grid_eps, NULL);
}

/* A silo's log as a tree: one self_composed(count, event) per distinct stored event. */
typedef struct log_tree {
    int64_t silo, n_charges; /* the log composed (silo 0: an empty slot) */
    uint64_t gen;            /* l->tree_gen when last built or advanced */
    bool usable;             /* false: too many distinct events, mixed relations, unparsable */
    bool have_nb;
    acct_neighboring nb;
    size_t n;
    char *text[LEDGER_REFINE_MAX_EVENTS];       /* owned: each distinct event's JSON */
    acct_event *node[LEDGER_REFINE_MAX_EVENTS]; /* owned: self_composed(count, event) */
} log_tree;

static void log_tree_clear(log_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        dp_free(t->text[i]);
        acct_event_free(t->node[i]);
    }
    memset(t, 0, sizeof *t);
}

/* Adds count rows of the stored event text under relation nb_text. */
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
    acct_event *ev = t->n < LEDGER_REFINE_MAX_EVENTS ? stored_event(text, 1) : NULL;
    acct_event *sc = ev != NULL ? acct_event_alloc(ACCT_EV_SELF_COMPOSED) : NULL;
    char *dup = sc != NULL ? dp_strdup(text) : NULL;
    if (dup == NULL) {
        acct_event_free(sc);
        acct_event_free(ev);
        t->usable = false;
        return;
    }
    sc->count = (uint64_t)count;
    sc->child = ev;
    t->text[t->n] = dup;
    t->node[t->n] = sc;
    t->n++;
}

/* Rebuilds t from the silo's log read on db (prepared per call: a rebuild is rare). */
static void log_tree_build(sqlite3 *db, int64_t silo, int64_t n_charges, log_tree *t)
{
    log_tree_clear(t);
    t->silo = silo;
    t->n_charges = n_charges;
    t->usable = true;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT event, neighboring, count(*) FROM charges WHERE silo_id = "
                                ":silo GROUP BY event, neighboring",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":silo", silo);
    while (rc == SQLITE_OK && t->usable && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        log_tree_add(t, (const char *)sqlite3_column_text(st, 0),
                     (const char *)sqlite3_column_text(st, 1), sqlite3_column_int64(st, 2));
    }
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        t->usable = false;
    sqlite3_finalize(st);
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
        int rc = b_i64(st, ":silo", s->id);
        if (rc == SQLITE_OK)
            rc = b_i64(st, ":seq", s->n_charges);
        if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
            log_tree_add(t, (const char *)sqlite3_column_text(st, 0),
                         (const char *)sqlite3_column_text(st, 1), 1);
            t->n_charges = s->n_charges;
            t->gen = l->tree_gen;
            st_done(st);
            return t;
        }
        st_done(st);
    }
    log_tree_build(l->db, s->id, s->n_charges, t);
    t->gen = l->tree_gen;
    return t;
}

/* Forgets the trees built or advanced since generation gen (their rows were rolled back). */
static void log_trees_forget(ledger *l, uint64_t gen)
{
    for (size_t i = 0; i < LEDGER_TREE_CACHE; i++)
        if (l->trees[i].silo != 0 && l->trees[i].gen >= gen)
            log_tree_clear(&l->trees[i]);
}

/* What an admission composes, as trees: the log, the active claims (except one) and the event. */
typedef struct refine_set {
    const log_tree *log;
    acct_event *claims[LEDGER_REFINE_MAX_EVENTS]; /* owned */
    size_t n_claims;
    bool claims_ok; /* every active claim is in claims[] under the log's relation */
    const acct_event *event;
    acct_neighboring event_nb;
} refine_set;

static void refine_set_free(refine_set *r)
{
    for (size_t i = 0; i < r->n_claims; i++)
        acct_event_free(r->claims[i]);
    r->n_claims = 0;
}

/* Fills r for silo s: its log tree, its active claims other than `except` (n_active of them) and
 * event (borrowed, may be NULL). Committer thread only. */
static void refine_set_load(ledger *l, const silo_row *s, int64_t now, int64_t except,
                            int64_t n_active, const acct_event *event, acct_neighboring nb,
                            refine_set *r)
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
    int rc = b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":except", except);
    bool ok = rc == SQLITE_OK;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW && r->n_claims < LEDGER_REFINE_MAX_EVENTS) {
        const char *nbt = (const char *)sqlite3_column_text(st, 1);
        acct_event *ev = stored_event((const char *)sqlite3_column_text(st, 0), 1);
        if (ev == NULL || nbt == NULL ||
            (strcmp(nbt, "replace_one") == 0 ? ACCT_NB_REPLACE_ONE : ACCT_NB_ADD_REMOVE) != nb) {
            acct_event_free(ev);
            ok = false;
            break;
        }
        r->claims[r->n_claims++] = ev;
    }
    st_done(st);
    r->claims_ok = ok && (int64_t)r->n_claims == n_active;
}

/* refined_eps of what r composes: the log (always), the claims (with_claims) and the event
 * (with_event). vec must be the matching per-order sum, grid_eps its grid conversion. */
static double refined_of_order(const ledger *l, const ledger_budget *b, const refine_set *r,
                               bool with_claims, bool with_event, const double *vec,
                               double grid_eps, double *order)
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
    return refined_eps_order(l, b, vec, k == 1 ? kids[0] : &root, nb, grid_eps, order);
}

static double refined_of(const ledger *l, const ledger_budget *b, const refine_set *r,
                         bool with_claims, bool with_event, const double *vec, double grid_eps)
{
    return refined_of_order(l, b, r, with_claims, with_event, vec, grid_eps, NULL);
}

/* Figures of an admission decision; sets *fits. n_active: active claims (held_* is their sum).
 * *e_wb_rdp: the RDP would-be epsilon, reused by totals_after. To save conversions (each is a min
 * over the order grid), `spent` and `reserved` are computed only for a refusal or when claims are
 * active; they are NAN otherwise. */
static int admit(ledger *l, const silo_row *s, const double *held_rdp, double held_rho,
                 int64_t n_active, const op_item *it, const refine_set *rf,
                 ledger_charge_result *res, bool *fits, double *e_wb_rdp, dp_err *err)
{
    const ledger_budget *b = &s->b;
    double wb_rdp[LEDGER_MAX_ORDERS], h_rdp[LEDGER_MAX_ORDERS];
    double e_spent = DP_NAN, e_held = DP_NAN, e_cost, e_wb;
    memcpy(h_rdp, s->spent_rdp, l->n_orders * sizeof(double));
    if (n_active > 0)
        vec_add_up(h_rdp, held_rdp, l->n_orders);
    memcpy(wb_rdp, h_rdp, l->n_orders * sizeof(double));
    vec_add_up(wb_rdp, it->cost_rdp, l->n_orders);
    double h_rho = n_active > 0 ? ledger_sum_up(s->spent_rho, held_rho) : s->spent_rho;
    double wb_rho = ledger_sum_up(h_rho, it->cost_rho);
    if ((b->accountant == LEDGER_ACCT_ZCDP) && !isfinite(it->cost_rho))
        return dp_err_set(err, DP_ENUMERIC, "event",
                          "the event has no finite zCDP bound, and this silo is accounted by zCDP");
    if (loss_of(l, b, it->cost_rdp, it->cost_rho, &e_cost, NULL, err) != DP_OK ||
        loss_of(l, b, wb_rdp, wb_rho, &e_wb, NULL, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    e_cost = refined_eps(l, b, it->cost_rdp, it->req->event, it->req->neighboring, e_cost);
    e_wb = refined_of(l, b, rf, n_active > 0, true, wb_rdp, e_wb);
    *e_wb_rdp = e_wb;
    bool pld = b->accountant == LEDGER_ACCT_PLD && it->pld_ready && !it->pld_give_up;
    if (pld) /* min of two upper bounds is an upper bound (PLD SILOS above) */
        e_wb = fmin(e_wb, it->pld_wb);
    res->silo_id = s->id;
    res->kind = b->kind;
    res->cost_eps = e_cost;
    res->cost_rho = it->cost_rho;
    res->requested = unit_value(b, e_cost, it->cost_rho);
    res->would_be = unit_value(b, e_wb, wb_rho);
    res->budget = cap_of(b);
    /* The rule: conv(spent + reserved + cost) <= cap, no tolerance (STYLE.md 2.8). NaN never fits.
     */
    *fits = b->kind == LEDGER_BUDGET_NONE || (res->would_be <= res->budget);
    res->spent = res->reserved = DP_NAN;
    if (*fits && n_active == 0)
        return DP_OK;
    if (loss_of(l, b, s->spent_rdp, s->spent_rho, &e_spent, NULL, err) != DP_OK ||
        (n_active > 0 && loss_of(l, b, h_rdp, h_rho, &e_held, NULL, err) != DP_OK))
        return err ? err->code : DP_EINTERNAL;
    e_spent = refined_of(l, b, rf, false, false, s->spent_rdp, e_spent);
    if (n_active > 0)
        e_held = refined_of(l, b, rf, true, false, h_rdp, e_held);
    if (n_active == 0)
        e_held = e_spent;
    res->reserved =
        b->kind == LEDGER_BUDGET_NONE
            ? DP_NAN
            : fmax(0.0, unit_value(b, e_held, h_rho) - unit_value(b, e_spent, s->spent_rho));
    if (pld)
        e_spent = fmin(e_spent, it->pld_spent);
    res->spent = unit_value(b, e_spent, s->spent_rho);
    return DP_OK;
}

/* Totals after appending cost (excluding held claims except in `remaining`). pld (may be NULL)
 * carries PLD figures for a PLD silo. */
static int totals_after(ledger *l, const silo_row *s, const double *cost_rdp, double cost_rho,
                        const double *held_rdp, double held_rho, int64_t n_active, double e_wb_rdp,
                        const op_item *pld, const refine_set *rf, double *new_rdp, double *new_rho,
                        ledger_charge_result *res, dp_err *err)
{
    memcpy(new_rdp, s->spent_rdp, l->n_orders * sizeof(double));
    vec_add_up(new_rdp, cost_rdp, l->n_orders);
    *new_rho = ledger_sum_up(s->spent_rho, cost_rho);
    double h_rdp[LEDGER_MAX_ORDERS], e_new, e_held;
    double h_rho = n_active > 0 ? ledger_sum_up(*new_rho, held_rho) : *new_rho;
    if (n_active == 0 && !isnan(e_wb_rdp)) {
        /* no claims: spent + cost is exactly the would-be sum admit() converted */
        e_new = e_held = e_wb_rdp;
    } else {
        memcpy(h_rdp, new_rdp, l->n_orders * sizeof(double));
        if (n_active > 0)
            vec_add_up(h_rdp, held_rdp, l->n_orders);
        if (loss_of(l, &s->b, new_rdp, *new_rho, &e_new, NULL, err) != DP_OK ||
            loss_of(l, &s->b, h_rdp, h_rho, &e_held, NULL, err) != DP_OK)
            return err ? err->code : DP_EINTERNAL;
        if (rf != NULL) {
            e_new = refined_of(l, &s->b, rf, false, true, new_rdp, e_new);
            e_held = refined_of(l, &s->b, rf, true, true, h_rdp, e_held);
        }
    }
    if (s->b.accountant == LEDGER_ACCT_PLD && pld != NULL && pld->pld_ready && !pld->pld_give_up) {
        e_new = fmin(e_new, pld->pld_after);
        e_held = fmin(e_held, pld->pld_wb); /* after the append, held = the would-be total */
    }
    res->spent_eps_after = e_new;
    res->spent_rho_after = *new_rho;
    res->remaining_after = remaining_of(&s->b, unit_value(&s->b, e_held, h_rho));
    return DP_OK;
}

/* Appends a charge row and updates the silo's cached totals. */
static int charge_append(ledger *l, const silo_row *s, const ledger_charge_req *req,
                         const uint8_t *hash, const char *key, int64_t claim_id,
                         const double *cost_rdp, double cost_rho, const double *held_rdp,
                         double held_rho, int64_t n_active, double e_wb_rdp, const op_item *pld,
                         const refine_set *rf, int64_t now, ledger_charge_result *res, dp_err *err)
{
    double new_rdp[LEDGER_MAX_ORDERS], new_rho;
    if (totals_after(l, s, cost_rdp, cost_rho, held_rdp, held_rho, n_active, e_wb_rdp, pld, rf,
                     new_rdp, &new_rho, res, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    /* The cumulative figure of the log never goes down from one row to the next at one delta
     * (D10): each figure is an upper bound on the loss of the rows so far, so the larger of this
     * one and the previous row's is one too. (A PLD figure may come out below an earlier row's
     * RDP fallback, or a later composition round differently.) */
    if (s->n_charges > 0 && !isnan(s->b.delta) && !isnan(res->spent_eps_after)) {
        sqlite3_stmt *pv = l->st[ST_PREV_AFTER];
        int prc = b_i64(pv, ":silo", s->id);
        if (prc == SQLITE_OK)
            prc = b_i64(pv, ":seq", s->n_charges);
        if (prc == SQLITE_OK)
            prc = sqlite3_step(pv);
        if (prc == SQLITE_ROW) {
            double prev = col_dbl(pv, 0), prev_delta = col_dbl(pv, 1);
            if (!isnan(prev) && memcmp(&prev_delta, &s->b.delta, sizeof prev_delta) == 0 &&
                prev > res->spent_eps_after)
                res->spent_eps_after = prev;
            prc = SQLITE_DONE;
        }
        st_done(pv);
        if (prc != SQLITE_DONE)
            return sql_fail(l, prc, "previous row", err);
    }
    sqlite3_stmt *st = l->st[ST_CHARGE_INSERT];
    int64_t seq = s->n_charges + 1;
    const char *nb = req->neighboring == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
    int rc = b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":actor", req->actor_token_id);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":job", req->job_id);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":claim", claim_id);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":key", key);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":hash", hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":reason", req->reason);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":event", req->event_json);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":nb", nb);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":rdp", cost_rdp, l->n_orders * sizeof(double));
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":rho", cost_rho);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":eps", res->cost_eps);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":seq", seq);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":eps_after", res->spent_eps_after);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":rho_after", new_rho);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":remaining", res->remaining_after);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":delta_after", isnan(res->spent_eps_after) ? DP_NAN : s->b.delta);
    int werr = st_write(l, st, rc, "insert charge", err);
    if (werr != DP_OK)
        return werr;
    res->charge_id = sqlite3_last_insert_rowid(l->db);
    res->created_at_ms = now;
    res->seq = seq;
    st = l->st[ST_SILO_TOTALS];
    rc = b_i64(st, ":n", seq);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":rdp", new_rdp, l->n_orders * sizeof(double));
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":rho", new_rho);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":id", s->id);
    return st_write(l, st, rc, "update silo totals", err);
}

/* Fills res from an existing charge row found by st (already stepped to SQLITE_ROW). */
static void result_from_row(sqlite3_stmt *st, const silo_row *s, ledger_charge_result *res)
{
    res->replayed = true;
    res->silo_id = s->id;
    res->kind = s->b.kind;
    res->charge_id = sqlite3_column_int64(st, 0);
    res->created_at_ms = sqlite3_column_int64(st, 1);
    res->seq = sqlite3_column_int64(st, 3);
    res->cost_eps = col_dbl(st, 4);
    res->cost_rho = col_dbl(st, 5);
    res->spent_eps_after = col_dbl(st, 6);
    res->spent_rho_after = col_dbl(st, 7);
    res->remaining_after = col_dbl(st, 8);
    res->requested = unit_value(&s->b, res->cost_eps, res->cost_rho);
    res->budget = cap_of(&s->b);
    res->spent = res->reserved = res->would_be = DP_NAN;
}

/* Looks up (silo, key) in charges. found: 0 none, 1 same request (res filled), 2 other request. */
static int charge_by_key(ledger *l, const silo_row *s, const char *key, const uint8_t *hash,
                         ledger_charge_result *res, int *found, dp_err *err)
{
    *found = 0;
    sqlite3_stmt *st = l->st[ST_CHARGE_BY_KEY];
    int rc = b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":key", key);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const void *h = sqlite3_column_blob(st, 2);
        if (h != NULL && sqlite3_column_bytes(st, 2) == DP_SHA256_DIGEST_BYTES &&
            memcmp(h, hash, DP_SHA256_DIGEST_BYTES) == 0) {
            *found = 1;
            result_from_row(st, s, res);
        } else {
            *found = 2;
        }
        rc = SQLITE_DONE;
    }
    st_done(st);
    return rc == SQLITE_DONE ? DP_OK : sql_fail(l, rc, "find charge by key", err);
}

static void item_field(const ledger_op *op, size_t i, char *buf, size_t len)
{
    if (op->batch_fields)
        snprintf(buf, len, "charges[%zu]", i);
    else
        buf[0] = '\0';
}

/* ---- committer: ops
 * --------------------------------------------------------------------------------------- */

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
    int rc = b_i64(st, ":silo", s->id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int64_t max_claim = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    st_done(st);
    if (rc != SQLITE_ROW)
        return sql_fail(l, rc, "highest claim", err);
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
    int rc = b_i64(st, ":actor", op->batch_actor);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":key", op->batch_key);
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
    st_done(st);
    if (rc != SQLITE_DONE)
        return sql_fail(l, rc, "find batch by key", err);
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
    int rc = b_i64(st, ":actor", op->batch_actor);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":key", op->batch_key);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":hash", op->batch_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    return st_write(l, st, rc, "insert batch", err);
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
        item_field(op, i, field, sizeof field);
        res->silo_id = req->silo_id;
        res->dry_run = op->dry_run;
        silo_row s;
        int rc = silo_load(l, req->silo_id, &s, err);
        if (rc != DP_OK) {
            res->status = rc;
            dp_err_prefix_field(err, field);
            return rc;
        }
        if (req->idempotency_key != NULL) {
            int found = 0;
            if (charge_by_key(l, &s, req->idempotency_key, it->req_hash, res, &found, err) != DP_OK)
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
        if (held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
            return err->code;
        bool fits = false;
        double e_wb_rdp = DP_NAN;
        refine_set rf;
        refine_set_load(l, &s, now, 0, n_active, req->event, req->neighboring, &rf);
        rc = admit(l, &s, held_rdp, held_rho, n_active, it, &rf, res, &fits, &e_wb_rdp, err);
        if (rc == DP_OK && fits && op->dry_run) {
            double nr[LEDGER_MAX_ORDERS], nrho;
            rc = totals_after(l, &s, it->cost_rdp, it->cost_rho, held_rdp, held_rho, n_active,
                              e_wb_rdp, it, &rf, nr, &nrho, res, err);
        } else if (rc == DP_OK && fits) {
            rc = charge_append(l, &s, req, it->req_hash, req->idempotency_key, 0, it->cost_rdp,
                               it->cost_rho, held_rdp, held_rho, n_active, e_wb_rdp, it, &rf, now,
                               res, err);
        }
        refine_set_free(&rf);
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
    c->state = claim_state_parse((const char *)sqlite3_column_text(st, 5));
    c->job_id = sqlite3_column_type(st, 6) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 6);
    c->cost_rho = sqlite3_column_double(st, 8);
    c->cost_eps = DP_NAN;
    if (cost_rdp != NULL && col_vec(st, 7, cost_rdp, l->n_orders) && b != NULL) {
        double e = DP_NAN;
        if (loss_of(l, b, cost_rdp, c->cost_rho, &e, NULL, NULL) == DP_OK)
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
    if (silo_load(l, req->silo_id, &s, err) != DP_OK)
        return err->code;
    if (req->idempotency_key != NULL) {
        sqlite3_stmt *st = l->st[ST_CLAIM_BY_KEY];
        int rc = b_i64(st, ":silo", s.id);
        if (rc == SQLITE_OK)
            rc = b_text(st, ":key", req->idempotency_key);
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
        st_done(st);
        if (rc != SQLITE_DONE)
            return sql_fail(l, rc, "find claim by key", err);
        if (existing != 0 && !same)
            return dp_err_set(err, DP_ECONFLICT, "idempotency_key",
                              "idempotency_key was already used for a different claim on silo %lld",
                              (long long)s.id);
        if (existing != 0) {
            st = l->st[ST_CLAIM_GET];
            rc = b_i64(st, ":id", existing);
            if (rc == SQLITE_OK)
                rc = sqlite3_step(st);
            if (rc == SQLITE_ROW) {
                double v[LEDGER_MAX_ORDERS];
                claim_from_row(l, st, &s.b, op->claim, v);
                rc = SQLITE_DONE;
            }
            st_done(st);
            if (rc != SQLITE_DONE)
                return sql_fail(l, rc, "load claim", err);
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
    if (held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
        return err->code;
    bool fits = false;
    double e_wb_rdp = DP_NAN;
    refine_set rf;
    refine_set_load(l, &s, now, 0, n_active, req->event, req->neighboring, &rf);
    int arc = admit(l, &s, held_rdp, held_rho, n_active, it, &rf, res, &fits, &e_wb_rdp, err);
    refine_set_free(&rf);
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
    int rc = b_i64(st, ":silo", s.id);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":exp", now + op->timeout_ms);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":actor", req->actor_token_id);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":job", req->job_id);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":key", req->idempotency_key);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":hash", it->req_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":reason", req->reason);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":event", req->event_json);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":nb", nb);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":rdp", it->cost_rdp, l->n_orders * sizeof(double));
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":rho", it->cost_rho);
    int werr = st_write(l, st, rc, "insert claim", err);
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
    int rc = b_i64(st, ":id", op->id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        st_done(st);
        return dp_err_set(err, DP_ENOTFOUND, "claim_id", "claim %lld does not exist",
                          (long long)op->id);
    }
    if (rc != SQLITE_ROW) {
        st_done(st);
        return sql_fail(l, rc, "load claim", err);
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
    st_done(st);
    if (too_long)
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    if (op->scope_silo_id != 0 && op->scope_silo_id != silo_id)
        return dp_err_set(err, DP_EFORBIDDEN, "claim_id", "this token may not act on claim %lld",
                          (long long)op->id);
    if (silo_load(l, silo_id, s, err) != DP_OK)
        return err->code;
    double v[LEDGER_MAX_ORDERS];
    memcpy(v, cost_rdp, l->n_orders * sizeof(double));
    double e = DP_NAN;
    if (loss_of(l, &s->b, v, c->cost_rho, &e, NULL, NULL) == DP_OK)
        c->cost_eps = e;
    return DP_OK;
}

static int claim_close(ledger *l, int64_t id, const char *state, int64_t now, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_CLAIM_CLOSE];
    int rc = b_text(st, ":state", state);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":id", id);
    return st_write(l, st, rc, "close claim", err);
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
        int src = b_i64(st, ":claim", c->id);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            result_from_row(st, &s, res);
            src = SQLITE_DONE;
        }
        st_done(st);
        if (src != SQLITE_DONE) {
            rc = sql_fail(l, src, "find charge of claim", err);
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
    if ((rc = held_load(l, s.id, now, c->id, held_rdp, &held_rho, &n_active, err)) != DP_OK)
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
    if ((rc = loss_of(l, &s.b, cost_rdp, c->cost_rho, &e, NULL, err)) != DP_OK)
        goto out;
    claim_ev = stored_event(event, 1);
    refine_set_load(l, &s, now, c->id, n_active, claim_ev, req.neighboring, &rf);
    e = refined_eps(l, &s.b, cost_rdp, claim_ev, req.neighboring, e);
    res->cost_eps = e;
    c->cost_eps = e;
    res->cost_rho = c->cost_rho;
    res->requested = unit_value(&s.b, e, c->cost_rho);
    res->budget = cap_of(&s.b);
    res->spent = res->reserved = res->would_be = DP_NAN;
    if ((rc = charge_append(l, &s, &req, hash, NULL, c->id, cost_rdp, c->cost_rho, held_rdp,
                            held_rho, n_active, DP_NAN, pit, &rf, now, res, err)) != DP_OK)
        goto out;
    if ((rc = claim_close(l, c->id, "committed", now, err)) != DP_OK)
        goto out;
    c->state = LEDGER_CLAIM_COMMITTED;
    c->closed_at_ms = now;
    c->charge_id = res->charge_id;
out:
    refine_set_free(&rf);
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
    c->state = claim_state_parse(state);
    c->closed_at_ms = now;
    return DP_OK;
}

static int bind_budget(sqlite3_stmt *st, const ledger_budget *b)
{
    int rc = b_dbl(st, ":eps", b->kind == LEDGER_BUDGET_EPS_DELTA ? b->epsilon : DP_NAN);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":delta", b->kind == LEDGER_BUDGET_NONE ? DP_NAN : b->delta);
    if (rc == SQLITE_OK)
        rc = b_dbl(st, ":rho", b->kind == LEDGER_BUDGET_RHO ? b->rho : DP_NAN);
    return rc;
}

static int view_of(ledger *l, const silo_row *s, int64_t now, ledger_silo_view *v, dp_err *err);

/* DP_ECONFLICT (field "name") when an active silo other than `except` (0 = none) is named name.
 * Names are unique among active silos; an archived silo's name may be taken again (archiving is
 * final, and a silo whose token leaked is archived and recreated under its name). The committer
 * serialises every write, so this check and the following write cannot race. */
static int name_check(ledger *l, const char *name, int64_t except, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_NAME_TAKEN];
    int rc = b_text(st, ":name", name);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":id", except);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int64_t other = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    st_done(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sql_fail(l, rc, "find silo by name", err);
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
    int rc = b_blob(st, ":hash", hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":role", "silo");
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":silo", silo_id);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    st_done(st);
    if (rc != SQLITE_DONE || sqlite3_changes(l->db) != 1)
        return rc != SQLITE_DONE ? sql_fail(l, rc, "insert token", err)
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
    int rc = b_text(st, ":name", op->name);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":kind", kind_name(b->kind));
    if (rc == SQLITE_OK)
        rc = b_text(st, ":acct", ledger_accountant_name(b->accountant));
    if (rc == SQLITE_OK)
        rc = b_text(st, ":conv", acct_conversion_name(b->conversion));
    if (rc == SQLITE_OK)
        rc = bind_budget(st, b);
    if (rc == SQLITE_OK)
        rc = b_blob(st, ":zero", zero, l->n_orders * sizeof(double));
    int werr = st_write(l, st, rc, "insert silo", err);
    if (werr != DP_OK)
        return werr;
    int64_t id = sqlite3_last_insert_rowid(l->db);
    if (token_insert_silo(l, op->token_hash, id, now, err) != DP_OK)
        return err->code;
    silo_row s;
    if (silo_load(l, id, &s, err) != DP_OK)
        return err->code;
    return view_of(l, &s, now, op->view, err);
}

static int apply_silo_patch(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    silo_row s;
    if (silo_load(l, op->id, &s, err) != DP_OK)
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
                  (nb.kind != LEDGER_BUDGET_NONE && cap_of(&nb) < cap_of(&s.b));
    if (!lowers || nb.kind == LEDGER_BUDGET_NONE)
        goto write;
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if (held_load(l, s.id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
        return err->code;
    vec_add_up(held_rdp, s.spent_rdp, l->n_orders);
    held_rho = ledger_sum_up(held_rho, s.spent_rho);
    double e_held = DP_NAN;
    if (loss_of(l, &nb, held_rdp, held_rho, &e_held, NULL, err) != DP_OK)
        return err->code;
    if (!(e_held <= cap_of(&nb))) { /* the refined figure (continuous order, pure events) */
        refine_set rf;
        refine_set_load(l, &s, now, 0, n_active, NULL, ACCT_NB_ADD_REMOVE, &rf);
        e_held = refined_of(l, &nb, &rf, n_active > 0, false, held_rdp, e_held);
        refine_set_free(&rf);
    }
    double held = unit_value(&nb, e_held, held_rho);
    if (!(held <= cap_of(&nb)) && nb.accountant == LEDGER_ACCT_PLD &&
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
    if (!(held <= cap_of(&nb)))
        return dp_err_set(
            err, DP_ECONFLICT, nb.kind == LEDGER_BUDGET_RHO ? "budget.rho" : "budget.epsilon",
            "the new budget %.6g is below what silo %lld has already spent or reserved "
            "(%.6g %s)",
            cap_of(&nb), (long long)s.id, held,
            nb.kind == LEDGER_BUDGET_RHO ? "rho" : "epsilon at the new delta");
write:;
    sqlite3_stmt *st = l->st[ST_SILO_PATCH];
    int rc = b_text(st, ":name", p->name != NULL ? p->name : s.name);
    if (rc == SQLITE_OK)
        rc = bind_budget(st, &nb);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":id", s.id);
    int werr = st_write(l, st, rc, "patch silo", err);
    if (werr != DP_OK)
        return werr;
    if (silo_load(l, s.id, &s, err) != DP_OK)
        return err->code;
    return view_of(l, &s, now, op->view, err);
}

static int apply_silo_archive(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    silo_row s;
    if (silo_load(l, op->id, &s, err) != DP_OK)
        return err->code;
    if (s.archived_at_ms == 0) {
        sqlite3_stmt *st = l->st[ST_SILO_ARCHIVE];
        int rc = b_i64(st, ":now", now);
        if (rc == SQLITE_OK)
            rc = b_i64(st, ":id", s.id);
        int werr = st_write(l, st, rc, "archive silo", err);
        if (werr != DP_OK)
            return werr;
        st = l->st[ST_CLAIMS_ABORT_SILO];
        rc = b_i64(st, ":now", now);
        if (rc == SQLITE_OK)
            rc = b_i64(st, ":silo", s.id);
        werr = st_write(l, st, rc, "abort claims of archived silo", err);
        if (werr != DP_OK)
            return werr;
        if (silo_load(l, s.id, &s, err) != DP_OK)
            return err->code;
    }
    return view_of(l, &s, now, op->view, err);
}

/* Revokes the admin tokens other than keep (silo 0), or the tokens of silo; *n gets the count. */
static int token_revoke(ledger *l, int64_t silo, int64_t keep, int64_t now, int64_t *n, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_TOKEN_REVOKE];
    int rc = b_i64(st, ":now", now);
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":keep", keep);
    if (rc == SQLITE_OK)
        rc = b_i64_or_null(st, ":silo", silo);
    int werr = st_write(l, st, rc, "revoke tokens", err);
    if (werr != DP_OK)
        return werr;
    if (n != NULL)
        *n = sqlite3_changes(l->db);
    return DP_OK;
}

static int apply_token_admin(ledger *l, ledger_op *op, int64_t now, dp_err *err)
{
    sqlite3_stmt *st = l->st[ST_TOKEN_INSERT];
    int rc = b_blob(st, ":hash", op->token_hash, DP_SHA256_DIGEST_BYTES);
    if (rc == SQLITE_OK)
        rc = b_text(st, ":role", "admin");
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_null(st, bind_idx(st, ":silo"));
    if (rc == SQLITE_OK)
        rc = b_i64(st, ":now", now);
    int werr = st_write(l, st, rc, "insert admin token", err);
    if (werr != DP_OK)
        return werr;
    st = l->st[ST_TOKEN_ID];
    rc = b_blob(st, ":hash", op->token_hash, DP_SHA256_DIGEST_BYTES);
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
    st_done(st);
    if (rc != SQLITE_DONE)
        return sql_fail(l, rc, "find admin token", err);
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
    if (silo_load(l, op->id, &s, err) != DP_OK)
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
    int rc = b_i64(st, ":now", now);
    if (rc != SQLITE_OK) {
        st_done(st);
        return sql_fail(l, rc, "bind sweep", err);
    }
    return exec_st(l, ST_CLAIMS_EXPIRE, err);
}

static int apply_op(ledger *l, ledger_op *op, int64_t now)
{
    dp_err *err = &op->err;
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

/* ---- committer: the group
 * ---------------------------------------------------------------------------------- */

/* Runs ops[0..n-1] in one transaction; sets each op's rc. */
static void run_group(ledger *l, ledger_op **ops, size_t n)
{
    int64_t now = now_ms();
    uint64_t gen0 = l->tree_gen + 1; /* the first op's generation */
    dp_err gerr;
    dp_err_clear(&gerr);
    int rc = sqlite3_step(l->st[ST_BEGIN]);
    st_done(l->st[ST_BEGIN]);
    if (rc != SQLITE_DONE) {
        sql_fail(l, rc, "BEGIN IMMEDIATE", &gerr);
        for (size_t i = 0; i < n; i++) {
            ops[i]->rc = gerr.code;
            ops[i]->err = gerr;
        }
        return;
    }
    bool txn_lost = false;
    for (size_t i = 0; i < n; i++) {
        ledger_op *op = ops[i];
        dp_err_clear(&op->err);
        dp_err serr;
        dp_err_clear(&serr);
        if (txn_lost || exec_st(l, ST_SAVEPOINT, &serr) != DP_OK) {
            op->rc = dp_err_set(&op->err, DP_EINTERNAL, NULL, "internal ledger error");
            continue;
        }
        uint64_t gen = ++l->tree_gen;
        op->rc = apply_op(l, op, now);
        if (op->rc != DP_OK) {
            log_trees_forget(l, gen);            /* its rows are rolled back */
            if (sqlite3_get_autocommit(l->db)) { /* SQLite rolled the whole transaction back */
                txn_lost = true;
                continue;
            }
            dp_err_clear(&serr);
            if (exec_st(l, ST_ROLLBACK_TO, &serr) != DP_OK)
                txn_lost = true;
        }
        dp_err_clear(&serr);
        if (!txn_lost && exec_st(l, ST_RELEASE, &serr) != DP_OK)
            txn_lost = true;
    }
    if (!txn_lost) {
        rc = sqlite3_step(l->st[ST_COMMIT]);
        st_done(l->st[ST_COMMIT]);
        if (rc == SQLITE_DONE) {
            atomic_fetch_add(&l->n_groups, 1);
            atomic_fetch_add(&l->n_ops, n);
            return;
        }
        sql_fail(l, rc, "COMMIT", &gerr);
    } else {
        dp_err_set(&gerr, DP_EINTERNAL, NULL, "internal ledger error");
    }
    if (!sqlite3_get_autocommit(l->db)) {
        int rrc = sqlite3_step(l->st[ST_ROLLBACK]);
        st_done(l->st[ST_ROLLBACK]);
        if (rrc != SQLITE_DONE)
            dp_log(DP_LOG_ERROR, NULL, "ledger: ROLLBACK failed (%d)", rrc);
    }
    log_trees_forget(l, gen0);
    /* Nothing of this group was recorded: every op fails, including those that had succeeded. */
    for (size_t i = 0; i < n; i++)
        if (ops[i]->rc == DP_OK || txn_lost) {
            dp_err_clear(&ops[i]->err);
            ops[i]->rc = gerr.code;
            ops[i]->err = gerr;
        }
}

static bool claims_overdue(ledger *l, int64_t now)
{
    sqlite3_stmt *st = l->st[ST_CLAIMS_OVERDUE];
    bool any = false;
    if (b_i64(st, ":now", now) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        any = sqlite3_column_int(st, 0) != 0;
    st_done(st);
    return any;
}

/* WAL hook of the committer's connection: runs in the committer thread after each COMMIT, without
 * l->mu held. It only flags the checkpointer. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int n_frames)
{
    (void)db;
    (void)name;
    ledger *l = arg;
    if (n_frames >= LEDGER_CKPT_FRAMES) {
        pthread_mutex_lock(&l->mu);
        if (!l->ckpt_wanted) {
            l->ckpt_wanted = true;
            pthread_cond_signal(&l->cv_ckpt);
        }
        pthread_mutex_unlock(&l->mu);
    }
    return SQLITE_OK;
}

static void *checkpointer_main(void *arg)
{
    ledger *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && !l->ckpt_wanted)
            pthread_cond_wait(&l->cv_ckpt, &l->mu);
        bool stop = l->stop;
        l->ckpt_wanted = false;
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        int n_log = 0, n_ckpt = 0;
        int rc =
            sqlite3_wal_checkpoint_v2(l->ck_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &n_log, &n_ckpt);
        if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
            dp_log(DP_LOG_WARN, NULL, "ledger: background checkpoint: %s (%d)",
                   sqlite3_errmsg(l->ck_db), rc);
    }
    return NULL;
}

static void pld_flags_clear(ledger_op *op)
{
    op->need_pld = false;
    for (size_t i = 0; i < op->n_items; i++)
        op->items[i].need_pld = false;
}

/* A wake-up owed to an asynchronous op, delivered after l->mu is released. */
typedef struct wake_slot {
    void (*fn)(void *arg);
    void *arg;
} wake_slot;

/* Appends op to a singly linked FIFO (the committer's or the PLD thread's); l->mu held. */
static void fifo_append(ledger_op **head, ledger_op **tail, ledger_op *op)
{
    op->next = NULL;
    if (*tail != NULL)
        (*tail)->next = op;
    else
        *head = op;
    *tail = op;
}

/* Appends op to the committer's FIFO and wakes it; l->mu held. Unlike enqueue, it also works while
 * stopping: the op was accepted before the stop and is still owed an answer. */
static void queue_push_locked(ledger *l, ledger_op *op)
{
    fifo_append(&l->head, &l->tail, op);
    l->n_queued++;
    pthread_cond_signal(&l->cv_work);
}

/* An op whose PLD figures are stale goes to the PLD thread, which computes them and queues the op
 * again; its waiter (or its wake-up) waits meanwhile, so no HTTP thread composes PLDs. While
 * stopping, the RDP bound decides alone instead (conservative) and the op is queued at once.
 * l->mu held. */
static void pld_handoff(ledger *l, ledger_op *op)
{
    if (l->stop) {
        for (size_t k = 0; k < op->n_items; k++)
            if (op->items[k].need_pld)
                op->items[k].pld_give_up = true;
        pld_flags_clear(op);
        queue_push_locked(l, op);
        return;
    }
    fifo_append(&l->pld_head, &l->pld_tail, op);
    l->pld_busy++;
    pthread_cond_signal(&l->cv_pld);
}

static int pld_prepare(ledger *l, op_item *it, dp_err *err);

/* The PLD thread: computes the figures of the items that need them, on its own snapshot
 * connections, then hands the op back to the committer. After LEDGER_PLD_RETRIES computations for
 * one op (its snapshots kept going stale), or once stopping, the RDP bound decides alone. */
static void *pld_main(void *arg)
{
    ledger *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && l->pld_head == NULL)
            pthread_cond_wait(&l->cv_pld, &l->mu);
        ledger_op *op = l->pld_head;
        if (op == NULL) { /* stopping with nothing left */
            pthread_mutex_unlock(&l->mu);
            break;
        }
        l->pld_head = op->next;
        if (l->pld_head == NULL)
            l->pld_tail = NULL;
        op->next = NULL;
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        for (size_t k = 0; k < op->n_items; k++) {
            op_item *it = &op->items[k];
            if (!it->need_pld)
                continue;
            dp_err e;
            dp_err_clear(&e);
            if (stop || op->pld_attempts >= LEDGER_PLD_RETRIES || pld_prepare(l, it, &e) != DP_OK)
                it->pld_give_up = true; /* the RDP bound decides alone: conservative */
        }
        op->pld_attempts++;
        pld_flags_clear(op);
        pthread_mutex_lock(&l->mu);
        l->pld_busy--;
        queue_push_locked(l, op);
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

static void *committer_main(void *arg)
{
    ledger *l = arg;
    ledger_op **batch = dp_calloc(LEDGER_MAX_GROUP, sizeof *batch);
    wake_slot *wakes = dp_calloc(LEDGER_MAX_GROUP, sizeof *wakes);
    ledger_op *single_op[1];
    wake_slot single_wake[1];
    size_t cap = batch != NULL && wakes != NULL ? LEDGER_MAX_GROUP : 1;
    ledger_op **ops = cap > 1 ? batch : single_op;
    wake_slot *wk = cap > 1 ? wakes : single_wake;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        /* Stopping: the committer stays until the PLD thread has handed back every op it holds. */
        while (l->head == NULL && (!l->stop || l->pld_busy > 0)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += LEDGER_SWEEP_MS / 1000;
            if (pthread_cond_timedwait(&l->cv_work, &l->mu, &until) == ETIMEDOUT &&
                l->head == NULL && !l->stop)
                break;
        }
        if (l->head == NULL && l->stop && l->pld_busy == 0) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        if (l->head != NULL && !l->stop && l->n_queued < l->last_group / 2) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += LEDGER_GATHER_US * 1000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (!l->stop && l->n_queued < l->last_group &&
                   pthread_cond_timedwait(&l->cv_work, &l->mu, &until) == 0)
                ;
        }
        size_t n = 0;
        while (l->head != NULL && n < cap) {
            ledger_op *op = l->head;
            l->head = op->next;
            if (l->head == NULL)
                l->tail = NULL;
            op->next = NULL;
            l->n_queued--;
            ops[n++] = op;
        }
        pthread_mutex_unlock(&l->mu);
        if (n == 0) { /* idle wake-up: mark overdue claims expired */
            int64_t now = now_ms();
            if (claims_overdue(l, now)) {
                ledger_op sweep = {.kind = OP_SWEEP};
                ledger_op *one = &sweep;
                run_group(l, &one, 1);
            }
            continue;
        }
        l->last_group = n;
        run_group(l, ops, n);
        size_t n_wake = 0;
        pthread_mutex_lock(&l->mu);
        for (size_t i = 0; i < n; i++) {
            ledger_op *op = ops[i];
            if (op->need_pld) { /* not done: PLD figures first (PLD SILOS), then again */
                pld_handoff(l, op);
                continue;
            }
            if (op->wake != NULL) {
                wk[n_wake].fn = op->wake;
                wk[n_wake].arg = op->wake_arg;
                n_wake++;
            }
            op->done = true;
            pthread_cond_signal(&op->cv); /* op may vanish once the lock is released */
        }
        pthread_mutex_unlock(&l->mu);
        for (size_t i = 0; i < n_wake; i++) /* e.g. http.c resumes a suspended connection */
            wk[i].fn(wk[i].arg);
    }
    dp_free(wakes);
    dp_free(batch);
    return NULL;
}

/* Queues op (its cv initialised, done false). Fails with DP_EBUSY once the ledger is stopping. */
static int enqueue(ledger *l, ledger_op *op)
{
    pthread_mutex_lock(&l->mu);
    if (l->stop) {
        pthread_mutex_unlock(&l->mu);
        return dp_err_set(&op->err, DP_EBUSY, NULL, "the ledger is shutting down");
    }
    queue_push_locked(l, op);
    pthread_mutex_unlock(&l->mu);
    return DP_OK;
}

static int op_init(ledger_op *op)
{
    op->done = false;
    op->next = NULL;
    op->rc = DP_OK;
    dp_err_clear(&op->err);
    if (pthread_cond_init(&op->cv, NULL) != 0)
        return dp_err_set(&op->err, DP_ENOMEM, NULL, "out of resources");
    return DP_OK;
}

/* Waits until the committer has set op->done. */
static void op_wait(ledger *l, ledger_op *op)
{
    pthread_mutex_lock(&l->mu);
    while (!op->done)
        pthread_cond_wait(&op->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* Queues op and waits until the committer has committed (or refused) it. */
static int submit(ledger *l, ledger_op *op)
{
    op->wake = NULL;
    op->wake_arg = NULL;
    if (op_init(op) != DP_OK)
        return op->rc = op->err.code;
    if (enqueue(l, op) != DP_OK) {
        pthread_cond_destroy(&op->cv);
        return op->rc = op->err.code;
    }
    op_wait(l, op);
    pthread_cond_destroy(&op->cv);
    return op->rc;
}

static int finish(ledger_op *op, dp_err *err)
{
    if (op->rc != DP_OK) {
        if (err != NULL && err->code == DP_OK)
            *err = op->err;
        if (op->err.code == DP_OK) /* defensive: never report failure without a message */
            return dp_err_set(err, op->rc, NULL, "internal ledger error");
    }
    return op->rc;
}

/* ---- open / free
 * -------------------------------------------------------------------------------------------- */

static int exec_sql(sqlite3 *db, const char *sql, dp_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: %s: %s", sql, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot open the ledger (see the log)");
    }
    return DP_OK;
}

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
        rc = b_blob(st, ":o", def, n_def * sizeof(double));
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE)
        return sql_fail(l, rc, "store order grid", err);
    rc = sqlite3_prepare_v2(l->db, "SELECT orders FROM ledger_orders WHERE id = 1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        return sql_fail(l, rc, "load order grid", err);
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
    bool mu_ok = false, cv_ok = false, ck_ok = false, cache_ok = false, pcv_ok = false;
    if (pthread_mutex_init(&l->cache_mu, NULL) != 0 || !(cache_ok = true) ||
        pthread_mutex_init(&l->mu, NULL) != 0 || !(mu_ok = true) ||
        pthread_cond_init(&l->cv_work, NULL) != 0 || !(cv_ok = true) ||
        pthread_cond_init(&l->cv_ckpt, NULL) != 0 || !(ck_ok = true) ||
        pthread_cond_init(&l->cv_pld, NULL) != 0 || !(pcv_ok = true)) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of resources");
        goto fail;
    }
    atomic_init(&l->n_groups, 0);
    atomic_init(&l->n_ops, 0);
    l->trees = dp_calloc(LEDGER_TREE_CACHE, sizeof *l->trees);
    if (l->trees == NULL) {
        dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    if (db_path == NULL || strlen(db_path) >= sizeof l->path) {
        dp_err_set(err, DP_EINVAL, "db", "database path too long");
        goto fail;
    }
    snprintf(l->path, sizeof l->path, "%s", db_path);
    int rc = sqlite3_open_v2(db_path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: cannot open %s: %s", db_path,
               l->db ? sqlite3_errmsg(l->db) : sqlite3_errstr(rc));
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot open the ledger database");
        goto fail;
    }
    sqlite3_extended_result_codes(l->db, 1);
    sqlite3_busy_timeout(l->db, LEDGER_BUSY_MS);
    /* FULL: a committed spend lost in a crash is budget that can be spent twice (STYLE.md 2.5). */
    if (exec_sql(l->db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL", err) != DP_OK)
        goto fail;
    if (orders_load(l, err) != DP_OK)
        goto fail;
    for (int i = 0; i < ST_N; i++) {
        rc = sqlite3_prepare_v3(l->db, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &l->st[i], NULL);
        if (rc != SQLITE_OK) {
            sql_fail(l, rc, SQL[i], err);
            goto fail;
        }
    }
    rc = sqlite3_open_v2(db_path, &l->ck_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        dp_log(DP_LOG_ERROR, NULL, "ledger: cannot open %s for checkpoints: %s", db_path,
               l->ck_db ? sqlite3_errmsg(l->ck_db) : sqlite3_errstr(rc));
        dp_err_set(err, DP_EINTERNAL, NULL, "cannot open the ledger database");
        goto fail;
    }
    sqlite3_extended_result_codes(l->ck_db, 1);
    sqlite3_busy_timeout(l->ck_db, LEDGER_BUSY_MS);
    if (exec_sql(l->ck_db, "PRAGMA synchronous=FULL", err) != DP_OK)
        goto fail;
    if (pthread_create(&l->ck_thread, NULL, checkpointer_main, l) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the ledger checkpointer");
        goto fail;
    }
    l->ck_started = true;
    if (pthread_create(&l->pld_thread, NULL, pld_main, l) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the ledger PLD thread");
        goto fail;
    }
    l->pld_started = true;
    sqlite3_wal_hook(l->db, wal_hook, l); /* replaces auto-checkpointing on the write connection */
    if (pthread_create(&l->thread, NULL, committer_main, l) != 0) {
        dp_err_set(err, DP_ENOMEM, NULL, "cannot start the ledger committer");
        goto fail;
    }
    l->thread_started = true;
    return l;
fail:
    if (l->ck_started || l->pld_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->cv_ckpt);
        pthread_cond_signal(&l->cv_pld);
        pthread_mutex_unlock(&l->mu);
        if (l->ck_started)
            pthread_join(l->ck_thread, NULL);
        if (l->pld_started)
            pthread_join(l->pld_thread, NULL);
    }
    for (int i = 0; i < ST_N; i++)
        sqlite3_finalize(l->st[i]);
    sqlite3_close(l->db);
    sqlite3_close(l->ck_db);
    if (pcv_ok)
        pthread_cond_destroy(&l->cv_pld);
    if (ck_ok)
        pthread_cond_destroy(&l->cv_ckpt);
    if (cv_ok)
        pthread_cond_destroy(&l->cv_work);
    if (mu_ok)
        pthread_mutex_destroy(&l->mu);
    if (cache_ok)
        pthread_mutex_destroy(&l->cache_mu);
    dp_free(l->trees);
    dp_free(l);
    return NULL;
}

void ledger_free(ledger *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cv_work);
    pthread_cond_signal(&l->cv_ckpt);
    pthread_cond_signal(&l->cv_pld);
    pthread_mutex_unlock(&l->mu);
    if (l->thread_started) /* finishes every queued op first, and those the PLD thread holds */
        pthread_join(l->thread, NULL);
    if (l->pld_started)
        pthread_join(l->pld_thread, NULL);
    if (l->ck_started)
        pthread_join(l->ck_thread, NULL);
    for (int i = 0; i < ST_N; i++)
        sqlite3_finalize(l->st[i]);
    sqlite3_close(l->db);
    sqlite3_close(l->ck_db);
    pthread_cond_destroy(&l->cv_pld);
    pthread_cond_destroy(&l->cv_ckpt);
    pthread_cond_destroy(&l->cv_work);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->cache_mu);
    for (size_t i = 0; i < LEDGER_TREE_CACHE; i++)
        log_tree_clear(&l->trees[i]);
    dp_free(l->trees);
    dp_free(l);
}

/* ---- public writes
 * -------------------------------------------------------------------------------------------- */

int ledger_token_generate(char out[LEDGER_TOKEN_BUF], dp_err *err)
{
    uint8_t raw[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no source of randomness for tokens");
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t r = read(fd, raw + got, sizeof raw - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != sizeof raw)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no source of randomness for tokens");
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "dps_", 4);
    for (size_t i = 0; i < sizeof raw; i++) {
        out[4 + 2 * i] = hex[raw[i] >> 4];
        out[5 + 2 * i] = hex[raw[i] & 15];
    }
    out[4 + 2 * sizeof raw] = '\0';
    memset(raw, 0, sizeof raw);
    return DP_OK;
}

int ledger_token_register_admin(ledger *l, const char *token, int64_t *token_id, dp_err *err)
{
    if (token == NULL || strlen(token) < 16)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token must have at least 16 bytes");
    ledger_op op = {.kind = OP_TOKEN_ADMIN, .token_id_out = token_id};
    dp_sha256(token, strlen(token), op.token_hash);
    submit(l, &op);
    return finish(&op, err);
}

int ledger_token_install_admin(ledger *l, const char *token, int64_t *token_id, int64_t *n_revoked,
                               dp_err *err)
{
    if (token == NULL || strlen(token) < 16)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token must have at least 16 bytes");
    *n_revoked = 0;
    ledger_op op = {.kind = OP_TOKEN_ADMIN, .token_id_out = token_id, .revoked_out = n_revoked};
    dp_sha256(token, strlen(token), op.token_hash);
    submit(l, &op);
    return finish(&op, err);
}

int ledger_silo_token_rotate(ledger *l, int64_t silo_id, char token_out[LEDGER_TOKEN_BUF],
                             int64_t *token_id, int64_t *n_revoked, dp_err *err)
{
    *n_revoked = 0;
    if (ledger_token_generate(token_out, err) != DP_OK)
        return err->code;
    ledger_op op = {
        .kind = OP_TOKEN_ROTATE, .id = silo_id, .token_id_out = token_id, .revoked_out = n_revoked};
    dp_sha256(token_out, strlen(token_out), op.token_hash);
    submit(l, &op);
    if (op.rc != DP_OK)
        memset(token_out, 0, LEDGER_TOKEN_BUF);
    return finish(&op, err);
}

int ledger_silo_token_revoke(ledger *l, int64_t silo_id, int64_t *n_revoked, dp_err *err)
{
    *n_revoked = 0;
    ledger_op op = {.kind = OP_TOKEN_REVOKE, .id = silo_id, .revoked_out = n_revoked};
    submit(l, &op);
    return finish(&op, err);
}

int ledger_silo_create(ledger *l, const char *name, const ledger_budget *b, ledger_silo_view *out,
                       char token_out[LEDGER_TOKEN_BUF], dp_err *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > LEDGER_NAME_MAX)
        return dp_err_set(err, DP_EINVAL, "name", "name must have 1 to %d bytes", LEDGER_NAME_MAX);
    if (ledger_budget_check(b, err) != DP_OK)
        return err->code;
    if (ledger_token_generate(token_out, err) != DP_OK)
        return err->code;
    ledger_op op = {.kind = OP_SILO_CREATE, .name = name, .budget = b, .view = out};
    dp_sha256(token_out, strlen(token_out), op.token_hash);
    submit(l, &op);
    if (op.rc != DP_OK)
        memset(token_out, 0, LEDGER_TOKEN_BUF);
    return finish(&op, err);
}

int ledger_silo_patch(ledger *l, int64_t id, const ledger_patch *p, ledger_silo_view *out,
                      dp_err *err)
{
    if (p->name != NULL && (p->name[0] == '\0' || strlen(p->name) > LEDGER_NAME_MAX))
        return dp_err_set(err, DP_EINVAL, "name", "name must have 1 to %d bytes", LEDGER_NAME_MAX);
    /* one item: the PLD figures of a PLD silo whose cap goes down (apply_silo_patch) */
    ledger_charge_result res;
    op_item *it = dp_calloc(1, sizeof *it);
    if (it == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    it->req_copy.silo_id = id;
    it->req = &it->req_copy;
    it->res = &res;
    ledger_op op = {
        .kind = OP_SILO_PATCH, .id = id, .patch = p, .view = out, .items = it, .n_items = 1};
    submit(l, &op);
    dp_free(it);
    return finish(&op, err);
}

int ledger_silo_archive(ledger *l, int64_t id, ledger_silo_view *out, dp_err *err)
{
    ledger_op op = {.kind = OP_SILO_ARCHIVE, .id = id, .view = out};
    submit(l, &op);
    return finish(&op, err);
}

/* ---- PLD recomposition (caller threads; see PLD SILOS)
 * ---------------------------------------------------- */

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

/* Parses a stored event; count > 1 wraps it in self_composed. NULL if it cannot be used. */
static acct_event *stored_event(const char *text, int64_t count)
{
    json_error_t jerr;
    json_t *j = text != NULL ? json_loads(text, 0, &jerr) : NULL;
    acct_event *ev = NULL;
    dp_err e;
    dp_err_clear(&e);
    if (j != NULL && event_json_parse(j, false, "event", &ev, &e) != DP_OK)
        ev = NULL;
    json_decref(j);
    if (ev != NULL && count > 1) {
        acct_event *sc = acct_event_alloc(ACCT_EV_SELF_COMPOSED);
        if (sc == NULL) {
            acct_event_free(ev);
            return NULL;
        }
        sc->count = (uint64_t)count;
        sc->child = ev;
        ev = sc;
    }
    return ev;
}

/* eps_PLD (upper bound) at delta of silo's charges [+ its active claims] [+ extra], all under
 * relation nb, read on db (inside the caller's read transaction). +INFINITY when PLD cannot account
 * them: an unsupported event, another relation, too many distinct events. Never fails otherwise. */
static double pld_eps_of(sqlite3 *db, int64_t silo, double delta, bool with_claims,
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
            rc = b_i64(st, ":silo", silo);
        if (rc == SQLITE_OK && q == 1)
            rc = b_i64(st, ":now", now);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            rc = SQLITE_OK;
            if (strcmp((const char *)sqlite3_column_text(st, 1), nb_name) != 0 ||
                !compose_add(root, cap,
                             stored_event((const char *)sqlite3_column_text(st, 0),
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
                           "SELECT neighboring FROM charges WHERE silo_id = :s ORDER BY id DESC "
                           "LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK &&
        b_i64(st, ":s", silo) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
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
        b_i64(st, ":id", id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        ev = stored_event((const char *)sqlite3_column_text(st, 0), 1);
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
static int pld_prepare(ledger *l, op_item *it, dp_err *err)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(l->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_close(db);
        return dp_err_set(err, DP_EINTERNAL, NULL, "internal ledger error");
    }
    sqlite3_busy_timeout(db, LEDGER_BUSY_MS);
    int64_t silo = it->req->silo_id, now = now_ms();
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
        rc = b_i64(st, ":silo", silo);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        it->snap_n_charges = sqlite3_column_int64(st, 0);
        delta = it->want_delta > 0 ? it->want_delta : col_dbl(st, 1);
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
            b_i64(cs, ":s", silo) == SQLITE_OK && b_i64(cs, ":now", now) == SQLITE_OK &&
            sqlite3_step(cs) == SQLITE_ROW)
            any_claim = sqlite3_column_int64(cs, 0) > (it->claim_id != 0 ? 1 : 0);
        sqlite3_finalize(cs);
        if (it->req->event != NULL) {
            acct_neighboring nb = it->req->neighboring;
            double spent = pld_cache_get(l, silo, it->snap_n_charges, delta);
            if (isnan(spent)) {
                spent = pld_eps_of(db, silo, delta, false, NULL, nb, now);
                pld_cache_put(l, silo, it->snap_n_charges, delta, spent);
            }
            it->pld_spent = spent;
            it->pld_after = pld_eps_of(db, silo, delta, false, it->req->event, nb, now);
            it->pld_wb = any_claim ? pld_eps_of(db, silo, delta, true, it->req->event, nb, now)
                                   : it->pld_after;
        } else if (it->claim_id != 0) {
            acct_neighboring nb = ACCT_NB_ADD_REMOVE;
            acct_event *ev = claim_event(db, it->claim_id, &nb);
            it->pld_spent = DP_INF;
            it->pld_after = ev != NULL ? pld_eps_of(db, silo, delta, false, ev, nb, now) : DP_INF;
            it->pld_wb =
                any_claim ? pld_eps_of(db, silo, delta, true, NULL, nb, now) : it->pld_after;
            acct_event_free(ev);
        } else {
            acct_neighboring nb = log_relation(db, silo);
            it->pld_spent = it->pld_after = DP_INF;
            it->pld_wb = pld_eps_of(db, silo, delta, true, NULL, nb, now);
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
        int rc = item_prepare(l, &reqs[i], "charge", &items[i], err);
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
    int rc = finish(op, err);
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
    submit(l, &op);
    rc = charge_finish(&op, out, n, dry_run, err);
    items_free(items, n);
    return rc;
}

/* ---- asynchronous charges (the HTTP dispatcher's path; contract in ledger.h) ---- */

struct ledger_pending {
    ledger *l;
    ledger_op op; /* op.cv initialised until collected */
    op_item *items;
    size_t n;
    bool dry_run;
    ledger_charge_result *out; /* caller-owned */
};

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
    pld_flags_clear(&p->op);
    if (op_init(&p->op) != DP_OK) {
        rc = finish(&p->op, err);
        items_free(p->items, n);
        dp_free(p);
        return rc;
    }
    if (enqueue(l, &p->op) != DP_OK) { /* stopping: wake will never be called */
        pthread_cond_destroy(&p->op.cv);
        rc = finish(&p->op, err);
        items_free(p->items, n);
        dp_free(p);
        return rc;
    }
    *pending = p; /* from here the committer may call wake at any time */
    return DP_OK;
}

int ledger_pending_finish(ledger_pending *p, dp_err *err)
{
    op_wait(p->l, &p->op); /* normally done already: called after wake */
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
    op_wait(p->l, &p->op);
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
    submit(l, &op);
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
    int rc = item_prepare(l, req, "claim", it, err);
    if (rc == DP_OK) {
        ledger_op op = {.kind = OP_CLAIM_CREATE,
                        .items = it,
                        .n_items = 1,
                        .timeout_ms = timeout_ms,
                        .claim = out};
        submit(l, &op);
        rc = finish(&op, err);
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
    submit(l, &op);
    dp_free(it);
    return finish(&op, err);
}

int ledger_claim_abort(ledger *l, int64_t claim_id, int64_t scope_silo_id, ledger_claim_view *out,
                       dp_err *err)
{
    ledger_op op = {
        .kind = OP_CLAIM_ABORT, .id = claim_id, .scope_silo_id = scope_silo_id, .claim = out};
    submit(l, &op);
    return finish(&op, err);
}

/* ---- views and reads
 * ------------------------------------------------------------------------------------------ */

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
    vec_add_up(h_rdp, held_rdp, l->n_orders);
    v->held_rho = ledger_sum_up(s->spent_rho, held_rho);
    if (loss_of(l, &s->b, s->spent_rdp, s->spent_rho, &v->spent_eps, &v->spent_order, err) !=
            DP_OK ||
        loss_of(l, &s->b, h_rdp, v->held_rho, &v->held_eps, NULL, err) != DP_OK)
        return err ? err->code : DP_EINTERNAL;
    v->remaining = remaining_of(&s->b, unit_value(&s->b, v->held_eps, v->held_rho));
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
        log_tree_build(db, s->id, s->n_charges, t);
        refine_set rf;
        memset(&rf, 0, sizeof rf);
        rf.log = t;
        rf.claims_ok = true;
        order = v->spent_order;
        eps = refined_of_order(l, b, &rf, false, false, s->spent_rdp, v->spent_eps, &order);
        log_tree_clear(t);
        dp_free(t);
        pthread_mutex_lock(&l->cache_mu);
        l->rdp_cache[slot].silo = s->id;
        l->rdp_cache[slot].n_charges = s->n_charges;
        l->rdp_cache[slot].delta = b->delta;
        l->rdp_cache[slot].eps = eps;
        l->rdp_cache[slot].order = order;
        pthread_mutex_unlock(&l->cache_mu);
    }
    if (eps < v->spent_eps) {
        v->spent_eps = eps;
        v->spent_order = order;
        if (v->n_active_claims == 0)
            v->held_eps = eps;
        v->remaining = remaining_of(b, v->held_eps);
    }
}

static int view_of(ledger *l, const silo_row *s, int64_t now, ledger_silo_view *v, dp_err *err)
{
    double held_rdp[LEDGER_MAX_ORDERS], held_rho;
    int64_t n_active;
    if (held_load(l, s->id, now, 0, held_rdp, &held_rho, &n_active, err) != DP_OK)
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
        "SELECT neighboring FROM charges WHERE silo_id = :s ORDER BY id DESC LIMIT 1";
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
        if (st != NULL && b_i64(st, ":s", v->id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            strcmp((const char *)sqlite3_column_text(st, 0), "replace_one") == 0)
            nb = ACCT_NB_REPLACE_ONE;
        st_done(st);
        /* PLD recomposition prepares its statements per call: milliseconds of FFT dominate */
        eps = pld_eps_of(store_conn_db(c), v->id, b->delta, false, NULL, nb, now_ms());
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
        v->remaining = remaining_of(b, v->held_eps);
    }
}

/* A statement cached on the caller's pooled connection (store.h; sql must have static storage).
 * Reset it with st_done after use; never finalise it. */
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
    int rc = silo_load_st(db, silo_st, l->n_orders, id, s, err);
    if (rc == DP_OK)
        rc =
            held_load_st(db, held_st, l->n_orders, id, now, 0, held_rdp, &held_rho, &n_active, err);
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
    st_done(st);
    return rc == SQLITE_DONE ? DP_OK : read_fail(store_conn_db(c), rc, "BEGIN", err);
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
        st_done(st);
        if (rc != SQLITE_DONE)
            dp_log(DP_LOG_WARN, NULL, "ledger: ending a read transaction failed (%d)", rc);
    }
}

int ledger_silo_get(ledger *l, store_conn *c, int64_t id, ledger_silo_view *out, dp_err *err)
{
    sqlite3_stmt *a = NULL, *b = NULL;
    int rc = prep(c, SQL[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, SQL[ST_CLAIMS_HELD], &b, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK)
        rc = view_read(l, c, a, b, id, now_ms(), out, err);
    read_end(c);
    st_done(a);
    st_done(b);
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
        rc = prep(c, SQL[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, SQL[ST_CLAIMS_HELD], &b, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK) {
        int src = b_i64(ids, ":after", after);
        if (src == SQLITE_OK)
            src = b_i64(ids, ":all", include_archived ? 1 : 0);
        if (src == SQLITE_OK)
            src = b_i64(ids, ":limit", (int64_t)limit);
        while (src == SQLITE_OK && n < limit && (src = sqlite3_step(ids)) == SQLITE_ROW) {
            idv[n++] = sqlite3_column_int64(ids, 0);
            src = SQLITE_OK;
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = read_fail(db, src, "list silos", err);
        st_done(ids);
    }
    int64_t now = now_ms();
    for (size_t i = 0; rc == DP_OK && i < n; i++)
        rc = view_read(l, c, a, b, idv[i], now, &v[i], err);
    read_end(c);
    st_done(ids);
    st_done(a);
    st_done(b);
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
        "SELECT cost_rdp, cost_rho, seq FROM charges WHERE silo_id = :silo "
        "ORDER BY id";
    sqlite3_stmt *a = NULL, *lg = NULL;
    silo_row *s = dp_malloc(sizeof *s);
    double sum[LEDGER_MAX_ORDERS] = {0}, v[LEDGER_MAX_ORDERS], rho = 0;
    int64_t n = 0;
    bool seq_ok = true, vec_ok = true;
    int rc = s != NULL ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (rc == DP_OK)
        rc = prep(c, SQL[ST_SILO_GET], &a, err);
    if (rc == DP_OK)
        rc = prep(c, log_sql, &lg, err);
    if (rc == DP_OK)
        rc = read_begin(c, err);
    if (rc == DP_OK)
        rc = silo_load_st(db, a, l->n_orders, id, s, err);
    if (rc == DP_OK) {
        int src = b_i64(lg, ":silo", id);
        while (src == SQLITE_OK && (src = sqlite3_step(lg)) == SQLITE_ROW) {
            src = SQLITE_OK;
            if (!col_vec(lg, 0, v, l->n_orders)) {
                vec_ok = false;
                continue;
            }
            vec_add_up(sum, v, l->n_orders);
            rho = ledger_sum_up(rho, sqlite3_column_double(lg, 1));
            n++;
            if (sqlite3_column_int64(lg, 2) != n) /* seq numbers 1..n in log order */
                seq_ok = false;
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = read_fail(db, src, "read log", err);
        st_done(lg);
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
    st_done(a);
    st_done(lg);
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
                              "(:job = 0 OR job_id = :job) ORDER BY id LIMIT :limit";
    sqlite3_stmt *st = NULL;
    ledger_charge_row *rows = dp_calloc(f->limit, sizeof *rows);
    size_t n = 0;
    bool oom = rows == NULL;
    int rc = oom ? dp_err_set(err, DP_ENOMEM, NULL, "out of memory") : prep(c, sql, &st, err);
    if (rc == DP_OK) {
        int src = b_i64(st, ":silo", silo_id);
        if (src == SQLITE_OK)
            src = b_i64(st, ":after", f->after);
        if (src == SQLITE_OK)
            src = b_i64(st, ":since", f->since_ms);
        if (src == SQLITE_OK)
            src = b_i64(st, ":until", f->until_ms);
        if (src == SQLITE_OK)
            src = b_i64(st, ":job", f->job_id);
        if (src == SQLITE_OK)
            src = b_i64(st, ":limit", (int64_t)f->limit);
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
            r->cost_eps = col_dbl(st, 11);
            r->cost_rho = col_dbl(st, 12);
            r->eps_after = col_dbl(st, 13);
            r->rho_after = col_dbl(st, 14);
            r->remaining_after = col_dbl(st, 15);
        }
        if (src != SQLITE_DONE && src != SQLITE_OK)
            rc = read_fail(db, src, "list charges", err);
        else if (oom)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
        st_done(st);
    }
    st_done(st);
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
        int src = b_i64(st, ":id", claim_id);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            memset(out, 0, sizeof *out);
            out->id = sqlite3_column_int64(st, 0);
            out->silo_id = sqlite3_column_int64(st, 1);
            out->created_at_ms = sqlite3_column_int64(st, 2);
            out->expires_at_ms = sqlite3_column_int64(st, 3);
            out->closed_at_ms = sqlite3_column_int64(st, 4);
            out->state = claim_state_parse((const char *)sqlite3_column_text(st, 5));
            out->job_id = sqlite3_column_int64(st, 6);
            out->cost_rho = sqlite3_column_double(st, 7);
            out->cost_eps = DP_NAN;
            out->charge_id = sqlite3_column_int64(st, 8);
            /* An active claim past its expiry is released: report it as expired. */
            if (out->state == LEDGER_CLAIM_ACTIVE && out->expires_at_ms <= now_ms())
                out->state = LEDGER_CLAIM_EXPIRED;
        } else if (src == SQLITE_DONE) {
            rc = dp_err_set(err, DP_ENOTFOUND, "claim_id", "claim %lld does not exist",
                            (long long)claim_id);
        } else {
            rc = read_fail(db, src, "get claim", err);
        }
        st_done(st);
    }
    st_done(st);
    return rc;
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
        int src = b_blob(st, ":hash", h, sizeof h);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_ROW)
            *token_id = sqlite3_column_int64(st, 0);
        else if (src != SQLITE_DONE)
            rc = read_fail(store_conn_db(c), src, "token id", err);
    }
    st_done(st);
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
        int src = b_blob(st, ":hash", h, sizeof h);
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
            rc = read_fail(db, src, "token lookup", err);
        }
        st_done(st);
    }
    st_done(st);
    return rc;
}
