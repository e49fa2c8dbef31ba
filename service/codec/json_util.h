/*
 * json_util: strict helpers for reading request JSON and writing response JSON (jansson).
 *
 * Every route validates its body with these, so that every bad input gets the same 400: a DP_EINVAL
 * whose field is the key (nested validators add the path with dp_err_prefix_field, e.g.
 * "event.sampling_rate") and whose message names the field, the expected type and what was
 * received.
 *
 * Reading rules:
 *   - obj must be a JSON object; NULL (no body) is reported as "request body must be a
 *     JSON object".
 *   - required (json_util_req_*): a missing key or a JSON null is an error ("is required").
 *   - optional (json_util_opt_*): a missing key or a JSON null leaves *out = def and returns DP_OK.
 *   - number: a JSON integer or real (clients send 1 for 1.0); int64: a JSON integer only
 *     (2.0 is refused); string: a JSON string (borrowed: valid while the body lives); bool:
 *     true/false only.
 *   - json_util_check_keys rejects any key not in the allowed list, naming it.
 * Range checks belong to the caller (they are domain rules); these helpers only check types.
 *
 * Writing: json_util_real returns JSON null for NaN/inf (jansson's json_real refuses them); pair it
 * with a "reason" member beside the value (docs/API.md, "Conventions"). json_util_set steals the
 * value and reports DP_ENOMEM (never ignores a failed set).
 *
 * Thread-safety: none needed; a json_t never crosses threads (handlers convert JSON
 * to C structs before handing work to another thread).
 */
#ifndef DP_SERVICE_JSON_UTIL_H
#define DP_SERVICE_JSON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/dp_err.h"

/* DP_EINVAL unless obj is a JSON object. */
int json_util_require_object(const json_t *obj, const char *field, dp_err *err);

/* Rejects the first key of obj that is not in allowed[0..n_allowed-1]: DP_EINVAL with field = that
 * key. */
int json_util_check_keys(const json_t *obj, const char *const *allowed, size_t n_allowed,
                         dp_err *err);

int json_util_req_number(const json_t *obj, const char *key, double *out, dp_err *err);
int json_util_opt_number(const json_t *obj, const char *key, double def, double *out, dp_err *err);
int json_util_req_int(const json_t *obj, const char *key, int64_t *out, dp_err *err);
int json_util_opt_int(const json_t *obj, const char *key, int64_t def, int64_t *out, dp_err *err);
/* *out is borrowed from obj (valid while obj lives); copy it to keep it. Embedded NULs are refused.
 */
int json_util_req_string(const json_t *obj, const char *key, const char **out, dp_err *err);
int json_util_opt_string(const json_t *obj, const char *key, const char *def, const char **out,
                         dp_err *err);
int json_util_req_bool(const json_t *obj, const char *key, bool *out, dp_err *err);
int json_util_opt_bool(const json_t *obj, const char *key, bool def, bool *out, dp_err *err);

/* {"<key>": items, "next_after": last or null}: a page of a list (more: rows follow after the id
 * last). items is stolen in every case (json_pack's "o" keeps it when the pack fails); NULL when
 * out of memory. */
json_t *json_util_page(const char *key, json_t *items, bool more, int64_t last);

/* A new reference: json_real(x) for finite x, json_null() otherwise. NULL only on allocation
 * failure. */
json_t *json_util_real(double x);

/* json_loadb / json_loads for every parse in service/. jansson (2.14, and its master as of this
 * writing) is not safe when an allocation fails inside the parser: load.c lex_save ignores the
 * failure of strbuffer_append_byte, so a token longer than the 16-byte saved-text buffer loses its
 * closing quote, and lex_scan_string then reads and writes past both buffers looking for it
 * (reproduced: json_loads of {"fits":null,"estimates":[{"id":0,"posterior_mean":0.3}]} with the
 * 14th allocation failing corrupts the heap). Nothing outside jansson can make that path safe, so
 * these wrappers exempt the parse from dp_alloc's failure injection (dp_alloc_exempt_begin): the
 * chaos test (tests/unit/test_service_chaos.c) then exercises every other allocation. A real
 * out-of-memory inside the parser remains jansson's bug. Same contract as jansson's functions:
 * new reference or NULL with err filled (err may be NULL). */
json_t *json_util_loadb(const char *buf, size_t len, size_t flags, json_error_t *err);

/* json_dumps for every serialisation in service/. jansson's json_dumps (2.14, and master as of this
 * writing) can return CORRUPTED text when an allocation fails: dump.c do_dump ignores the return of
 * dump_string for object keys, so a key whose bytes could not be appended to the output buffer is
 * silently dropped ({"noise_multiplier":8,"type":"gaussian"} came out as {":8,"type":"gaussian"},
 * and was committed to the append-only charges log by the chaos test). This measures the text with
 * json_dumpb(json, NULL, 0, flags), allocates it, and writes it with json_dumpb into that buffer,
 * whose callback cannot fail, so the text is complete or the call returns NULL. Returns owned
 * text, NUL-terminated, allocated by dp_malloc (release with free() or dp_free(), which are the
 * same), or NULL on allocation failure or when jansson refuses json. */
char *json_util_dumps(const json_t *json, size_t flags);
json_t *json_util_loads(const char *text, size_t flags, json_error_t *err);

/* A new JSON string with the RFC 3339 UTC time of unix_ms (milliseconds since 1970), e.g.
 * "2026-11-22T13:10:20.838Z" (time_format_rfc3339 of base/time.h: the API speaks RFC 3339 UTC,
 * the database stores Unix ms). NULL on allocation failure or a time outside years 0..9999. */
json_t *json_util_time(int64_t unix_ms);

/* json_object_set_new(obj, key, value) with value stolen (even on failure, like jansson); value
 * NULL (a failed constructor) or a failed set -> DP_ENOMEM. */
int json_util_set(json_t *obj, const char *key, json_t *value, dp_err *err);

/* Short name of a JSON value's type for messages: "object", "array", "string", "integer", "real",
 * "boolean", "null"; "nothing" for NULL. */
const char *json_util_type_name(const json_t *v);

#endif
