/*
 * ledger: per-silo privacy budgets. The spend log, its admission control, claims and tokens (issue
 * #5).
 *
 * WHAT. A silo owns a budget: (epsilon, delta) composed by RDP (default), zCDP or PLD; or a zCDP
 * rho; or none at all (a silo that opted out of DP, like the non-private clients of Aldaghri et al.
 * (FedHDP): its spends are recorded, never refused). Every spend is one append-only row of
 * `charges` (migrations/0003_ledger.sql). A silo's totals are a cached per-order RDP vector and a
 * rho sum, derived from its charges: each append updates them in the same transaction, and
 * ledger_silo_verify recomputes them from the log.
 *
 * ADMISSION. A charge of cost c is admitted iff  conv(spent + reserved + c) <= cap,  evaluated in
 * ONE BEGIN IMMEDIATE transaction together with the append, with no tolerance in the permissive
 * direction. "reserved" is the sum of the silo's active, unexpired claims. conv is
 * the RDP -> (eps, delta) conversion of accounting/rdp.h at the silo's delta (zCDP silos: the RDP
 * curve rho*alpha, Bun & Steinke 2016 Def. 1.1, converted the same way; rho budgets compare rho
 * sums directly). For rdp and pld silos it is acct_rdp_epsilon_curve of the composed events on the
 * summed vector: the calculator's answer (continuous order with conversion "optimal", the sum of
 * epsilons for pure events) for logs of up to 8 distinct events, the grid minimum otherwise. Vector
 * sums round upward (ledger_sum_up), so a cached total is never below the exact sum of its terms.
 *
 * GROUP COMMIT (DESIGN). All writes go through one committer thread, db/writer's (db/writer.h, the
 * one writer of the database), that owns the only write connection (synchronous=FULL). Callers
 * enqueue an op and sleep on their own condition variable; the committer takes every queued op (up
 * to LEDGER_MAX_GROUP), runs them in one BEGIN IMMEDIATE transaction, each inside its own SAVEPOINT
 * so that a refused or failing op is rolled back alone, COMMITs once (one fsync for the group) and
 * only then wakes the waiters. A waiter is acknowledged only after COMMIT returned; if COMMIT
 * fails, every op of the group fails. Throughput therefore grows with concurrency. The FIFO, mutex
 * and per-op condition variable follow redis bio.c (src/bio.c: a FIFO, a mutex and a condition
 * variable). Costs (RDP curves) are computed by the calling thread before enqueueing, so nothing
 * slow runs inside the write transaction.
 *
 * THREADS. A ledger is shared by all HTTP threads and job workers. Write calls block until their op
 * is committed or refused; ledger_charge_start is the non-blocking form of a charge (the
 * committer calls the caller's wake-up after COMMIT instead of signalling a waiting thread). Read
 * calls take the caller's store_conn (a borrowed pool connection, never used by two threads at
 * once; their statements are cached on it) and see a committed snapshot.
 *
 * USE FROM A HANDLER OR A JOB (estimators, training rounds). A handler finds the ledger in
 * rq->ledger (http/server.h); a job worker gets the same pointer from whoever started it (main.c
 * owns it). One round that spends on several silos is one all-or-nothing call:
 *   - fill ledger_charge_req reqs[K], one per silo: silo_id, event (a validated acct_event tree),
 *     idempotency_key (e.g. "job-9-round-3"), job_id, reason; event_json may stay NULL;
 *   - rc = ledger_charge_batch(l, reqs, K, false, out, &err) with ledger_charge_result out[K];
 *   - DP_OK: all charged (or replayed). DP_EBUDGET: nothing charged; out[i].status names the
 *     refused silo, out[i].would_be and out[i].budget say why. dry_run = true asks, writes nothing.
 * A job that must not start unless its whole spend fits can reserve it first with
 * ledger_claim_create and commit per round, or check with a dry run.
 *
 * OWNERSHIP. Pointers in requests are borrowed for the duration of the call. Views are plain
 * structs filled by the callee; lists are arrays owned by the caller, freed with the matching
 * _free.
 */
#ifndef DP_SERVICE_LEDGER_H
#define DP_SERVICE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "accounting/event.h"
#include "accounting/rdp.h"
#include "common/dp_err.h"
#include "service/db/store.h"
#include "service/db/writer.h"

#define LEDGER_MAX_ORDERS   256                      /* RDP orders per vector */
#define LEDGER_MAX_BATCH    1024                     /* silos in one batch charge */
#define LEDGER_MAX_GROUP    DB_WRITER_MAX_GROUP      /* ops in one group commit */
#define LEDGER_NAME_MAX     200                      /* silo name bytes */
#define LEDGER_KEY_MAX      200                      /* idempotency key bytes */
#define LEDGER_REASON_MAX   2000                     /* reason bytes */
#define LEDGER_TOKEN_BUF    80                       /* a token plus NUL */
#define LEDGER_LIST_MAX     1000                     /* page size cap */
#define LEDGER_CLAIM_MAX_MS (7LL * 24 * 3600 * 1000) /* longest claim timeout: one week */

typedef enum ledger_accountant {
    LEDGER_ACCT_RDP = 0, /* per-order RDP vector, converted at delta */
    LEDGER_ACCT_ZCDP,    /* rho sum */
    LEDGER_ACCT_PLD, /* privacy loss distributions; see ledger/ledger.c on how admission bounds it
                      */
    LEDGER_ACCT_NONE /* opted out of DP */
} ledger_accountant;

typedef enum ledger_budget_kind {
    LEDGER_BUDGET_EPS_DELTA = 0, /* cap on epsilon at delta */
    LEDGER_BUDGET_RHO,           /* cap on the zCDP rho */
    LEDGER_BUDGET_NONE           /* {"private": false} */
} ledger_budget_kind;

typedef struct ledger_budget {
    ledger_budget_kind kind;
    ledger_accountant accountant; /* EPS_DELTA: RDP, ZCDP or PLD; RHO: ZCDP; NONE: NONE */
    acct_conversion conversion;   /* RDP -> eps conversion (accounting/rdp.h); default BALLE2020 */
    double epsilon;               /* EPS_DELTA: cap, >= 0 */
    double delta; /* EPS_DELTA: in (0, 1); RHO: optional (NAN = none) for reporting eps */
    double rho;   /* RHO: cap, >= 0 */
} ledger_budget;

/* Checks domains and combinations; the failing field is named ("budget.delta"...). */
int ledger_budget_check(const ledger_budget *b, dp_err *err);
/* "rdp", "zcdp", "pld", "none". Never NULL. */
const char *ledger_accountant_name(ledger_accountant a);
/* Parses "rdp", "zcdp", "pld"; DP_EINVAL (field "budget.accountant") otherwise. */
int ledger_accountant_parse(const char *s, ledger_accountant *out, dp_err *err);

/* Totals of a silo, in the unit of its budget where one applies. Non-finite values: +INFINITY means
 * unbounded loss (e.g. a charge with no finite zCDP bound), NAN means "not applicable" (no delta).
 */
typedef struct ledger_silo_view {
    int64_t id;
    char name[LEDGER_NAME_MAX + 1];
    ledger_budget budget;
    int64_t created_at_ms;
    int64_t archived_at_ms; /* 0 while active */
    int64_t n_charges;
    int64_t n_active_claims; /* unexpired */
    double spent_eps;        /* at budget.delta */
    double spent_order;      /* RDP order attaining spent_eps (NAN if n/a) */
    double spent_rho;        /* sum of rho over charges */
    double held_eps;         /* spent plus active claims, at budget.delta */
    double held_rho;
    double remaining; /* cap - held, in the budget's unit (eps or rho); NAN for NONE */
} ledger_silo_view;

typedef struct ledger ledger;

/* Opens the ledger on the database file (migrations already applied), fixes the RDP order grid at
 * first start, and starts the committer thread. Returns NULL and fills err on failure. Owned by
 * caller. */
ledger *ledger_open(const char *db_path, dp_err *err);
/* Stops the committer after it has finished every queued op, then closes. NULL is a no-op. */
void ledger_free(ledger *l);

/* Group-commit statistics since open: committed groups and the ops they carried (a refused op
 * counts). ops / groups is the mean group size. Thread-safe (atomics). */
void ledger_stats(const ledger *l, uint64_t *groups, uint64_t *ops);

/* The cache of event costs (ledger/curves.c): a charge whose event (tree and neighbouring relation)
 * was seen before takes its RDP curve on the order grid and its rho from the cache instead of
 * computing them again; the figures are bit-identical. Bounded (LEDGER_CURVE_CACHE entries, least
 * recently used evicted), shared by every thread, on by default. */
#define LEDGER_CURVE_CACHE 4096
typedef struct ledger_curve_stats {
    uint64_t hits;          /* costs taken from the cache */
    uint64_t misses;        /* costs computed while the cache was on */
    uint64_t evictions;     /* entries replaced by another event's */
    uint64_t refined_hits;  /* an event's own refined epsilon (cost_eps) taken from the cache */
    uint64_t would_be_hits; /* a charge's would-be epsilon taken from its dry run's (wb_memo) */
    size_t entries;         /* entries held */
    size_t capacity;        /* entries it can hold (0: no cache) */
    bool enabled;
} ledger_curve_stats;
/* Thread-safe. */
void ledger_curve_cache_stats(const ledger *l, ledger_curve_stats *out);
/* Turns the cache off (every cost computed, as without it) or on again; what it holds is kept.
 * For benchmarks and tests; thread-safe. */
void ledger_curve_cache_enable(ledger *l, bool on);

/* The database writer the ledger commits through (db/writer.h; borrowed, valid until ledger_free).
 * Other clients (tuning draws, through app->writer; job state and per-round metrics next) submit
 * their own db_write_ops to it, so that there is one writer of the database; a write that must
 * commit with a charge goes through ledger_charge_batch_with instead (db/writer.h, COMPOSITE
 * OPERATIONS). */
db_writer *ledger_writer(ledger *l);

/* The RDP orders of every vector in this ledger (borrowed, valid until ledger_free). */
const double *ledger_orders(const ledger *l, size_t *n_orders);

/* ---- tokens ---- */
typedef enum ledger_role { LEDGER_ROLE_NONE = 0, LEDGER_ROLE_ADMIN, LEDGER_ROLE_SILO } ledger_role;
typedef struct ledger_principal {
    ledger_role role;
    int64_t token_id; /* tokens.id: the actor recorded on charges; 0 for NONE */
    int64_t silo_id;  /* ROLE_SILO: the silo it may read and charge */
} ledger_principal;

/* Writes a fresh random token ("dps_" + 64 hex digits, 256 bits from /dev/urandom) into out. */
int ledger_token_generate(char out[LEDGER_TOKEN_BUF], dp_err *err);
/* Records the admin token's hash (idempotent) and returns its id. token is borrowed, never stored.
 */
int ledger_token_register_admin(ledger *l, const char *token, int64_t *token_id, dp_err *err);
/* Resolves a bearer token through its SHA-256. Unknown or revoked token -> DP_EUNAUTH. */
int ledger_token_lookup(store_conn *c, const char *token, ledger_principal *out, dp_err *err);
/* The tokens.id of token, revoked or not, or 0 when it is unknown (or NULL): who to record as the
 * creator of work that was admitted while the token was valid. Errors are database errors only. */
int ledger_token_id(store_conn *c, const char *token, int64_t *token_id, dp_err *err);

/* Token rotation (docs/BUDGETS.md "Access control"). Tokens are never deleted: a revoked token
 * keeps its row (created_at, revoked_at: the audit trail) and never resolves again. A token that
 * was revoked can never be registered again (DP_EINVAL "admin_token").
 * ledger_token_install_admin: ledger_token_register_admin, then every OTHER admin token is revoked,
 * in one transaction (the token file holds the one admin credential). *n_revoked: how many now. */
int ledger_token_install_admin(ledger *l, const char *token, int64_t *token_id, int64_t *n_revoked,
                               dp_err *err);
/* Issues a new token for silo_id into token_out (owned by the caller; shown once, stored as a hash)
 * and revokes the silo's previous tokens in the same transaction. DP_ENOTFOUND: no such silo;
 * DP_ECONFLICT: the silo is archived. */
int ledger_silo_token_rotate(ledger *l, int64_t silo_id, char token_out[LEDGER_TOKEN_BUF],
                             int64_t *token_id, int64_t *n_revoked, dp_err *err);
/* Revokes every token of silo_id (archived or not) without issuing one. DP_ENOTFOUND: no silo. */
int ledger_silo_token_revoke(ledger *l, int64_t silo_id, int64_t *n_revoked, dp_err *err);

/* ---- silos ---- */
/* Creates a silo; writes its token (returned once, stored as a hash only) into token_out. Names are
 * unique among active silos (DP_ECONFLICT, field "name"); an archived silo's name may be reused. */
int ledger_silo_create(ledger *l, const char *name, const ledger_budget *b, ledger_silo_view *out,
                       char token_out[LEDGER_TOKEN_BUF], dp_err *err);
int ledger_silo_get(ledger *l, store_conn *c, int64_t id, ledger_silo_view *out, dp_err *err);
/* Silos with id > after, ascending, at most limit (<= LEDGER_LIST_MAX). *out (owned by caller, free
 * with ledger_views_free) may be NULL when *n_out is 0. */
int ledger_silo_list(ledger *l, store_conn *c, int64_t after, size_t limit, bool include_archived,
                     ledger_silo_view **out, size_t *n_out, dp_err *err);
void ledger_views_free(ledger_silo_view *v);

/* A PATCH: fields left NULL/NAN are kept. A rename (to a name no other active silo has, else
 * DP_ECONFLICT, field "name") and a raise (same delta, cap not lower) are always accepted. A lower
 * cap or another delta is checked with the admission rule: what is held (spent plus active claims)
 * at the new delta, min(RDP, PLD) for a PLD silo, above the new cap is DP_ECONFLICT (409). The
 * accountant and budget kind never change. */
typedef struct ledger_patch {
    const char *name; /* borrowed; NULL keeps */
    double epsilon;   /* NAN keeps */
    double delta;     /* NAN keeps */
    double rho;       /* NAN keeps */
} ledger_patch;
int ledger_silo_patch(ledger *l, int64_t id, const ledger_patch *p, ledger_silo_view *out,
                      dp_err *err);
/* Archives: no further charges or claims; the log stays readable. Archiving twice is a no-op. */
int ledger_silo_archive(ledger *l, int64_t id, ledger_silo_view *out, dp_err *err);

/* Recomputes a silo's totals from its log and compares them with the cached ones, bit for bit (the
 * sum is taken in the same order with the same rounding). */
typedef struct ledger_verify {
    bool consistent;
    int64_t n_charges_log, n_charges_cached;
    double spent_rho_log, spent_rho_cached;
    double max_abs_diff_rdp; /* largest |log - cached| over orders */
} ledger_verify;
int ledger_silo_verify(const ledger *l, store_conn *c, int64_t id, ledger_verify *out, dp_err *err);

/* ---- charges ---- */
/* One spend against one silo. Every pointer is borrowed for the duration of the call. */
typedef struct ledger_charge_req {
    int64_t silo_id;
    const acct_event *event; /* validated tree (acct_event_check) */
    acct_neighboring neighboring;
    /* The event as canonical JSON (compact, sorted keys), stored in the log. NULL: the ledger
     * writes it from `event` (C callers such as training jobs need no JSON). */
    const char *event_json;
    const char *idempotency_key; /* NULL = none; <= LEDGER_KEY_MAX bytes */
    const char *reason;          /* NULL = none; <= LEDGER_REASON_MAX bytes */
    int64_t job_id;              /* 0 = none */
    int64_t actor_token_id;      /* tokens.id of the caller; 0 = none (auth off, internal) */
} ledger_charge_req;

/* The outcome for one silo. Figures are in `unit` (the silo budget's: eps at delta, or rho). */
typedef struct ledger_charge_result {
    int status;    /* DP_OK, or why this silo failed: DP_EBUDGET, DP_ENOTFOUND, DP_ECONFLICT,
                      DP_ENUMERIC; DP_OK items of a failed batch were not charged */
    bool replayed; /* idempotent retry: the first answer, nothing charged now */
    bool dry_run;  /* admitted (or not) but nothing written */
    int64_t silo_id;
    int64_t charge_id; /* 0 when nothing was written */
    int64_t created_at_ms;
    int64_t seq; /* n_charges of the silo after this charge */
    ledger_budget_kind kind;
    double cost_eps;  /* this charge alone at the silo's delta (NAN if no delta) */
    double cost_rho;  /* this charge's rho (INFINITY if none) */
    double spent;     /* before the charge; computed for a refusal or when claims are active, NAN
                         otherwise (saves two conversions per accepted charge) */
    double reserved;  /* held by active claims, before; same rule as spent */
    double requested; /* this charge alone */
    double would_be;  /* conv(spent + reserved + cost) */
    double budget;    /* the cap */
    double spent_eps_after, spent_rho_after,
        remaining_after; /* totals after (first answer on replay) */
} ledger_charge_result;

/* Charges every req[i] (distinct silos), all or nothing, in one transaction. out[i] (caller-owned
 * array of n) receives each silo's outcome. Returns DP_OK when all were charged (or replayed, or
 * admitted on a dry run); otherwise the first failure's code with err->field "charges[i]..." and
 * nothing written. */
int ledger_charge_batch(ledger *l, const ledger_charge_req *reqs, size_t n, bool dry_run,
                        ledger_charge_result *out, dp_err *err);
/* ledger_charge_batch of a batch that has its own idempotency key (POST /v1/charges
 * "idempotency_key"; borrowed, 1..LEDGER_KEY_MAX bytes, NULL = none; items should carry it as their
 * idempotency_key unless they have their own). The whole batch (its silos, events, relations, jobs
 * and item keys, in any order) is recorded under (reqs[0].actor_token_id, batch_key): a retry of
 * the same batch is replayed whole; the key with another batch is DP_ECONFLICT (field
 * "idempotency_key"), never a partial replay. */
int ledger_charge_batch_keyed(ledger *l, const ledger_charge_req *reqs, size_t n,
                              const char *batch_key, bool dry_run, ledger_charge_result *out,
                              dp_err *err);
/* A write of the caller's that must commit together with a charge (an estimator run's row): called
 * on the ledger's committer thread with its write connection db, inside the charge's SAVEPOINT,
 * after every item was admitted; out[0..n-1] hold the charges' outcomes (replayed ones included).
 * It must be quick and may only use db (prepare, step, finalize: no locks, no I/O, no ledger
 * calls). A non-OK return (err set) rolls the charge back with it. */
typedef int (*ledger_write_fn)(sqlite3 *db, void *arg, const ledger_charge_result *out, size_t n,
                               dp_err *err);
/* ledger_charge_batch (never a dry run) with write(db, write_arg, out, n, err) in the same
 * transaction: both commit or neither (a busy database, a refusal, a failing write, a failed
 * COMMIT). n may be 0: the write alone, through the committer. reqs, out and write_arg are borrowed
 * for the call. A PLD silo may make the committer run the op more than once; write is then called
 * again, after the previous attempt was rolled back. */
int ledger_charge_batch_with(ledger *l, const ledger_charge_req *reqs, size_t n,
                             ledger_write_fn write, void *write_arg, ledger_charge_result *out,
                             dp_err *err);
/* ledger_charge_batch of one request. */
int ledger_charge(ledger *l, const ledger_charge_req *req, bool dry_run, ledger_charge_result *out,
                  dp_err *err);

/* Asynchronous charge, for callers that must not block a thread on the group commit (the HTTP
 * dispatcher suspends the connection instead; http/server.h PENDING). ledger_charge_start checks
 * and prepares like ledger_charge_batch (batch_fields: name failing items "charges[i]", as
 * ledger_charge_batch does; false: as ledger_charge does), queues the op and returns at once:
 *   - DP_OK: *pending (owned) is set, and wake(wake_arg) WILL be called exactly once, from the
 *     committer thread (possibly before ledger_charge_start returns), after the group's COMMIT (or
 *     refusal). wake must be quick and must not call into the ledger. Then call
 *     ledger_pending_finish, which returns what ledger_charge_batch would have returned and fills
 *     out; or ledger_pending_free to drop the answer (the client has gone).
 *   - otherwise: the error, with nothing queued, *pending NULL and wake never called.
 * reqs, every string and event they point to, and out (n results) are borrowed until
 * ledger_pending_finish/ledger_pending_free returns. A PLD silo's figures are computed by the
 * ledger's own PLD thread before wake is called, so ledger_pending_finish never composes anything:
 * every charge completes on the committer's wake-up alone. */
typedef struct ledger_pending ledger_pending;
int ledger_charge_start(ledger *l, const ledger_charge_req *reqs, size_t n, const char *batch_key,
                        bool dry_run, bool batch_fields, ledger_charge_result *out,
                        void (*wake)(void *arg), void *wake_arg, ledger_pending **pending,
                        dp_err *err);
/* Collects the outcome (waits if wake has not been called yet) and frees p. */
int ledger_pending_finish(ledger_pending *p, dp_err *err);
/* Waits for the outcome if needed and discards it; frees p. NULL is a no-op. */
void ledger_pending_free(ledger_pending *p);

/* A row of the audit log. Strings are owned by the array (freed by ledger_charge_rows_free). */
typedef struct ledger_charge_row {
    int64_t id, silo_id, created_at_ms, actor_token_id, job_id, claim_id, seq;
    char *idempotency_key; /* NULL if none */
    char *reason;          /* NULL if none */
    char *event;           /* JSON text */
    char neighboring[16];
    double cost_eps, cost_rho, eps_after, rho_after, remaining_after; /* NAN where n/a */
} ledger_charge_row;

typedef struct ledger_charge_filter {
    int64_t after;    /* charges with id > after */
    size_t limit;     /* <= LEDGER_LIST_MAX */
    int64_t since_ms; /* created_at >= since_ms; INT64_MIN = no bound */
    int64_t until_ms; /* created_at < until_ms; INT64_MAX = no bound */
    int64_t job_id;   /* 0 = any */
} ledger_charge_filter;
int ledger_charges_list(store_conn *c, int64_t silo_id, const ledger_charge_filter *f,
                        ledger_charge_row **out, size_t *n_out, dp_err *err);
void ledger_charge_rows_free(ledger_charge_row *rows, size_t n);

/* ---- claims ---- */
typedef enum ledger_claim_state {
    LEDGER_CLAIM_ACTIVE = 0,
    LEDGER_CLAIM_COMMITTED,
    LEDGER_CLAIM_ABORTED,
    LEDGER_CLAIM_EXPIRED
} ledger_claim_state;
const char *ledger_claim_state_name(ledger_claim_state s);

typedef struct ledger_claim_view {
    int64_t id, silo_id, created_at_ms, expires_at_ms, closed_at_ms, charge_id, job_id;
    ledger_claim_state state;
    bool replayed;
    double cost_eps, cost_rho;
} ledger_claim_view;

/* Reserves req's cost on its silo for timeout_ms (1 .. LEDGER_CLAIM_MAX_MS) under the same
 * admission rule as a charge; refusal is DP_EBUDGET with the figures in *figures (may be NULL). */
int ledger_claim_create(ledger *l, const ledger_charge_req *req, int64_t timeout_ms,
                        ledger_claim_view *out, ledger_charge_result *figures, dp_err *err);
/* Commits an active claim: appends its charge (never refused: the budget was held; the row's
 * cumulative figure follows the silo's admission rule, min(RDP, PLD) for a PLD silo). scope_silo_id
 * != 0 limits the call to claims of that silo (DP_EFORBIDDEN otherwise). Expired or closed ->
 * DP_ECONFLICT; committing a committed claim again returns it (replayed). */
int ledger_claim_commit(ledger *l, int64_t claim_id, int64_t scope_silo_id, int64_t actor_token_id,
                        ledger_claim_view *out, ledger_charge_result *charge, dp_err *err);
/* Releases an active claim. Aborting an aborted claim is a no-op; committed -> DP_ECONFLICT. */
int ledger_claim_abort(ledger *l, int64_t claim_id, int64_t scope_silo_id, ledger_claim_view *out,
                       dp_err *err);
int ledger_claim_get(store_conn *c, int64_t claim_id, ledger_claim_view *out, dp_err *err);
/* The silo's open claims (active and unexpired now) with id > after, ascending, at most limit
 * (1 .. LEDGER_LIST_MAX); *more: another open claim follows the page. Each cost_eps is at b's delta
 * (b: the silo's budget, borrowed; NULL or no delta: DP_NAN). *out (owned by caller, dp_free) is
 * NULL when *n_out is 0. Reads on c, the caller's connection. */
int ledger_claims_list(ledger *l, store_conn *c, int64_t silo_id, const ledger_budget *b,
                       int64_t after, size_t limit, ledger_claim_view **out, size_t *n_out,
                       bool *more, dp_err *err);

/* Rounds a + b upward: the exact sum when it is representable, else the next double above it
 * (Knuth's TwoSum gives the rounding error). Used for every total, so totals never under-report. */
double ledger_sum_up(double a, double b);

#endif
