/*
 * dp_err.c: recording errors. See dp_err.h for the contract.
 */
#include "common/dp_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void dp_err_clear(dp_err *e)
{
    if (e == NULL)
        return;
    e->code = DP_OK;
    e->field[0] = '\0';
    e->msg[0] = '\0';
}

int dp_err_set(dp_err *e, int code, const char *field, const char *fmt, ...)
{
    if (e == NULL || e->code != DP_OK)
        return code;
    e->code = code;
    snprintf(e->field, sizeof e->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        e->msg[0] = '\0';
    /* A message never carries a newline, so it cannot break a log line or a header. */
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return code;
}

void dp_err_prefix_field(dp_err *e, const char *prefix)
{
    if (e == NULL || e->code == DP_OK || prefix == NULL || prefix[0] == '\0')
        return;
    char buf[DP_ERR_FIELD_MAX];
    int n;
    if (e->field[0] == '\0')
        n = snprintf(buf, sizeof buf, "%s", prefix);
    else if (e->field[0] == '[')
        n = snprintf(buf, sizeof buf, "%s%s", prefix, e->field);
    else
        n = snprintf(buf, sizeof buf, "%s.%s", prefix, e->field);
    if (n < 0 || (size_t)n >= sizeof buf)
        return; /* keep the shorter, still-true field name */
    memcpy(e->field, buf, sizeof buf);
}

int dp_err_prefix_index(dp_err *e, const char *name, size_t i, int code)
{
    char p[DP_ERR_FIELD_MAX];
    int n = snprintf(p, sizeof p, "%s[%zu]", name, i);
    if (n > 0 && (size_t)n < sizeof p)
        dp_err_prefix_field(e, p);
    return code;
}

const char *dp_err_code_name(int code)
{
    switch (code) {
        case DP_OK:
            return "ok";
        case DP_EINVAL:
            return "invalid_argument";
        case DP_ENOTFOUND:
            return "not_found";
        case DP_EBUDGET:
            return "budget_exhausted";
        case DP_ECONFLICT:
            return "conflict";
        case DP_ETOOBIG:
            return "payload_too_large";
        case DP_ENUMERIC:
            return "numerical_failure";
        case DP_EBUSY:
            return "busy";
        case DP_ENOMEM:
            return "out_of_memory";
        case DP_EUNAUTH:
            return "unauthenticated";
        case DP_EFORBIDDEN:
            return "forbidden";
        default:
            return "internal";
    }
}
