/*
 * event.h: the privacy-event tree in C (its JSON form: docs/ACCOUNTING.md, "The event tree";
 * modelled on dp_accounting's DpEvent).
 *
 * service/ parses the JSON event into this structure; the accounting library evaluates it (RDP,
 * zCDP, PLD), and the ledger stores the JSON. The library never sees JSON.
 *
 * Memory: a tree is owned by its root. Nodes are allocated with acct_event_alloc and released with
 * acct_event_free(root), which frees the whole subtree (children first). acct_event_free(NULL) is a
 * no-op.
 *
 * Open parameters (calibration): a `noise_multiplier` or `sampling_rate` of NAN, or a count with
 * count_open set, marks the unknown that acct_calibrate_* solves for. Evaluation functions reject
 * trees that still have open parameters.
 *
 * Limits: depth <= ACCT_EVENT_MAX_DEPTH, nodes <= ACCT_EVENT_MAX_NODES, counts <=
 * ACCT_EVENT_MAX_COUNT.
 *
 * Thread-safety: a tree is immutable once built and may be read by several threads.
 */
#ifndef DP_ACCOUNTING_EVENT_H
#define DP_ACCOUNTING_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

#define ACCT_EVENT_MAX_DEPTH 64               /* deeper trees are refused: 400 */
#define ACCT_EVENT_MAX_NODES 100000           /* more nodes are refused: 400 */
#define ACCT_EVENT_MAX_COUNT 1000000000000ULL /* self_composed counts up to 10^12 */

typedef enum acct_event_type {
    ACCT_EV_GAUSSIAN = 0,  /* noise_multiplier = std / L2 sensitivity */
    ACCT_EV_LAPLACE,       /* noise_multiplier = scale / L1 sensitivity */
    ACCT_EV_ZCDP,          /* rho */
    ACCT_EV_PURE,          /* epsilon */
    ACCT_EV_POISSON,       /* sampling_rate, child */
    ACCT_EV_SWOR,          /* sampled without replacement: source_size, sample_size, child */
    ACCT_EV_SELF_COMPOSED, /* count, child */
    ACCT_EV_COMPOSED,      /* children[n_children] */
    ACCT_EV_REPEAT_SELECT  /* child, dist (Papernot & Steinke 2022; accounting/tuning.h) */
} acct_event_type;

typedef enum acct_neighboring {
    ACCT_NB_ADD_REMOVE = 0, /* default: add or remove one record (or user) */
    ACCT_NB_REPLACE_ONE     /* replace one record */
} acct_neighboring;

/* Distribution of the number of runs K in repeat_and_select (Papernot & Steinke 2022). */
typedef enum acct_tuning_kind {
    ACCT_TUNE_FIXED = 0,   /* K = k exactly: plain k-fold composition */
    ACCT_TUNE_POISSON,     /* K ~ Poisson(mean) */
    ACCT_TUNE_TRUNC_NEGBIN /* truncated negative binomial(eta, gamma); eta=1 geometric, eta=0 log */
} acct_tuning_kind;

typedef struct acct_tuning_dist {
    acct_tuning_kind kind;
    uint64_t k;   /* FIXED: number of runs, >= 1 */
    double mean;  /* POISSON: mean mu > 0; TRUNC_NEGBIN: mean when given (else NAN) */
    double eta;   /* TRUNC_NEGBIN: eta > -1 */
    double gamma; /* TRUNC_NEGBIN: gamma in (0, 1] */
} acct_tuning_dist;

typedef struct acct_event {
    acct_event_type type;
    double noise_multiplier;      /* GAUSSIAN, LAPLACE; NAN = open (calibration) */
    double rho;                   /* ZCDP: rho >= 0 */
    double epsilon;               /* PURE: epsilon >= 0 */
    double sampling_rate;         /* POISSON: q in (0, 1]; NAN = open */
    uint64_t source_size;         /* SWOR: n, records in the data set */
    uint64_t sample_size;         /* SWOR: m <= n, records per sample */
    uint64_t count;               /* SELF_COMPOSED: count >= 1 (or 0 with count_open) */
    bool count_open;              /* SELF_COMPOSED: count is the unknown to calibrate */
    acct_tuning_dist dist;        /* REPEAT_SELECT */
    struct acct_event *child;     /* POISSON, SWOR, SELF_COMPOSED, REPEAT_SELECT (owned) */
    struct acct_event **children; /* COMPOSED: array of n_children owned nodes */
    size_t n_children;            /* COMPOSED */
} acct_event;

/* Allocates a zeroed node of the given type with numeric parameters set to NAN where NAN means
 * "open". Returns NULL on allocation failure. Owned by caller (or by the parent it is attached to).
 */
acct_event *acct_event_alloc(acct_event_type type);

/* Constructors: one call per node, so a tree is one nested expression, e.g. a DP-SGD training run
 *
 *     acct_event *run = acct_event_self_composed(T, acct_event_poisson(q, acct_event_gaussian(s)));
 *     if (run == NULL) ... out of memory (nothing leaked) ...
 *
 * Ownership: a constructor takes ownership of the children it is given, on success and on failure
 * alike (like jansson's *_new functions). On allocation failure it frees those children and returns
 * NULL; a NULL child (an inner constructor that failed) makes it free the other children it was
 * given and return NULL. So nested calls leak nothing whichever allocation fails, and the caller
 * checks the outermost result only. The result is owned by the caller (acct_event_free).
 *
 * Parameters are stored as given, not validated: the evaluation functions (acct_event_check and
 * everything that calls it) refuse out-of-domain values with the field's path. NAN noise or rate
 * marks an open parameter for calibration; an open count is set with ev->count_open afterwards. */
acct_event *acct_event_gaussian(double noise_multiplier); /* std / L2 sensitivity */
acct_event *acct_event_laplace(double noise_multiplier);  /* scale / L1 sensitivity */
acct_event *acct_event_zcdp(double rho);
acct_event *acct_event_pure(double epsilon);
/* Poisson subsampling with rate sampling_rate of child. */
acct_event *acct_event_poisson(double sampling_rate, acct_event *child);
/* Sampling sample_size of source_size records without replacement, then child. */
acct_event *acct_event_swor(uint64_t source_size, uint64_t sample_size, acct_event *child);
/* count-fold composition of child with itself. */
acct_event *acct_event_self_composed(uint64_t count, acct_event *child);
/* Composition of children[0..n): the node takes ownership of the n events (any of which may be
 * NULL, see above), copies the pointers into an array of its own and leaves the caller's array
 * (which may be on the stack) to the caller. n = 0 is an empty composition (children NULL). */
acct_event *acct_event_composed(acct_event *const *children, size_t n);
/* repeat_and_select of child with the number of runs drawn from dist (accounting/tuning.h). */
acct_event *acct_event_repeat_select(acct_event *child, acct_tuning_dist dist);

/* Frees the node and its whole subtree. NULL is a no-op. */
void acct_event_free(acct_event *ev);

/* Validates the whole tree: domains (finite, q in (0,1], sigma > 0, ...), depth, node count and
 * counts. allow_open: whether NAN noise/sampling and open counts are accepted (calibration) or
 * refused. On failure returns DP_EINVAL with err->field the path of the offending field (e.g.
 * "event.event.sampling_rate"), relative to the tree root. */
int acct_event_check(const acct_event *ev, bool allow_open, dp_err *err);

/* Deep copy of a tree (owned by caller; free with acct_event_free). NULL on allocation failure or
 * when ev is NULL. Used by calibration to substitute candidate values for open parameters. */
acct_event *acct_event_clone(const acct_event *ev);

/* Kinds of open parameter (bit flags) found by acct_event_open_params. */
enum {
    ACCT_OPEN_NOISE = 1u << 0, /* a gaussian/laplace noise_multiplier is NAN */
    ACCT_OPEN_RATE = 1u << 1,  /* a poisson sampling_rate is NAN */
    ACCT_OPEN_COUNT = 1u << 2  /* a self_composed count is open */
};

/* Bit set of the open-parameter kinds present in the tree (0 = fully specified). */
unsigned acct_event_open_params(const acct_event *ev);

/* Sets every open parameter of the given kind (one ACCT_OPEN_* flag) to value; for ACCT_OPEN_COUNT
 * the value must be an integer in [1, ACCT_EVENT_MAX_COUNT] and count_open is cleared. NAN markers
 * are overwritten, so calibration fills a fresh clone for every candidate value. */
void acct_event_fill_open(acct_event *ev, unsigned kind, double value);

/* Stable lower-case JSON name of a type ("gaussian", "poisson_sampled", ...). Never NULL. */
const char *acct_event_type_name(acct_event_type type);

#endif
