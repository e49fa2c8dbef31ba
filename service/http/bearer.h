/*
 * bearer: parsing the Authorization header, and nothing more. Whether a token is valid, and what it
 * may do, is the api layer's policy (api/auth.h); the server only finds the token.
 */
#ifndef DP_SERVICE_HTTP_BEARER_H
#define DP_SERVICE_HTTP_BEARER_H

#define HTTP_TOKEN_MAX 256 /* longest bearer token accepted, bytes */

/* The token of an "Authorization: Bearer <token>" header value (borrowed pointer into hdr), or NULL
 * when hdr is NULL, is another scheme, or the token is empty or longer than HTTP_TOKEN_MAX. The
 * scheme name is case-insensitive (RFC 6750, section 2.1). */
const char *http_bearer_from_header(const char *hdr);

#endif
