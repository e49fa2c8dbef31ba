/*
 * auth: bearer-token access control for dpsilod (issue #5, issue 10 "Access").
 *
 * Who may do what (the full table is docs/BUDGETS.md "Access control"):
 *   - the admin token (from --admin-token-file, or generated at first start into
 *     <db dir>/admin.token with mode 0600) may do everything. At each start the token in the file
 *     is registered and every other admin token is revoked (ledger_token_install_admin): changing
 *     the file and restarting rotates the admin token;
 *   - a silo token (returned once by POST /v1/silos or POST /v1/silos/{id}/token, stored only
 *     as its SHA-256) may read and charge its own silo and nothing else; rotating it revokes the
 *     old one;
 *   - estimator runs and tuning draws are private: creating one needs a valid token; reading one
 *     needs the admin token, the token that created it (or another token of the same silo), or,
 *     for a run, the token of a silo it charged. Anyone else gets 404, so ids do not leak;
 *   - no token: 401; another silo's token on a silo route: 403;
 *   - the calculators (/v1/accounting/..., /v1/tuning/cost and /plan), /healthz and /v1/version
 *     never call these functions: they stay open (the route table's ROUTE_OPEN rows);
 *   - with --auth off (loopback only, refused by cfg otherwise) every caller is treated as the
 *     admin and recorded with no actor.
 * A token never reaches a log line: the dispatcher logs only method, path and status, and nothing
 * here logs a token or its hash.
 *
 * THE ADMIN TOKEN FILE (auth_admin_token_prepare) is refused, and the daemon does not start, when
 * it is a symbolic link (opened with O_NOFOLLOW), not a regular file, owned by another user than
 * the daemon's, or writable by group or others (checked with fstat on the open descriptor, so the
 * file checked is the file read). A token read from it must pass auth_token_check_strength.
 *
 * Thread-safety: all functions are reentrant; token lookups use the request's borrowed connection.
 */
#ifndef DP_SERVICE_AUTH_H
#define DP_SERVICE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"
#include "service/base/cfg.h"
#include "service/db/bind.h"
#include "service/http/bearer.h"
#include "service/http/server.h"
#include "service/ledger/ledger.h"

#define AUTH_TOKEN_MAX HTTP_TOKEN_MAX /* longest bearer token accepted, bytes (http/bearer.h) */

/* The dispatcher's early check (http/server.h http_authenticate_fn): DP_OK when rq->bearer is a
 * valid token (or auth is off), DP_EUNAUTH when it is not. */
int auth_authenticate(const http_req *rq, dp_err *err);

/* Who is calling: the admin (also when auth is off), a silo, or an error (DP_EUNAUTH: no or unknown
 * token). */
int auth_resolve(const http_req *rq, ledger_principal *out, dp_err *err);
/* auth_resolve as a viewer of stored resources (db/bind.h store_viewer); who (may be NULL) gets the
 * principal too. */
int auth_viewer(const http_req *rq, store_viewer *v, ledger_principal *who, dp_err *err);
/* The tokens.id to record as the creator of what this request makes: the bearer's id, revoked or
 * not (the request was admitted while it was valid), or 0 with --auth off or without a bearer. */
int auth_creator_id(const http_req *rq, int64_t *token_id, dp_err *err);
/* Admin only: silo tokens get DP_EFORBIDDEN. */
int auth_require_admin(const http_req *rq, ledger_principal *out, dp_err *err);
/* The admin or the token of silo_id; another silo's token gets DP_EFORBIDDEN. */
int auth_require_silo(const http_req *rq, int64_t silo_id, ledger_principal *out, dp_err *err);

#define AUTH_TOKEN_MIN       22  /* shortest token accepted from the admin token file, bytes */
#define AUTH_TOKEN_MIN_BITS  128 /* least estimated randomness of such a token */
#define AUTH_TOKEN_MIN_KINDS 8   /* least number of distinct characters in it */

/* The strength rule for a token chosen by an operator (the admin token file); generated tokens
 * ("dps_" + 64 hex digits, 256 bits) always pass. A token is refused (DP_EINVAL naming field)
 * unless
 *   1. it has AUTH_TOKEN_MIN to AUTH_TOKEN_MAX bytes, all printable ASCII other than space;
 *   2. its estimated randomness, length x log2(N), is at least AUTH_TOKEN_MIN_BITS bits, where N is
 *      16 when every character is a hex digit, else the sum of the sizes of the character classes
 *      it uses: digits 10, lower case 26, upper case 26, other printable characters 32. So 32 hex
 *      digits (openssl rand -hex 16) pass, as do 22 random base64url characters that use letters
 *      and digits, while 22 lower-case letters (103 bits) do not;
 *   3. it has at least AUTH_TOKEN_MIN_KINDS distinct characters: a repeated character or a short
 *      repeated pattern ("aaaa...", "abab...") is refused whatever its length.
 * The estimate is an upper bound on the randomness of the string, not a proof of it: a token must
 * still come from a random source (the README shows one). *bits (may be NULL) gets the estimate. */
int auth_token_check_strength(const char *token, const char *field, double *bits, dp_err *err);

#define AUTH_PATH_MAX (CFG_PATH_MAX + 32)

/* What auth_admin_token_prepare found, for the start-up log line. */
typedef struct auth_token_file {
    char path[AUTH_PATH_MAX]; /* the file used */
    unsigned mode;            /* its permission bits (st_mode & 07777), as found or created */
    bool generated;           /* true: it did not exist and was created with a fresh token */
} auth_token_file;

/* The admin token at start-up. token_file non-empty: read that file. Otherwise use
 * <directory of db_path>/admin.token, creating it with a fresh token and mode 0600 when missing.
 * The file is read through one descriptor opened with O_NOFOLLOW and refused (DP_EINVAL naming
 * --admin-token-file, a sentence naming the file and the reason) when it is a symbolic link, not
 * a regular file, owned by another user than the effective uid, or writable by group or others;
 * its first line (trailing whitespace dropped) must pass auth_token_check_strength. The token is
 * written to token (caller buffer of token_len > AUTH_TOKEN_MAX bytes); *info says which file,
 * its mode and whether it was generated. */
int auth_admin_token_prepare(const char *token_file, const char *db_path, char *token,
                             size_t token_len, auth_token_file *info, dp_err *err);

#endif
