/*
 * auth: bearer-token access control for dpsilod (issue #5).
 *
 * Who may do what:
 *   - the admin token (from --admin-token-file, or generated at first start into
 *     <db dir>/admin.token with mode 0600) may do everything;
 *   - a silo token (returned once by POST /v1/silos, stored only as its SHA-256) may read and
 *     charge its own silo and nothing else;
 *   - no token: 401; another silo's token: 403;
 *   - calculators (/v1/accounting/..., /v1/tuning/...) never call these functions: they stay open;
 *   - with --auth off (loopback only, refused by cfg otherwise) every caller is treated as the
 *     admin and recorded with no actor.
 * A token never reaches a log line: the dispatcher logs only method, path and status, and nothing
 * here logs a token or its hash.
 *
 * Thread-safety: all functions are reentrant; token lookups use the request's borrowed connection.
 */
#ifndef DP_SERVICE_AUTH_H
#define DP_SERVICE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "service/http.h"
#include "service/ledger.h"

#define AUTH_TOKEN_MAX 256 /* longest bearer token accepted, bytes */

/* The token of an "Authorization: Bearer <token>" header value (borrowed pointer into hdr), or NULL
 * when hdr is NULL, is another scheme, or the token is empty or longer than AUTH_TOKEN_MAX. The
 * scheme name is case-insensitive (RFC 6750, section 2.1). */
const char *auth_bearer_from_header(const char *hdr);

/* Who is calling: the admin (also when auth is off), a silo, or an error (DP_EUNAUTH: no or unknown
 * token). */
int auth_resolve(const http_req *rq, ledger_principal *out, dp_err *err);
/* Admin only: silo tokens get DP_EFORBIDDEN. */
int auth_require_admin(const http_req *rq, ledger_principal *out, dp_err *err);
/* The admin or the token of silo_id; another silo's token gets DP_EFORBIDDEN. */
int auth_require_silo(const http_req *rq, int64_t silo_id, ledger_principal *out, dp_err *err);

/* The admin token at start-up. token_file non-empty: read it (first line, >= 16 bytes). Otherwise
 * use <directory of db_path>/admin.token, creating it with a fresh token and mode 0600 when missing
 * (*generated set). path_out receives the file used. The token is written to token (caller buffer).
 */
int auth_admin_token_prepare(const char *token_file, const char *db_path, char *token,
                             size_t token_len, char *path_out, size_t path_len, bool *generated,
                             dp_err *err);

#endif
