/*
 * codec/event_json.c: JSON <-> acct_event. See codec/event_json.h for the grammar.
 *
 * The parser checks JSON types, keys, depth and node count itself (so a hostile body cannot make it
 * allocate more than ACCT_EVENT_MAX_NODES nodes or recurse deeper than ACCT_EVENT_MAX_DEPTH), then
 * acct_event_check validates the domains of the finished tree; both report paths, prefixed here
 * with the request field name.
 */
#include "service/codec/event_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/dp_math.h"
#include "common/dp_alloc.h"
#include "service/codec/json_util.h"
#include "service/codec/tuning_json.h"

typedef struct parse_state {
    bool allow_open;
    size_t nodes;
} parse_state;

static const struct {
    const char *name;
    acct_event_type type;
} TYPES[] = {
    {"gaussian", ACCT_EV_GAUSSIAN},
    {"laplace", ACCT_EV_LAPLACE},
    {"zcdp", ACCT_EV_ZCDP},
    {"pure", ACCT_EV_PURE},
    {"poisson_sampled", ACCT_EV_POISSON},
    {"sampled_without_replacement", ACCT_EV_SWOR},
    {"self_composed", ACCT_EV_SELF_COMPOSED},
    {"composed", ACCT_EV_COMPOSED},
    {"repeat_and_select", ACCT_EV_REPEAT_SELECT},
};

static int parse_node(const json_t *j, parse_state *st, size_t depth, acct_event **out,
                      dp_err *err);

/* A number, or null when open parameters are allowed (-> NAN). */
static int open_number(const json_t *j, const char *key, parse_state *st, double *out, dp_err *err)
{
    const json_t *v = json_object_get(j, key);
    if (v != NULL && json_is_null(v) && st->allow_open) {
        *out = DP_NAN;
        return DP_OK;
    }
    if (v != NULL && json_is_null(v))
        return dp_err_set(err, DP_EINVAL, key,
                          "%s is required (null leaves it open, which only /calibrate accepts)",
                          key);
    return json_util_req_number(j, key, out, err);
}

static int child(const json_t *j, const char *key, parse_state *st, size_t depth, acct_event **out,
                 dp_err *err)
{
    const json_t *v = json_object_get(j, key);
    if (v == NULL || json_is_null(v))
        return dp_err_set(err, DP_EINVAL, key, "%s is required (a nested event object)", key);
    int rc = parse_node(v, st, depth + 1, out, err);
    if (rc != DP_OK)
        dp_err_prefix_field(err, key);
    return rc;
}

static int count_field(const json_t *j, acct_event *ev, parse_state *st, dp_err *err)
{
    const json_t *v = json_object_get(j, "count");
    if (v != NULL && json_is_null(v) && st->allow_open) {
        ev->count_open = true;
        ev->count = 0;
        return DP_OK;
    }
    if (v != NULL && json_is_real(v))
        return dp_err_set(err, DP_EINVAL, "count", "count must be an integer, got %.17g",
                          json_real_value(v));
    int64_t c;
    int rc = json_util_req_int(j, "count", &c, err);
    if (rc != DP_OK)
        return rc;
    if (c < 1 || (uint64_t)c > ACCT_EVENT_MAX_COUNT)
        return dp_err_set(err, DP_EINVAL, "count", "count must be in [1, 10^12], got %lld",
                          (long long)c);
    ev->count = (uint64_t)c;
    return DP_OK;
}

static int size_field(const json_t *j, const char *key, uint64_t *out, dp_err *err)
{
    int64_t v;
    int rc = json_util_req_int(j, key, &v, err);
    if (rc != DP_OK)
        return rc;
    if (v < 1)
        return dp_err_set(err, DP_EINVAL, key, "%s must be >= 1, got %lld", key, (long long)v);
    *out = (uint64_t)v;
    return DP_OK;
}

static int parse_fields(const json_t *j, acct_event *ev, parse_state *st, size_t depth, dp_err *err)
{
    int rc;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE: {
            static const char *const k[] = {"type", "noise_multiplier"};
            if ((rc = json_util_check_keys(j, k, 2, err)) != DP_OK)
                return rc;
            return open_number(j, "noise_multiplier", st, &ev->noise_multiplier, err);
        }
        case ACCT_EV_ZCDP: {
            static const char *const k[] = {"type", "rho"};
            if ((rc = json_util_check_keys(j, k, 2, err)) != DP_OK)
                return rc;
            return json_util_req_number(j, "rho", &ev->rho, err);
        }
        case ACCT_EV_PURE: {
            static const char *const k[] = {"type", "epsilon"};
            if ((rc = json_util_check_keys(j, k, 2, err)) != DP_OK)
                return rc;
            return json_util_req_number(j, "epsilon", &ev->epsilon, err);
        }
        case ACCT_EV_POISSON: {
            static const char *const k[] = {"type", "sampling_rate", "event"};
            if ((rc = json_util_check_keys(j, k, 3, err)) != DP_OK ||
                (rc = open_number(j, "sampling_rate", st, &ev->sampling_rate, err)) != DP_OK)
                return rc;
            return child(j, "event", st, depth, &ev->child, err);
        }
        case ACCT_EV_SWOR: {
            static const char *const k[] = {"type", "source_size", "sample_size", "event"};
            if ((rc = json_util_check_keys(j, k, 4, err)) != DP_OK ||
                (rc = size_field(j, "source_size", &ev->source_size, err)) != DP_OK ||
                (rc = size_field(j, "sample_size", &ev->sample_size, err)) != DP_OK)
                return rc;
            return child(j, "event", st, depth, &ev->child, err);
        }
        case ACCT_EV_SELF_COMPOSED: {
            static const char *const k[] = {"type", "count", "event"};
            if ((rc = json_util_check_keys(j, k, 3, err)) != DP_OK ||
                (rc = count_field(j, ev, st, err)) != DP_OK)
                return rc;
            return child(j, "event", st, depth, &ev->child, err);
        }
        case ACCT_EV_COMPOSED: {
            static const char *const k[] = {"type", "events"};
            if ((rc = json_util_check_keys(j, k, 2, err)) != DP_OK)
                return rc;
            const json_t *arr = json_object_get(j, "events");
            if (!json_is_array(arr))
                return dp_err_set(err, DP_EINVAL, "events",
                                  "events must be an array of events, got %s",
                                  json_util_type_name(arr));
            size_t n = json_array_size(arr);
            if (n > ACCT_EVENT_MAX_NODES)
                return dp_err_set(err, DP_EINVAL, "events", "event tree has more than %d nodes",
                                  ACCT_EVENT_MAX_NODES);
            if (n > 0) {
                ev->children = dp_calloc(n, sizeof *ev->children);
                if (ev->children == NULL)
                    return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
            }
            for (size_t i = 0; i < n; i++) {
                rc = parse_node(json_array_get(arr, i), st, depth + 1, &ev->children[i], err);
                if (ev->children[i] != NULL)
                    ev->n_children = i + 1;
                if (rc != DP_OK) {
                    char idx[32];
                    snprintf(idx, sizeof idx, "[%zu]", i);
                    dp_err_prefix_field(err, idx);
                    dp_err_prefix_field(err, "events");
                    return rc;
                }
            }
            return DP_OK;
        }
        case ACCT_EV_REPEAT_SELECT: {
            /* Papernot & Steinke 2022; the distribution grammar is the tuning module's. */
            static const char *const k[] = {"type", "event", "distribution"};
            if ((rc = json_util_check_keys(j, k, 3, err)) != DP_OK)
                return rc;
            const json_t *d = json_object_get(j, "distribution");
            if (d == NULL || json_is_null(d))
                return dp_err_set(err, DP_EINVAL, "distribution", "distribution is required");
            if ((rc = tuning_json_parse_dist(d, false, &ev->dist, err)) != DP_OK)
                return rc;
            return child(j, "event", st, depth, &ev->child, err);
        }
    }
    return dp_err_set(err, DP_EINVAL, "type", "unknown event type");
}

static int parse_node(const json_t *j, parse_state *st, size_t depth, acct_event **out, dp_err *err)
{
    *out = NULL;
    if (depth > ACCT_EVENT_MAX_DEPTH)
        return dp_err_set(err, DP_EINVAL, NULL, "event tree is deeper than %d levels",
                          ACCT_EVENT_MAX_DEPTH);
    if (++st->nodes > ACCT_EVENT_MAX_NODES)
        return dp_err_set(err, DP_EINVAL, NULL, "event tree has more than %d nodes",
                          ACCT_EVENT_MAX_NODES);
    if (!json_is_object(j))
        return dp_err_set(err, DP_EINVAL, NULL, "an event must be a JSON object, got %s",
                          json_util_type_name(j));
    const char *tname;
    int rc = json_util_req_string(j, "type", &tname, err);
    if (rc != DP_OK)
        return rc;
    size_t t = 0;
    while (t < sizeof TYPES / sizeof TYPES[0] && strcmp(TYPES[t].name, tname) != 0)
        t++;
    if (t == sizeof TYPES / sizeof TYPES[0])
        return dp_err_set(err, DP_EINVAL, "type",
                          "unknown event type \"%.40s\" (expected gaussian, laplace, zcdp, pure, "
                          "poisson_sampled, sampled_without_replacement, self_composed, composed, "
                          "repeat_and_select)",
                          tname);
    acct_event *ev = acct_event_alloc(TYPES[t].type);
    if (ev == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    rc = parse_fields(j, ev, st, depth, err);
    if (rc != DP_OK) {
        acct_event_free(ev);
        return rc;
    }
    *out = ev;
    return DP_OK;
}

int event_json_parse(const json_t *j, bool allow_open, const char *field, acct_event **out,
                     dp_err *err)
{
    *out = NULL;
    if (j == NULL || json_is_null(j))
        return dp_err_set(err, DP_EINVAL, field, "%s is required", field ? field : "event");
    parse_state st = {allow_open, 0};
    acct_event *ev;
    int rc = parse_node(j, &st, 1, &ev, err);
    if (rc == DP_OK) {
        rc = acct_event_check(ev, allow_open, err);
        if (rc != DP_OK) {
            acct_event_free(ev);
            ev = NULL;
        }
    }
    if (rc != DP_OK) {
        dp_err_prefix_field(err, field);
        return rc;
    }
    *out = ev;
    return DP_OK;
}

int event_json_neighboring(const json_t *body, acct_neighboring *out, dp_err *err)
{
    const char *s;
    int rc = json_util_opt_string(body, "neighboring", "add_remove", &s, err);
    if (rc != DP_OK)
        return rc;
    if (strcmp(s, "add_remove") == 0)
        *out = ACCT_NB_ADD_REMOVE;
    else if (strcmp(s, "replace_one") == 0)
        *out = ACCT_NB_REPLACE_ONE;
    else
        return dp_err_set(err, DP_EINVAL, "neighboring",
                          "neighboring must be \"add_remove\" or \"replace_one\"");
    return DP_OK;
}

const char *event_json_neighboring_name(acct_neighboring nb)
{
    return nb == ACCT_NB_REPLACE_ONE ? "replace_one" : "add_remove";
}

json_t *event_json_encode(const acct_event *ev)
{
    json_t *o = json_object(), *child = NULL;
    bool ok = o != NULL &&
              json_object_set_new(o, "type", json_string(acct_event_type_name(ev->type))) == 0;
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE:
            ok = ok &&
                 json_object_set_new(o, "noise_multiplier", json_real(ev->noise_multiplier)) == 0;
            break;
        case ACCT_EV_ZCDP:
            ok = ok && json_object_set_new(o, "rho", json_real(ev->rho)) == 0;
            break;
        case ACCT_EV_PURE:
            ok = ok && json_object_set_new(o, "epsilon", json_real(ev->epsilon)) == 0;
            break;
        case ACCT_EV_POISSON:
            ok = ok && json_object_set_new(o, "sampling_rate", json_real(ev->sampling_rate)) == 0;
            break;
        case ACCT_EV_SWOR:
            ok = ok &&
                 json_object_set_new(o, "source_size", json_integer((json_int_t)ev->source_size)) ==
                     0 &&
                 json_object_set_new(o, "sample_size", json_integer((json_int_t)ev->sample_size)) ==
                     0;
            break;
        case ACCT_EV_SELF_COMPOSED:
            ok = ok && !ev->count_open &&
                 json_object_set_new(o, "count", json_integer((json_int_t)ev->count)) == 0;
            break;
        case ACCT_EV_COMPOSED: {
            json_t *arr = json_array();
            ok = ok && arr != NULL;
            for (size_t i = 0; ok && i < ev->n_children; i++) {
                json_t *c = event_json_encode(ev->children[i]);
                ok = c != NULL && json_array_append_new(arr, c) == 0;
            }
            ok = ok && json_object_set_new(o, "events", arr) == 0;
            if (!ok && json_object_get(o, "events") != arr)
                json_decref(arr);
            break;
        }
        case ACCT_EV_REPEAT_SELECT:
            ok = ok && json_object_set_new(o, "distribution", tuning_json_dist(&ev->dist)) == 0;
            break;
    }
    if (ok && ev->child != NULL) {
        child = event_json_encode(ev->child);
        ok = child != NULL && json_object_set_new(o, "event", child) == 0;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *event_json_dumps(const acct_event *ev)
{
    json_t *j = event_json_encode(ev);
    char *s = j != NULL ? json_util_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}
