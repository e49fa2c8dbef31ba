/*
 * api/datasets.c: the data sets training jobs learn from (docs/TRAINING.md "Data sets").
 *
 *   GET    /v1/datasets          the built-in data sets and generators, then the uploads the
 *                                caller may see (paginated by upload id: ?after=&limit=)
 *   POST   /v1/datasets          upload a CSV (Content-Type: text/csv; ?label=COLUMN, optional
 *                                &silo=COLUMN and &name=NAME); 201 with what the parse found
 *   GET    /v1/datasets/{id}     one upload's summary
 *   DELETE /v1/datasets/{id}     removes an upload (its uploader, a token of its silo, the admin)
 *
 * An upload is parsed on the compute pool (http/offload.h): a 256 MiB text takes seconds, and the
 * HTTP threads must stay free. The parse is the training library's (federated/fl_data.h
 * fl_csv_parse): a bad cell is a 400 whose message names its line and column, which the error
 * object also carries as "line" and "column". The text is stored as uploaded, through the
 * database writer (db/writer.h), and the 201 is sent only once it is committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/dp_alloc.h"
#include "common/dp_sha256.h"
#include "federated/fl_data.h"
#include "service/api/auth.h"
#include "service/api/routes.h"
#include "service/api/write.h"
#include "service/app.h"
#include "service/base/time.h"
#include "service/codec/json_util.h"
#include "service/db/datasets.h"
#include "service/db/jobs.h"
#include "service/db/writer.h"
#include "service/http/err.h"
#include "service/http/offload.h"

#define DATASETS_DEFAULT_NAME "upload"

/* ---- built-in data sets and generators ---- */

typedef struct builtin_param {
    const char *name, *type, *doc;
    double def, lo, hi;
} builtin_param;

typedef struct builtin_dataset {
    const char *id, *kind, *task, *description;
    const builtin_param *params;
    size_t n_params;
} builtin_dataset;

static const builtin_param SYNTH_PARAMS[] = {
    {"silos", "integer", "number of silos", 20, 1, 10000},
    {"dim", "integer", "features", 10, 1, 100000},
    {"n_min", "integer", "fewest rows of a silo", 100, 1, 1e7},
    {"n_max", "integer", "most rows of a silo", 200, 1, 1e7},
    {"tau", "number", "spread of the silos' true models around the shared one", 0.1, 0, 1e6},
    {"noise", "number", "label noise standard deviation", 0.1, 0, 1e6},
    {"seed", "integer", "generator seed", 1, 0, 9007199254740991.0},
};

static const builtin_param SYNTH_CLASS_PARAMS[] = {
    {"silos", "integer", "number of silos", 20, 1, 10000},
    {"dim", "integer", "features", 10, 1, 100000},
    {"n_min", "integer", "fewest rows of a silo", 100, 1, 1e7},
    {"n_max", "integer", "most rows of a silo", 200, 1, 1e7},
    {"tau", "number", "spread of the silos' true models around the shared one", 0.1, 0, 1e6},
    {"noise", "number", "noise added before the label is taken", 0.1, 0, 1e6},
    {"classes", "integer", "classes (2: binary labels 0 and 1)", 2, 2, FL_MAX_CLASSES},
    {"seed", "integer", "generator seed", 1, 0, 9007199254740991.0},
};

static const builtin_param SYNTH_LOWRANK_PARAMS[] = {
    {"silos", "integer", "number of users (one silo each)", 20, 1, 10000},
    {"dim", "integer", "features d", 10, 1, 100000},
    {"n_min", "integer", "rows of every user", 100, 1, 1e7},
    {"rank", "integer", "k, the shared subspace's dimension (<= dim)", 2, 1, 64},
    {"noise", "number", "label noise standard deviation", 0.1, 0, 1e6},
    {"seed", "integer", "generator seed", 1, 0, 9007199254740991.0},
};

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const builtin_dataset BUILTINS[] = {
    {"fashion-mnist", "dataset", "classification",
     "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 60,000 training and 10,000 test images of "
     "28x28 pixels in 10 classes, read from Debian's dataset-fashion-mnist package; no natural "
     "silos (give a partition)",
     NULL, 0},
    {"synthetic-linreg", "generator", "regression",
     "federated linear regression: silo k's model is a shared model plus tau * N(0, I) (Liu et "
     "al., NeurIPS 2022, the synthetic setting); natural silos",
     SYNTH_PARAMS, N_ELEMS(SYNTH_PARAMS)},
    {"synthetic-classification", "generator", "classification",
     "federated classification: silo k's model is a shared model plus tau * N(0, I); labels "
     "from the sign (2 classes) or the argmax of the noisy scores; natural silos",
     SYNTH_CLASS_PARAMS, N_ELEMS(SYNTH_CLASS_PARAMS)},
    {"synthetic-lowrank", "generator", "regression",
     "low-rank personalised regression (Jain et al., NeurIPS 2021, Sec. 6): user j's model is "
     "U* v*_j with U* (dim x rank, unit Gaussian columns) shared and v*_j ~ N(0, I); one silo per "
     "user, all with n_min rows; the data of the altmin algorithm",
     SYNTH_LOWRANK_PARAMS, N_ELEMS(SYNTH_LOWRANK_PARAMS)},
};

#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

static json_t *builtin_json(const builtin_dataset *b)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "id", b->id, "kind", b->kind, "task", b->task,
                          "description", b->description);
    if (o == NULL)
        return NULL;
    if (strcmp(b->id, "fashion-mnist") == 0) {
        bool ok = access(FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0;
        if (json_object_set_new(o, "available", json_boolean(ok)) != 0 ||
            json_object_set_new(o, "rows", json_integer(70000)) != 0 ||
            json_object_set_new(o, "features", json_integer(784)) != 0 ||
            json_object_set_new(o, "classes", json_integer(10)) != 0) {
            json_decref(o);
            return NULL;
        }
        return o;
    }
    json_t *ps = json_array();
    for (size_t i = 0; ps != NULL && i < b->n_params; i++) {
        const builtin_param *p = &b->params[i];
        json_t *pj =
            json_pack("{s:s, s:s, s:s, s:f, s:f, s:f}", "name", p->name, "type", p->type,
                      "description", p->doc, "default", p->def, "min", p->lo, "max", p->hi);
        if (pj == NULL || json_array_append_new(ps, pj) != 0) {
            json_decref(ps);
            ps = NULL;
        }
    }
    /* "parameters" first: json_object_set_new takes ps whether it succeeds or not */
    if (ps == NULL || json_object_set_new(o, "parameters", ps) != 0 ||
        json_object_set_new(o, "available", json_true()) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- one upload's summary ---- */

static json_t *row_json(const dataset_row *r)
{
    json_error_t je;
    json_t *silos = json_util_loads(r->silos, 0, &je);
    json_t *features = json_util_loads(r->features, 0, &je);
    json_t *o = NULL;
    if (silos != NULL && features != NULL)
        o = json_pack("{s:I, s:s, s:s, s:o, s:I, s:I, s:s, s:o, s:O, s:I, s:O, s:I, s:s}", "id",
                      (json_int_t)r->id, "kind", "upload", "name", r->name, "created_at",
                      json_util_time(r->created_at_ms), "rows", (json_int_t)r->n_rows, "columns",
                      (json_int_t)r->n_columns, "label", r->label_column, "silo",
                      r->silo_column[0] ? json_string(r->silo_column) : json_null(), "features",
                      features, "classes", (json_int_t)r->n_classes, "silos", silos, "bytes",
                      (json_int_t)r->bytes, "sha256", r->sha256);
    json_decref(silos);
    json_decref(features);
    return o;
}

/* ---- POST /v1/datasets ---- */

typedef struct upload {
    /* in (copied or borrowed from the request: the body stays valid until the wake-up) */
    const char *text;
    size_t len;
    char label[DATASETS_COL_MAX];
    char silo[DATASETS_COL_MAX]; /* "" = none */
    char name[DATASETS_NAME_MAX];
    char req_id[64];
    int64_t creator;
    db_writer *writer;
    /* out */
    int parse_rc; /* a refused text: answered by render, with its place */
    dp_err parse_err;
    size_t line, column; /* a bad cell */
    dataset_row row;     /* what was stored */
} upload;

static void upload_free(void *arg)
{
    upload *u = arg;
    if (u == NULL)
        return;
    dataset_row_clear(&u->row);
    dp_free(u);
}

/* The summary JSON texts of d: silos [{"name","rows"}] and features. */
static int summarize(const fl_dataset *d, char **silos, char **features, dp_err *err)
{
    json_t *s = json_array(), *f = json_array();
    size_t *count = d->n_silos ? dp_calloc(d->n_silos, sizeof *count) : NULL;
    int rc = s && f && (d->n_silos == 0 || count)
                 ? DP_OK
                 : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; rc == DP_OK && d->silo != NULL && i < d->n; i++)
        count[d->silo[i]]++;
    for (size_t k = 0; rc == DP_OK && k < d->n_silos; k++) {
        json_t *o = json_pack("{s:s, s:I}", "name", d->silo_names[k], "rows", (json_int_t)count[k]);
        if (o == NULL || json_array_append_new(s, o) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t j = 0; rc == DP_OK && j < d->d; j++) {
        const char *nm = d->feature_names ? d->feature_names[j] : "";
        if (json_array_append_new(f, json_string(nm)) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    if (rc == DP_OK) {
        *silos = json_util_dumps(s, JSON_COMPACT);
        *features = json_util_dumps(f, JSON_COMPACT);
        if (*silos == NULL || *features == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    dp_free(count);
    json_decref(s);
    json_decref(f);
    return rc;
}

/* Parses the text (compute thread), then stores it through the writer. */
static int upload_run(void *arg, const atomic_bool *cancel, dp_err *err)
{
    (void)cancel; /* the parse is one linear pass; the deadline is checked before the store */
    upload *u = arg;
    fl_dataset d = {0};
    int rc = fl_csv_parse(u->text, u->len, u->label, u->silo[0] ? u->silo : NULL, &d, &u->line,
                          &u->column, &u->parse_err);
    if (rc == DP_EINVAL) { /* the client's text: render answers it, with the cell's place */
        u->parse_rc = rc;
        return DP_OK;
    }
    if (rc != DP_OK) {
        *err = u->parse_err;
        return rc;
    }
    if (cancel != NULL && atomic_load(cancel)) {
        fl_dataset_free(&d);
        return dp_err_set(err, DP_EBUSY, NULL, "the upload was cancelled before it was stored");
    }
    char *silos = NULL, *features = NULL;
    rc = summarize(&d, &silos, &features, err);
    uint8_t dig[DP_SHA256_DIGEST_BYTES];
    char hex[DP_SHA256_HEX_CHARS + 1];
    dp_sha256(u->text, u->len, dig);
    dp_sha256_hex(dig, hex);
    dataset_new nw = {.name = u->name,
                      .created_at_ms = time_now_ms(),
                      .request_id = u->req_id,
                      .creator_token_id = u->creator,
                      .label_column = u->label,
                      .silo_column = u->silo[0] ? u->silo : NULL,
                      .n_rows = (int64_t)d.n,
                      .n_columns = (int64_t)(d.d + 1 + (u->silo[0] ? 1 : 0)),
                      .n_features = (int64_t)d.d,
                      .n_classes = (int64_t)d.n_classes,
                      .silos = silos,
                      .features = features,
                      .sha256 = hex,
                      .csv = u->text,
                      .csv_len = u->len};
    dataset_insert_op op = {&nw, 0};
    if (rc == DP_OK)
        rc = db_writer_run(u->writer, datasets_insert_apply, &op, err);
    if (rc == DP_OK) {
        dataset_row *r = &u->row;
        r->id = op.id;
        snprintf(r->name, sizeof r->name, "%s", u->name);
        r->created_at_ms = nw.created_at_ms;
        snprintf(r->label_column, sizeof r->label_column, "%s", u->label);
        snprintf(r->silo_column, sizeof r->silo_column, "%s", u->silo);
        r->n_rows = nw.n_rows;
        r->n_columns = nw.n_columns;
        r->n_features = nw.n_features;
        r->n_classes = nw.n_classes;
        r->bytes = (int64_t)u->len;
        snprintf(r->sha256, sizeof r->sha256, "%s", hex);
        r->silos = silos;
        r->features = features;
        silos = features = NULL;
    }
    free(silos);
    free(features);
    fl_dataset_free(&d);
    return rc;
}

static int upload_error(const http_req *rq, http_resp *rs, const upload *u, dp_err *err);

static int upload_render(void *arg, const http_req *rq, http_resp *rs, bool deferred, dp_err *err)
{
    (void)deferred;
    upload *u = arg;
    if (u->parse_rc != DP_OK)
        return upload_error(rq, rs, u, err);
    json_t *o = row_json(&u->row);
    if (o == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return http_resp_created(rs, o, err, "/v1/datasets/%lld", (long long)u->row.id);
}

/* A refused text is a 400 (naming the field: "label", "silo" or "body"); a bad cell's also
 * carries its place as "line" and "column" beside the message. */
static int upload_error(const http_req *rq, http_resp *rs, const upload *u, dp_err *err)
{
    if (u->line == 0) {
        *err = u->parse_err;
        return u->parse_rc;
    }
    json_t *body = http_err_body(&u->parse_err, rq->req_id);
    json_t *inner = body ? json_object_get(body, "error") : NULL;
    if (inner == NULL ||
        json_object_set_new(inner, "line", json_integer((json_int_t)u->line)) != 0 ||
        json_object_set_new(inner, "column", json_integer((json_int_t)u->column)) != 0) {
        json_decref(body);
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    return http_resp_json(rs, http_err_status(u->parse_rc), body, err);
}

/* Query parameter name copied into buf (cap bytes); absent: def (NULL: required, a 400). */
static int query_copy(const http_req *rq, const char *name, const char *def, char *buf, size_t cap,
                      dp_err *err)
{
    const char *v = http_req_query(rq, name);
    if (v == NULL && def == NULL)
        return dp_err_set(err, DP_EINVAL, name,
                          "give the %s column's name: POST /v1/datasets?%s=COLUMN", name, name);
    if (v == NULL)
        v = def;
    if (v[0] == '\0' || strlen(v) >= cap)
        return dp_err_set(err, DP_EINVAL, name, "%s must be 1..%zu bytes", name, cap - 1);
    snprintf(buf, cap, "%s", v);
    return DP_OK;
}

int route_datasets_upload(const http_req *rq, http_resp *rs, dp_err *err)
{
    if (rq->app == NULL || rq->app->writer == NULL)
        return dp_err_set(err, DP_EINTERNAL, NULL, "no database writer to store the data set");
    if (rq->raw == NULL || rq->raw_len == 0)
        return dp_err_set(err, DP_EINVAL, "body",
                          "the body is empty: send the CSV text (first line a header)");
    upload *u = dp_calloc(1, sizeof *u);
    if (u == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    int rc = query_copy(rq, "label", NULL, u->label, sizeof u->label, err);
    if (rc == DP_OK && http_req_query(rq, "silo") != NULL)
        rc = query_copy(rq, "silo", "", u->silo, sizeof u->silo, err);
    if (rc == DP_OK)
        rc = query_copy(rq, "name", DATASETS_DEFAULT_NAME, u->name, sizeof u->name, err);
    if (rc == DP_OK && u->silo[0] && strcmp(u->silo, u->label) == 0)
        rc = dp_err_set(err, DP_EINVAL, "silo", "the silo column cannot be the label column");
    if (rc == DP_OK)
        rc = auth_creator_id(rq, &u->creator, err);
    if (rc != DP_OK) {
        upload_free(u);
        return rc;
    }
    u->text = rq->raw;
    u->len = rq->raw_len;
    u->writer = rq->app->writer;
    snprintf(u->req_id, sizeof u->req_id, "%s", rq->req_id ? rq->req_id : "-");
    compute_task t = {upload_run, upload_render, upload_free, u, COMPUTE_TOKEN};
    return compute_offload(rq, rs, &t, err);
}

/* ---- GET /v1/datasets ---- */

#define DATASETS_PAGE_MAX 1000

int route_datasets_list(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t limit, after;
    dataset_viewer v;
    if (http_req_page(rq, &limit, &after, err) != DP_OK || auth_viewer(rq, &v, NULL, err) != DP_OK)
        return err->code;
    if (limit > DATASETS_PAGE_MAX)
        limit = DATASETS_PAGE_MAX;
    dataset_row *page = dp_calloc((size_t)limit, sizeof *page);
    if (page == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    size_t n = 0;
    bool more = false;
    if (datasets_list(rq->db, &v, after, (size_t)limit, page, &n, &more, rq->req_id, err) !=
        DP_OK) {
        dp_free(page);
        return err->code;
    }
    json_t *arr = json_array();
    int rc = arr ? DP_OK : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    /* the built-ins lead the first page only: the pages are over the uploads' ids */
    for (size_t i = 0; rc == DP_OK && after == 0 && i < N_ELEMS(BUILTINS); i++) {
        json_t *b = builtin_json(&BUILTINS[i]);
        if (b == NULL || json_array_append_new(arr, b) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; rc == DP_OK && i < n; i++) {
        json_t *r = row_json(&page[i]);
        if (r == NULL || json_array_append_new(arr, r) != 0)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    }
    int64_t last = n > 0 ? page[n - 1].id : 0;
    for (size_t i = 0; i < n; i++)
        dataset_row_clear(&page[i]);
    dp_free(page);
    if (rc != DP_OK) {
        json_decref(arr);
        return rc;
    }
    json_t *o = json_util_page("datasets", arr, more, last);
    return http_resp_json(rs, 200, o, err);
}

/* ---- GET /v1/datasets/{id} ---- */

int route_dataset_get(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    dataset_viewer v;
    if (http_req_param_id(rq, "id", &id, err) != DP_OK || auth_viewer(rq, &v, NULL, err) != DP_OK)
        return err->code;
    dataset_row row;
    bool found = false;
    if (datasets_get(rq->db, id, &v, &row, &found, rq->req_id, err) != DP_OK)
        return err->code;
    if (!found)
        return http_err_not_found(err, "id", "data set", id);
    json_t *o = row_json(&row);
    dataset_row_clear(&row);
    if (o == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    return http_resp_json(rs, 200, o, err);
}

/* ---- DELETE /v1/datasets/{id} ---- */

static int delete_finish(const http_req *rq, http_resp *rs, void *arg, int rc, const dp_err *werr,
                         dp_err *err)
{
    (void)rq;
    dataset_delete_op *op = arg;
    if (rc != DP_OK) {
        *err = *werr;
        return rc;
    }
    if (!op->found)
        return http_err_not_found(err, "id", "data set", op->id);
    json_t *o = json_pack("{s:I, s:b}", "id", (json_int_t)op->id, "deleted", 1);
    return o ? http_resp_json(rs, 200, o, err) : dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
}

int route_dataset_delete(const http_req *rq, http_resp *rs, dp_err *err)
{
    int64_t id;
    dataset_viewer who;
    if (http_req_param_id(rq, "id", &id, err) != DP_OK || auth_viewer(rq, &who, NULL, err) != DP_OK)
        return err->code;
    bool in_use = false;
    if (jobs_dataset_in_use(rq->db, id, &in_use, rq->req_id, err) != DP_OK)
        return err->code;
    if (in_use)
        return dp_err_set(err, DP_ECONFLICT, "id",
                          "data set %lld is used by a queued or running job: cancel it or wait "
                          "for it to end",
                          (long long)id);
    dataset_delete_op *op = dp_calloc(1, sizeof *op);
    if (op == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    op->id = id;
    op->who = who;
    /* the MHD thread does not wait for the group commit (api/write.h) */
    return api_write(rq, rs, datasets_delete_apply, op, dp_free, delete_finish, err);
}
