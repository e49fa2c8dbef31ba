/*
 * api/auth.c: bearer tokens (see api/auth.h for the rules). Tokens are compared only through their
 * SHA-256 (ledger_token_lookup), so the database never holds one, and nothing in this file logs
 * one.
 */
#include "service/api/auth.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dp_log.h"
#include "service/base/cfg.h"

int auth_resolve(const http_req *rq, ledger_principal *out, dp_err *err)
{
    memset(out, 0, sizeof *out);
    if (rq->app != NULL && rq->app->cfg != NULL && rq->app->cfg->auth_off) {
        out->role = LEDGER_ROLE_ADMIN;
        return DP_OK;
    }
    if (rq->bearer == NULL)
        return dp_err_set(err, DP_EUNAUTH, NULL,
                          "this endpoint needs a bearer token (Authorization: Bearer <token>)");
    return ledger_token_lookup(rq->db, rq->bearer, out, err);
}

int auth_authenticate(const http_req *rq, dp_err *err)
{
    ledger_principal who;
    return auth_resolve(rq, &who, err);
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

int auth_viewer(const http_req *rq, store_viewer *v, ledger_principal *who, dp_err *err)
{
    ledger_principal p;
    if (auth_resolve(rq, &p, err) != DP_OK)
        return err->code;
    v->admin = p.role == LEDGER_ROLE_ADMIN;
    v->token_id = p.token_id;
    v->silo_id = v->admin ? 0 : p.silo_id;
    if (who != NULL)
        *who = p;
    return DP_OK;
}

int auth_creator_id(const http_req *rq, int64_t *token_id, dp_err *err)
{
    *token_id = 0;
    if ((rq->app != NULL && rq->app->cfg != NULL && rq->app->cfg->auth_off) || rq->bearer == NULL)
        return DP_OK;
    return ledger_token_id(rq->db, rq->bearer, token_id, err);
}

int auth_token_check_strength(const char *token, const char *field, double *bits, dp_err *err)
{
    size_t n = strlen(token);
    bool all_hex = true, digit = false, lower = false, upper = false, other = false;
    bool seen[128] = {false};
    size_t kinds = 0;
    if (bits != NULL)
        *bits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)token[i];
        if (ch <= ' ' || ch >= 127)
            return dp_err_set(err, DP_EINVAL, field,
                              "the token may hold only printable ASCII characters other than space "
                              "(byte %zu is 0x%02x)",
                              i, ch);
        if (!seen[ch]) {
            seen[ch] = true;
            kinds++;
        }
        all_hex = all_hex && isxdigit(ch);
        digit = digit || isdigit(ch);
        lower = lower || islower(ch);
        upper = upper || isupper(ch);
        other = other || !isalnum(ch);
    }
    if (n < AUTH_TOKEN_MIN || n > AUTH_TOKEN_MAX)
        return dp_err_set(err, DP_EINVAL, field, "the token must have %d to %d bytes (got %zu)",
                          AUTH_TOKEN_MIN, AUTH_TOKEN_MAX, n);
    double alphabet = all_hex ? 16 : 10.0 * digit + 26.0 * lower + 26.0 * upper + 32.0 * other;
    double b = (double)n * log2(alphabet);
    if (bits != NULL)
        *bits = b;
    if (b < AUTH_TOKEN_MIN_BITS)
        return dp_err_set(err, DP_EINVAL, field,
                          "the token has about %.0f bits of randomness (%zu characters from an "
                          "alphabet of %.0f), fewer than %d",
                          b, n, alphabet, AUTH_TOKEN_MIN_BITS);
    if (kinds < AUTH_TOKEN_MIN_KINDS)
        return dp_err_set(err, DP_EINVAL, field,
                          "the token uses only %zu distinct characters (at least %d needed)", kinds,
                          AUTH_TOKEN_MIN_KINDS);
    return DP_OK;
}

/* Reads the admin token from path through one descriptor: O_NOFOLLOW refuses a symbolic link, and
 * fstat checks the file that is read (no window between a check and the open). info->mode gets the
 * file's permission bits. */
static int read_token(const char *path, char *token, auth_token_file *info, dp_err *err)
{
    static const char *F = "--admin-token-file";
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP)
            return dp_err_set(err, DP_EINVAL, F,
                              "the admin token file %s is a symbolic link: refused (name the "
                              "real file, owned by this user and not writable by others)",
                              path);
        return dp_err_set(err, DP_EINVAL, F, "cannot read the admin token file %s: %s", path,
                          strerror(errno));
    }
    struct stat sb;
    int rc = DP_OK;
    if (fstat(fd, &sb) != 0) {
        rc = dp_err_set(err, DP_EINVAL, F, "cannot stat the admin token file %s: %s", path,
                        strerror(errno));
        goto out;
    }
    info->mode = (unsigned)(sb.st_mode & 07777);
    if (!S_ISREG(sb.st_mode)) {
        rc = dp_err_set(err, DP_EINVAL, F, "the admin token file %s is not a regular file", path);
        goto out;
    }
    if (sb.st_uid != geteuid()) {
        rc = dp_err_set(err, DP_EINVAL, F,
                        "the admin token file %s is owned by uid %lu, not by the user running "
                        "dpsilod (uid %lu): refused, anyone who can write it chooses the admin "
                        "token",
                        path, (unsigned long)sb.st_uid, (unsigned long)geteuid());
        goto out;
    }
    if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        rc = dp_err_set(err, DP_EINVAL, F,
                        "the admin token file %s has mode %04o: group or others can write it, "
                        "refused (chmod 600 %s)",
                        path, info->mode, path);
        goto out;
    }
    char buf[AUTH_TOKEN_MAX + 3];
    ssize_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - (size_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = dp_err_set(err, DP_EINVAL, F, "cannot read the admin token file %s: %s", path,
                            strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        got += r;
        if ((size_t)got == sizeof buf - 1 || memchr(buf, '\n', (size_t)got) != NULL)
            break;
    }
    buf[got] = '\0';
    size_t n = strcspn(buf, "\n");
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    if (n > AUTH_TOKEN_MAX) {
        rc = dp_err_set(err, DP_EINVAL, F, "the admin token in %s is longer than %d bytes", path,
                        AUTH_TOKEN_MAX);
    } else if (auth_token_check_strength(buf, F, NULL, err) != DP_OK) {
        /* name the file: the message is for the operator */
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        int w = snprintf(err->msg, sizeof err->msg, "admin token in %s refused: ", path);
        if (w > 0 && (size_t)w < sizeof err->msg) {
            size_t k = strnlen(msg, sizeof err->msg - 1 - (size_t)w);
            memcpy(err->msg + w, msg, k);
            err->msg[(size_t)w + k] = '\0';
        }
        rc = err->code;
    } else {
        memcpy(token, buf, n + 1);
    }
    memset(buf, 0, sizeof buf);
out:
    close(fd);
    return rc;
}

int auth_admin_token_prepare(const char *token_file, const char *db_path, char *token,
                             size_t token_len, auth_token_file *info, dp_err *err)
{
    memset(info, 0, sizeof *info);
    if (token_len <= AUTH_TOKEN_MAX || token_len < LEDGER_TOKEN_BUF)
        return dp_err_set(err, DP_EINTERNAL, NULL, "token buffer too small");
    token[0] = '\0';
    char *path_out = info->path;
    size_t path_len = sizeof info->path;
    if (token_file != NULL && token_file[0] != '\0') {
        if ((size_t)snprintf(path_out, path_len, "%s", token_file) >= path_len)
            return dp_err_set(err, DP_EINVAL, "--admin-token-file", "path too long");
        return read_token(token_file, token, info, err);
    }
    /* <dir of db>/admin.token */
    const char *slash = strrchr(db_path, '/');
    int n = slash == NULL
                ? snprintf(path_out, path_len, "admin.token")
                : snprintf(path_out, path_len, "%.*s/admin.token", (int)(slash - db_path), db_path);
    if (n < 0 || (size_t)n >= path_len)
        return dp_err_set(err, DP_EINVAL, "--db", "database path too long");
    struct stat sb;
    if (lstat(path_out, &sb) == 0 || errno != ENOENT)
        return read_token(path_out, token, info, err); /* refuses a link too */
    if (ledger_token_generate(token, err) != DP_OK)
        return err->code;
    int fd = open(path_out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        memset(token, 0, token_len);
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot create the admin token file %s: %s",
                          path_out, strerror(errno));
    }
    size_t len = strlen(token);
    bool ok = fchmod(fd, 0600) == 0 && write(fd, token, len) == (ssize_t)len &&
              write(fd, "\n", 1) == 1 && fsync(fd) == 0 && fstat(fd, &sb) == 0;
    if (close(fd) != 0)
        ok = false;
    if (!ok) {
        unlink(path_out);
        memset(token, 0, token_len);
        return dp_err_set(err, DP_EINTERNAL, NULL, "cannot write the admin token file %s",
                          path_out);
    }
    info->mode = (unsigned)(sb.st_mode & 07777);
    info->generated = true;
    return DP_OK;
}
