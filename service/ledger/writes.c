/*
 * ledger/writes.c: the public writes of tokens and silos (create, patch, archive, rotate).
 * The design is in ledger/ledger.c; the shared types in ledger/internal.h.
 */
#include "service/ledger/internal.h"

/* ---- public writes ---- */

int ledger_token_generate(char out[LEDGER_TOKEN_BUF], dp_err *err)
{
    uint8_t raw[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no source of randomness for tokens");
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t r = read(fd, raw + got, sizeof raw - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != sizeof raw)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no source of randomness for tokens");
    static const char hex[] = "0123456789abcdef";
    memcpy(out, "dps_", 4);
    for (size_t i = 0; i < sizeof raw; i++) {
        out[4 + 2 * i] = hex[raw[i] >> 4];
        out[5 + 2 * i] = hex[raw[i] & 15];
    }
    out[4 + 2 * sizeof raw] = '\0';
    memset(raw, 0, sizeof raw);
    return DP_OK;
}

int ledger_token_register_admin(ledger *l, const char *token, int64_t *token_id, dp_err *err)
{
    if (token == NULL || strlen(token) < 16)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token must have at least 16 bytes");
    ledger_op op = {.kind = OP_TOKEN_ADMIN, .token_id_out = token_id};
    dp_sha256(token, strlen(token), op.token_hash);
    lg_submit(l, &op);
    return lg_finish(&op, err);
}

int ledger_token_install_admin(ledger *l, const char *token, int64_t *token_id, int64_t *n_revoked,
                               dp_err *err)
{
    if (token == NULL || strlen(token) < 16)
        return dp_err_set(err, DP_EINVAL, "admin_token",
                          "the admin token must have at least 16 bytes");
    *n_revoked = 0;
    ledger_op op = {.kind = OP_TOKEN_ADMIN, .token_id_out = token_id, .revoked_out = n_revoked};
    dp_sha256(token, strlen(token), op.token_hash);
    lg_submit(l, &op);
    return lg_finish(&op, err);
}

int ledger_silo_token_rotate(ledger *l, int64_t silo_id, char token_out[LEDGER_TOKEN_BUF],
                             int64_t *token_id, int64_t *n_revoked, dp_err *err)
{
    *n_revoked = 0;
    if (ledger_token_generate(token_out, err) != DP_OK)
        return err->code;
    ledger_op op = {
        .kind = OP_TOKEN_ROTATE, .id = silo_id, .token_id_out = token_id, .revoked_out = n_revoked};
    dp_sha256(token_out, strlen(token_out), op.token_hash);
    lg_submit(l, &op);
    if (op.rc != DP_OK)
        memset(token_out, 0, LEDGER_TOKEN_BUF);
    return lg_finish(&op, err);
}

int ledger_silo_token_revoke(ledger *l, int64_t silo_id, int64_t *n_revoked, dp_err *err)
{
    *n_revoked = 0;
    ledger_op op = {.kind = OP_TOKEN_REVOKE, .id = silo_id, .revoked_out = n_revoked};
    lg_submit(l, &op);
    return lg_finish(&op, err);
}

int ledger_silo_create(ledger *l, const char *name, const ledger_budget *b, ledger_silo_view *out,
                       char token_out[LEDGER_TOKEN_BUF], dp_err *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > LEDGER_NAME_MAX)
        return dp_err_set(err, DP_EINVAL, "name", "name must have 1 to %d bytes", LEDGER_NAME_MAX);
    if (ledger_budget_check(b, err) != DP_OK)
        return err->code;
    if (ledger_token_generate(token_out, err) != DP_OK)
        return err->code;
    ledger_op op = {.kind = OP_SILO_CREATE, .name = name, .budget = b, .view = out};
    dp_sha256(token_out, strlen(token_out), op.token_hash);
    lg_submit(l, &op);
    if (op.rc != DP_OK)
        memset(token_out, 0, LEDGER_TOKEN_BUF);
    return lg_finish(&op, err);
}

int ledger_silo_patch(ledger *l, int64_t id, const ledger_patch *p, ledger_silo_view *out,
                      dp_err *err)
{
    if (p->name != NULL && (p->name[0] == '\0' || strlen(p->name) > LEDGER_NAME_MAX))
        return dp_err_set(err, DP_EINVAL, "name", "name must have 1 to %d bytes", LEDGER_NAME_MAX);
    /* one item: the PLD figures of a PLD silo whose cap goes down (apply_silo_patch) */
    ledger_charge_result res;
    op_item *it = dp_calloc(1, sizeof *it);
    if (it == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    it->req_copy.silo_id = id;
    it->req = &it->req_copy;
    it->res = &res;
    ledger_op op = {
        .kind = OP_SILO_PATCH, .id = id, .patch = p, .view = out, .items = it, .n_items = 1};
    lg_submit(l, &op);
    dp_free(it);
    return lg_finish(&op, err);
}

int ledger_silo_archive(ledger *l, int64_t id, ledger_silo_view *out, dp_err *err)
{
    ledger_op op = {.kind = OP_SILO_ARCHIVE, .id = id, .view = out};
    lg_submit(l, &op);
    return lg_finish(&op, err);
}
