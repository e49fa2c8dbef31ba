/*
 * event.c: allocation, validation and copying of privacy-event trees. See event.h for the contract.
 *
 * Validation walks the tree recursively; the recursion depth is bounded because a node deeper than
 * ACCT_EVENT_MAX_DEPTH stops the walk with an error before descending further. Field paths are
 * built on the way back up with dp_err_prefix_field, so an error names e.g.
 * "event.events[2].sampling_rate" relative to the root node (the service adds the request key,
 * usually "event").
 */
#include "accounting/event.h"
#include "accounting/tuning.h"

#include <math.h>
#include <stdio.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"

acct_event *acct_event_alloc(acct_event_type type)
{
    acct_event *ev = dp_calloc(1, sizeof *ev);
    if (ev == NULL)
        return NULL;
    ev->type = type;
    ev->noise_multiplier = DP_NAN;
    ev->sampling_rate = DP_NAN;
    ev->rho = DP_NAN;
    ev->epsilon = DP_NAN;
    ev->dist.kind = ACCT_TUNE_FIXED;
    ev->dist.mean = DP_NAN;
    ev->dist.eta = DP_NAN;
    ev->dist.gamma = DP_NAN;
    return ev;
}

void acct_event_free(acct_event *ev)
{
    if (ev == NULL)
        return;
    acct_event_free(ev->child);
    for (size_t i = 0; i < ev->n_children; i++)
        acct_event_free(ev->children[i]);
    dp_free(ev->children);
    dp_free(ev);
}

/* ---- constructors (ownership rules in event.h) ----------------------------------------------- */

acct_event *acct_event_gaussian(double noise_multiplier)
{
    acct_event *ev = acct_event_alloc(ACCT_EV_GAUSSIAN);
    if (ev != NULL)
        ev->noise_multiplier = noise_multiplier;
    return ev;
}

acct_event *acct_event_laplace(double noise_multiplier)
{
    acct_event *ev = acct_event_alloc(ACCT_EV_LAPLACE);
    if (ev != NULL)
        ev->noise_multiplier = noise_multiplier;
    return ev;
}

acct_event *acct_event_zcdp(double rho)
{
    acct_event *ev = acct_event_alloc(ACCT_EV_ZCDP);
    if (ev != NULL)
        ev->rho = rho;
    return ev;
}

acct_event *acct_event_pure(double epsilon)
{
    acct_event *ev = acct_event_alloc(ACCT_EV_PURE);
    if (ev != NULL)
        ev->epsilon = epsilon;
    return ev;
}

/* A node of the given type over child, or NULL (child freed) when child is NULL or memory ran out.
 */
static acct_event *wrap(acct_event_type type, acct_event *child)
{
    if (child == NULL)
        return NULL;
    acct_event *ev = acct_event_alloc(type);
    if (ev == NULL) {
        acct_event_free(child);
        return NULL;
    }
    ev->child = child;
    return ev;
}

acct_event *acct_event_poisson(double sampling_rate, acct_event *child)
{
    acct_event *ev = wrap(ACCT_EV_POISSON, child);
    if (ev != NULL)
        ev->sampling_rate = sampling_rate;
    return ev;
}

acct_event *acct_event_swor(uint64_t source_size, uint64_t sample_size, acct_event *child)
{
    acct_event *ev = wrap(ACCT_EV_SWOR, child);
    if (ev != NULL) {
        ev->source_size = source_size;
        ev->sample_size = sample_size;
    }
    return ev;
}

acct_event *acct_event_self_composed(uint64_t count, acct_event *child)
{
    acct_event *ev = wrap(ACCT_EV_SELF_COMPOSED, child);
    if (ev != NULL)
        ev->count = count;
    return ev;
}

acct_event *acct_event_repeat_select(acct_event *child, acct_tuning_dist dist)
{
    acct_event *ev = wrap(ACCT_EV_REPEAT_SELECT, child);
    if (ev != NULL)
        ev->dist = dist;
    return ev;
}

acct_event *acct_event_composed(acct_event *const *children, size_t n)
{
    bool missing = n > 0 && children == NULL;
    for (size_t i = 0; i < n && !missing; i++)
        missing = children[i] == NULL;
    acct_event *ev = missing ? NULL : acct_event_alloc(ACCT_EV_COMPOSED);
    if (ev != NULL && n > 0) {
        ev->children = dp_calloc(n, sizeof *ev->children);
        if (ev->children == NULL) {
            acct_event_free(ev);
            ev = NULL;
        }
    }
    if (ev == NULL) {
        for (size_t i = 0; children != NULL && i < n; i++)
            acct_event_free(children[i]);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        ev->children[i] = children[i];
    ev->n_children = n;
    return ev;
}

const char *acct_event_type_name(acct_event_type type)
{
    switch (type) {
        case ACCT_EV_GAUSSIAN:
            return "gaussian";
        case ACCT_EV_LAPLACE:
            return "laplace";
        case ACCT_EV_ZCDP:
            return "zcdp";
        case ACCT_EV_PURE:
            return "pure";
        case ACCT_EV_POISSON:
            return "poisson_sampled";
        case ACCT_EV_SWOR:
            return "sampled_without_replacement";
        case ACCT_EV_SELF_COMPOSED:
            return "self_composed";
        case ACCT_EV_COMPOSED:
            return "composed";
        case ACCT_EV_REPEAT_SELECT:
            return "repeat_and_select";
    }
    return "unknown";
}

static int check_child(const acct_event *child, bool allow_open, size_t depth, size_t *nodes,
                       const char *name, dp_err *err);

static int check_node(const acct_event *ev, bool allow_open, size_t depth, size_t *nodes,
                      dp_err *err)
{
    if (depth > ACCT_EVENT_MAX_DEPTH)
        return dp_err_set(err, DP_EINVAL, NULL, "event tree is deeper than %d levels",
                          ACCT_EVENT_MAX_DEPTH);
    if (++*nodes > ACCT_EVENT_MAX_NODES)
        return dp_err_set(err, DP_EINVAL, NULL, "event tree has more than %d nodes",
                          ACCT_EVENT_MAX_NODES);
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE:
            if (isnan(ev->noise_multiplier) && allow_open)
                return DP_OK;
            if (!isfinite(ev->noise_multiplier) || ev->noise_multiplier <= 0.0)
                return dp_err_set(err, DP_EINVAL, "noise_multiplier",
                                  "noise_multiplier must be finite and > 0, got %g",
                                  ev->noise_multiplier);
            return DP_OK;
        case ACCT_EV_ZCDP:
            if (!isfinite(ev->rho) || ev->rho < 0.0)
                return dp_err_set(err, DP_EINVAL, "rho", "rho must be finite and >= 0, got %g",
                                  ev->rho);
            return DP_OK;
        case ACCT_EV_PURE:
            if (!isfinite(ev->epsilon) || ev->epsilon < 0.0)
                return dp_err_set(err, DP_EINVAL, "epsilon",
                                  "epsilon must be finite and >= 0, got %g", ev->epsilon);
            return DP_OK;
        case ACCT_EV_POISSON:
            if (!(isnan(ev->sampling_rate) && allow_open) &&
                (!isfinite(ev->sampling_rate) || ev->sampling_rate <= 0.0 ||
                 ev->sampling_rate > 1.0))
                return dp_err_set(err, DP_EINVAL, "sampling_rate",
                                  "sampling_rate must be in (0, 1], got %g", ev->sampling_rate);
            return check_child(ev->child, allow_open, depth, nodes, "event", err);
        case ACCT_EV_SWOR:
            if (ev->source_size < 1)
                return dp_err_set(err, DP_EINVAL, "source_size", "source_size must be >= 1");
            if (ev->sample_size < 1 || ev->sample_size > ev->source_size)
                return dp_err_set(err, DP_EINVAL, "sample_size",
                                  "sample_size must be in [1, source_size]");
            return check_child(ev->child, allow_open, depth, nodes, "event", err);
        case ACCT_EV_SELF_COMPOSED:
            if (!(ev->count_open && allow_open) &&
                (ev->count < 1 || ev->count > ACCT_EVENT_MAX_COUNT))
                return dp_err_set(err, DP_EINVAL, "count",
                                  "count must be an integer in [1, 10^12]");
            return check_child(ev->child, allow_open, depth, nodes, "event", err);
        case ACCT_EV_COMPOSED:
            if (ev->n_children > 0 && ev->children == NULL)
                return dp_err_set(err, DP_EINVAL, "events", "events is missing");
            for (size_t i = 0; i < ev->n_children; i++) {
                char idx[32];
                snprintf(idx, sizeof idx, "[%zu]", i);
                int rc = check_child(ev->children[i], allow_open, depth, nodes, idx, err);
                if (rc != DP_OK) {
                    dp_err_prefix_field(err, "events");
                    return rc;
                }
            }
            return DP_OK;
        case ACCT_EV_REPEAT_SELECT: {
            /* domain and field names are the tuning module's (accounting/tuning.h) */
            int rc = acct_tuning_dist_check(&ev->dist, err);
            if (rc != DP_OK)
                return rc;
            return check_child(ev->child, allow_open, depth, nodes, "event", err);
        }
    }
    return dp_err_set(err, DP_EINVAL, "type", "unknown event type");
}

static int check_child(const acct_event *child, bool allow_open, size_t depth, size_t *nodes,
                       const char *name, dp_err *err)
{
    if (child == NULL)
        return dp_err_set(err, DP_EINVAL, name, "nested event is missing");
    int rc = check_node(child, allow_open, depth + 1, nodes, err);
    if (rc != DP_OK)
        dp_err_prefix_field(err, name);
    return rc;
}

int acct_event_check(const acct_event *ev, bool allow_open, dp_err *err)
{
    if (ev == NULL)
        return dp_err_set(err, DP_EINVAL, NULL, "event is missing");
    size_t nodes = 0;
    return check_node(ev, allow_open, 1, &nodes, err);
}

acct_event *acct_event_clone(const acct_event *ev)
{
    if (ev == NULL)
        return NULL;
    acct_event *cp = dp_malloc(sizeof *cp);
    if (cp == NULL)
        return NULL;
    *cp = *ev;
    cp->child = NULL;
    cp->children = NULL;
    cp->n_children = 0;
    if (ev->child != NULL) {
        cp->child = acct_event_clone(ev->child);
        if (cp->child == NULL) {
            acct_event_free(cp);
            return NULL;
        }
    }
    if (ev->n_children > 0) {
        cp->children = dp_calloc(ev->n_children, sizeof *cp->children);
        if (cp->children == NULL) {
            acct_event_free(cp);
            return NULL;
        }
        for (size_t i = 0; i < ev->n_children; i++) {
            cp->children[i] = acct_event_clone(ev->children[i]);
            cp->n_children = i + 1; /* so a failure below frees what was copied */
            if (cp->children[i] == NULL) {
                acct_event_free(cp);
                return NULL;
            }
        }
    }
    return cp;
}

/* The open parameter of this node alone: one ACCT_OPEN_* flag, or 0. */
static unsigned open_here(const acct_event *ev)
{
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE:
            return isnan(ev->noise_multiplier) ? ACCT_OPEN_NOISE : 0;
        case ACCT_EV_POISSON:
            return isnan(ev->sampling_rate) ? ACCT_OPEN_RATE : 0;
        case ACCT_EV_SELF_COMPOSED:
            return ev->count_open ? ACCT_OPEN_COUNT : 0;
        default:
            return 0;
    }
}

unsigned acct_event_open_params(const acct_event *ev)
{
    if (ev == NULL)
        return 0;
    unsigned k = open_here(ev);
    k |= acct_event_open_params(ev->child);
    for (size_t i = 0; i < ev->n_children; i++)
        k |= acct_event_open_params(ev->children[i]);
    return k;
}

void acct_event_fill_open(acct_event *ev, unsigned kind, double value)
{
    if (ev == NULL)
        return;
    if (open_here(ev) == kind) {
        switch (kind) {
            case ACCT_OPEN_NOISE:
                ev->noise_multiplier = value;
                break;
            case ACCT_OPEN_RATE:
                ev->sampling_rate = value;
                break;
            case ACCT_OPEN_COUNT:
                ev->count = (uint64_t)value;
                ev->count_open = false;
                break;
            default: /* 0 or several flags: nothing to fill */
                break;
        }
    }
    acct_event_fill_open(ev->child, kind, value);
    for (size_t i = 0; i < ev->n_children; i++)
        acct_event_fill_open(ev->children[i], kind, value);
}
