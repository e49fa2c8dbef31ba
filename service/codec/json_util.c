/*
 * codec/json_util.c: strict JSON field readers and writers. Contract in codec/json_util.h.
 */
#include "service/codec/json_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "service/base/time.h"

#include "common/dp_alloc.h"

const char *json_util_type_name(const json_t *v)
{
    if (v == NULL)
        return "nothing";
    switch (json_typeof(v)) {
        case JSON_OBJECT:
            return "object";
        case JSON_ARRAY:
            return "array";
        case JSON_STRING:
            return "string";
        case JSON_INTEGER:
            return "integer";
        case JSON_REAL:
            return "real";
        case JSON_TRUE:
        case JSON_FALSE:
            return "boolean";
        default:
            return "null";
    }
}

int json_util_require_object(const json_t *obj, const char *field, dp_err *err)
{
    if (obj != NULL && json_is_object(obj))
        return DP_OK;
    if (field == NULL || field[0] == '\0')
        return dp_err_set(err, DP_EINVAL, NULL, "request body must be a JSON object (got %s)",
                          json_util_type_name(obj));
    return dp_err_set(err, DP_EINVAL, field, "%s must be a JSON object (got %s)", field,
                      json_util_type_name(obj));
}

int json_util_check_keys(const json_t *obj, const char *const *allowed, size_t n_allowed,
                         dp_err *err)
{
    if (json_util_require_object(obj, NULL, err) != DP_OK)
        return DP_EINVAL;
    const char *key;
    json_t *v;
    /* json_object_foreach needs a non-const object; iteration does not modify it. */
    json_object_foreach((json_t *)obj, key, v)
    {
        (void)v;
        bool ok = false;
        for (size_t i = 0; i < n_allowed && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok)
            return dp_err_set(err, DP_EINVAL, key, "unknown field \"%.40s\"", key);
    }
    return DP_OK;
}

/* Looks key up; *v = NULL when absent or JSON null. Fails only when obj is not an object. */
static int lookup(const json_t *obj, const char *key, const json_t **v, dp_err *err)
{
    if (json_util_require_object(obj, NULL, err) != DP_OK)
        return DP_EINVAL;
    const json_t *x = json_object_get(obj, key);
    *v = (x == NULL || json_is_null(x)) ? NULL : x;
    return DP_OK;
}

static int missing(const char *key, dp_err *err)
{
    return dp_err_set(err, DP_EINVAL, key, "%s is required", key);
}

static int number_of(const json_t *v, const char *key, double *out, dp_err *err)
{
    if (!json_is_number(v))
        return dp_err_set(err, DP_EINVAL, key, "%s must be a number (got %s)", key,
                          json_util_type_name(v));
    *out = json_number_value(v);
    return DP_OK;
}

int json_util_req_number(const json_t *obj, const char *key, double *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    return v == NULL ? missing(key, err) : number_of(v, key, out, err);
}

int json_util_opt_number(const json_t *obj, const char *key, double def, double *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    if (v == NULL) {
        *out = def;
        return DP_OK;
    }
    return number_of(v, key, out, err);
}

static int int_of(const json_t *v, const char *key, int64_t *out, dp_err *err)
{
    if (!json_is_integer(v))
        return dp_err_set(err, DP_EINVAL, key, "%s must be an integer (got %s)", key,
                          json_util_type_name(v));
    *out = (int64_t)json_integer_value(v);
    return DP_OK;
}

int json_util_req_int(const json_t *obj, const char *key, int64_t *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    return v == NULL ? missing(key, err) : int_of(v, key, out, err);
}

int json_util_opt_int(const json_t *obj, const char *key, int64_t def, int64_t *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    if (v == NULL) {
        *out = def;
        return DP_OK;
    }
    return int_of(v, key, out, err);
}

static int string_of(const json_t *v, const char *key, const char **out, dp_err *err)
{
    if (!json_is_string(v))
        return dp_err_set(err, DP_EINVAL, key, "%s must be a string (got %s)", key,
                          json_util_type_name(v));
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return dp_err_set(err, DP_EINVAL, key, "%s must not contain NUL characters", key);
    *out = s;
    return DP_OK;
}

int json_util_req_string(const json_t *obj, const char *key, const char **out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    return v == NULL ? missing(key, err) : string_of(v, key, out, err);
}

int json_util_opt_string(const json_t *obj, const char *key, const char *def, const char **out,
                         dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    if (v == NULL) {
        *out = def;
        return DP_OK;
    }
    return string_of(v, key, out, err);
}

static int bool_of(const json_t *v, const char *key, bool *out, dp_err *err)
{
    if (!json_is_boolean(v))
        return dp_err_set(err, DP_EINVAL, key, "%s must be true or false (got %s)", key,
                          json_util_type_name(v));
    *out = json_is_true(v);
    return DP_OK;
}

int json_util_req_bool(const json_t *obj, const char *key, bool *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    return v == NULL ? missing(key, err) : bool_of(v, key, out, err);
}

int json_util_opt_bool(const json_t *obj, const char *key, bool def, bool *out, dp_err *err)
{
    const json_t *v;
    if (lookup(obj, key, &v, err) != DP_OK)
        return DP_EINVAL;
    if (v == NULL) {
        *out = def;
        return DP_OK;
    }
    return bool_of(v, key, out, err);
}

json_t *json_util_loadb(const char *buf, size_t len, size_t flags, json_error_t *err)
{
    dp_alloc_exempt_begin();
    json_t *j = json_loadb(buf, len, flags, err);
    dp_alloc_exempt_end();
    return j;
}

char *json_util_dumps(const json_t *json, size_t flags)
{
    if (json == NULL)
        return NULL;
    size_t n = json_dumpb(json, NULL, 0, flags);
    if (n == 0)
        return NULL;
    char *buf = dp_malloc(n + 1);
    if (buf == NULL)
        return NULL;
    if (json_dumpb(json, buf, n, flags) != n) {
        dp_free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

json_t *json_util_loads(const char *text, size_t flags, json_error_t *err)
{
    dp_alloc_exempt_begin();
    json_t *j = json_loads(text, flags, err);
    dp_alloc_exempt_end();
    return j;
}

json_t *json_util_real(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *json_util_time(int64_t unix_ms)
{
    char buf[TIME_RFC3339_MAX];
    if (time_format_rfc3339(unix_ms, buf, sizeof buf) < 0)
        return NULL;
    return json_string(buf);
}

int json_util_set(json_t *obj, const char *key, json_t *value, dp_err *err)
{
    if (value == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    if (json_object_set_new(obj, key, value) != 0)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return DP_OK;
}

json_t *json_util_page(const char *key, json_t *items, bool more, int64_t last)
{
    json_t *o = json_object();
    if (o == NULL) {
        json_decref(items);
        return NULL;
    }
    /* json_object_set_new steals the value even when it fails */
    if (json_object_set_new(o, key, items) != 0 ||
        json_object_set_new(o, "next_after", more ? json_integer((json_int_t)last) : json_null()) !=
            0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
