/*
 * bench_accounting.c: timings of the RDP accountant on the tasks of bench/accounting/tasks.json,
 * and the HTTP round trip of POST /v1/accounting/epsilon (with --http HOST:PORT, sequential
 * requests on one keep-alive connection). Not part of `make test`; bench/accounting/run.sh drives
 * it.
 *
 * Output: one line per measurement, tab-separated, the same format as the reference harness:
 *   task <TAB> implementation <TAB> seconds (median per call, or total for the sweep) <TAB> result
 * Timings never enter a test; they are printed for docs/BENCHMARKS.md.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "accounting/calibrate.h"
#include "accounting/rdp.h"
#include "common/dp_math.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The sampled Gaussian mechanism over `steps` steps (DP-SGD). */
static acct_event *sgm(double q, double s, unsigned long long steps)
{
    return acct_event_self_composed(steps, acct_event_poisson(q, acct_event_gaussian(s)));
}

static double opacus[151];
static size_t n_opacus;

static double eps_once(acct_event *ev, double delta, acct_conversion conv, const double *o,
                       size_t n)
{
    acct_rdp_answer a;
    dp_err err = {0};
    if (acct_rdp_epsilon(ev, ACCT_NB_ADD_REMOVE, delta, conv, o, n, &a, &err) != DP_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    return a.value;
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

/* ---- HTTP client: minimal HTTP/1.1 keep-alive POST ---- */
static int http_connect(const char *hostport)
{
    char host[64];
    int port;
    if (sscanf(hostport, "%63[^:]:%d", host, &port) != 2)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Sends one POST and reads the whole response (Content-Length framed). Returns 0 on success. */
static int http_post(int fd, const char *path, const char *body, char *resp, size_t cap)
{
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, strlen(body), body);
    if (write(fd, req, (size_t)n) != n)
        return -1;
    size_t got = 0;
    long clen = -1;
    char *hdr_end = NULL;
    for (;;) {
        ssize_t r = read(fd, resp + got, cap - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        resp[got] = '\0';
        if (hdr_end == NULL && (hdr_end = strstr(resp, "\r\n\r\n")) != NULL) {
            const char *cl = strstr(resp, "Content-Length:");
            if (cl == NULL)
                cl = strstr(resp, "content-length:");
            clen = cl ? strtol(cl + 15, NULL, 10) : 0;
        }
        if (hdr_end && (long)(got - (size_t)(hdr_end + 4 - resp)) >= clen)
            return strncmp(resp, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
        if (got + 1 >= cap)
            return -1;
    }
}

int main(int argc, char **argv)
{
    gsl_set_error_handler_off();
    const char *tasks_path = "bench/accounting/tasks.json", *http = NULL;
    int reps = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tasks") == 0)
            tasks_path = argv[i + 1];
        else if (strcmp(argv[i], "--http") == 0)
            http = argv[i + 1];
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
    }
    json_error_t je;
    json_t *tasks = json_load_file(tasks_path, 0, &je);
    if (tasks == NULL) {
        fprintf(stderr, "bench: %s: %s\n", tasks_path, je.text);
        return 1;
    }
    for (int x = 1; x <= 99; x++)
        opacus[n_opacus++] = 1.0 + x / 10.0;
    for (int a = 12; a <= 63; a++)
        opacus[n_opacus++] = a;
    double *t = malloc((size_t)reps * sizeof *t);

    /* 1. single epsilon: the same answer as Opacus/dp_accounting (their grid, Balle conversion),
     * and our default (default grid + continuous order) */
    const json_t *s = json_object_get(tasks, "single");
    acct_event *ev = sgm(num(s, "q"), num(s, "sigma"), (unsigned long long)num(s, "steps"));
    double e = 0.0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        e = eps_once(ev, num(s, "delta"), ACCT_CONV_BALLE2020, opacus, n_opacus);
        t[r] = now() - t0;
    }
    printf("single_eps\tdpsilo\t%.9f\t%.10f\n", median(t, (size_t)reps), e);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        e = eps_once(ev, num(s, "delta"), ACCT_CONV_OPTIMAL, NULL, 0);
        t[r] = now() - t0;
    }
    printf("single_eps_optimal\tdpsilo\t%.9f\t%.10f\n", median(t, (size_t)reps), e);
    acct_event_free(ev);

    /* 2. sweep: 1000 settings, total time of one pass (median of 5 passes: one pass is ~10 ms,
     * which the shared machine's scheduling noise easily doubles) */
    const json_t *sw = json_object_get(tasks, "sweep");
    const json_t *qs = json_object_get(sw, "q"), *ss = json_object_get(sw, "sigma"),
                 *ts = json_object_get(sw, "steps");
    double sum = 0.0, t0, passes[5];
    size_t count = 0;
    for (int pass = 0; pass < 5; pass++) {
        sum = 0.0;
        count = 0;
        t0 = now();
        for (size_t i = 0; i < json_array_size(qs); i++)
            for (size_t j = 0; j < json_array_size(ss); j++)
                for (size_t k = 0; k < json_array_size(ts); k++) {
                    acct_event *w =
                        sgm(json_number_value(json_array_get(qs, i)),
                            json_number_value(json_array_get(ss, j)),
                            (unsigned long long)json_number_value(json_array_get(ts, k)));
                    sum += eps_once(w, num(sw, "delta"), ACCT_CONV_BALLE2020, opacus, n_opacus);
                    acct_event_free(w);
                    count++;
                }
        passes[pass] = now() - t0;
    }
    printf("sweep_%zu\tdpsilo\t%.9f\t%.10f\n", count, median(passes, 5), sum);

    /* 3. calibration: smallest noise multiplier meeting the target (Opacus grid, Balle) */
    const json_t *c = json_object_get(tasks, "calibrate");
    ev = sgm(num(c, "q"), DP_NAN, (unsigned long long)num(c, "steps"));
    acct_calib_rdp_ctx ctx = {
        ACCT_NB_ADD_REMOVE, num(c, "delta"), ACCT_CONV_BALLE2020, opacus, n_opacus, 0};
    acct_calib_result res = {0};
    int creps = reps / 20 > 3 ? reps / 20 : 3;
    for (int r = 0; r < creps; r++) {
        dp_err err = {0};
        t0 = now();
        if (acct_calibrate(ev, num(c, "target_epsilon"), acct_calib_rdp_eps, &ctx, &res, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        t[r] = now() - t0;
    }
    printf("calibrate\tdpsilo\t%.9f\t%.10f\n", median(t, (size_t)creps), res.value);
    acct_event_free(ev);

    /* 4. HTTP median round trip of POST /v1/accounting/epsilon (default: optimal conversion) */
    if (http != NULL) {
        int fd = http_connect(http);
        if (fd < 0) {
            fprintf(stderr, "bench: cannot connect to %s\n", http);
            return 1;
        }
        char body[512], resp[65536];
        snprintf(body, sizeof body,
                 "{\"event\":{\"type\":\"self_composed\",\"count\":%lld,\"event\":{\"type\":"
                 "\"poisson_sampled\",\"sampling_rate\":%.17g,\"event\":{\"type\":\"gaussian\","
                 "\"noise_multiplier\":%.17g}}},\"delta\":%.17g}",
                 (long long)num(s, "steps"), num(s, "q"), num(s, "sigma"), num(s, "delta"));
        for (int r = 0; r < reps; r++) {
            t0 = now();
            if (http_post(fd, "/v1/accounting/epsilon", body, resp, sizeof resp) != 0) {
                fprintf(stderr, "bench: HTTP request failed: %.200s\n", resp);
                return 1;
            }
            t[r] = now() - t0;
        }
        const char *p = strstr(strstr(resp, "\r\n\r\n"), "\"epsilon\":");
        printf("http_epsilon\tdpsilo\t%.9f\t%.10f\n", median(t, (size_t)reps),
               p ? strtod(p + 10, NULL) : DP_NAN);
        close(fd);
    }
    free(t);
    json_decref(tasks);
    return 0;
}
