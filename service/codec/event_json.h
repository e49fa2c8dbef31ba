/*
 * event_json: the privacy-event JSON (docs/ACCOUNTING.md, "The event tree"), parsed into an
 * acct_event tree (accounting/event.h).
 *
 * Grammar (every key other than those listed is refused, naming it):
 *   {"type": "gaussian", "noise_multiplier": s}          s > 0 (null = open, calibration only)
 *   {"type": "laplace", "noise_multiplier": b}           b > 0 (null = open)
 *   {"type": "zcdp", "rho": r}                            r >= 0
 *   {"type": "pure", "epsilon": e}                        e >= 0
 *   {"type": "poisson_sampled", "sampling_rate": q, "event": E}
 *                                                         q in (0, 1] (null = open)
 *   {"type": "sampled_without_replacement", "source_size": n, "sample_size": m, "event": E}
 *                                                         integers, 1 <= m <= n
 *   {"type": "self_composed", "count": c, "event": E}     integer 1 <= c <= 10^12 (null = open)
 *   {"type": "composed", "events": [E, ...]}
 *   {"type": "repeat_and_select", "event": E, "distribution": D}   D: service/codec/tuning_json.h
 *
 * Errors are DP_EINVAL (400) with the full field path from the request root, e.g.
 * "event.event.sampling_rate" or "event.events[3].count": unknown type, wrong JSON type, a
 * non-integer count (1000.0 is refused too), a value out of domain, an unknown key, a tree deeper
 * than ACCT_EVENT_MAX_DEPTH levels, more than ACCT_EVENT_MAX_NODES nodes. JSON itself cannot carry
 * NaN or infinities, so those never reach here.
 *
 * Ownership: *out is a new tree owned by the caller (acct_event_free); NULL on error. j is
 * borrowed. Thread-safety: reentrant.
 *
 * The other way (event_json_encode, event_json_dumps) writes a tree in the same grammar; the
 * canonical text (compact, sorted keys) is what the ledger stores and hashes, so the JSON of an
 * event built in C (a job's round, an estimator's charge) is byte-identical to the JSON of a
 * request that parses to the same tree with the same numbers.
 */
#ifndef DP_SERVICE_EVENT_JSON_H
#define DP_SERVICE_EVENT_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include "accounting/event.h"
#include "common/dp_err.h"

/* Parses j into a tree. allow_open: JSON null is accepted for noise_multiplier, sampling_rate and
 * count (calibration). field: the name of j in the request ("event"), used as the path prefix. */
int event_json_parse(const json_t *j, bool allow_open, const char *field, acct_event **out,
                     dp_err *err);

/* A new JSON value (owned by the caller) for the tree ev, the inverse of event_json_parse; NULL on
 * allocation failure or an open parameter (a count left open; open noise or rate would be a JSON
 * null, which json_real refuses, so NULL too). Reals are written with json_real, counts and sizes
 * as integers. */
json_t *event_json_encode(const acct_event *ev);

/* The canonical text of ev: event_json_encode dumped compact with sorted keys. Owned by the caller
 * (free, as any json_dumps result); NULL as event_json_encode. */
char *event_json_dumps(const acct_event *ev);

/* Reads the optional "neighboring" member of a request body: "add_remove" (default) or
 * "replace_one". */
int event_json_neighboring(const json_t *body, acct_neighboring *out, dp_err *err);

/* "add_remove" / "replace_one". */
const char *event_json_neighboring_name(acct_neighboring nb);

#endif
