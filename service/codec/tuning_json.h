/*
 * tuning_json: the JSON form of a repeat_and_select distribution (issue #4), read and written.
 *
 * A distribution is an object with exactly one key:
 *   {"fixed": k}                                               k >= 1 runs, plain composition
 *   {"poisson": {"mean": mu}}                                  mu >= 1
 *   {"truncated_negative_binomial": {"eta": e, "gamma": g}}    e > -1, g in (0, 1]
 *   {"truncated_negative_binomial": {"eta": e, "mean": m}}     gamma solved from the mean
 *   {"geometric": {"mean": m} | {"gamma": g}}                  = truncated_negative_binomial, eta 1
 *   {"logarithmic": {"mean": m} | {"gamma": g}}                = truncated_negative_binomial, eta 0
 * Errors are DP_EINVAL with the full field path, e.g. "distribution.poisson.mean" (with prefix
 * "distribution" as given by the caller; the event parser passes "event.distribution" etc. by
 * prefixing afterwards).
 *
 * Used by api/tuning.c and by the event parser (codec/event_json.c) for repeat_and_select nodes.
 *
 * Thread-safety: functions of their arguments only, no global state; safe from any thread. A
 * jansson value passed in is only read, and must not be changed by another thread meanwhile.
 */
#ifndef DP_SERVICE_TUNING_JSON_H
#define DP_SERVICE_TUNING_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include "accounting/event.h"
#include "common/dp_err.h"

/* Parses j (borrowed) into *out. mean_optional: a TNB/Poisson mean may be left out (it is then NAN
 * and the caller fills it, e.g. from a grid size); otherwise the result is fully validated with
 * acct_tuning_dist_check. Field names start with "distribution". */
int tuning_json_parse_dist(const json_t *j, bool mean_optional, acct_tuning_dist *out, dp_err *err);

/* A new JSON object describing a resolved distribution in the input form, with every parameter:
 * {"truncated_negative_binomial": {"eta":..,"gamma":..,"mean":..}}, {"poisson": {"mean":..}},
 * {"fixed": k}. NULL on allocation failure. */
json_t *tuning_json_dist(const acct_tuning_dist *d);

#endif
