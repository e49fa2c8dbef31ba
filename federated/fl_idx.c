/*
 * fl_idx.c: the IDX reader of fl_data.h (fl_idx_load), for MNIST and Fashion-MNIST.
 *
 * IDX (LeCun, Cortes & Burges, "The MNIST database of handwritten digits", the file-format
 * section; Xiao, Rasul & Vollgraf, "Fashion-MNIST", arXiv:1708.07747, 2017, uses it unchanged): a
 * magic of two zero bytes, the element type (0x08 = unsigned byte) and the number of dimensions,
 * then each dimension as a big-endian uint32, then the elements in row-major order. Images are
 * idx3 (n x rows x cols), labels idx1 (n). zlib's gzread reads gzip files and, transparently,
 * plain ones.
 *
 * Errors name the file by role ("images", "labels"), never by path.
 */
#include "federated/fl_data.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

#include "common/dp_alloc.h"

/* errno's text, reentrantly (strerror may share a buffer between threads). */
static const char *errno_text(int e, char *buf, size_t len)
{
    if (strerror_r(e, buf, len) != 0)
        snprintf(buf, len, "error %d", e);
    return buf;
}

static int idx_open(const char *path, const char *what, gzFile *f, dp_err *err)
{
    if (path == NULL || *path == '\0')
        return dp_err_set(err, DP_EINVAL, what, "the %s file must be named", what);
    errno = 0;
    *f = gzopen(path, "rb");
    if (*f == NULL) {
        char eb[64];
        if (errno == ENOENT)
            return dp_err_set(err, DP_ENOTFOUND, what, "the %s file does not exist", what);
        if (errno == 0)
            return dp_err_set(err, DP_ENOMEM, NULL, "out of memory opening the %s file", what);
        return dp_err_set(err, DP_EINTERNAL, what, "the %s file cannot be opened (%s)", what,
                          errno_text(errno, eb, sizeof eb));
    }
    return DP_OK;
}

/* Reads exactly n bytes; a short file is DP_EINVAL ("truncated"). */
static int idx_read(gzFile f, void *buf, size_t n, const char *what, dp_err *err)
{
    unsigned char *b = buf;
    while (n > 0) {
        unsigned chunk = n > (size_t)INT_MAX / 2 ? (unsigned)(INT_MAX / 2) : (unsigned)n;
        int got = gzread(f, b, chunk);
        if (got < 0) {
            int zerr = Z_OK;
            const char *msg = gzerror(f, &zerr);
            char eb[64];
            if (zerr == Z_ERRNO)
                return dp_err_set(err, DP_EINTERNAL, what, "the %s file cannot be read (%s)", what,
                                  errno_text(errno, eb, sizeof eb));
            if (zerr == Z_MEM_ERROR)
                return dp_err_set(err, DP_ENOMEM, NULL, "out of memory reading the %s file", what);
            return dp_err_set(err, DP_EINVAL, what, "the %s file is not valid gzip data (%s)", what,
                              msg);
        }
        if (got == 0)
            return dp_err_set(err, DP_EINVAL, what,
                              "the %s file is truncated (shorter than its dimensions say)", what);
        b += got;
        n -= (size_t)got;
    }
    return DP_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads the magic and the ndim dimensions (each >= 1) into dims. */
static int idx_header(gzFile f, unsigned ndim, uint32_t *dims, const char *what, dp_err *err)
{
    unsigned char h[16];
    int rc = idx_read(f, h, 4, what, err); /* the magic first: a wrong file is named so */
    if (rc != DP_OK)
        return rc;
    if (h[0] != 0 || h[1] != 0 || h[2] != 0x08 || h[3] != ndim)
        return dp_err_set(err, DP_EINVAL, what,
                          "the %s file is not an IDX file of unsigned bytes with %u dimensions "
                          "(magic 0x%02x%02x%02x%02x)",
                          what, ndim, h[0], h[1], h[2], h[3]);
    rc = idx_read(f, h + 4, 4 * (size_t)ndim, what, err);
    if (rc != DP_OK)
        return rc;
    for (unsigned i = 0; i < ndim; i++) {
        dims[i] = be32(h + 4 + 4 * i);
        if (dims[i] == 0)
            return dp_err_set(err, DP_EINVAL, what, "the %s file has a zero dimension", what);
    }
    return DP_OK;
}

/* After the last element: the file must end. */
static int idx_at_end(gzFile f, const char *what, dp_err *err)
{
    unsigned char extra;
    int got = gzread(f, &extra, 1);
    if (got < 0)
        return idx_read(f, &extra, 1, what, err); /* reports the error */
    if (got > 0)
        return dp_err_set(err, DP_EINVAL, what,
                          "the %s file has bytes after the elements its dimensions say", what);
    return DP_OK;
}

static int read_images(gzFile f, size_t keep, size_t d, bool all, float *x, dp_err *err)
{
    enum { CHUNK = 1 << 16 };
    unsigned char *buf = dp_malloc(CHUNK);
    if (buf == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory reading the images file");
    size_t total = keep * d;
    int rc = DP_OK;
    for (size_t off = 0; off < total && rc == DP_OK; off += CHUNK) {
        size_t n = total - off < CHUNK ? total - off : CHUNK;
        rc = idx_read(f, buf, n, "images", err);
        for (size_t i = 0; i < n && rc == DP_OK; i++)
            x[off + i] = (float)buf[i] / 255.0f;
    }
    dp_free(buf);
    if (rc == DP_OK && all)
        rc = idx_at_end(f, "images", err);
    return rc;
}

static int read_labels(gzFile f, size_t keep, bool all, fl_dataset *out, dp_err *err)
{
    unsigned char *buf = dp_malloc(keep);
    if (buf == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory reading the labels file");
    int rc = idx_read(f, buf, keep, "labels", err);
    for (size_t i = 0; i < keep && rc == DP_OK; i++)
        out->y[i] = (float)buf[i]; /* an unsigned byte: < 256 <= FL_MAX_CLASSES */
    dp_free(buf);
    if (rc == DP_OK && all)
        rc = idx_at_end(f, "labels", err);
    return rc;
}

int fl_idx_load(const char *images_path, const char *labels_path, size_t max_rows, fl_dataset *out,
                dp_err *err)
{
    memset(out, 0, sizeof *out);
    gzFile fi = NULL, fl = NULL;
    uint32_t idims[3], ldims[1];
    int rc = idx_open(images_path, "images", &fi, err);
    if (rc == DP_OK)
        rc = idx_open(labels_path, "labels", &fl, err);
    if (rc == DP_OK)
        rc = idx_header(fi, 3, idims, "images", err);
    if (rc == DP_OK)
        rc = idx_header(fl, 1, ldims, "labels", err);
    if (rc == DP_OK && ldims[0] != idims[0])
        rc = dp_err_set(err, DP_EINVAL, "labels", "the labels file has %lu labels for %lu images",
                        (unsigned long)ldims[0], (unsigned long)idims[0]);
    size_t n = rc == DP_OK ? idims[0] : 0, d = rc == DP_OK ? (size_t)idims[1] * idims[2] : 0;
    size_t keep = max_rows > 0 && max_rows < n ? max_rows : n;
    if (rc == DP_OK && (d > FL_MAX_CELLS || keep > FL_MAX_CELLS / d))
        rc = dp_err_set(err, DP_EINVAL, "images",
                        "the images file holds more than %zu cells (%lu images of %lu x %lu)",
                        FL_MAX_CELLS, (unsigned long)idims[0], (unsigned long)idims[1],
                        (unsigned long)idims[2]);
    if (rc == DP_OK) {
        out->n = keep;
        out->d = d;
        out->x = dp_malloc(keep * d * sizeof(float));
        out->y = dp_malloc(keep * sizeof(float));
        if (out->x == NULL || out->y == NULL)
            rc = dp_err_set(err, DP_ENOMEM, NULL, "out of memory reading IDX files");
    }
    if (rc == DP_OK)
        rc = read_images(fi, keep, d, keep == n, out->x, err);
    if (rc == DP_OK)
        rc = read_labels(fl, keep, keep == n, out, err);
    if (rc == DP_OK)
        out->n_classes = fl_labels_n_classes(out->y, out->n);
    if (fi != NULL)
        gzclose(fi);
    if (fl != NULL)
        gzclose(fl);
    if (rc != DP_OK)
        fl_dataset_free(out);
    return rc;
}
