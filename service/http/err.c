/*
 * http/err.c: dp_err code -> HTTP status, and the error JSON. Table and contract in http/err.h.
 */
#include "service/http/err.h"

#include <stdio.h>
#include <string.h>

/* json_string refuses invalid UTF-8 (a message may hold a truncated client string); fall back to a
 * copy with every non-ASCII byte replaced by '?', so an error body can always be built. */
static json_t *safe_string(const char *s)
{
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
            *p = '?';
    return json_string(buf);
}

static const struct {
    int code;   /* DP_E* */
    int status; /* HTTP */
} STATUS_OF[] = {
    {DP_EINVAL, 400},    {DP_ENOTFOUND, 404}, {DP_EBUDGET, 409},    {DP_ECONFLICT, 409},
    {DP_ETOOBIG, 413},   {DP_ENUMERIC, 422},  {DP_EBUSY, 503},      {DP_ENOMEM, 503},
    {DP_EINTERNAL, 500}, {DP_EUNAUTH, 401},   {DP_EFORBIDDEN, 403},
};

int http_err_status(int code)
{
    for (size_t i = 0; i < sizeof STATUS_OF / sizeof STATUS_OF[0]; i++)
        if (STATUS_OF[i].code == code)
            return STATUS_OF[i].status;
    return 500;
}

json_t *http_err_body_raw(const char *code_name, const char *message, const char *field,
                          const char *req_id)
{
    json_t *e = json_object();
    json_t *root = json_object();
    if (e == NULL || root == NULL)
        goto fail;
    if (json_object_set_new(e, "code", json_string(code_name)) != 0 ||
        json_object_set_new(e, "message", safe_string(message ? message : "")) != 0 ||
        json_object_set_new(e, "field", field && field[0] ? safe_string(field) : json_null()) !=
            0 ||
        json_object_set_new(e, "request_id", req_id ? safe_string(req_id) : json_null()) != 0)
        goto fail;
    if (json_object_set_new(root, "error", e) != 0) {
        e = NULL; /* stolen */
        goto fail;
    }
    return root;
fail:
    json_decref(e);
    json_decref(root);
    return NULL;
}

json_t *http_err_body(const dp_err *e, const char *req_id)
{
    int code = e ? e->code : DP_EINTERNAL;
    int status = http_err_status(code);
    const char *name = dp_err_code_name(code);
    if (status == 500)
        return http_err_body_raw(
            "internal", "internal error; the server log has the details under this request_id",
            NULL, req_id);
    return http_err_body_raw(name, e->msg[0] ? e->msg : name, e->field, req_id);
}
