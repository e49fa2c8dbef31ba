/*
 * ledger/internal.h: what the files of service/ledger/ share (never included outside ledger/).
 * The design essay is at the top of ledger/ledger.c; the public contract in ledger/ledger.h.
 * Functions shared between the files carry the prefix lg_; each one's comment is at its definition.
 */
#ifndef DP_SERVICE_LEDGER_INTERNAL_H
#define DP_SERVICE_LEDGER_INTERNAL_H

#include "service/ledger/ledger.h"

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
#include "common/dp_assert.h"
#include "service/base/time.h"
#include "service/codec/event_json.h"
#include "service/codec/json_util.h"
#include "service/codec/tuning_json.h"
#include "service/db/writer.h"

#define LEDGER_SWEEP_MS 1000 /* idle wake-up period of the committer to mark expired claims */
#define LEDGER_PLD_RETRIES                                                                         \
    4                       /* stale PLD snapshots tolerated before the RDP bound decides alone    \
                             */
#define LEDGER_PLD_CACHE 64 /* remembered eps_PLD of (silo, n_charges) for reads */
/* A silo's per-order RDP total is stored as a checkpoint (silo_totals, migration 0013) rewritten
 * when (seq + silo id) is a multiple of LEDGER_TOTALS_EVERY, so that the silos of one round do not
 * all rewrite theirs in the same batch; a reader adds the curves of the at most
 * LEDGER_TOTALS_EVERY - 1 rows after it (LG_TOTALS_REPLAY_SQL), the committer keeps the current
 * totals in memory (ledger.totals). */
#define LEDGER_TOTALS_EVERY 16
/* The curves of a silo's rows after :from, in log order (each row's own or its stored one). */
#define LG_TOTALS_REPLAY_SQL                                                                       \
    "SELECT coalesce(k.cost_rdp, c.cost_rdp) FROM charges AS c LEFT JOIN charge_curves AS k ON "   \
    "k.event_key = c.curve_key WHERE c.silo_id = :silo AND c.seq > :from ORDER BY c.seq"

/* ---- statements of the write connection ---- */

enum {
    ST_SILO_GET = 0,
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
    ST_CURVE_INSERT,
    ST_TOTALS_INSERT,
    ST_TOTALS_SAVE,
    ST_TOTALS_REPLAY,
    ST_N
};

/* ---- the ledger ---- */

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
    uint8_t ev_key[DP_SHA256_DIGEST_BYTES];   /* lg_event_key of the event, when have_key */
    bool have_key;             /* the cost cache was on: lg_cost_eps may look the event up */
    ledger_charge_result *res; /* caller-owned output */
    /* PLD silos only (see PLD SILOS above) */
    bool need_pld;    /* set by the committer: compute the figures below and lg_submit again */
    bool pld_ready;   /* the figures below hold for the snapshot */
    bool pld_give_up; /* too many stale snapshots: the RDP bound decides alone */
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
    db_write_op wop;        /* the op as db/writer sees it: apply op_apply, done op_done, arg op */
    struct ledger *l;       /* set by lg_enqueue */
    uint64_t gen;           /* l->tree_gen of its last apply (writer thread only) */
    struct ledger_op *next; /* PLD queue link, guarded by l->mu */
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
    char path[1024];        /* database file, for the PLD snapshots' read connections */
    db_writer *w;           /* the writer (owned): its thread is "the committer" */
    sqlite3 *db;            /* the writer's connection (borrowed): committer thread only */
    sqlite3_stmt *st[ST_N]; /* prepared on db; committer thread only */
    double orders[LEDGER_MAX_ORDERS]; /* RDP grid of every vector; immutable after open */
    size_t n_orders;
    pthread_mutex_t mu;
    bool stop;             /* guarded by mu */
    ledger_op sweep;       /* the idle sweep's op; committer thread only */
    bool sweep_queued;     /* committer thread only */
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
    struct lg_curve_cache *curves; /* event costs (curves.c; its own lock); NULL = none */
    struct lg_conv_tables *convs;  /* conversion tables per (delta, conversion) (curves.c; its own
                                      lock) */
    struct log_tree *trees;        /* LEDGER_TREE_CACHE slots: committer thread only */
    /* The committer's current per-order totals of silos, LEDGER_TREE_CACHE slots indexed like
     * trees (silo id modulo), each valid for the silo's first n_charges rows and stamped with the
     * op's generation, forgotten on rollback with the trees (lg_log_trees_forget); totals_rdp holds
     * n_orders doubles per slot. Committer thread only. */
    struct {
        int64_t silo, n_charges; /* silo 0: an empty slot */
        uint64_t gen;
    } * totals;
    double *totals_rdp;
    struct wb_memo *wb_memo; /* LEDGER_TREE_CACHE slots indexed like trees: committer thread only */
    atomic_uint_least64_t wb_hits; /* would-be figures taken from wb_memo (the committer adds) */
    uint64_t tree_gen; /* incremented per op the committer applies; committer thread only */
};

/* A silo row as the committer sees it. */
typedef struct silo_row {
    int64_t id;
    char name[LEDGER_NAME_MAX + 1];
    int64_t created_at_ms, archived_at_ms;
    ledger_budget b;
    int64_t n_charges;
    double spent_rdp[LEDGER_MAX_ORDERS]; /* the total of rows 1..n_charges */
    double spent_rho;
} silo_row;

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
/* Slots of the log-tree cache, indexed by silo id modulo: a job round charges up to hundreds of
 * silos in one batch (139 for the School job), and with fewer slots than silos every charge rebuilt
 * its log's tree from SQL (a GROUP BY over the silo's log). ~200 bytes per slot. */
#define LEDGER_TREE_CACHE 1024
/* The refined would-be epsilon of a charge without active claims (lg_admit): a function of the
 * silo's log (its first n_charges rows: the tree and the per-order total), the event (ev_key, the
 * cost cache's key: the event and its relation), and the silo's delta and conversion. A job round
 * asks it twice for the same state (the runner's dry run before training, the charge after it), so
 * the committer keeps the last one per silo, stamped with the op's generation and forgotten on
 * rollback like the trees (lg_log_trees_forget). grid: the grid conversion of the same would-be
 * total, compared as well (a check of the per-order sum the value was refined from). */
typedef struct wb_memo {     /* committer thread only */
    int64_t silo, n_charges; /* the log: silo's rows 1..n_charges (silo 0: an empty slot) */
    uint64_t gen;            /* l->tree_gen when computed (forgotten on rollback) */
    uint8_t ev_key[DP_SHA256_DIGEST_BYTES]; /* the event and its relation (lg_event_key) */
    acct_conversion conversion;             /* the silo's conversion ... */
    double delta;                           /* ... and delta then */
    double grid;  /* the would-be total's grid conversion: a second check of the log and delta */
    double value; /* the refined would-be epsilon */
} wb_memo;

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
    /* The newest row's eps_after and delta_after (row seq == n_charges), as bound to its INSERT:
     * known when the committer appended that row itself (lg_charge_append), so the next charge of
     * the silo does not read it back (NAN stands for NULL, as lg_col_dbl reads it). */
    bool have_prev;
    double prev_eps_after, prev_delta_after;
} log_tree;

/* What an admission composes, as trees: the log, the active claims (except one) and the event. */
typedef struct refine_set {
    const log_tree *log;
    acct_event *claims[LEDGER_REFINE_MAX_EVENTS]; /* owned */
    size_t n_claims;
    bool claims_ok; /* every active claim is in claims[] under the log's relation */
    const acct_event *event;
    acct_neighboring event_nb;
} refine_set;

struct ledger_pending {
    ledger *l;
    ledger_op op; /* op.cv initialised until collected */
    op_item *items;
    size_t n;
    bool dry_run;
    ledger_charge_result *out; /* caller-owned */
};

/* admit.c */
int lg_loss_of(const ledger *l, const ledger_budget *b, const double *rdp, double rho, double *eps,
               double *order, dp_err *err);
double lg_unit_value(const ledger_budget *b, double eps, double rho);
double lg_cap_of(const ledger_budget *b);
double lg_remaining_of(const ledger_budget *b, double held);
void lg_vec_add_up(double *acc, const double *x, size_t n);
int lg_item_prepare(const ledger *l, const ledger_charge_req *req, const char *what, op_item *it,
                    dp_err *err);
int lg_silo_load_st(sqlite3 *db, sqlite3_stmt *st, sqlite3_stmt *replay, size_t n_orders,
                    int64_t id, silo_row *s, dp_err *err);
int lg_silo_load(ledger *l, int64_t id, silo_row *s, dp_err *err);
int lg_held_load_st(sqlite3 *db, sqlite3_stmt *st, size_t n_orders, int64_t silo_id, int64_t now,
                    int64_t except, double *rdp, double *rho, int64_t *n_active, dp_err *err);
int lg_held_load(ledger *l, int64_t silo_id, int64_t now, int64_t except, double *rdp, double *rho,
                 int64_t *n_active, dp_err *err);
double lg_refined_eps(const ledger *l, const ledger_budget *b, const double *vec,
                      const acct_event *tree, acct_neighboring nb, double grid_eps);
void lg_log_tree_clear(log_tree *t);
void lg_log_tree_build(sqlite3 *db, int64_t silo, int64_t n_charges, log_tree *t);
void lg_log_trees_forget(ledger *l, uint64_t gen);
void lg_refine_set_free(refine_set *r);
void lg_refine_set_load(ledger *l, const silo_row *s, int64_t now, int64_t except, int64_t n_active,
                        const acct_event *event, acct_neighboring nb, refine_set *r);
double lg_refined_of_order(const ledger *l, const ledger_budget *b, const refine_set *r,
                           bool with_claims, bool with_event, const double *vec, double grid_eps,
                           double *order, bool *oom);
double lg_refined_of(const ledger *l, const ledger_budget *b, const refine_set *r, bool with_claims,
                     bool with_event, const double *vec, double grid_eps);
int lg_admit(ledger *l, const silo_row *s, const double *held_rdp, double held_rho,
             int64_t n_active, const op_item *it, const refine_set *rf, ledger_charge_result *res,
             bool *fits, double *e_wb_rdp, dp_err *err);
int lg_totals_after(ledger *l, const silo_row *s, const double *cost_rdp, double cost_rho,
                    const double *held_rdp, double held_rho, int64_t n_active, double e_wb_rdp,
                    const op_item *pld, const refine_set *rf, double *new_rdp, double *new_rho,
                    ledger_charge_result *res, dp_err *err);
int lg_charge_append(ledger *l, const silo_row *s, const ledger_charge_req *req,
                     const uint8_t *hash, const char *key, int64_t claim_id, const double *cost_rdp,
                     const uint8_t *curve_key, double cost_rho, const double *held_rdp,
                     double held_rho, int64_t n_active, double e_wb_rdp, const op_item *pld,
                     const refine_set *rf, int64_t now, ledger_charge_result *res, dp_err *err);
void lg_result_from_row(sqlite3_stmt *st, const silo_row *s, ledger_charge_result *res);
int lg_charge_by_key(ledger *l, const silo_row *s, const char *key, const uint8_t *hash,
                     ledger_charge_result *res, int *found, dp_err *err);
void lg_item_field(const ledger_op *op, size_t i, char *buf, size_t len);

/* apply.c */
int lg_apply_op(ledger *l, ledger_op *op, int64_t now, dp_err *err);

/* commit.c */
void lg_pld_flags_clear(ledger_op *op);
void *lg_pld_main(void *arg);
void lg_idle_sweep(sqlite3 *db, void *arg);
int lg_enqueue(ledger *l, ledger_op *op);
int lg_op_init(ledger_op *op);
void lg_op_wait(ledger *l, ledger_op *op);
int lg_submit(ledger *l, ledger_op *op);
int lg_finish(ledger_op *op, dp_err *err);

/* curves.c */
#define LG_CURVE_WAYS 4 /* entries per set of the cost cache */
typedef struct lg_curve_cache lg_curve_cache;
lg_curve_cache *lg_curve_cache_alloc(size_t capacity, size_t n_orders);
void lg_curve_cache_free(lg_curve_cache *c);
void lg_curve_cache_enable(lg_curve_cache *c, bool on);
bool lg_curve_cache_enabled(const lg_curve_cache *c);
void lg_event_key(const acct_event *ev, acct_neighboring nb, uint8_t key[DP_SHA256_DIGEST_BYTES]);
bool lg_curve_cache_get(lg_curve_cache *c, const uint8_t *key, double *rdp, double *rho);
void lg_curve_cache_put(lg_curve_cache *c, const uint8_t *key, const double *rdp, double rho);
void lg_curve_cache_stats(lg_curve_cache *c, ledger_curve_stats *out);
char *lg_curve_cache_get_json(lg_curve_cache *c, const uint8_t *key);
void lg_curve_cache_put_json(lg_curve_cache *c, const uint8_t *key, const char *json);
#define LG_CURVE_REFINED 2 /* (delta, conversion) pairs of an event's own refined epsilon */
bool lg_curve_cache_get_refined(lg_curve_cache *c, const uint8_t *key, double delta,
                                acct_conversion conv, double *eps);
void lg_curve_cache_put_refined(lg_curve_cache *c, const uint8_t *key, double delta,
                                acct_conversion conv, double eps);
double lg_cost_eps(const ledger *l, const ledger_budget *b, const op_item *it, double grid_eps);
/* An (eps, delta) silo accounted by rdp or pld: its figures are refined on a continuous order. */
bool lg_refinable(const ledger_budget *b);
typedef struct lg_conv_tables lg_conv_tables;
lg_conv_tables *lg_conv_tables_alloc(const double *orders, size_t n_orders);
void lg_conv_tables_free(lg_conv_tables *c);
const acct_conv_table *lg_conv_table(lg_conv_tables *c, double delta, acct_conversion conv);

/* ledger.c */
const char *lg_kind_name(ledger_budget_kind k);
int lg_kind_parse(const char *s, ledger_budget_kind *k);
ledger_claim_state lg_claim_state_parse(const char *s);

/* pld.c */
int lg_stored_event_parse(const char *text, int64_t count, acct_event **out);
acct_event *lg_stored_event(const char *text, int64_t count);
double lg_pld_eps_of(sqlite3 *db, int64_t silo, double delta, bool with_claims,
                     const acct_event *extra, acct_neighboring nb, int64_t now);
int lg_pld_prepare(ledger *l, op_item *it, dp_err *err);

/* reads.c */
int lg_view_of(ledger *l, const silo_row *s, int64_t now, ledger_silo_view *v, dp_err *err);

/* sql.c */
/* The SQL of each ST_* statement (reads.c also prepares some on pool connections:
 * store_conn_prepare caches by the address, which is stable). */
extern const char *const lg_sql[ST_N];
int lg_sql_fail(ledger *l, int rc, const char *what, dp_err *err);
int lg_read_fail(sqlite3 *db, int rc, const char *what, dp_err *err);
void lg_st_done(sqlite3_stmt *st);
int lg_st_write(ledger *l, sqlite3_stmt *st, int rc, const char *what, dp_err *err);
int lg_bind_idx(sqlite3_stmt *st, const char *name);
int lg_b_i64(sqlite3_stmt *st, const char *name, int64_t v);
int lg_b_i64_or_null(sqlite3_stmt *st, const char *name, int64_t v);
int lg_b_dbl(sqlite3_stmt *st, const char *name, double v);
int lg_b_text(sqlite3_stmt *st, const char *name, const char *v);
int lg_b_blob(sqlite3_stmt *st, const char *name, const void *p, size_t n);
double lg_col_dbl(sqlite3_stmt *st, int c);
bool lg_col_vec(sqlite3_stmt *st, int c, double *out, size_t n);
int lg_exec_st(ledger *l, int which, dp_err *err);
int lg_statements_prepare(ledger *l, dp_err *err);
void lg_statements_finalize(ledger *l);

/* For DP_ASSERT: l->mu is held (by some thread; see commit.c). */
bool lg_mu_held(ledger *l);

#endif
