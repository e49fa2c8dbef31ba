/*
 * test_common_rng.c: SplitMix64 against the reference algorithm's published outputs, the seeded
 * mt19937 streams (determinism, independence of stream ids, the outputs pinned when the streams
 * moved here from estimators/), indexed streams and seed derivation for training jobs.
 */
#include <string.h>

#include "common/dp_rng.h"
#include "tests/support/test_util.h"

/* Vigna's splitmix64.c (Steele, Lea & Flood 2014) from state 1234567: the first five outputs of
 * the usual test sequence (the Rosetta Code task "Pseudo-random numbers/Splitmix64" lists them),
 * checked here against an independent Python transcription of splitmix64.c as well. */
static void splitmix64_matches_the_reference_outputs(void **state)
{
    (void)state;
    static const uint64_t want[5] = {6457827717110365317ULL, 3203168211198807973ULL,
                                     9817491932198370423ULL, 4593380528125082431ULL,
                                     16408922859458223821ULL};
    uint64_t st = 1234567;
    for (int i = 0; i < 5; i++)
        assert_true(dp_splitmix64(&st) == want[i]);
    assert_true(st == 1234567 + 5 * 0x9e3779b97f4a7c15ULL); /* the state walks by the increment */
}

/* The first two mt19937 outputs of seed 20260101 per stream id, recorded from eb_rng_alloc before
 * it moved to common/: every stored seeded run keeps its draws. */
static void streams_keep_the_outputs_they_had_in_estimators(void **state)
{
    (void)state;
    static const struct {
        uint64_t stream;
        unsigned long first, second;
    } pin[] = {
        {DP_RNG_STREAM_DATA, 2374757940UL, 3711929748UL},
        {DP_RNG_STREAM_GAUSSIAN_NOISE, 567604226UL, 486885350UL},
        {DP_RNG_STREAM_BETA_RESPONSES, 1318438836UL, 75612881UL},
        {DP_RNG_STREAM_MIXTURE_NOISE, 314509800UL, 3773438225UL},
        {DP_RNG_STREAM_MIXTURE_RESTART, 2648102891UL, 1741325484UL},
        {DP_RNG_STREAM_MIXTURE_RESTART + 99, 1822956146UL, 3800838630UL},
        {DP_RNG_STREAM_LINREG_INIT, 828422610UL, 1870273985UL},
    };
    for (size_t i = 0; i < sizeof pin / sizeof pin[0]; i++) {
        dp_err e = {0};
        gsl_rng *r = dp_rng_alloc(20260101ULL, pin[i].stream, &e);
        assert_non_null(r);
        assert_true(gsl_rng_get(r) == pin[i].first);
        assert_true(gsl_rng_get(r) == pin[i].second);
        gsl_rng_free(r);
    }
    /* the named ids keep the numbers the estimators used (1, 2, 3, 100 + r, 200) */
    assert_int_equal(DP_RNG_STREAM_GAUSSIAN_NOISE, 1);
    assert_int_equal(DP_RNG_STREAM_BETA_RESPONSES, 2);
    assert_int_equal(DP_RNG_STREAM_MIXTURE_NOISE, 3);
    assert_int_equal(dp_rng_stream_at(DP_RNG_STREAM_MIXTURE_RESTART, 7), 107);
    assert_int_equal(DP_RNG_STREAM_LINREG_INIT, 200);
}

#define N_DRAWS 64

static void draws(uint64_t seed, uint64_t stream, unsigned long *out)
{
    dp_err e = {0};
    gsl_rng *r = dp_rng_alloc(seed, stream, &e);
    assert_non_null(r);
    for (int i = 0; i < N_DRAWS; i++)
        out[i] = gsl_rng_get(r);
    gsl_rng_free(r);
}

/* How many positions two draw sequences share (unrelated 32-bit streams: almost surely 0). */
static int common_positions(const unsigned long *a, const unsigned long *b)
{
    int k = 0;
    for (int i = 0; i < N_DRAWS; i++)
        k += a[i] == b[i];
    return k;
}

static void same_seed_and_stream_repeat_and_any_change_gives_another_stream(void **state)
{
    (void)state;
    unsigned long a[N_DRAWS], b[N_DRAWS];
    draws(42, DP_RNG_STREAM_GAUSSIAN_NOISE, a);
    draws(42, DP_RNG_STREAM_GAUSSIAN_NOISE, b);
    assert_memory_equal(a, b, sizeof a);
    /* every pair among a few seeds and every named stream differs at every position */
    static const uint64_t streams[] = {
        DP_RNG_STREAM_DATA,          DP_RNG_STREAM_GAUSSIAN_NOISE,     DP_RNG_STREAM_BETA_RESPONSES,
        DP_RNG_STREAM_MIXTURE_NOISE, DP_RNG_STREAM_MIXTURE_RESTART,    DP_RNG_STREAM_LINREG_INIT,
        DP_RNG_STREAM_FL_DP_NOISE,   DP_RNG_STREAM_FL_CLIENT_SAMPLING, DP_RNG_STREAM_FL_MODEL_INIT};
    static const uint64_t seeds[] = {0, 1, 42, UINT64_MAX};
    enum { NS = sizeof streams / sizeof streams[0], NSEED = sizeof seeds / sizeof seeds[0] };
    static unsigned long all[NSEED * NS][N_DRAWS];
    for (size_t s = 0; s < NSEED; s++)
        for (size_t k = 0; k < NS; k++)
            draws(seeds[s], streams[k], all[s * NS + k]);
    for (size_t i = 0; i < NSEED * NS; i++)
        for (size_t j = i + 1; j < NSEED * NS; j++)
            assert_true(common_positions(all[i], all[j]) <= 1);
}

/* A job's (silo, round) seeds: reproducible, distinct per silo and per round, and the order of the
 * labels matters (silo 2 round 3 is not silo 3 round 2). */
static void derived_seeds_separate_silos_and_rounds(void **state)
{
    (void)state;
    const uint64_t job = 20261126;
    uint64_t s23 = dp_rng_derive(dp_rng_derive(job, 2), 3);
    assert_true(s23 == dp_rng_derive(dp_rng_derive(job, 2), 3));
    assert_true(s23 != dp_rng_derive(dp_rng_derive(job, 3), 2));
    assert_true(s23 != dp_rng_derive(dp_rng_derive(job + 1, 2), 3));
    /* 64 silos x 64 rounds: 4096 distinct seeds */
    enum { N = 64 };
    static uint64_t seen[N * N];
    for (uint64_t s = 0; s < N; s++)
        for (uint64_t r = 0; r < N; r++)
            seen[s * N + r] = dp_rng_derive(dp_rng_derive(job, s), r);
    for (size_t i = 0; i < N * N; i++)
        for (size_t j = i + 1; j < N * N; j++)
            assert_true(seen[i] != seen[j]);
    /* derive is SplitMix64 of seed ^ SplitMix64(label), both from the reference step */
    uint64_t h = 5, st;
    st = job ^ dp_splitmix64(&h);
    assert_true(dp_rng_derive(job, 5) == dp_splitmix64(&st));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splitmix64_matches_the_reference_outputs),
        cmocka_unit_test(streams_keep_the_outputs_they_had_in_estimators),
        cmocka_unit_test(same_seed_and_stream_repeat_and_any_change_gives_another_stream),
        cmocka_unit_test(derived_seeds_separate_silos_and_rounds),
    };
    return cmocka_run_group_tests_name("common_rng", tests, NULL, NULL);
}
