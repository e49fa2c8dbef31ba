/*
 * Unit tests for service/codec/job_spec.c: a full spec read into the struct, the defaults, and
 * every refusal naming its field in full.
 */
#include "tests/support/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "service/codec/job_spec.h"

/* Parses text; returns the code, the struct in *s and the error in *e. */
static int parse(const char *text, job_spec *s, dp_err *e)
{
    json_error_t je;
    json_t *b = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (b == NULL)
        fail_msg("test JSON does not parse: %s: %s", je.text, text);
    dp_err_clear(e);
    int rc = job_spec_parse(b, s, e);
    json_decref(b);
    return rc;
}

static void a_full_spec_is_read(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    const char *t =
        "{\"algorithm\":\"mrmtl\",\"dataset\":7,\"model\":{\"type\":\"mlp\",\"hidden\":[64,32]},"
        "\"rounds\":200,\"local_epochs\":2,\"batch_size\":32,\"lr\":0.01,\"lambda\":1,"
        "\"seed\":5,\"test_fraction\":0.25,\"privacy\":{\"target_epsilon\":6,\"delta\":1e-3,"
        "\"clip\":1},\"silos\":{\"north\":3,\"south\":4},\"on_budget_exhausted\":\"stop_silo\","
        "\"standardize\":\"none\",\"weighted\":false,\"resume\":false,\"name\":\"school\"}";
    assert_int_equal(parse(t, &s, &e), DP_OK);
    assert_string_equal(s.algorithm, "mrmtl");
    assert_string_equal(s.name, "school");
    assert_int_equal(s.data, JOB_DATA_UPLOAD);
    assert_int_equal(s.dataset_id, 7);
    assert_false(s.has_partition);
    assert_int_equal(s.model.type, FL_MODEL_MLP);
    assert_int_equal(s.model.n_hidden, 2);
    assert_int_equal(s.model.hidden[0], 64);
    assert_int_equal(s.model.hidden[1], 32);
    assert_int_equal(s.rounds, 200);
    assert_int_equal(s.local_epochs, 2);
    assert_int_equal(s.batch_size, 32);
    assert_close(s.lr, 0.01, 0, 0);
    assert_close(s.lambda, 1, 0, 0);
    assert_int_equal(s.seed, 5);
    assert_close(s.test_fraction, 0.25, 0, 0);
    assert_int_equal(s.privacy, JOB_PRIVACY_TARGET);
    assert_close(s.target_epsilon, 6, 0, 0);
    assert_close(s.delta, 1e-3, 0, 0);
    assert_close(s.clip, 1, 0, 0);
    assert_int_equal(s.n_bindings, 2);
    assert_string_equal(s.bindings[0].name, "north");
    assert_int_equal(s.bindings[0].silo_id, 3);
    assert_string_equal(s.bindings[1].name, "south");
    assert_int_equal(s.on_budget, JOB_BUDGET_STOP_SILO);
    assert_false(s.standardize);
    assert_false(s.weighted);
    assert_false(s.resume);
    job_spec_clear(&s);
}

static void defaults_and_generators(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    const char *t = "{\"algorithm\":\"fedavg\",\"dataset\":{\"generator\":\"synthetic-"
                    "classification\",\"silos\":5,\"dim\":3,\"classes\":4,\"seed\":9},"
                    "\"partition\":{\"kind\":\"dirichlet\",\"silos\":10,\"alpha\":0.5},"
                    "\"model\":{\"type\":\"softmax\"},\"rounds\":3,\"batch_size\":8,\"lr\":0.1}";
    assert_int_equal(parse(t, &s, &e), DP_OK);
    assert_int_equal(s.data, JOB_DATA_SYNTHETIC);
    assert_int_equal(s.synth.silos, 5);
    assert_int_equal(s.synth.dim, 3);
    assert_int_equal(s.synth.classes, 4);
    assert_int_equal(s.synth.n_min, 100);
    assert_int_equal(s.synth.n_max, 200);
    assert_int_equal(s.synth.seed, 9);
    assert_true(s.has_partition);
    assert_int_equal(s.partition.kind, FL_PARTITION_DIRICHLET);
    assert_int_equal(s.partition.silos, 10);
    assert_close(s.partition.alpha, 0.5, 0, 0);
    assert_int_equal(s.local_epochs, 1);
    assert_close(s.test_fraction, 0.2, 0, 0);
    assert_int_equal(s.privacy, JOB_PRIVACY_NONE);
    assert_int_equal(s.on_budget, JOB_BUDGET_REFUSE);
    assert_true(s.standardize);
    assert_true(s.weighted);
    assert_true(s.resume);
    job_spec_clear(&s);
    assert_int_equal(parse("{\"algorithm\":\"local\",\"dataset\":\"fashion-mnist\",\"partition\":"
                           "{\"kind\":\"iid\",\"silos\":4},\"model\":{\"type\":\"logistic\"},"
                           "\"rounds\":1,\"batch_size\":1,\"lr\":1}",
                           &s, &e),
                     DP_OK);
    assert_int_equal(s.data, JOB_DATA_FASHION_MNIST);
    assert_int_equal(s.partition.rows_per_silo, 0); /* absent: every row */
    job_spec_clear(&s);
    /* one class and 30 rows per silo (Aldaghri et al.'s clients) */
    assert_int_equal(parse("{\"algorithm\":\"local\",\"dataset\":\"fashion-mnist\",\"partition\":"
                           "{\"kind\":\"classes\",\"silos\":200,\"classes_per_silo\":1,"
                           "\"rows_per_silo\":30},\"model\":{\"type\":\"logistic\"},"
                           "\"rounds\":1,\"batch_size\":1,\"lr\":1}",
                           &s, &e),
                     DP_OK);
    assert_int_equal(s.partition.kind, FL_PARTITION_CLASSES);
    assert_int_equal(s.partition.classes_per_silo, 1);
    assert_int_equal(s.partition.rows_per_silo, 30);
    job_spec_clear(&s);
}

/* A valid base with one key replaced by a fragment: "{<base>,<frag>}" minus the base's key. */
static void expect_field(const char *body, const char *fieldname)
{
    job_spec s;
    dp_err e;
    int rc = parse(body, &s, &e);
    if (rc != DP_EINVAL || strcmp(e.field, fieldname) != 0)
        fail_msg("expected a 400 naming %s, got rc %d field \"%s\" (%s) for %s", fieldname, rc,
                 e.field, e.msg, body);
    assert_true(strlen(e.msg) > 0);
}

#define BASE_HEAD "{\"algorithm\":\"fedavg\",\"dataset\":1,\"model\":{\"type\":\"linear\"},"

static void refusals_name_the_field(void **state)
{
    (void)state;
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":0,\"lr\":0.1}", "batch_size");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":1.5,\"lr\":0.1}", "batch_size");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":\"8\",\"lr\":0.1}", "batch_size");
    expect_field(BASE_HEAD "\"batch_size\":8,\"lr\":0.1}", "rounds");
    expect_field(BASE_HEAD "\"rounds\":1000001,\"batch_size\":8,\"lr\":0.1}", "rounds");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0}", "lr");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"lambda\":1}", "lambda");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"colour\":1}", "colour");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"local_epochs\":0}",
                 "local_epochs");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"test_fraction\":0.95}",
                 "test_fraction");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"on_budget_exhausted\":"
                           "\"later\"}",
                 "on_budget_exhausted");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"standardize\":\"all\"}",
                 "standardize");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"delta\":1e-"
                           "5,\"clip\":1}}",
                 "privacy");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"noise_multiplier\":1,\"delta\":1e-5,\"clip\":1}}",
                 "privacy");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":-1,\"delta\":1e-5,\"clip\":1}}",
                 "privacy.target_epsilon");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"delta\":0.7,\"clip\":1}}",
                 "privacy.delta");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"delta\":1e-5}}",
                 "privacy.clip");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"delta\":1e-5,\"clip\":1,\"client_rate\":0.5}}",
                 "privacy.client_rate");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"delta\":1e-5,\"clip\":1},\"silos\":{\"a\":1,\"b\":1}}",
                 "silos.b");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"silos\":{\"a\":1}}",
                 "silos");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"privacy\":{\"target_"
                           "epsilon\":1,\"delta\":1e-5,\"clip\":1},\"silos\":{\"a\":\"x\"}}",
                 "silos.a");
    expect_field("{\"algorithm\":\"fedsgd\",\"dataset\":1,\"model\":{\"type\":\"linear\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "algorithm");
    expect_field("{\"algorithm\":\"fedavg\",\"model\":{\"type\":\"linear\"},\"rounds\":2,"
                 "\"batch_size\":8,\"lr\":0.1}",
                 "dataset");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":\"mnist\",\"model\":{\"type\":\"linear\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "dataset");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":{\"generator\":\"synthetic-linreg\","
                 "\"tau\":-1},\"model\":{\"type\":\"linear\"},\"rounds\":2,\"batch_size\":8,"
                 "\"lr\":0.1}",
                 "dataset.tau");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":{\"generator\":\"synthetic-linreg\","
                 "\"classes\":3},\"model\":{\"type\":\"linear\"},\"rounds\":2,\"batch_size\":8,"
                 "\"lr\":0.1}",
                 "dataset.classes");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"model\":{\"type\":\"cnn\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "model.type");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"model\":{\"type\":\"mlp\","
                 "\"hidden\":[64,0]},\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "model.hidden");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"model\":{\"type\":\"linear\","
                 "\"hidden\":[4]},\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "model.hidden");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"partition\":{\"kind\":\"dirichlet\","
                 "\"silos\":3},\"model\":{\"type\":\"linear\"},\"rounds\":2,\"batch_size\":8,"
                 "\"lr\":0.1}",
                 "partition.alpha");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"partition\":{\"kind\":\"iid\","
                 "\"silos\":3,\"rows_per_silo\":0},\"model\":{\"type\":\"linear\"},\"rounds\":2,"
                 "\"batch_size\":8,\"lr\":0.1}",
                 "partition.rows_per_silo");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":1,\"partition\":{\"kind\":\"iid\","
                 "\"silos\":3,\"rows_per_silo\":2.5},\"model\":{\"type\":\"linear\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "partition.rows_per_silo");
    expect_field("{\"algorithm\":\"mrmtl\",\"dataset\":1,\"model\":{\"type\":\"linear\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "lambda");
    expect_field("{\"algorithm\":\"dp_fedavg\",\"dataset\":1,\"model\":{\"type\":\"linear\"},"
                 "\"rounds\":2,\"batch_size\":8,\"lr\":0.1}",
                 "privacy");
    expect_field("[1]", "body");
}

#define PPSGD_HEAD                                                                                 \
    "{\"algorithm\":\"ppsgd\",\"dataset\":1,\"model\":{\"type\":\"linear\"},\"rounds\":5,"         \
    "\"batch_size\":10,\"lr\":0.1,"
#define PPSGD_PRIV "\"privacy\":{\"noise_multiplier\":1,\"delta\":1e-5,\"clip\":1}"

static void ppsgd_reads_its_ratio(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    assert_int_equal(parse(PPSGD_HEAD "\"ratio\":0.3," PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_string_equal(s.algorithm, "ppsgd");
    assert_close(s.ratio, 0.3, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(parse(PPSGD_HEAD "\"ratio\":\"inf\"," PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_true(isinf(s.ratio));
    job_spec_clear(&s);
    assert_int_equal(parse(PPSGD_HEAD PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_close(s.ratio, 1, 0, 0); /* the default: equal steps */
    job_spec_clear(&s);
    assert_int_equal(parse(PPSGD_HEAD "\"privacy\":{\"noise_multiplier\":1,\"delta\":1e-5,"
                                      "\"clip\":1,\"client_rate\":0.2}}",
                           &s, &e),
                     DP_OK);
    assert_close(s.client_rate, 0.2, 0, 0);
    job_spec_clear(&s);
    expect_field(PPSGD_HEAD "\"ratio\":-1," PPSGD_PRIV "}", "ratio");
    expect_field(PPSGD_HEAD "\"ratio\":\"infinity\"," PPSGD_PRIV "}", "ratio");
    expect_field(PPSGD_HEAD "\"ratio\":1}", "privacy"); /* user-level DP needs its privacy */
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"ratio\":1}", "ratio");
}

#define PPSGD1_HEAD                                                                                \
    "{\"algorithm\":\"ppsgd\",\"dataset\":1,\"model\":{\"type\":\"linear\"},\"rounds\":5,"         \
    "\"batch_size\":1,\"lr\":0.1,"

static void ppsgd_reads_its_mode(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    assert_int_equal(parse(PPSGD_HEAD PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_int_equal(s.ppsgd_mode, 3); /* the default: Alg. 3 */
    job_spec_clear(&s);
    assert_int_equal(parse(PPSGD_HEAD "\"ppsgd_mode\":2," PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_int_equal(s.ppsgd_mode, 2);
    job_spec_clear(&s);
    /* Alg. 1: every user (client_rate 1, the default) and one sample each (batch_size 1) */
    assert_int_equal(parse(PPSGD1_HEAD "\"ppsgd_mode\":1," PPSGD_PRIV "}", &s, &e), DP_OK);
    assert_int_equal(s.ppsgd_mode, 1);
    job_spec_clear(&s);
    expect_field(PPSGD_HEAD "\"ppsgd_mode\":1," PPSGD_PRIV "}", "batch_size");
    expect_field(PPSGD1_HEAD "\"ppsgd_mode\":1,\"privacy\":{\"noise_multiplier\":1,\"delta\":1e-5,"
                             "\"clip\":1,\"client_rate\":0.5}}",
                 "privacy.client_rate");
    expect_field(PPSGD_HEAD "\"ppsgd_mode\":0," PPSGD_PRIV "}", "ppsgd_mode");
    expect_field(PPSGD_HEAD "\"ppsgd_mode\":4," PPSGD_PRIV "}", "ppsgd_mode");
    expect_field(PPSGD_HEAD "\"ppsgd_mode\":2.5," PPSGD_PRIV "}", "ppsgd_mode");
    expect_field(PPSGD_HEAD "\"ppsgd_mode\":\"2\"," PPSGD_PRIV "}", "ppsgd_mode");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"ppsgd_mode\":2}",
                 "ppsgd_mode");
}

#define HDP_HEAD                                                                                   \
    "{\"algorithm\":\"fedhdp\",\"dataset\":1,\"model\":{\"type\":\"linear\"},\"rounds\":5,"        \
    "\"batch_size\":10,\"lr\":0.1,\"lambda\":0.2,"
#define HDP_PRIV "\"privacy\":{\"target_epsilon\":2,\"delta\":1e-5,\"clip\":1}"

static void fedhdp_reads_its_groups(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    /* no block: one private group of every silo at the privacy block's level, r 1, the lambda */
    assert_int_equal(parse(HDP_HEAD HDP_PRIV "}", &s, &e), DP_OK);
    assert_int_equal(s.n_hdp_groups, 1);
    assert_false(s.hdp_given);
    assert_true(s.hdp_groups[0].rest);
    assert_int_equal(s.hdp_groups[0].privacy, JOB_PRIVACY_TARGET);
    assert_close(s.hdp_groups[0].target_epsilon, 2, 0, 0);
    assert_false(s.hdp[0].opt_out);
    assert_close(s.hdp[0].r, 1, 0, 0);
    assert_close(s.hdp[0].lambda, 0.2, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(parse(HDP_HEAD HDP_PRIV
                           ",\"fedhdp\":{\"groups\":["
                           "{\"name\":\"out\",\"silos\":[\"a\",\"b\"],\"private\":false,"
                           "\"lambda\":0.5},"
                           "{\"silos\":[\"c\"],\"noise_multiplier\":3,\"r\":0.1},"
                           "{\"target_epsilon\":0.5,\"r\":0.25}]}}",
                           &s, &e),
                     DP_OK);
    assert_true(s.hdp_given);
    assert_int_equal(s.n_hdp_groups, 3);
    assert_string_equal(s.hdp_groups[0].name, "out");
    assert_true(s.hdp[0].opt_out);
    assert_int_equal(s.hdp_groups[0].privacy, JOB_PRIVACY_NONE);
    assert_int_equal(s.hdp_groups[0].n_silos, 2);
    assert_string_equal(s.hdp_groups[0].silos[1], "b");
    assert_close(s.hdp[0].lambda, 0.5, 0, 0);
    assert_string_equal(s.hdp_groups[1].name, "group1");
    assert_int_equal(s.hdp_groups[1].privacy, JOB_PRIVACY_NOISE);
    assert_close(s.hdp[1].noise, 3, 0, 0);
    assert_close(s.hdp[1].r, 0.1, 0, 0);
    assert_close(s.hdp[1].lambda, 0.2, 0, 0); /* the job's */
    assert_true(s.hdp_groups[2].rest);
    assert_int_equal(s.hdp_groups[2].privacy, JOB_PRIVACY_TARGET);
    assert_close(s.hdp_groups[2].target_epsilon, 0.5, 0, 0);
    job_spec_clear(&s);
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[]}}", "fedhdp.groups");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{}],\"x\":1}}", "fedhdp.x");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"r\":-1}]}}", "fedhdp.groups[0].r");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"r\":0}]}}", "fedhdp.groups");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{},{}]}}", "fedhdp.groups[1].silos");
    expect_field(HDP_HEAD HDP_PRIV
                 ",\"fedhdp\":{\"groups\":[{\"silos\":[\"a\"]},{\"silos\":[\"a\"]}]}}",
                 "fedhdp.groups[1].silos[0]");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"private\":false,"
                                   "\"noise_multiplier\":1}]}}",
                 "fedhdp.groups[0].noise_multiplier");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"name\":\"g\"},{\"name\":\"g\","
                                   "\"silos\":[\"a\"]}]}}",
                 "fedhdp.groups[1].name");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"lambda\":\"x\"}]}}",
                 "fedhdp.groups[0].lambda");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"groups\":[{\"target_epsilon\":1,"
                                   "\"noise_multiplier\":1}]}}",
                 "fedhdp.groups[0]");
    expect_field(HDP_HEAD "\"seed\":1}", "privacy"); /* client-level DP needs its privacy */
    assert_int_equal(parse(HDP_HEAD HDP_PRIV
                           ",\"fedhdp\":{\"adaptive_clip\":{\"count_noise\":5},\"groups\":[{}]}}",
                           &s, &e),
                     DP_OK);
    assert_true(s.hdp_adaptive);
    assert_close(s.hdp_clip_quantile, 0.5, 0, 0); /* Andrew et al.'s defaults */
    assert_close(s.hdp_clip_lr, 0.2, 0, 0);
    assert_close(s.hdp_count_noise, 5, 0, 0);
    job_spec_clear(&s);
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"adaptive_clip\":{},\"groups\":[{}]}}",
                 "fedhdp.adaptive_clip.count_noise");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"adaptive_clip\":{\"count_noise\":5,"
                                   "\"quantile\":1},\"groups\":[{}]}}",
                 "fedhdp.adaptive_clip.quantile");
    expect_field(HDP_HEAD HDP_PRIV ",\"fedhdp\":{\"adaptive_clip\":{\"count_noise\":5,"
                                   "\"beta\":1},\"groups\":[{}]}}",
                 "fedhdp.adaptive_clip.beta");
    expect_field(PPSGD_HEAD PPSGD_PRIV ",\"fedhdp\":{\"groups\":[{}]}}", "fedhdp");
}

#define ALTMIN_HEAD                                                                                \
    "{\"algorithm\":\"altmin\",\"dataset\":{\"generator\":\"synthetic-lowrank\",\"silos\":50,"     \
    "\"dim\":8,\"n_min\":12,\"rank\":3,\"noise\":0.01},\"rounds\":4,"
#define ALTMIN_PRIV "\"privacy\":{\"target_epsilon\":5,\"delta\":1e-6,\"clip\":1e-4}"

#define IFCA_HEAD                                                                                  \
    "{\"algorithm\":\"ifca\",\"dataset\":1,\"model\":{\"type\":\"linear\"},\"rounds\":40,"         \
    "\"batch_size\":8,\"lr\":0.1,"
#define IFCA_TARGET "\"privacy\":{\"target_epsilon\":2,\"delta\":1e-5,\"clip\":1}"
#define IFCA_NOISE  "\"privacy\":{\"noise_multiplier\":1.5,\"delta\":1e-5,\"clip\":1}"

static void ifca_reads_its_block_with_the_papers_defaults(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    assert_int_equal(parse(IFCA_HEAD "\"lambda\":0.5,\"ifca\":{\"clusters\":3,\"select_rounds\":4,"
                                     "\"warm_rounds\":10,\"selection_epsilon\":0.05,"
                                     "\"loss_bound\":2}," IFCA_TARGET "}",
                           &s, &e),
                     DP_OK);
    assert_string_equal(s.algorithm, "ifca");
    assert_int_equal(s.ifca_clusters, 3);
    assert_int_equal(s.ifca_select_rounds, 4);
    assert_int_equal(s.ifca_warm_rounds, 10);
    assert_close(s.ifca_select_eps, 0.05, 0, 0);
    assert_close(s.ifca_loss_bound, 2, 0, 0);
    assert_close(s.lambda, 0.5, 0, 0);
    job_spec_clear(&s);
    /* defaults: 2 clusters, IFCA and selection in every round, 0.03 target_epsilon each */
    assert_int_equal(parse(IFCA_HEAD IFCA_TARGET "}", &s, &e), DP_OK);
    assert_int_equal(s.ifca_clusters, 2);
    assert_int_equal(s.ifca_select_rounds, 40);
    assert_int_equal(s.ifca_warm_rounds, 40);
    assert_close(s.ifca_select_eps, 0.06, 1e-15, 0);
    assert_close(s.lambda, 0, 0, 0);
    job_spec_clear(&s);
    /* a warm start selects in its IFCA rounds by default; without privacy, the exact argmin */
    assert_int_equal(parse(IFCA_HEAD "\"ifca\":{\"warm_rounds\":5}}", &s, &e), DP_OK);
    assert_int_equal(s.ifca_select_rounds, 5);
    assert_true(isinf(s.ifca_select_eps));
    job_spec_clear(&s);
    assert_int_equal(parse(IFCA_HEAD "\"ifca\":{\"clusters\":1}," IFCA_NOISE "}", &s, &e), DP_OK);
    job_spec_clear(&s);
    expect_field(IFCA_HEAD "\"ifca\":{\"clusters\":0}}", "ifca.clusters");
    expect_field(IFCA_HEAD "\"ifca\":{\"clusters\":17}}", "ifca.clusters");
    expect_field(IFCA_HEAD "\"ifca\":{\"warm_rounds\":41}}", "ifca.warm_rounds");
    expect_field(IFCA_HEAD "\"ifca\":{\"warm_rounds\":5,\"select_rounds\":6}}",
                 "ifca.select_rounds");
    expect_field(IFCA_HEAD "\"ifca\":{\"select_rounds\":0}}", "ifca.select_rounds");
    expect_field(IFCA_HEAD "\"ifca\":{\"loss_bound\":0}}", "ifca.loss_bound");
    expect_field(IFCA_HEAD "\"ifca\":{\"selection_epsilon\":0.1}}", "ifca.selection_epsilon");
    expect_field(IFCA_HEAD "\"ifca\":{\"selection_epsilon\":0}," IFCA_TARGET "}",
                 "ifca.selection_epsilon");
    expect_field(IFCA_HEAD IFCA_NOISE "}", "ifca.selection_epsilon");
    expect_field(IFCA_HEAD "\"ifca\":{\"clustres\":2}}", "ifca.clustres");
    expect_field(IFCA_HEAD "\"ifca\":[2]}", "ifca");
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"ifca\":{}}", "ifca");
}

static void altmin_reads_its_block_and_refuses_what_does_not_apply(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    assert_int_equal(
        parse(ALTMIN_HEAD "\"altmin\":{\"rank\":3,\"init\":\"spectral\"}," ALTMIN_PRIV "}", &s, &e),
        DP_OK);
    assert_string_equal(s.algorithm, "altmin");
    assert_int_equal(s.altmin_rank, 3);
    assert_true(s.altmin_spectral);
    assert_int_equal(s.data, JOB_DATA_SYNTHETIC);
    assert_int_equal(s.synth.rank, 3);
    assert_int_equal(s.synth.n_min, 12);
    assert_int_equal(s.model.type, FL_MODEL_LINEAR); /* the default model */
    assert_false(s.standardize);                     /* features as they are */
    assert_close(s.client_rate, 1, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(parse(ALTMIN_HEAD ALTMIN_PRIV "}", &s, &e), DP_OK);
    assert_int_equal(s.altmin_rank, 2); /* the defaults */
    assert_false(s.altmin_spectral);
    job_spec_clear(&s);
    expect_field(ALTMIN_HEAD "\"altmin\":{\"rank\":0}," ALTMIN_PRIV "}", "altmin.rank");
    expect_field(ALTMIN_HEAD "\"altmin\":{\"init\":\"pca\"}," ALTMIN_PRIV "}", "altmin.init");
    expect_field(ALTMIN_HEAD "\"altmin\":{\"rnak\":2}," ALTMIN_PRIV "}", "altmin.rnak");
    expect_field(ALTMIN_HEAD "\"altmin\":3," ALTMIN_PRIV "}", "altmin");
    expect_field(ALTMIN_HEAD "\"lr\":0.1," ALTMIN_PRIV "}", "lr");
    expect_field(ALTMIN_HEAD "\"batch_size\":4," ALTMIN_PRIV "}", "batch_size");
    expect_field(ALTMIN_HEAD "\"local_epochs\":2," ALTMIN_PRIV "}", "local_epochs");
    expect_field(ALTMIN_HEAD "\"standardize\":\"silo\"," ALTMIN_PRIV "}", "standardize");
    expect_field(ALTMIN_HEAD "\"model\":{\"type\":\"logistic\"}," ALTMIN_PRIV "}", "model.type");
    expect_field(ALTMIN_HEAD "\"privacy\":{\"target_epsilon\":5,\"delta\":1e-6,\"clip\":1,"
                             "\"client_rate\":0.5}}",
                 "privacy.client_rate");
    expect_field(ALTMIN_HEAD "\"seed\":4}", "privacy"); /* user-level DP needs its privacy */
    expect_field(BASE_HEAD "\"rounds\":2,\"batch_size\":8,\"lr\":0.1,\"altmin\":{}}", "altmin");
    /* the low-rank generator's own fields */
    expect_field("{\"algorithm\":\"altmin\",\"dataset\":{\"generator\":\"synthetic-lowrank\","
                 "\"dim\":4,\"rank\":5},\"rounds\":2," ALTMIN_PRIV "}",
                 "dataset.rank");
    expect_field("{\"algorithm\":\"altmin\",\"dataset\":{\"generator\":\"synthetic-lowrank\","
                 "\"tau\":1},\"rounds\":2," ALTMIN_PRIV "}",
                 "dataset.tau");
    expect_field("{\"algorithm\":\"fedavg\",\"dataset\":{\"generator\":\"synthetic-linreg\","
                 "\"rank\":2},\"model\":{\"type\":\"linear\"},\"rounds\":2,\"batch_size\":8,"
                 "\"lr\":0.1}",
                 "dataset.rank");
}

#define AP_HEAD                                                                                    \
    "{\"dataset\":1,\"model\":{\"type\":\"logistic\"},\"rounds\":5,\"batch_size\":10,\"lr\":0.1,"
#define AP_PRIV "\"privacy\":{\"target_epsilon\":2,\"delta\":1e-5,\"clip\":1,\"client_rate\":0.4}"

static void adaped_reads_its_block(void **state)
{
    (void)state;
    job_spec s;
    dp_err e;
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"adaped\"}", &s, &e), DP_OK);
    /* the defaults: App. K.1's settings, every silo each round, nothing private */
    assert_int_equal(s.ap_tau, 10);
    assert_close(s.ap_psi_init, 3.5, 0, 0);
    assert_close(s.ap_psi_floor, 0.5, 0, 0);
    assert_close(s.ap_lr_mu, 0.1, 0, 0);
    assert_close(s.ap_lr_psi, 0.05, 0, 0);
    assert_close(s.ap_kd_psi, 1, 0, 0);
    assert_int_equal(s.ap_unsampled_rounds, 0); /* Alg. 2: unsampled silos idle */
    assert_close(s.client_rate, 1, 0, 0);
    assert_int_equal(s.privacy, JOB_PRIVACY_NONE);
    job_spec_clear(&s);
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"tau\":3,\"psi_init\":"
                                   "4,\"psi_floor\":1,\"lr_mu\":0.2,\"lr_psi\":0,\"kd_psi\":5,"
                                   "\"client_rate\":0.3,\"unsampled_rounds\":4}}",
                           &s, &e),
                     DP_OK);
    assert_int_equal(s.ap_tau, 3);
    assert_int_equal(s.ap_unsampled_rounds, 4);
    assert_close(s.ap_psi_init, 4, 0, 0);
    assert_close(s.ap_psi_floor, 1, 0, 0);
    assert_close(s.ap_lr_mu, 0.2, 0, 0);
    assert_close(s.ap_lr_psi, 0, 0, 0);
    assert_close(s.ap_kd_psi, 5, 0, 0);
    assert_close(s.client_rate, 0.3, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(
        parse(AP_HEAD "\"algorithm\":\"dp_adaped\",\"adaped\":{\"clip_psi\":0.25}," AP_PRIV "}", &s,
              &e),
        DP_OK);
    assert_close(s.ap_clip_psi, 0.25, 0, 0);
    assert_close(s.client_rate, 0.4, 0, 0);
    assert_int_equal(s.privacy, JOB_PRIVACY_TARGET);
    job_spec_clear(&s);
    expect_field(AP_HEAD "\"algorithm\":\"adaped\"," AP_PRIV "}", "privacy");
    expect_field(AP_HEAD "\"algorithm\":\"dp_adaped\"}", "privacy");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"tau\":0}}", "adaped.tau");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"unsampled_rounds\":-1}}",
                 "adaped.unsampled_rounds");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"unsampled_rounds\":100001}}",
                 "adaped.unsampled_rounds");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"tau\":1.5}}", "adaped.tau");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"psi_init\":0}}",
                 "adaped.psi_init");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"psi_init\":1,\"psi_floor\":2}}",
                 "adaped.psi_init");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"psi_floor\":-1}}",
                 "adaped.psi_floor");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"lr_mu\":0}}", "adaped.lr_mu");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"lr_psi\":-0.1}}", "adaped.lr_psi");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"kd_psi\":\"5\"}}",
                 "adaped.kd_psi");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"clip_psi\":1}}",
                 "adaped.clip_psi");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"client_rate\":0}}",
                 "adaped.client_rate");
    expect_field(AP_HEAD "\"algorithm\":\"dp_adaped\",\"adaped\":{\"clip_psi\":0}," AP_PRIV "}",
                 "adaped.clip_psi");
    expect_field(AP_HEAD "\"algorithm\":\"dp_adaped\",\"adaped\":{\"client_rate\":0.5}," AP_PRIV
                         "}",
                 "adaped.client_rate");
    expect_field(AP_HEAD "\"algorithm\":\"adaped\",\"adaped\":{\"eta\":1}}", "adaped.eta");
    expect_field(AP_HEAD "\"algorithm\":\"fedavg\",\"adaped\":{}}", "adaped");
}

/* adamix and gaussian_prior (Ozkara, Acharya et al., Alg. 1, 4, 5): their blocks' defaults and
 * values, no privacy block, standardize "none" by default and "silo" refused. */
static void prior_blocks_are_read(void **state)
{
    (void)state;
    job_spec s;
    dp_err e = {0};
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"adamix\"}", &s, &e), DP_OK);
    assert_int_equal(s.pr_components, 2);
    assert_int_equal(s.pr_steps, 20);
    assert_int_equal(s.pr_em_iters, 3);
    assert_close(s.pr_noise_var, 1, 0, 0);
    assert_close(s.pr_var_floor, 1e-4, 0, 0);
    assert_false(s.standardize);
    assert_int_equal(s.privacy, JOB_PRIVACY_NONE);
    job_spec_clear(&s);
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"adamix\",\"adamix\":{\"components\":3,"
                                   "\"steps\":7,\"em_iters\":2,\"noise_var\":0.1,\"var_floor\":"
                                   "0.001}}",
                           &s, &e),
                     DP_OK);
    assert_int_equal(s.pr_components, 3);
    assert_int_equal(s.pr_steps, 7);
    assert_int_equal(s.pr_em_iters, 2);
    assert_close(s.pr_noise_var, 0.1, 0, 0);
    assert_close(s.pr_var_floor, 0.001, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"gaussian_prior\"}", &s, &e), DP_OK);
    assert_int_equal(s.pr_variant, FL_GP_GD);
    assert_int_equal(s.pr_steps, 1);
    assert_close(s.pr_sigma_theta2, 1, 0, 0);
    job_spec_clear(&s);
    assert_int_equal(parse(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"gaussian_prior\":{"
                                   "\"variant\":\"em\",\"sigma_theta2\":0.01,\"sigma_x2\":0.05,"
                                   "\"lr_mu\":0.5,\"lr_var\":0.2,\"steps\":4}}",
                           &s, &e),
                     DP_OK);
    assert_int_equal(s.pr_variant, FL_GP_EM);
    assert_int_equal(s.pr_steps, 4);
    assert_close(s.pr_sigma_theta2, 0.01, 0, 0);
    assert_close(s.pr_sigma_x2, 0.05, 0, 0);
    assert_close(s.pr_lr_mu, 0.5, 0, 0);
    assert_close(s.pr_lr_var, 0.2, 0, 0);
    job_spec_clear(&s);
    expect_field(AP_HEAD "\"algorithm\":\"adamix\"," AP_PRIV "}", "privacy");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\"," AP_PRIV "}", "privacy");
    expect_field(AP_HEAD "\"algorithm\":\"adamix\",\"adamix\":{\"components\":17}}",
                 "adamix.components");
    expect_field(AP_HEAD "\"algorithm\":\"adamix\",\"adamix\":{\"em_iters\":0}}",
                 "adamix.em_iters");
    expect_field(AP_HEAD "\"algorithm\":\"adamix\",\"adamix\":{\"noise_var\":0}}",
                 "adamix.noise_var");
    expect_field(AP_HEAD "\"algorithm\":\"adamix\",\"adamix\":{\"variant\":\"em\"}}",
                 "adamix.variant");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"gaussian_prior\":{\"steps\":0}}",
                 "gaussian_prior.steps");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"gaussian_prior\":{\"variant\":1}}",
                 "gaussian_prior.variant");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"gaussian_prior\":{\"lr_mu\":3}}",
                 "gaussian_prior.lr_mu");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"gaussian_prior\":{\"sigma_x2\":"
                         "0}}",
                 "gaussian_prior.sigma_x2");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"standardize\":\"silo\"}",
                 "standardize");
    expect_field(AP_HEAD "\"algorithm\":\"gaussian_prior\",\"adamix\":{}}", "adamix");
    expect_field(AP_HEAD "\"algorithm\":\"fedavg\",\"gaussian_prior\":{}}", "gaussian_prior");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_full_spec_is_read),
        cmocka_unit_test(defaults_and_generators),
        cmocka_unit_test(refusals_name_the_field),
        cmocka_unit_test(ppsgd_reads_its_ratio),
        cmocka_unit_test(ppsgd_reads_its_mode),
        cmocka_unit_test(fedhdp_reads_its_groups),
        cmocka_unit_test(altmin_reads_its_block_and_refuses_what_does_not_apply),
        cmocka_unit_test(ifca_reads_its_block_with_the_papers_defaults),
        cmocka_unit_test(adaped_reads_its_block),
        cmocka_unit_test(prior_blocks_are_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
