/*
 * federated/fl_algo_state.c: a job's state (the whole checkpoint) and its byte format.
 *
 * FORMAT (version 1, all integers little-endian):
 *     "DPFLSTAT"                         8 bytes
 *     version                            u32 (FL_STATE_VERSION)
 *     name length L, algorithm name      u32, L bytes (no NUL)
 *     n_silos K, n_params P, round, n_extra   4 x u64
 *     global, personal (K x P), extra    (P + K P + n_extra) x u32: each float's IEEE-754 bits
 *     stopped                            K bytes, 0 or 1
 *     SHA-256 of every byte above        32 bytes
 * Floats travel as their bits, so a state read back is the state written, bit for bit, and a
 * resumed job continues exactly (fl_algo.h, DETERMINISM). Every size is checked against the job
 * before anything is allocated, and a digest mismatch (a torn or corrupted checkpoint) is refused.
 */
#include "federated/fl_algo.h"
#include "federated/fl_algo_impl.h"

#include <string.h>

#include "common/dp_alloc.h"
#include "common/dp_rng.h"
#include "common/dp_sha256.h"

#define MAGIC        "DPFLSTAT"
#define MAGIC_LEN    8
#define NAME_MAX_LEN 64

void fl_state_free(fl_state *s)
{
    if (s == NULL)
        return;
    dp_free(s->global);
    dp_free(s->personal);
    dp_free(s->stopped);
    dp_free(s->extra);
    memset(s, 0, sizeof *s);
}

/* Allocates the arrays of a state of K silos, P parameters and e extra floats (zeroed). */
static int state_alloc(size_t k_n, size_t p, size_t e, fl_state *s, dp_err *err)
{
    memset(s, 0, sizeof *s);
    s->n_silos = k_n;
    s->n_params = p;
    s->n_extra = e;
    s->global = dp_calloc(p, sizeof(float));
    s->personal = dp_calloc(k_n, p * sizeof(float));
    s->stopped = dp_calloc(k_n, sizeof(bool));
    s->extra = e > 0 ? dp_calloc(e, sizeof(float)) : NULL;
    if (s->global == NULL || s->personal == NULL || s->stopped == NULL ||
        (e > 0 && s->extra == NULL)) {
        fl_state_free(s);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return DP_OK;
}

static size_t extra_of(const fl_job_cfg *cfg, size_t k_n, size_t p)
{
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    return a != NULL && a->extra_floats != NULL ? a->extra_floats(cfg, k_n, p) : 0;
}

int fl_state_init(const fl_job_cfg *cfg, const fl_federation *f, fl_state *out, dp_err *err)
{
    if (fl_job_cfg_check(cfg, f, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    size_t p = fl_model_n_params(&cfg->model);
    if (state_alloc(f->n_silos, p, extra_of(cfg, f->n_silos, p), out, err) != DP_OK)
        return DP_ENOMEM;
    fl_model_init(&cfg->model, dp_rng_derive(cfg->seed, FL_SEED_INIT), out->global);
    fl_broadcast_global(out);
    return DP_OK;
}

/* ---- byte helpers ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint8_t *put_floats(uint8_t *p, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        put_u32(p + 4 * i, bits);
    }
    return p + 4 * n;
}

static const uint8_t *get_floats(const uint8_t *p, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = get_u32(p + 4 * i);
        memcpy(&x[i], &bits, sizeof bits);
    }
    return p + 4 * n;
}

/* Bytes of a checkpoint; the sizes were bounded by FL_MAX_STATE_FLOATS, so no overflow. */
static size_t state_bytes(size_t name_len, size_t k_n, size_t p, size_t e)
{
    return MAGIC_LEN + 4 + 4 + name_len + 4 * 8 + 4 * (p + k_n * p + e) + k_n +
           DP_SHA256_DIGEST_BYTES;
}

int fl_state_serialize(const fl_state *s, const fl_job_cfg *cfg, uint8_t **buf, size_t *len,
                       dp_err *err)
{
    *buf = NULL;
    *len = 0;
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    if (a == NULL)
        return dp_err_set(err, DP_EINVAL, "algorithm", "unknown algorithm");
    if (s->global == NULL || s->personal == NULL || s->stopped == NULL ||
        (s->n_extra > 0 && s->extra == NULL) || s->n_params == 0 ||
        ((unsigned long long)s->n_silos + 2) > FL_MAX_STATE_FLOATS / s->n_params ||
        s->n_extra > FL_MAX_STATE_FLOATS)
        return dp_err_set(err, DP_EINVAL, "state", "the state is malformed");
    size_t name_len = strlen(a->name);
    size_t total = state_bytes(name_len, s->n_silos, s->n_params, s->n_extra);
    uint8_t *b = dp_malloc(total);
    if (b == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    uint8_t *p = b;
    memcpy(p, MAGIC, MAGIC_LEN);
    p += MAGIC_LEN;
    put_u32(p, FL_STATE_VERSION);
    put_u32(p + 4, (uint32_t)name_len);
    p += 8;
    memcpy(p, a->name, name_len);
    p += name_len;
    put_u64(p, s->n_silos);
    put_u64(p + 8, s->n_params);
    put_u64(p + 16, s->round);
    put_u64(p + 24, s->n_extra);
    p += 32;
    p = put_floats(p, s->global, s->n_params);
    p = put_floats(p, s->personal, s->n_silos * s->n_params);
    p = put_floats(p, s->extra, s->n_extra);
    for (size_t k = 0; k < s->n_silos; k++)
        *p++ = s->stopped[k] ? 1 : 0;
    dp_sha256(b, (size_t)(p - b), p);
    *buf = b;
    *len = total;
    return DP_OK;
}

static int bad(dp_err *err, const char *why)
{
    return dp_err_set(err, DP_EINVAL, "checkpoint", "the checkpoint does not fit this job: %s",
                      why);
}

int fl_state_deserialize(const uint8_t *buf, size_t len, const fl_job_cfg *cfg,
                         const fl_federation *f, fl_state *out, dp_err *err)
{
    /* Only the shape of f is used (its silo count): the checkpoint holds no data. */
    if (fl_job_cfg_check(cfg, NULL, err) != DP_OK)
        return err != NULL ? err->code : DP_EINVAL;
    if (f == NULL || f->n_silos < 1)
        return dp_err_set(err, DP_EINVAL, "federation", "the federation has no silo");
    const fl_algo_ops *a = fl_algo_find(cfg->algorithm);
    size_t k_n = f->n_silos, p_n = fl_model_n_params(&cfg->model);
    if (buf == NULL || len < MAGIC_LEN + 8 || memcmp(buf, MAGIC, MAGIC_LEN) != 0)
        return bad(err, "not a training checkpoint");
    if (get_u32(buf + MAGIC_LEN) != FL_STATE_VERSION)
        return bad(err, "unknown format version");
    size_t name_len = get_u32(buf + MAGIC_LEN + 4);
    if (name_len != strlen(a->name) || len < MAGIC_LEN + 8 + name_len + 32 ||
        memcmp(buf + MAGIC_LEN + 8, a->name, name_len) != 0)
        return bad(err, "another algorithm");
    const uint8_t *p = buf + MAGIC_LEN + 8 + name_len;
    uint64_t ck = get_u64(p), cp = get_u64(p + 8), round = get_u64(p + 16), ce = get_u64(p + 24);
    if (ck != k_n || cp != p_n)
        return bad(err, "another number of silos or parameters");
    if (ce != extra_of(cfg, k_n, p_n))
        return bad(err, "another number of algorithm values");
    if (round > cfg->rounds)
        return bad(err, "more rounds than the job has");
    if (len != state_bytes(name_len, k_n, p_n, (size_t)ce))
        return bad(err, "wrong size");
    uint8_t digest[DP_SHA256_DIGEST_BYTES];
    dp_sha256(buf, len - DP_SHA256_DIGEST_BYTES, digest);
    if (memcmp(digest, buf + len - DP_SHA256_DIGEST_BYTES, DP_SHA256_DIGEST_BYTES) != 0)
        return bad(err, "digest mismatch (corrupted)");
    fl_state s;
    if (state_alloc(k_n, p_n, (size_t)ce, &s, err) != DP_OK)
        return DP_ENOMEM;
    s.round = round;
    p += 32;
    p = get_floats(p, s.global, p_n);
    p = get_floats(p, s.personal, k_n * p_n);
    p = get_floats(p, s.extra, s.n_extra);
    for (size_t k = 0; k < k_n; k++) {
        if (p[k] > 1) {
            fl_state_free(&s);
            return bad(err, "a stopped flag is neither 0 nor 1");
        }
        s.stopped[k] = p[k] == 1;
    }
    *out = s;
    return DP_OK;
}
