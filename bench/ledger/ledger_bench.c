/*
 * ledger_bench: acknowledged durable charges per second and latency percentiles of the budget
 * ledger.
 *
 *   ledger_bench http HOST PORT SILO_ID CONNECTIONS REQUESTS_PER_CONNECTION [TOKEN]
 *       CONNECTIONS threads, each with one keep-alive HTTP/1.1 connection (raw sockets), send
 *       POST /v1/silos/SILO_ID/charges one after another and time each request from the first byte
 *       sent to the last byte of the answer. Only 201 answers count as acknowledged.
 *   ledger_bench api DB_PATH THREADS CHARGES_PER_THREAD
 *       The same through the C API (ledger_charge) from THREADS threads against a fresh silo in an
 *       existing, migrated database: the ledger's own capacity without HTTP and JSON.
 *   ledger_bench dpsgd DB_PATH SILOS ROUNDS THREADS CHARGES_PER_THREAD
 *       DP-SGD round events, as a training job charges them: SILOS silos (the School job: 139),
 * each with its own round event self_composed(steps, poisson(q, gaussian(z))) (steps and q from the
 *       silo's size), accounted by rdp with conversion "optimal" (the API's default). Creates and
 *       migrates DB_PATH when missing. Two parts, each run with the ledger's curve cache off (every
 *       charge computes the event's RDP curve, as before the cache) and then on, in the same
 *       process on fresh silos:
 *         batch: ROUNDS rounds of one ledger_charge_batch of SILOS items (silo k, event k) from one
 *                thread; the time of each batch call (first round apart: the cache misses there);
 *         api:   THREADS threads, each ledger_charge of CHARGES_PER_THREAD charges cycling over the
 *                silos and their events: acknowledged durable charges per second.
 *       Then, cache on, a round part: ROUNDS rounds as the job runner makes them (a dry run of the
 *       batch, then the charge, no idempotency keys), each call timed.
 *       CONVERSION (default "optimal") is the silos' conversion; a last argument "trivial" charges
 *       gaussian(1000 + k) instead (the floor: SQLite, the group commit and its fsync).
 *       The batch line's warm_* figures leave out round 1 (where the cache fills).
 *       LEDGER_BENCH_ONLY_CACHED=1 skips the cache-off parts (for profiling the cached path);
 *       LEDGER_BENCH_JOBS=J adds a part with J jobs' rounds in flight at once: J threads, each with
 *       its own SILOS silos, charging ROUNDS batches back to back (one warm-up round each first),
 *       so that the writer may commit several jobs' batches in one group.
 *
 * Every acknowledged charge is durable: the daemon answers only after its group's COMMIT returned
 * with synchronous=FULL (service/ledger/ledger.h). Output: one line of "key=value" pairs, parsed by
 * run.sh. Timings are measured here, never asserted in tests (HELPERS.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accounting/event.h"
#include "common/dp_math.h"
#include "common/dp_err.h"
#include "service/base/embedded.h"
#include "service/db/store.h"
#include "service/ledger/ledger.h"

#define BENCH_MAX_THREADS 256
#define BENCH_BUF         8192

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct worker {
    /* inputs */
    const char *host;
    int port;
    long silo;
    long n;
    const char *token;
    ledger *l;
    const acct_event *ev;
    const acct_event *const *evs; /* dpsgd: n_evs events, event k charges silos[k] */
    const int64_t *silos;
    size_t n_evs, first;
    /* outputs */
    double *lat; /* n latencies, seconds */
    long ok, refused, failed;
} worker;

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one HTTP response; returns its status, or -1. */
static int read_response(int fd, char *buf, size_t cap)
{
    size_t have = 0;
    char *hdr_end = NULL;
    while (hdr_end == NULL) {
        if (have + 1 >= cap)
            return -1;
        ssize_t r = read(fd, buf + have, cap - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        hdr_end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    long clen = 0;
    for (char *p = buf; p < hdr_end; p++)
        if ((p == buf || p[-1] == '\n') && strncasecmp(p, "Content-Length:", 15) == 0)
            clen = strtol(p + 15, NULL, 10);
    size_t body_have = have - (size_t)(hdr_end + 4 - buf);
    while ((long)body_have < clen) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        body_have += (size_t)r;
    }
    return status;
}

static int connect_to(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *http_worker(void *arg)
{
    worker *w = arg;
    char body[256], req[1024], buf[BENCH_BUF], auth[400] = "";
    if (w->token != NULL)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", w->token);
    int fd = connect_to(w->host, w->port);
    for (long i = 0; i < w->n; i++) {
        int bn = snprintf(body, sizeof body,
                          "{\"event\":{\"type\":\"gaussian\",\"noise_multiplier\":1000},"
                          "\"reason\":\"bench %ld\"}",
                          i);
        int rn = snprintf(req, sizeof req,
                          "POST /v1/silos/%ld/charges HTTP/1.1\r\nHost: %s\r\n%s"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                          w->silo, w->host, auth, bn, body);
        double t0 = now_s();
        int status = -1;
        if (fd >= 0 && write_all(fd, req, (size_t)rn) == 0)
            status = read_response(fd, buf, sizeof buf);
        w->lat[i] = now_s() - t0;
        if (status == 201)
            w->ok++;
        else if (status == 409)
            w->refused++;
        else
            w->failed++;
        if (status < 0) { /* reconnect after a broken connection */
            if (fd >= 0)
                close(fd);
            fd = connect_to(w->host, w->port);
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* Charge i of worker w: its latency and its outcome counted. */
static void charge_timed(worker *w, const ledger_charge_req *r, long i)
{
    ledger_charge_result res;
    dp_err e;
    dp_err_clear(&e);
    double t0 = now_s();
    int rc = ledger_charge(w->l, r, false, &res, &e);
    w->lat[i] = now_s() - t0;
    if (rc == DP_OK)
        w->ok++;
    else if (rc == DP_EBUDGET)
        w->refused++;
    else
        w->failed++;
}

static void *api_worker(void *arg)
{
    worker *w = arg;
    for (long i = 0; i < w->n; i++) {
        ledger_charge_req r = {.silo_id = w->silo,
                               .event = w->ev,
                               .neighboring = ACCT_NB_ADD_REMOVE,
                               .event_json = "{\"noise_multiplier\":1000,\"type\":\"gaussian\"}",
                               .reason = "bench"};
        charge_timed(w, &r, i);
    }
    return NULL;
}

/* dpsgd api part: charge i of this worker charges silos[k] with evs[k], k = (first + i) % n_evs */
static void *dpsgd_worker(void *arg)
{
    worker *w = arg;
    for (long i = 0; i < w->n; i++) {
        size_t k = (w->first + (size_t)i) % w->n_evs;
        ledger_charge_req r = {.silo_id = w->silos[k],
                               .event = w->evs[k],
                               .neighboring = ACCT_NB_ADD_REMOVE,
                               .reason = "bench dpsgd"};
        charge_timed(w, &r, i);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(worker *ws, long nth, void *(*fn)(void *))
{
    pthread_t th[BENCH_MAX_THREADS];
    double t0 = now_s();
    for (long i = 0; i < nth; i++)
        if (pthread_create(&th[i], NULL, fn, &ws[i]) != 0)
            return 1;
    for (long i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    double el = now_s() - t0;
    long total = 0, ok = 0, refused = 0, failed = 0;
    for (long i = 0; i < nth; i++) {
        total += ws[i].n;
        ok += ws[i].ok;
        refused += ws[i].refused;
        failed += ws[i].failed;
    }
    double *all = calloc((size_t)total, sizeof *all);
    if (all == NULL)
        return 1;
    long k = 0;
    for (long i = 0; i < nth; i++)
        for (long j = 0; j < ws[i].n; j++)
            all[k++] = ws[i].lat[j];
    qsort(all, (size_t)total, sizeof *all, cmp_double);
    printf(
        "clients=%ld requests=%ld acked=%ld refused=%ld failed=%ld seconds=%.3f acked_per_s=%.0f "
        "p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
        nth, total, ok, refused, failed, el, (double)ok / el, 1e3 * all[total / 2],
        1e3 * all[(size_t)floor(0.99 * (double)(total - 1))], 1e3 * all[total - 1]);
    free(all);
    return failed != 0;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static acct_conversion bench_conv = ACCT_CONV_OPTIMAL; /* dpsgd: the silos' conversion */

/* Creates n silos named "dpsgd-<part>-<tag>-<k>-<pid>" (a cap no run reaches, rdp, conversion
 * optimal). */
static int dpsgd_silos(ledger *l, const char *part, const char *tag, size_t n, int64_t *ids)
{
    ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                       .accountant = LEDGER_ACCT_RDP,
                       .conversion = bench_conv,
                       .epsilon = 1e9,
                       .delta = 1e-5,
                       .rho = DP_NAN};
    for (size_t k = 0; k < n; k++) {
        ledger_silo_view v;
        char tok[LEDGER_TOKEN_BUF], name[96];
        dp_err e;
        dp_err_clear(&e);
        snprintf(name, sizeof name, "dpsgd-%s-%s-%zu-%ld", part, tag, k, (long)getpid());
        if (ledger_silo_create(l, name, &b, &v, tok, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: %s\n", e.msg);
            return 1;
        }
        ids[k] = v.id;
    }
    return 0;
}

/* One batch part: rounds batches of n items; prints the first batch and the others' percentiles. */
static int dpsgd_batch(ledger *l, const char *tag, acct_event *const *evs, size_t n, long rounds)
{
    int64_t *ids = calloc(n, sizeof *ids);
    ledger_charge_req *reqs = calloc(n, sizeof *reqs);
    ledger_charge_result *out = calloc(n, sizeof *out);
    double *lat = calloc((size_t)rounds, sizeof *lat);
    int rc = ids == NULL || reqs == NULL || out == NULL || lat == NULL ||
             dpsgd_silos(l, "batch", tag, n, ids);
    double t0 = now_s(), c0 = cpu_s(), c1 = c0, t1 = t0;
    for (long r = 0; rc == 0 && r < rounds; r++) {
        if (r == 1) { /* rounds 2..: the cost cache is warm */
            c1 = cpu_s();
            t1 = now_s();
        }
        char key[64];
        snprintf(key, sizeof key, "round-%ld", r);
        for (size_t k = 0; k < n; k++)
            reqs[k] = (ledger_charge_req){.silo_id = ids[k],
                                          .event = evs[k],
                                          .neighboring = ACCT_NB_ADD_REMOVE,
                                          .idempotency_key = key,
                                          .job_id = 1,
                                          .reason = "bench dpsgd round"};
        dp_err e;
        dp_err_clear(&e);
        double b0 = now_s();
        if (ledger_charge_batch(l, reqs, n, false, out, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: batch: %s\n", e.msg);
            rc = 1;
        }
        lat[r] = now_s() - b0;
    }
    double t2 = now_s(), c2 = cpu_s(), el = t2 - t0, cpu = c2 - c0;
    if (rc == 0) {
        double first = lat[0];
        qsort(lat + 1, (size_t)rounds - 1, sizeof *lat, cmp_double);
        long m = rounds - 1;
        /* warm_*: rounds 2.. only (round 1 computes every event's curve when the cache is on) */
        printf("batch cache=%s silos=%zu rounds=%ld charges_per_s=%.0f cpu_us_per_charge=%.1f "
               "warm_charges_per_s=%.0f warm_cpu_us_per_charge=%.1f "
               "first_batch_ms=%.3f batch_p50_ms=%.3f batch_p99_ms=%.3f batch_max_ms=%.3f\n",
               tag, n, rounds, (double)n * (double)rounds / el,
               1e6 * cpu / ((double)n * (double)rounds),
               m > 0 ? (double)n * (double)m / (t2 - t1) : DP_NAN,
               m > 0 ? 1e6 * (c2 - c1) / ((double)n * (double)m) : DP_NAN, 1e3 * first,
               m > 0 ? 1e3 * lat[1 + m / 2] : DP_NAN,
               m > 0 ? 1e3 * lat[1 + (size_t)floor(0.99 * (double)(m - 1))] : DP_NAN,
               m > 0 ? 1e3 * lat[rounds - 1] : DP_NAN);
    }
    free(lat);
    free(out);
    free(reqs);
    free(ids);
    return rc;
}

/* The round part: rounds as a training job runs them (service/jobs/runner.c one_round): a dry run
 * of the round's batch before the round trains, then the charge itself (no idempotency keys: a
 * round's charge commits with its checkpoint). Prints the percentiles of each and of their sum,
 * and the CPU of both per charge, over rounds 2.. (round 1 fills the cost cache). */
static int dpsgd_rounds(ledger *l, acct_event *const *evs, size_t n, long rounds)
{
    int64_t *ids = calloc(n, sizeof *ids);
    ledger_charge_req *reqs = calloc(n, sizeof *reqs);
    ledger_charge_result *out = calloc(n, sizeof *out);
    double *lat = calloc(3 * (size_t)rounds, sizeof *lat), *dry = lat + rounds,
           *sum = lat + 2 * rounds;
    int rc = ids == NULL || reqs == NULL || out == NULL || lat == NULL;
    if (rc != 0)
        fprintf(stderr, "ledger_bench: round: out of memory\n");
    else
        rc = dpsgd_silos(l, "round", "on", n, ids);
    for (size_t k = 0; rc == 0 && k < n; k++)
        reqs[k] = (ledger_charge_req){.silo_id = ids[k],
                                      .event = evs[k],
                                      .neighboring = ACCT_NB_ADD_REMOVE,
                                      .job_id = 1,
                                      .reason = "bench dpsgd round"};
    double c1 = cpu_s();
    for (long r = 0; rc == 0 && r < rounds; r++) {
        if (r == 1)
            c1 = cpu_s();
        dp_err e;
        dp_err_clear(&e);
        double b0 = now_s();
        if (ledger_charge_batch(l, reqs, n, true, out, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: round dry run: %s\n", e.msg);
            rc = 1;
        }
        double b1 = now_s();
        if (rc == 0 && ledger_charge_batch(l, reqs, n, false, out, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: round charge: %s\n", e.msg);
            rc = 1;
        }
        double b2 = now_s();
        dry[r] = b1 - b0;
        lat[r] = b2 - b1;
        sum[r] = b2 - b0;
    }
    double c2 = cpu_s();
    long m = rounds - 1;
    if (rc == 0 && m > 0) {
        qsort(lat + 1, (size_t)m, sizeof *lat, cmp_double);
        qsort(dry + 1, (size_t)m, sizeof *dry, cmp_double);
        qsort(sum + 1, (size_t)m, sizeof *sum, cmp_double);
        size_t p50 = 1 + (size_t)m / 2, p99 = 1 + (size_t)floor(0.99 * (double)(m - 1));
        printf("round cache=on silos=%zu rounds=%ld dry_p50_ms=%.3f charge_p50_ms=%.3f "
               "charge_p99_ms=%.3f round_p50_ms=%.3f round_p99_ms=%.3f "
               "warm_cpu_us_per_charge=%.1f\n",
               n, rounds, 1e3 * dry[p50], 1e3 * lat[p50], 1e3 * lat[p99], 1e3 * sum[p50],
               1e3 * sum[p99], 1e6 * (c2 - c1) / ((double)n * (double)m));
    }
    free(lat);
    free(out);
    free(reqs);
    free(ids);
    return rc;
}

/* Concurrent rounds: jobs threads, each with its own n silos (another job's), charging rounds
 * batches of its n events back to back; the writer may group several jobs' batches in one commit.
 */
typedef struct jobs_arg {
    ledger *l;
    acct_event *const *evs;
    const int64_t *ids; /* this job's n silos */
    size_t n;
    long rounds;
    double *lat; /* rounds entries */
    int rc;
} jobs_arg;

static void *jobs_worker(void *p)
{
    jobs_arg *a = p;
    ledger_charge_req *reqs = calloc(a->n, sizeof *reqs);
    ledger_charge_result *out = calloc(a->n, sizeof *out);
    a->rc = reqs == NULL || out == NULL;
    for (long r = 0; a->rc == 0 && r < a->rounds; r++) {
        char key[64];
        snprintf(key, sizeof key, "round-%ld", r);
        for (size_t k = 0; k < a->n; k++)
            reqs[k] = (ledger_charge_req){.silo_id = a->ids[k],
                                          .event = a->evs[k],
                                          .neighboring = ACCT_NB_ADD_REMOVE,
                                          .idempotency_key = key,
                                          .job_id = 1,
                                          .reason = "bench dpsgd round"};
        dp_err e;
        dp_err_clear(&e);
        double b0 = now_s();
        if (ledger_charge_batch(a->l, reqs, a->n, false, out, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: jobs batch: %s\n", e.msg);
            a->rc = 1;
        }
        a->lat[r] = now_s() - b0;
    }
    free(out);
    free(reqs);
    return NULL;
}

/* The jobs part: a warm-up round per job (the cost cache fills), then rounds timed. */
static int dpsgd_jobs(ledger *l, acct_event *const *evs, size_t n, long jobs, long rounds)
{
    if (jobs < 1 || jobs > BENCH_MAX_THREADS || rounds < 2)
        return 0;
    int64_t *ids = calloc((size_t)jobs * n, sizeof *ids);
    jobs_arg *ja = calloc((size_t)jobs, sizeof *ja);
    double *lat = calloc((size_t)(jobs * rounds), sizeof *lat);
    pthread_t th[BENCH_MAX_THREADS];
    int rc = ids == NULL || ja == NULL || lat == NULL;
    for (long j = 0; rc == 0 && j < jobs; j++) {
        char part[32];
        snprintf(part, sizeof part, "jobs%ld", j);
        rc = dpsgd_silos(l, part, "on", n, ids + (size_t)j * n);
        ja[j] = (jobs_arg){.l = l,
                           .evs = evs,
                           .ids = ids + (size_t)j * n,
                           .n = n,
                           .rounds = 1,
                           .lat = lat + j * rounds};
    }
    for (long j = 0; rc == 0 && j < jobs; j++) { /* warm-up: one round per job, in turn */
        jobs_worker(&ja[j]);
        rc = ja[j].rc;
    }
    double t0 = now_s(), c0 = cpu_s();
    long started = 0;
    for (long j = 0; rc == 0 && j < jobs; j++) {
        ja[j].rounds = rounds - 1;
        if (pthread_create(&th[j], NULL, jobs_worker, &ja[j]) != 0)
            rc = 1;
        else
            started++;
    }
    for (long j = 0; j < started; j++) {
        pthread_join(th[j], NULL);
        rc = rc || ja[j].rc;
    }
    double el = now_s() - t0, cpu = cpu_s() - c0;
    if (rc == 0) {
        size_t m = (size_t)(jobs * (rounds - 1)), k = 0;
        double *all = calloc(m, sizeof *all);
        for (long j = 0; all != NULL && j < jobs; j++)
            for (long r = 0; r < rounds - 1; r++)
                all[k++] = ja[j].lat[r];
        if (all != NULL) {
            qsort(all, m, sizeof *all, cmp_double);
            double charges = (double)n * (double)m;
            printf("jobs  cache=on jobs=%ld silos_per_job=%zu rounds=%ld charges_per_s=%.0f "
                   "cpu_us_per_charge=%.1f batch_p50_ms=%.3f batch_p99_ms=%.3f batch_max_ms=%.3f\n",
                   jobs, n, rounds - 1, charges / el, 1e6 * cpu / charges, 1e3 * all[m / 2],
                   1e3 * all[(size_t)floor(0.99 * (double)(m - 1))], 1e3 * all[m - 1]);
            free(all);
        }
    }
    free(lat);
    free(ja);
    free(ids);
    return rc;
}

static int dpsgd_api(ledger *l, const char *tag, acct_event *const *evs, size_t n, long nth,
                     long per)
{
    int64_t *ids = calloc(n, sizeof *ids);
    worker *ws = calloc((size_t)nth, sizeof *ws);
    int rc = ids == NULL || ws == NULL || dpsgd_silos(l, "api", tag, n, ids);
    for (long i = 0; rc == 0 && i < nth; i++) {
        ws[i] = (worker){.l = l,
                         .n = per,
                         .evs = (const acct_event *const *)evs,
                         .silos = ids,
                         .n_evs = n,
                         .first = (size_t)i * 7,
                         .lat = calloc((size_t)per, sizeof(double))};
        if (ws[i].lat == NULL)
            rc = 1;
    }
    if (rc == 0) {
        printf("api   cache=%s threads=%ld ", tag, nth);
        fflush(stdout);
        double c0 = cpu_s();
        rc = run(ws, nth, dpsgd_worker);
        printf("      cpu_us_per_charge=%.1f\n", 1e6 * (cpu_s() - c0) / (double)(nth * per));
    }
    for (long i = 0; ws != NULL && i < nth; i++)
        free(ws[i].lat);
    free(ws);
    free(ids);
    return rc;
}

static int dpsgd_main(const char *path, size_t n, long rounds, long nth, long per, bool trivial)
{
    dp_err e;
    dp_err_clear(&e);
    store *st = store_open(path, 1, EMBED_MIGRATIONS, EMBED_MIGRATIONS_N, &e);
    if (st == NULL) {
        fprintf(stderr, "ledger_bench: %s\n", e.msg);
        return 1;
    }
    ledger *l = ledger_open(path, &e);
    if (l == NULL) {
        fprintf(stderr, "ledger_bench: %s\n", e.msg);
        store_free(st);
        return 1;
    }
    /* Round events like the School job's: local epochs of batches of 32 over silos of 300 to 3,000
     * records, noise multiplier 1.1; each silo's q and steps differ, so the events are distinct. */
    acct_event **evs = calloc(n, sizeof *evs);
    int rc = evs == NULL;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        double n_k = 300.0 + (double)((k * 2711) % 2701);
        uint64_t steps = (uint64_t)ceil(n_k / 32.0);
        evs[k] = trivial ? acct_event_gaussian(1000.0 + (double)k)
                         : acct_event_self_composed(
                               steps, acct_event_poisson(32.0 / n_k, acct_event_gaussian(1.1)));
        rc = evs[k] == NULL;
    }
    printf("== %s round events: %zu distinct, %s\n", trivial ? "trivial" : "DP-SGD", n,
           trivial ? "gaussian(1000 + k)" : "self_composed(steps, poisson(q, gaussian(1.1)))");
#ifdef LEDGER_CURVE_CACHE
    static const char *const tags[] = {"off", "on"};
    const size_t n_tags = 2;
#else /* this file built against a ledger without the cost cache (to measure the code before it)   \
       */
    static const char *const tags[] = {"none"};
    const size_t n_tags = 1;
#endif
    /* LEDGER_BENCH_ONLY_CACHED=1 skips the cache-off rows (to profile the cached path alone). */
    const char *only = getenv("LEDGER_BENCH_ONLY_CACHED");
    size_t t0 = only != NULL && strcmp(only, "1") == 0 ? n_tags - 1 : 0;
    for (size_t t = t0; rc == 0 && t < n_tags; t++) {
#ifdef LEDGER_CURVE_CACHE
        ledger_curve_cache_enable(l, t == 1);
#endif
        rc = dpsgd_batch(l, tags[t], evs, n, rounds);
    }
#ifdef LEDGER_CURVE_CACHE
    ledger_curve_cache_enable(l, true);
#endif
    if (rc == 0)
        rc = dpsgd_rounds(l, evs, n, rounds);
    for (size_t t = t0; rc == 0 && t < n_tags; t++) {
#ifdef LEDGER_CURVE_CACHE
        ledger_curve_cache_enable(l, t == 1);
#endif
        rc = dpsgd_api(l, tags[t], evs, n, nth, per);
    }
    /* LEDGER_BENCH_JOBS=J: J jobs' rounds in flight at once (dpsgd_jobs), cache on. */
    const char *jobs = getenv("LEDGER_BENCH_JOBS");
    if (rc == 0 && jobs != NULL) {
#ifdef LEDGER_CURVE_CACHE
        ledger_curve_cache_enable(l, true);
#endif
        rc = dpsgd_jobs(l, evs, n, strtol(jobs, NULL, 10), rounds);
    }
#ifdef LEDGER_CURVE_CACHE
    ledger_curve_stats cs;
    ledger_curve_cache_stats(l, &cs);
    printf("   curve cache: hits=%llu misses=%llu evictions=%llu refined_hits=%llu entries=%zu of "
           "%zu\n",
           (unsigned long long)cs.hits, (unsigned long long)cs.misses,
           (unsigned long long)cs.evictions, (unsigned long long)cs.refined_hits, cs.entries,
           cs.capacity);
#endif
    for (size_t k = 0; evs != NULL && k < n; k++)
        acct_event_free(evs[k]);
    free(evs);
    ledger_free(l);
    store_free(st);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 7 && strcmp(argv[1], "dpsgd") == 0) {
        long n = strtol(argv[3], NULL, 10), rounds = strtol(argv[4], NULL, 10);
        long nth = strtol(argv[5], NULL, 10), per = strtol(argv[6], NULL, 10);
        if (n < 1 || n > LEDGER_MAX_BATCH || rounds < 1 || nth < 1 || nth > BENCH_MAX_THREADS ||
            per < 1)
            return 2;
        if (argc >= 8 && acct_conversion_parse(argv[7], &bench_conv, NULL) != DP_OK)
            return 2;
        return dpsgd_main(argv[2], (size_t)n, rounds, nth, per,
                          argc >= 9 && strcmp(argv[8], "trivial") == 0);
    }
    if (argc >= 7 && strcmp(argv[1], "http") == 0) {
        long nth = strtol(argv[5], NULL, 10), n = strtol(argv[6], NULL, 10);
        if (nth < 1 || nth > BENCH_MAX_THREADS || n < 1)
            return 2;
        worker *ws = calloc((size_t)nth, sizeof *ws);
        for (long i = 0; ws != NULL && i < nth; i++) {
            ws[i] = (worker){.host = argv[2],
                             .port = (int)strtol(argv[3], NULL, 10),
                             .silo = strtol(argv[4], NULL, 10),
                             .n = n,
                             .token = argc >= 8 ? argv[7] : NULL,
                             .lat = calloc((size_t)n, sizeof(double))};
            if (ws[i].lat == NULL)
                return 1;
        }
        return ws == NULL ? 1 : run(ws, nth, http_worker);
    }
    if (argc >= 5 && strcmp(argv[1], "api") == 0) {
        long nth = strtol(argv[3], NULL, 10), n = strtol(argv[4], NULL, 10);
        if (nth < 1 || nth > BENCH_MAX_THREADS || n < 1)
            return 2;
        dp_err e;
        dp_err_clear(&e);
        ledger *l = ledger_open(argv[2], &e);
        if (l == NULL) {
            fprintf(stderr, "ledger_bench: %s\n", e.msg);
            return 1;
        }
        /* a cap no run reaches: every charge pays the full RDP admission and is appended */
        ledger_budget b = {.kind = LEDGER_BUDGET_EPS_DELTA,
                           .accountant = LEDGER_ACCT_RDP,
                           .conversion = ACCT_CONV_BALLE2020,
                           .epsilon = 1e9,
                           .delta = 1e-5,
                           .rho = DP_NAN};
        ledger_silo_view v;
        char tok[LEDGER_TOKEN_BUF], name[64];
        /* one silo per run: every run of run.sh uses the same database, where the HTTP part already
         * created "bench", and active silo names are unique */
        snprintf(name, sizeof name, "bench-api-%ld-%ld", nth, (long)getpid());
        if (ledger_silo_create(l, name, &b, &v, tok, &e) != DP_OK) {
            fprintf(stderr, "ledger_bench: %s\n", e.msg);
            return 1;
        }
        acct_event *g = acct_event_gaussian(1000);
        worker *ws = calloc((size_t)nth, sizeof *ws);
        for (long i = 0; ws != NULL && i < nth; i++) {
            ws[i] = (worker){
                .l = l, .silo = v.id, .n = n, .ev = g, .lat = calloc((size_t)n, sizeof(double))};
            if (ws[i].lat == NULL)
                return 1;
        }
        int rc = ws == NULL ? 1 : run(ws, nth, api_worker);
        uint64_t groups = 0, ops = 0;
        ledger_stats(l, &groups, &ops);
        printf("   group commits=%llu ops=%llu mean_group=%.1f\n", (unsigned long long)groups,
               (unsigned long long)ops, groups ? (double)ops / (double)groups : 0.0);
        ledger_free(l);
        acct_event_free(g);
        return rc;
    }
    fprintf(stderr, "usage: ledger_bench http HOST PORT SILO CONNECTIONS REQUESTS [TOKEN]\n"
                    "       ledger_bench api DB_PATH THREADS CHARGES_PER_THREAD\n"
                    "       ledger_bench dpsgd DB_PATH SILOS ROUNDS THREADS CHARGES_PER_THREAD "
                    "[CONVERSION [trivial]]\n");
    return 2;
}
