/*
 * Unit tests of service/db/writer.c, the group-committing writer, alone (no ledger): operations are
 * committed in groups, a failing operation rolls back only its own savepoint, every done is called
 * exactly once and only once its write is visible to another connection (committed), stopping runs
 * what was queued (also what a done submits again), concurrent submitters, the idle hook and the
 * background checkpointer; and the helpers that run one function through it (db_writer_run waits
 * for the COMMIT, db_writer_start wakes its caller once after it, both refused by a closed writer;
 * db_writer_run_conn for a process without a writer).
 *
 * Groups are made deterministic with a gate: a first operation whose apply waits until the test
 * opens the gate holds the writer thread while the test queues the operations of the next group.
 */
#include "tests/support/test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/dp_log.h"
#include "service/db/store.h"
#include "service/db/writer.h"

typedef struct fixture {
    char dir[64];
    char path[128];
    store *st;
    store_conn *rd; /* a second connection: sees only committed rows */
    db_writer *w;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/dpsilo-writer-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->path, sizeof f->path, "%s/t.db", f->dir);
    dp_err e;
    dp_err_clear(&e);
    f->st = store_open(f->path, 1, NULL, 0, &e); /* WAL mode, no migrations */
    if (f->st == NULL || (f->rd = store_conn_borrow(f->st, &e)) == NULL)
        return -1;
    if (sqlite3_exec(store_conn_db(f->rd),
                     "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE, pad BLOB)",
                     NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    if ((f->w = db_writer_open(f->path, &e)) == NULL)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    db_writer_free(f->w);
    store_conn_return(f->st, f->rd);
    store_free(f->st);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%s", f->path, sfx[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Rows with value v, read on the second connection (committed rows only). */
static int rows_with(fixture *f, const char *v)
{
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(store_conn_db(f->rd), "SELECT count(*) FROM t WHERE v = ?", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, v, -1, SQLITE_TRANSIENT) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int rows_all(fixture *f)
{
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(store_conn_db(f->rd), "SELECT count(*) FROM t", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* ---- a test operation: inserts v (and pad_bytes of zeroes), optionally failing after it */

typedef struct top {
    db_write_op op;
    fixture *f;
    char v[32];
    int pad_bytes;
    int fail_code;       /* apply returns this after the insert (DP_OK: succeeds) */
    atomic_int n_apply;  /* apply calls */
    atomic_int n_done;   /* done calls */
    int rc;              /* done's rc */
    dp_err err;          /* done's err */
    int visible_at_done; /* rows with v seen by the other connection inside done */
    struct top *again;   /* submitted again from done (stop drains it too) */
    int again_rc;        /* what db_writer_submit_again returned */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool finished;
} top;

static int top_apply(sqlite3 *db, void *arg, dp_err *err)
{
    top *t = arg;
    atomic_fetch_add(&t->n_apply, 1);
    sqlite3_stmt *st = NULL;
    int rc =
        sqlite3_prepare_v2(db, "INSERT INTO t (v, pad) VALUES (?, zeroblob(?))", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, t->v, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 2, t->pad_bytes);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return dp_err_set(err, DP_ECONFLICT, "v", "cannot insert %s", t->v);
    if (t->fail_code != DP_OK)
        return dp_err_set(err, t->fail_code, "v", "refused %s after inserting it", t->v);
    return DP_OK;
}

static void top_done(void *arg, int rc, const dp_err *err)
{
    top *t = arg;
    t->rc = rc;
    t->err = *err;
    t->visible_at_done = rows_with(t->f, t->v);
    if (t->again != NULL) {
        dp_err e;
        dp_err_clear(&e);
        t->again_rc = db_writer_submit_again(t->f->w, &t->again->op, &e);
    }
    pthread_mutex_lock(&t->mu);
    atomic_fetch_add(&t->n_done, 1);
    t->finished = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void top_init(top *t, fixture *f, const char *v, int fail_code)
{
    memset(t, 0, sizeof *t);
    t->f = f;
    snprintf(t->v, sizeof t->v, "%s", v);
    t->fail_code = fail_code;
    atomic_init(&t->n_apply, 0);
    atomic_init(&t->n_done, 0);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->op = (db_write_op){.apply = top_apply, .done = top_done, .arg = t};
}

static void top_wait(top *t)
{
    pthread_mutex_lock(&t->mu);
    while (!t->finished)
        pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static void top_fini(top *t)
{
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

/* ---- the gate: an operation that holds the writer thread until opened */

typedef struct gate {
    db_write_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open, finished;
} gate;

static int gate_apply(sqlite3 *db, void *arg, dp_err *err)
{
    (void)db;
    (void)err;
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return DP_OK;
}

static void gate_done(void *arg, int rc, const dp_err *err)
{
    (void)rc;
    (void)err;
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->finished = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Submits the gate and returns once the writer thread is inside it. */
static void gate_hold(fixture *f, gate *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->op = (db_write_op){.apply = gate_apply, .done = gate_done, .arg = g};
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_submit(f->w, &g->op, &e), DP_OK);
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_fini(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->finished)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* ---- tests */

/* Operations queued while the writer is busy are committed together: one BEGIN..COMMIT for all, and
 * each done sees its row committed (read on another connection). */
static void queued_ops_commit_in_one_group(void **state)
{
    fixture *f = *state;
    enum { N = 50 };
    static top ts[N];
    gate g;
    gate_hold(f, &g);
    uint64_t g0, o0;
    db_writer_stats(f->w, &g0, &o0);
    for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof v, "g%d", i);
        top_init(&ts[i], f, v, DP_OK);
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(db_writer_submit(f->w, &ts[i].op, &e), DP_OK);
    }
    gate_open(&g);
    for (int i = 0; i < N; i++)
        top_wait(&ts[i]);
    gate_fini(&g);
    uint64_t g1, o1;
    db_writer_stats(f->w, &g1, &o1);
    assert_int_equal(g1 - g0, 2); /* the gate's group, then the N queued ops in one group */
    assert_int_equal(o1 - o0, N + 1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ts[i].rc, DP_OK);
        assert_int_equal(atomic_load(&ts[i].n_apply), 1);
        assert_int_equal(atomic_load(&ts[i].n_done), 1);
        assert_int_equal(ts[i].visible_at_done, 1); /* committed before done */
        top_fini(&ts[i]);
    }
    assert_int_equal(rows_all(f), N);
}

/* In one group: a succeeds, b inserts and then fails, c violates a constraint, d succeeds. Only b's
 * and c's savepoints are rolled back; their done report their errors, a and d commit. */
static void failing_op_rolls_back_only_its_savepoint(void **state)
{
    fixture *f = *state;
    top a, b, c, d;
    top_init(&a, f, "a", DP_OK);
    top_init(&b, f, "b", DP_EBUDGET);
    top_init(&c, f, "a", DP_OK); /* UNIQUE(v): a is already inserted in this transaction */
    top_init(&d, f, "d", DP_OK);
    gate g;
    gate_hold(f, &g);
    top *all[] = {&a, &b, &c, &d};
    for (size_t i = 0; i < 4; i++) {
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(db_writer_submit(f->w, &all[i]->op, &e), DP_OK);
    }
    gate_open(&g);
    for (size_t i = 0; i < 4; i++)
        top_wait(all[i]);
    gate_fini(&g);
    assert_int_equal(a.rc, DP_OK);
    assert_int_equal(d.rc, DP_OK);
    assert_int_equal(b.rc, DP_EBUDGET);
    assert_int_equal(b.err.code, DP_EBUDGET);
    assert_string_equal(b.err.msg, "refused b after inserting it");
    assert_int_equal(c.rc, DP_ECONFLICT);
    assert_string_equal(c.err.field, "v");
    assert_int_equal(rows_with(f, "a"), 1);
    assert_int_equal(rows_with(f, "b"), 0); /* its insert was rolled back with its savepoint */
    assert_int_equal(rows_with(f, "d"), 1);
    assert_int_equal(rows_all(f), 2);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(atomic_load(&all[i]->n_done), 1);
        top_fini(all[i]);
    }
}

/* Closing refuses new operations (their done is never called); stopping runs every queued one,
 * and also one that a done submits again while the writer drains. */
static void stop_drains_the_queue(void **state)
{
    fixture *f = *state;
    enum { N = 100 };
    static top ts[N];
    top again, late;
    top_init(&again, f, "again", DP_OK);
    top_init(&late, f, "late", DP_OK);
    gate g;
    gate_hold(f, &g);
    for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof v, "s%d", i);
        top_init(&ts[i], f, v, DP_OK);
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(db_writer_submit(f->w, &ts[i].op, &e), DP_OK);
    }
    ts[N - 1].again = &again;
    db_writer_close(f->w);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_submit(f->w, &late.op, &e), DP_EBUSY);
    gate_open(&g);
    db_writer_stop(f->w); /* returns once everything queued (and submitted again) has run */
    gate_fini(&g);
    for (int i = 0; i < N; i++) {
        assert_int_equal(atomic_load(&ts[i].n_done), 1);
        assert_int_equal(ts[i].rc, DP_OK);
        top_fini(&ts[i]);
    }
    assert_int_equal(ts[N - 1].again_rc, DP_OK);
    assert_int_equal(atomic_load(&again.n_done), 1);
    assert_int_equal(again.rc, DP_OK);
    assert_int_equal(atomic_load(&late.n_done), 0);
    assert_int_equal(atomic_load(&late.n_apply), 0);
    assert_int_equal(rows_all(f), N + 1);
    assert_int_equal(rows_with(f, "late"), 0);
    /* after the stop, even an operation owed an answer is refused */
    dp_err_clear(&e);
    assert_int_equal(db_writer_submit_again(f->w, &late.op, &e), DP_EBUSY);
    top_fini(&again);
    top_fini(&late);
}

enum { SUB_THREADS = 8, SUB_OPS = 150 };

typedef struct submitter {
    fixture *f;
    int id;
    top *ts;
} submitter;

static void *submitter_main(void *arg)
{
    submitter *s = arg;
    for (int i = 0; i < SUB_OPS; i++) {
        char v[32];
        snprintf(v, sizeof v, "c%d-%d", s->id, i);
        top_init(&s->ts[i], s->f, v, i % 10 == 9 ? DP_EINVAL : DP_OK);
        dp_err e;
        dp_err_clear(&e);
        if (db_writer_submit(s->f->w, &s->ts[i].op, &e) != DP_OK)
            return NULL;
        top_wait(&s->ts[i]); /* as a blocking client does */
    }
    return NULL;
}

/* Several threads submit and wait, as the ledger's callers do: every op is applied and done once,
 * the failing ones (every tenth) alone are missing, and groups carry more than one op on average
 * only as concurrency allows (never more groups than ops). */
static void concurrent_submitters(void **state)
{
    fixture *f = *state;
    submitter subs[SUB_THREADS];
    pthread_t th[SUB_THREADS];
    uint64_t g0, o0;
    db_writer_stats(f->w, &g0, &o0);
    for (int k = 0; k < SUB_THREADS; k++) {
        subs[k] = (submitter){.f = f, .id = k, .ts = calloc(SUB_OPS, sizeof(top))};
        assert_non_null(subs[k].ts);
        assert_int_equal(pthread_create(&th[k], NULL, submitter_main, &subs[k]), 0);
    }
    for (int k = 0; k < SUB_THREADS; k++)
        pthread_join(th[k], NULL);
    int ok = 0;
    for (int k = 0; k < SUB_THREADS; k++) {
        for (int i = 0; i < SUB_OPS; i++) {
            top *t = &subs[k].ts[i];
            assert_int_equal(atomic_load(&t->n_apply), 1);
            assert_int_equal(atomic_load(&t->n_done), 1);
            assert_int_equal(t->rc, i % 10 == 9 ? DP_EINVAL : DP_OK);
            assert_int_equal(t->visible_at_done, t->rc == DP_OK ? 1 : 0);
            ok += t->rc == DP_OK;
            top_fini(t);
        }
        free(subs[k].ts);
    }
    uint64_t g1, o1;
    db_writer_stats(f->w, &g1, &o1);
    assert_int_equal(o1 - o0, SUB_THREADS * SUB_OPS);
    assert_true(g1 - g0 >= 1 && g1 - g0 <= o1 - o0);
    assert_int_equal(rows_all(f), ok);
    assert_int_equal(ok, SUB_THREADS * SUB_OPS * 9 / 10);
}

/* Enough WAL frames (one group of large rows) wake the background checkpointer. */
static void checkpointer_runs(void **state)
{
    fixture *f = *state;
    enum { N = 40 };
    static top ts[N];
    assert_int_equal(db_writer_checkpoints(f->w), 0);
    gate g;
    gate_hold(f, &g);
    for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof v, "k%d", i);
        top_init(&ts[i], f, v, DP_OK);
        ts[i].pad_bytes = 128 * 1024; /* ~32 pages each: the group writes > DB_WRITER_CKPT_FRAMES */
        dp_err e;
        dp_err_clear(&e);
        assert_int_equal(db_writer_submit(f->w, &ts[i].op, &e), DP_OK);
    }
    gate_open(&g);
    for (int i = 0; i < N; i++) {
        top_wait(&ts[i]);
        assert_int_equal(ts[i].rc, DP_OK);
        top_fini(&ts[i]);
    }
    gate_fini(&g);
    /* The checkpointer runs on its own thread: wait for it (bounded, not a timing assertion). */
    for (int i = 0; i < 3000 && db_writer_checkpoints(f->w) == 0; i++) {
        struct timespec ts10 = {0, 10 * 1000 * 1000};
        nanosleep(&ts10, NULL);
    }
    assert_true(db_writer_checkpoints(f->w) >= 1);
}

typedef struct idle_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    bool db_ok;
    db_writer *w;
} idle_rec;

static void idle_fn(sqlite3 *db, void *arg)
{
    idle_rec *r = arg;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->db_ok = db == db_writer_db(r->w) && sqlite3_get_autocommit(db) != 0; /* no transaction */
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* The idle hook is called on the writer's connection, outside any transaction. */
static void idle_hook_is_called(void **state)
{
    fixture *f = *state;
    idle_rec r = {.calls = 0, .w = f->w};
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    db_writer_set_idle(f->w, 5, idle_fn, &r);
    pthread_mutex_lock(&r.mu);
    while (r.calls < 2)
        pthread_cond_wait(&r.cv, &r.mu);
    bool ok = r.db_ok;
    pthread_mutex_unlock(&r.mu);
    db_writer_stop(f->w); /* before r goes out of scope: no more idle calls */
    assert_true(ok);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}

/* ---- one function, committed: db_writer_run, db_writer_start, db_writer_run_conn ---- */

/* db_writer_run returns once the write is committed (another connection sees it), and reports an
 * apply's error with that operation rolled back; the next run works. One operation per call. */
static void run_waits_for_the_commit_and_reports_errors(void **state)
{
    fixture *f = *state;
    top ok, bad;
    top_init(&ok, f, "run-ok", DP_OK);
    top_init(&bad, f, "run-bad", DP_EBUDGET);
    uint64_t g0, o0, g1, o1;
    db_writer_stats(f->w, &g0, &o0);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_run(f->w, top_apply, &ok, &e), DP_OK);
    assert_int_equal(e.code, DP_OK);
    assert_int_equal(rows_with(f, "run-ok"), 1); /* committed before the return */
    assert_int_equal(db_writer_run(f->w, top_apply, &bad, &e), DP_EBUDGET);
    assert_int_equal(e.code, DP_EBUDGET);
    assert_string_equal(e.field, "v");
    assert_string_equal(e.msg, "refused run-bad after inserting it");
    assert_int_equal(rows_with(f, "run-bad"), 0); /* its insert was rolled back */
    db_writer_stats(f->w, &g1, &o1);
    assert_int_equal(o1 - o0, 2); /* one operation per run, a failed one counted */
    assert_int_equal(g1 - g0, 2);
    assert_int_equal(atomic_load(&ok.n_apply), 1);
    assert_int_equal(atomic_load(&bad.n_apply), 1);
    top_fini(&ok);
    top_fini(&bad);
    assert_int_equal(rows_all(f), 1);
}

/* A deferred call's wake-up: counted, with what the other connection saw at that moment. */
typedef struct waker {
    fixture *f;
    const char *v;
    atomic_int n_wake;
    int visible_at_wake;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken;
} waker;

static void waker_wake(void *arg)
{
    waker *k = arg;
    k->visible_at_wake = rows_with(k->f, k->v);
    pthread_mutex_lock(&k->mu);
    atomic_fetch_add(&k->n_wake, 1);
    k->woken = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static void waker_init(waker *k, fixture *f, const char *v)
{
    memset(k, 0, sizeof *k);
    k->f = f;
    k->v = v;
    atomic_init(&k->n_wake, 0);
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
}

static void waker_wait(waker *k)
{
    pthread_mutex_lock(&k->mu);
    while (!k->woken)
        pthread_cond_wait(&k->cv, &k->mu);
    pthread_mutex_unlock(&k->mu);
}

static void waker_fini(waker *k)
{
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}

/* Two deferred calls in one group (held behind the gate): neither result is available before its
 * wake-up; each wake is called once, after the COMMIT; the failing one is rolled back alone. */
static void start_wakes_once_after_the_commit(void **state)
{
    fixture *f = *state;
    top ok, bad;
    top_init(&ok, f, "start-ok", DP_OK);
    top_init(&bad, f, "start-bad", DP_ECONFLICT);
    waker kok, kbad;
    waker_init(&kok, f, "start-ok");
    waker_init(&kbad, f, "start-bad");
    db_writer_call *cok = calloc(1, sizeof *cok), *cbad = calloc(1, sizeof *cbad);
    assert_non_null(cok);
    assert_non_null(cbad);
    gate g;
    gate_hold(f, &g);
    uint64_t g0, o0, g1, o1;
    db_writer_stats(f->w, &g0, &o0);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_start(f->w, cok, top_apply, &ok, waker_wake, &kok, &e), DP_OK);
    assert_int_equal(db_writer_start(f->w, cbad, top_apply, &bad, waker_wake, &kbad, &e), DP_OK);
    /* the writer is held: no result yet (a programming error, refused) */
    assert_int_equal(db_writer_call_result(cok, &e), DP_EINTERNAL);
    assert_int_equal(atomic_load(&kok.n_wake), 0);
    dp_err_clear(&e);
    gate_open(&g);
    waker_wait(&kok);
    waker_wait(&kbad);
    gate_fini(&g);
    assert_int_equal(kok.visible_at_wake, 1); /* committed before the wake-up */
    assert_int_equal(kbad.visible_at_wake, 0);
    assert_int_equal(db_writer_call_result(cok, &e), DP_OK);
    assert_int_equal(e.code, DP_OK);
    assert_int_equal(db_writer_call_result(cbad, &e), DP_ECONFLICT);
    assert_string_equal(e.msg, "refused start-bad after inserting it");
    db_writer_stats(f->w, &g1, &o1);
    assert_int_equal(g1 - g0, 2); /* the gate's group, then both calls in one group */
    assert_int_equal(o1 - o0, 3);
    free(cok); /* the writer is done with a call once it has woken it */
    free(cbad);
    db_writer_stop(f->w); /* nothing more runs: the counts are final */
    assert_int_equal(atomic_load(&kok.n_wake), 1);
    assert_int_equal(atomic_load(&kbad.n_wake), 1);
    assert_int_equal(rows_with(f, "start-ok"), 1);
    assert_int_equal(rows_with(f, "start-bad"), 0);
    waker_fini(&kok);
    waker_fini(&kbad);
    top_fini(&ok);
    top_fini(&bad);
}

/* A closed writer refuses both helpers with DP_EBUSY and a message, runs nothing, and never wakes
 * a refused call. */
static void a_closed_writer_refuses_runs_and_calls(void **state)
{
    fixture *f = *state;
    top t;
    top_init(&t, f, "closed", DP_OK);
    waker k;
    waker_init(&k, f, "closed");
    db_writer_call c;
    db_writer_close(f->w);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_run(f->w, top_apply, &t, &e), DP_EBUSY);
    assert_int_equal(e.code, DP_EBUSY);
    assert_string_equal(e.msg, "the database writer is shutting down");
    dp_err_clear(&e);
    assert_int_equal(db_writer_start(f->w, &c, top_apply, &t, waker_wake, &k, &e), DP_EBUSY);
    assert_int_equal(e.code, DP_EBUSY);
    db_writer_stop(f->w);
    assert_int_equal(atomic_load(&k.n_wake), 0);
    assert_int_equal(atomic_load(&t.n_apply), 0);
    assert_int_equal(rows_all(f), 0);
    waker_fini(&k);
    top_fini(&t);
}

/* db_writer_run inside an apply (on the writer thread) would wait for itself: refused. */
typedef struct nested {
    fixture *f;
    top inner;
    int inner_rc;
    dp_err inner_err;
} nested;

static int nested_apply(sqlite3 *db, void *arg, dp_err *err)
{
    (void)db;
    (void)err;
    nested *n = arg;
    dp_err_clear(&n->inner_err);
    n->inner_rc = db_writer_run(n->f->w, top_apply, &n->inner, &n->inner_err);
    return DP_OK;
}

static void run_on_the_writer_thread_is_refused(void **state)
{
    fixture *f = *state;
    nested n = {.f = f};
    top_init(&n.inner, f, "inner", DP_OK);
    dp_err e;
    dp_err_clear(&e);
    assert_int_equal(db_writer_run(f->w, nested_apply, &n, &e), DP_OK);
    assert_int_equal(n.inner_rc, DP_EINTERNAL);
    assert_int_equal(n.inner_err.code, DP_EINTERNAL);
    assert_int_equal(atomic_load(&n.inner.n_apply), 0);
    assert_int_equal(rows_with(f, "inner"), 0);
    top_fini(&n.inner);
}

/* Without a writer: the same apply in its own transaction on a pooled connection, committed on
 * success, rolled back on failure, and the connection is left outside any transaction. */
static void run_conn_commits_or_rolls_back(void **state)
{
    fixture *f = *state;
    top ok, bad;
    top_init(&ok, f, "conn-ok", DP_OK);
    top_init(&bad, f, "conn-bad", DP_EBUDGET);
    dp_err e;
    dp_err_clear(&e);
    store_conn *c = store_conn_open_extra(f->st, &e);
    assert_non_null(c);
    assert_int_equal(db_writer_run_conn(c, top_apply, &ok, &e), DP_OK);
    assert_int_not_equal(sqlite3_get_autocommit(store_conn_db(c)), 0);
    assert_int_equal(rows_with(f, "conn-ok"), 1); /* committed: the other connection sees it */
    assert_int_equal(db_writer_run_conn(c, top_apply, &bad, &e), DP_EBUDGET);
    assert_string_equal(e.msg, "refused conn-bad after inserting it");
    assert_int_not_equal(sqlite3_get_autocommit(store_conn_db(c)), 0);
    assert_int_equal(rows_with(f, "conn-bad"), 0);
    dp_err_clear(&e);
    assert_int_equal(db_writer_run_conn(NULL, top_apply, &ok, &e), DP_EINTERNAL);
    store_conn_close(c);
    top_fini(&ok);
    top_fini(&bad);
}

int main(void)
{
    dp_log_set_level(DP_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(queued_ops_commit_in_one_group, setup, teardown),
        cmocka_unit_test_setup_teardown(failing_op_rolls_back_only_its_savepoint, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_drains_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_submitters, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpointer_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(idle_hook_is_called, setup, teardown),
        cmocka_unit_test_setup_teardown(run_waits_for_the_commit_and_reports_errors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(start_wakes_once_after_the_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(a_closed_writer_refuses_runs_and_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(run_on_the_writer_thread_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(run_conn_commits_or_rolls_back, setup, teardown),
    };
    return cmocka_run_group_tests_name("service_writer", tests, NULL, NULL);
}
