/*
 * auth.c: bearer tokens (see auth.h for the rules). Tokens are compared only through their SHA-256
 * (ledger_token_lookup), so the database never holds one, and nothing in this file logs one.
 */
#include "service/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dp_log.h"

const char *auth_bearer_from_header(const char *hdr)
{
    if (hdr == NULL || strncasecmp(hdr, "Bearer ", 7) != 0)
        return NULL;
    const char *t = hdr + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    if (n == 0 || n > AUTH_TOKEN_MAX)
        return NULL;
    return t;
}

int auth_resolve(const http_req *rq, ledger_principal *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    if (rq->cfg != NULL && rq->cfg->auth_off) {
        out->role = LEDGER_ROLE_ADMIN;
        return DP_OK;
    }
    if (rq->bearer == NULL)
        return dp_err_set(err, DP_EUNAUTH, NULL,
                          "this endpoint needs a bearer token (Authorization: Bearer <token>)");
    return ledger_token_lookup(rq->db, rq->bearer, out, err);
}

int auth_require_admin(const http_req *rq, ledger_principal *out, dp_err *err)
{
    if (auth_resolve(rq, out, err) != DP_OK)
        return err->code;
    if (out->role != LEDGER_ROLE_ADMIN)
        return dp_err_set(err, DP_EFORBIDDEN, NULL, "this endpoint needs the admin token");
    return DP_OK;
}

int auth_require_silo(const http_req *rq, int64_t silo_id, ledger_principal *out, dp_err *err)
{
    if (auth_resolve(rq, out, err) != DP_OK)
        return err->code;
    if (out->role == LEDGER_ROLE_ADMIN ||
        (out->role == LEDGER_ROLE_SILO && out->silo_id == silo_id))
        return DP_OK;
    return dp_err_set(err, DP_EFORBIDDEN, NULL, "this token may not act on silo %lld",
                      (long long)silo_id);
}

/* Reads the first line of path into token; trailing whitespace is dropped. */
static int read_token(const char *path, char *token, size_t token_len, dp_err *err)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return dp_err_set(err, DP_EINVAL, "--admin-token-file",
                          "cannot read the admin token file %s: %s", path, strerror(errno));
    char *ok = fgets(token, (int)token_len, f);
    fclose(f);
    if (ok == NULL)
        token[0] = '\0';
    size_t n = strlen(token);
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' ' ||
                     token[n - 1] == '\t'))
        token[--n] = '\0';
    if (n < 16 || n > AUTH_TOKEN_MAX) {
        memset(token, 0, token_len);
        return dp_err_set(err, DP_EINVAL, "--admin-token-file",
                          "the admin token in %s must have 16 to %d bytes", path, AUTH_TOKEN_MAX);
    }
    return DP_OK;
}

int auth_admin_token_prepare(const char *token_file, const char *db_path, char *token,
                             size_t token_len, char *path_out, size_t path_len, bool *generated,
                             dp_err *err)
{
    *generated = false;
    if (token_len < LEDGER_TOKEN_BUF)
        return dp_err_set(err, DP_EINTERNAL, NULL, "token buffer too small");
    if (token_file != NULL && token_file[0] != '\0') {
        if ((size_t)snprintf(path_out, path_len, "%s", token_file) >= path_len)
            return dp_err_set(err, DP_EINVAL, "--admin-token-file", "path too long");
        return read_token(token_file, token, token_len, err);
    }
    /* <dir of db>/admin.token */
    const char *slash = strrchr(db_path, '/');
    int n = slash == NULL
                ? snprintf(path_out, path_len, "admin.token")
                : snprintf(path_out, path_len, "%.*s/admin.token", (int)(slash - db_path), db_path);
    if (n < 0 || (size_t)n >= path_len)
        return dp_err_set(err, DP_EINVAL, "--db", "database path too long");
    if (access(path_out, F_OK) == 0)
        return read_token(path_out, token, token_len, err);
    if (ledger_token_generate(token, err) != DP_OK)
        return err->code;
    int fd = open(path_out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the admin token file %s: %s",
                          path_out, strerror(errno));
    size_t len = strlen(token);
    bool ok = fchmod(fd, 0600) == 0 && write(fd, token, len) == (ssize_t)len &&
              write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    if (close(fd) != 0)
        ok = false;
    if (!ok) {
        unlink(path_out);
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot write the admin token file %s",
                          path_out);
    }
    *generated = true;
    return DP_OK;
}
