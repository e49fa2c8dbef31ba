/*
 * federated/fl_model_internal: the workspace layout shared by fl_model.c and fl_sgd.c (not part of
 * the public interface; other modules use federated/fl_model.h).
 *
 * Every model is a stack of dense layers: layer l (1..n_layers) maps dims[l-1] inputs to dims[l]
 * outputs with W_l (dims[l] x dims[l-1], row-major) at w + w_off[l] and b_l right after it; ReLU
 * follows every layer but the last. LINEAR, LOGISTIC and SVM are one layer with one output,
 * SOFTMAX one layer with n_classes outputs, MLP n_hidden + 1 layers.
 *
 * A workspace belongs to one thread. fl_sgd_run may use peer workspaces (fl_ws_set_threads), one
 * per extra thread, each touched only by its thread while a step runs; the lane accumulators of the
 * main workspace are written by the thread that owns the lane (lane k by thread k mod threads).
 */
#ifndef DP_FEDERATED_FL_MODEL_INTERNAL_H
#define DP_FEDERATED_FL_MODEL_INTERNAL_H

#include <stddef.h>

#include "federated/fl_model.h"

/* x86-64 with gcc or clang: AVX2 / AVX-512 versions of a few loops, compiled with target
 * attributes (the build targets baseline x86-64) and picked at run time; each gives the same bits
 * as its portable version. */
#if defined(__x86_64__) && defined(__GNUC__)
#define FL_X86_SIMD 1
#include <immintrin.h>
#else
#define FL_X86_SIMD 0
#endif

#define FL_MAX_LAYERS (FL_MAX_HIDDEN + 1)
/* Chunks of a batch go to FL_SGD_LANES lanes (chunk k to lane k mod FL_SGD_LANES), each summed in
 * chunk order; the lanes are then added in lane order. The tree does not depend on the number of
 * threads (at most FL_SGD_LANES), so neither do the results. */
#define FL_SGD_LANES 4

struct fl_ws {
    fl_model_spec spec;
    size_t n_layers;                 /* dense layers, 1..FL_MAX_LAYERS */
    size_t dims[FL_MAX_LAYERS + 1];  /* dims[0] = d_in, dims[n_layers] = outputs */
    size_t w_off[FL_MAX_LAYERS + 1]; /* offset of W_l in the parameter vector (l >= 1) */
    size_t n_params;
    size_t max_rows;
    float *act[FL_MAX_LAYERS + 1];   /* act[l]: max_rows x dims[l] outputs of layer l (post-ReLU) */
    float *delta[FL_MAX_LAYERS + 1]; /* delta[l]: max_rows x dims[l], d loss / d pre-activation */
    float *ones;                     /* max_rows ones (bias gradients as a product) */
    double *norm2;                   /* max_rows squared per-example gradient norms */
    float *gtmp;                     /* n_params: one chunk's gradient */
    float *xg, *yg;                  /* max_rows x d_in, max_rows: a chunk's gathered rows */
    /* fl_sgd_run only (main workspace): */
    float *lane[FL_SGD_LANES]; /* n_params each: per-lane gradient sums */
    float *noise;              /* n_params: one step's noise */
    size_t *idx;               /* idx_cap: a step's batch rows, kept between calls */
    size_t idx_cap;
    size_t n_threads;                     /* 1..FL_SGD_LANES */
    struct fl_ws *peer[FL_SGD_LANES - 1]; /* workspaces of threads 1..n_threads-1, owned */
};

/* Element-wise loops over float vectors, written as blocks of 16 with restrict pointers so that
 * gcc -O2 (whose default cost model vectorizes only loops of known trip count without alias
 * checks) vectorizes them; element-wise operations give the same bits vectorized or not. */
#define FL_VBLOCK 16

/* a += b */
static inline void fl_vadd(float *restrict a, const float *restrict b, size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++)
            a[j + k] += b[j + k];
    for (; j < n; j++)
        a[j] += b[j];
}

/* w -= lr * (g * inv_b) */
static inline void fl_vstep(float *restrict w, const float *restrict g, float lr, float inv_b,
                            size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++)
            w[j + k] -= lr * (g[j + k] * inv_b);
    for (; j < n; j++)
        w[j] -= lr * (g[j] * inv_b);
}

/* w -= lr * ((g + z) * inv_b): fl_vadd(g, z) then fl_vstep in one pass, the same bits (g + z is
 * rounded to float either way; g is left as it was). */
static inline void fl_vstep_sum(float *restrict w, const float *restrict g, const float *restrict z,
                                float lr, float inv_b, size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++) {
            float t = g[j + k] + z[j + k];
            w[j + k] -= lr * (t * inv_b);
        }
    for (; j < n; j++) {
        float t = g[j] + z[j];
        w[j] -= lr * (t * inv_b);
    }
}

/* w -= lr * (g * inv_b + lam * (w - anchor)) */
static inline void fl_vstep_prox(float *restrict w, const float *restrict g,
                                 const float *restrict anchor, float lr, float inv_b, float lam,
                                 size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++)
            w[j + k] -= lr * (g[j + k] * inv_b + lam * (w[j + k] - anchor[j + k]));
    for (; j < n; j++)
        w[j] -= lr * (g[j] * inv_b + lam * (w[j] - anchor[j]));
}

/* a = max(a, 0) (ReLU; NaN becomes 0) */
static inline void fl_vrelu(float *restrict a, size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++)
            a[j + k] = a[j + k] > 0.0f ? a[j + k] : 0.0f;
    for (; j < n; j++)
        a[j] = a[j] > 0.0f ? a[j] : 0.0f;
}

/* d = d where a > 0, else 0 (the ReLU's derivative applied to a delta) */
static inline void fl_vmask(float *restrict d, const float *restrict a, size_t n)
{
    size_t j = 0;
    for (; j + FL_VBLOCK <= n; j += FL_VBLOCK)
        for (size_t k = 0; k < FL_VBLOCK; k++)
            d[j + k] = a[j + k] > 0.0f ? d[j + k] : 0.0f;
    for (; j < n; j++)
        d[j] = a[j] > 0.0f ? d[j] : 0.0f;
}

/* Gradient (sum) of the n rows (n <= ws->max_rows) into g; clip > 0 clips each row's gradient
 * (ghost clipping) and writes the unclipped norms to norms when not NULL. Returns the summed loss.
 */
double fl_model_chunk_grad(fl_ws *ws, const float *w, const float *x, const float *y, size_t n,
                           double clip, float *g, float *norms);

/* fl_model_chunk_grad of the rows idx[0..n-1] (n <= ws->max_rows) of x (row-major, d_in wide) and
 * y, without norms: the same bits as gathering those rows and calling fl_model_chunk_grad. A model
 * with one dense layer and one output (linear, logistic, svm) reads the rows in place, and takes
 * 1 / sqrt(||x_row||^2 + 1) from inv_s[row] when inv_s is not NULL (fl_rows_inv_s of x: then the
 * same bits); the others gather the rows into the workspace first and ignore inv_s. */
double fl_model_chunk_grad_rows(fl_ws *ws, const float *w, const float *x, const float *y,
                                const float *inv_s, const size_t *idx, size_t n, double clip,
                                float *g);

/* fl_gauss_fill's normals come in blocks of FL_ZIG_BLOCK (fl_noise.c), computed by one of these
 * paths; all give the same bits. */
#define FL_ZIG_BLOCK 16
enum {
    FL_ZIG_BEST = -1,  /* the fastest this CPU runs (what fl_gauss_fill uses) */
    FL_ZIG_SCALAR = 0, /* portable C */
    FL_ZIG_AVX2 = 1,   /* x86-64 with AVX2 */
    FL_ZIG_AVX512 = 2  /* x86-64 with AVX-512F */
};

/* The widest of FL_ZIG_AVX512, FL_ZIG_AVX2, FL_ZIG_SCALAR this CPU runs (cached). */
int fl_simd_level(void);

/* ||v[0..n)||^2 in double as the ghost norms compute it (fl_model.c), through the given path (one
 * this CPU does not run falls back to the best it does). The same bits on every path. */
double fl_sq_norm_path(const float *v, size_t n, int path);

/* fl_gauss_fill through the given path (for tests and benches). Returns the path used, or -1 (out
 * untouched) when this CPU or build cannot run it. */
int fl_gauss_fill_path(float *out, size_t n, double sigma, uint64_t seed, int path);

#endif
