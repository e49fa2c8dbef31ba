/*
 * dp_err: the one error type of dpsilo.
 *
 * Every function that can fail returns an int status (DP_OK is 0) or a pointer (NULL on failure)
 * and fills a caller-owned dp_err. The first error recorded wins, so a low-level cause is not
 * overwritten by a caller's generic message. service/http/err.c maps codes to HTTP statuses
 * (the table is in docs/API.md, "Conventions"); the message is one client-safe sentence naming the
 * field, the constraint and the value received.
 *
 * Thread-safety: a dp_err is owned by one thread (usually one per request).
 */
#ifndef DP_COMMON_DP_ERR_H
#define DP_COMMON_DP_ERR_H

#include <stddef.h>

enum {
    DP_OK = 0,
    DP_EINVAL,    /* bad input: 400 invalid_argument */
    DP_ENOTFOUND, /* 404 not_found */
    DP_EBUDGET,   /* 409 budget_exhausted */
    DP_ECONFLICT, /* 409 conflict */
    DP_ETOOBIG,   /* 413 payload_too_large */
    DP_ENUMERIC,  /* 422 numerical_failure: valid input that asks for the impossible */
    DP_EBUSY,     /* 503 with Retry-After */
    DP_ENOMEM,    /* 503 out_of_memory */
    DP_EINTERNAL, /* 500 internal */
    DP_EUNAUTH,   /* 401 unauthenticated */
    DP_EFORBIDDEN /* 403 forbidden */
};

#define DP_ERR_FIELD_MAX 48
#define DP_ERR_MSG_MAX   200

typedef struct dp_err {
    int code;                     /* DP_OK or DP_E* */
    char field[DP_ERR_FIELD_MAX]; /* offending input, e.g. "sampling_rate"; "" if none */
    char msg[DP_ERR_MSG_MAX];     /* one client-safe sentence */
} dp_err;

/* Resets e to DP_OK with empty field and message. e may be NULL. */
void dp_err_clear(dp_err *e);

/* Records the error unless one is already set; e may be NULL. field may be NULL. Returns code. */
int dp_err_set(dp_err *e, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefixes the recorded field with "prefix." (e.g. "event" + "sampling_rate" ->
 * "event.sampling_rate"), so nested validators can name the full path. No-op when e is NULL or no
 * error is set. */
void dp_err_prefix_field(dp_err *e, const char *prefix);

/* dp_err_prefix_field with "name[i]" (e.g. "groups" + 1 + "clients" -> "groups[1].clients");
 * returns code, so that a validator can write return dp_err_prefix_index(err, "groups", i, rc). */
int dp_err_prefix_index(dp_err *e, const char *name, size_t i, int code);

/* Stable lower-case name of a code ("invalid_argument", ...). Never NULL. */
const char *dp_err_code_name(int code);

#endif
