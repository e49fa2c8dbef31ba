/*
 * bench_ppsgd.c: wall and CPU time of one PPSGD run (federated/fl_algo_ppsgd.c) on the synthetic
 * personalised regression of Bietti et al., ICML 2022, §6.1 (federated/fl_additive.h): N = 1000
 * users, d = 100, 10 fresh samples per user per round, every user every round, ratio r = 1, noise
 * multiplier 10, clip 10, step 0.4, T rounds (argument, default 200). Prints one JSON line with
 * the time per round and the final excess risk; bench/ppsgd/run.sh runs it beside a NumPy
 * implementation of the same algorithm (ppsgd_numpy.py) and prints the ratio. The data generation
 * (fresh samples every round) is timed apart from the training rounds. Not part of make test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dp_err.h"
#include "federated/fl_additive.h"
#include "federated/fl_algo.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
    if (rounds < 1 || rounds > 100000) {
        fprintf(stderr, "usage: %s [rounds]\n", argv[0]);
        return 2;
    }
    fl_additive_spec spec = fl_additive_paper_spec();
    fl_additive a;
    fl_federation f;
    fl_state st;
    dp_err e;
    dp_err_clear(&e);
    fl_job_cfg c;
    fl_job_cfg_default(&c);
    c.algorithm = "ppsgd";
    c.model = (fl_model_spec){.type = FL_MODEL_LINEAR, .d_in = spec.dim};
    c.rounds = (uint64_t)rounds;
    c.batch_size = spec.rows;
    c.lr = 0.4;
    c.seed = 7;
    c.ppsgd_ratio = 1.0;
    c.client_rate = 1.0;
    c.update_clip = 10.0;
    c.server_noise = 10.0;
    if (fl_additive_init(&spec, &a, &e) != DP_OK || fl_additive_federation(&a, &f, &e) != DP_OK ||
        fl_state_init(&c, &f, &st, &e) != DP_OK) {
        fprintf(stderr, "bench_ppsgd: %s\n", e.msg);
        return 1;
    }
    double gen = 0, train = 0, cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (long t = 0; t < rounds; t++) {
        double t0 = clock_s(CLOCK_MONOTONIC);
        if (fl_additive_draw(&a, (uint64_t)t, &f, &e) != DP_OK) {
            fprintf(stderr, "bench_ppsgd: %s\n", e.msg);
            return 1;
        }
        double t1 = clock_s(CLOCK_MONOTONIC);
        if (fl_round_run(&c, &f, &st, NULL, 1, NULL, &e) != DP_OK) {
            fprintf(stderr, "bench_ppsgd: %s\n", e.msg);
            return 1;
        }
        gen += t1 - t0;
        train += clock_s(CLOCK_MONOTONIC) - t1;
    }
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    printf("{\"impl\": \"dpsilo\", \"rounds\": %ld, \"users\": %zu, \"dim\": %zu, \"rows\": %zu, "
           "\"train_ms_per_round\": %.4f, \"data_ms_per_round\": %.4f, \"cpu_ms_per_round\": %.4f, "
           "\"final_excess_risk\": %.6g}\n",
           rounds, spec.users, spec.dim, spec.rows, 1e3 * train / (double)rounds,
           1e3 * gen / (double)rounds, 1e3 * cpu / (double)rounds,
           fl_additive_excess_risk(&a, st.personal));
    fl_state_free(&st);
    fl_federation_free(&f);
    fl_additive_free(&a);
    return 0;
}
