/*
 * http_err: the one mapping from dp_err codes to HTTP statuses, and the one error body.
 *
 *   DP_EINVAL     400 invalid_argument      DP_ETOOBIG     413 payload_too_large
 *   DP_ENOTFOUND  404 not_found             DP_ENUMERIC    422 numerical_failure
 *   DP_EBUDGET    409 budget_exhausted      DP_EBUSY       503 busy (+ Retry-After: 1)
 *   DP_ECONFLICT  409 conflict              DP_ENOMEM      503 out_of_memory
 *   DP_EUNAUTH    401 unauthenticated       DP_EINTERNAL   500 internal
 *   DP_EFORBIDDEN 403 forbidden             (http/server.c)       405 method_not_allowed
 *
 * Body (docs/API.md, "Conventions"): {"error":{"code":"...","message":"...","field":"..."|null,
 * "request_id":"..."}}. For DP_EINTERNAL (and unknown codes) the message is replaced by a generic
 * sentence: internal detail is logged with the request id, never sent.
 *
 * Thread-safety: pure functions.
 */
#ifndef DP_SERVICE_HTTP_ERR_H
#define DP_SERVICE_HTTP_ERR_H

#include <jansson.h>

#include "common/dp_err.h"

/* HTTP status for a dp_err code (500 for unknown codes and DP_OK, which is not an error). */
int http_err_status(int code);

/* New reference to the error body for e, or NULL on allocation failure. req_id may be NULL. */
json_t *http_err_body(const dp_err *e, const char *req_id);

/* Same for an HTTP-level error without a dp_err code (405), e.g. code_name "method_not_allowed". */
json_t *http_err_body_raw(const char *code_name, const char *message, const char *field,
                          const char *req_id);

#endif
