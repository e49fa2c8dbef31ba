/*
 * federated/fl_model.c: the five models as stacks of dense layers, their summed gradients, ghost
 * clipping and evaluation. See fl_model.h for the contract and fl_model_internal.h for the layout.
 *
 * Forward pass for n rows (row-major, one row per example): act_l = relu(act_{l-1} W_l^T + b_l),
 * the last layer without ReLU (cblas_sgemm, or cblas_sgemv for one output). Backward pass: the loss
 * gives delta_L = d loss / d logits per row; delta_{l-1} = (delta_l W_l) .* [act_{l-1} > 0]. The
 * summed weight gradient of layer l is delta_l^T act_{l-1} (one sgemm over the rows) and the bias
 * gradient delta_l^T 1.
 *
 * Ghost clipping (Goodfellow, "Efficient Per-Example Gradient Computations", arXiv:1510.01799,
 * 2015, Sec. 3; Li, Tramer, Liang & Hashimoto, "Large Language Models Can Be Strong Differentially
 * Private Learners", ICLR 2022, Sec. 4; Bu, Mao & Xu, "Scalable and Efficient Training of Large
 * Convolutional Neural Networks with Differential Privacy", NeurIPS 2022, Sec. 3): example i's
 * gradient for layer l is the outer product delta_{l,i} a_{l-1,i}^T plus the bias delta_{l,i}, so
 *     ||g_i||^2 = sum_l ||delta_{l,i}||^2 (||a_{l-1,i}||^2 + 1).
 * The clipped sum sum_i c_i g_i, c_i = min(1, C / (||g_i|| + 1e-15)), is linear in the deltas: all
 * the deltas come from one backward pass (delta_{l-1} depends only on delta_l, so scaling row i of
 * every layer's delta by c_i is the same as back-propagating c_i delta_{L,i}), their rows are
 * scaled by c_i, and then one sgemm per layer gives the weight gradients. The extra cost over the
 * non-private step is O(n * sum_l dims[l-1] + dims[l]) for the norms and scaling; the squared norms
 * are sums in double over sixteen partial sums in a fixed order (sq_norm_c), vectorised with AVX2
 * or AVX-512 where the CPU has them (same bits).
 *
 * One dense layer with one output (linear, logistic, svm: most of a DP-SGD step's cost is fixed
 * overhead at these sizes) takes a fused path, dense1_grad: blocks of the batch's rows (read in
 * place through its row indexes, no copy), each row's logit, loss and derivative, clipped by a
 * clamp to +-clip / sqrt(||x_i||^2 + 1) (the inverse square root cached per silo when the caller
 * has it: fl_rows_inv_s), and the block's clipped gradients added while its rows are still in
 * cache, with plain loops in a fixed order instead of BLAS calls.
 *
 * Precision: parameters, activations and gradients are float (the speed of BLAS single precision);
 * per-row losses, softmax normalisers and the norms are double. Results depend only on the inputs
 * (BLAS is pinned to one thread; see fl_blas_single_thread).
 * Thread-safety: reentrant; a workspace belongs to one thread.
 */
#include "federated/fl_model.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include <cblas.h>

#include "common/dp_alloc.h"
#include "common/dp_math.h"
#include "federated/fl_data.h"
#include "federated/fl_model_internal.h"
#include "federated/fl_rng.h"

/* ---- BLAS threads ---- */

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_pin(void)
{
    openblas_set_num_threads(1);
}

void fl_blas_single_thread(void)
{
    (void)pthread_once(&blas_once, blas_pin);
}

/* ---- specs ---- */

static const char *const type_names[] = {"linear", "logistic", "svm", "softmax", "mlp"};

const char *fl_model_type_name(fl_model_type t)
{
    if ((unsigned)t >= sizeof type_names / sizeof type_names[0])
        return "unknown";
    return type_names[t];
}

int fl_model_type_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
        if (strcmp(name, type_names[i]) == 0)
            return (int)i;
    return -1;
}

bool fl_model_is_regression(const fl_model_spec *m)
{
    return m->type == FL_MODEL_LINEAR;
}

static bool is_multiclass(fl_model_type t)
{
    return t == FL_MODEL_SOFTMAX || t == FL_MODEL_MLP;
}

/* Layer widths of a valid spec: returns the number of layers. */
static size_t spec_dims(const fl_model_spec *m, size_t dims[FL_MAX_LAYERS + 1])
{
    dims[0] = m->d_in;
    if (!is_multiclass(m->type)) {
        dims[1] = 1;
        return 1;
    }
    size_t nh = m->type == FL_MODEL_MLP ? m->n_hidden : 0;
    for (size_t k = 0; k < nh; k++)
        dims[k + 1] = m->hidden[k];
    dims[nh + 1] = m->n_classes;
    return nh + 1;
}

int fl_model_check(const fl_model_spec *m, dp_err *err)
{
    if (m == NULL)
        return dp_err_set(err, DP_EINVAL, "model", "the model is missing");
    if ((unsigned)m->type > FL_MODEL_MLP)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "model.type must be linear, logistic, svm, softmax or mlp (got %d)",
                          (int)m->type);
    if (m->d_in < 1 || m->d_in > FL_MAX_FEATURES)
        return dp_err_set(err, DP_EINVAL, "model.d_in", "model.d_in must be in [1, %d] (got %zu)",
                          FL_MAX_FEATURES, m->d_in);
    if (is_multiclass(m->type) && (m->n_classes < 2 || m->n_classes > FL_MAX_CLASSES))
        return dp_err_set(err, DP_EINVAL, "model.n_classes",
                          "model.n_classes must be in [2, %d] for %s (got %zu)", FL_MAX_CLASSES,
                          fl_model_type_name(m->type), m->n_classes);
    if (m->type == FL_MODEL_MLP) {
        if (m->n_hidden > FL_MAX_HIDDEN)
            return dp_err_set(err, DP_EINVAL, "model.hidden",
                              "model.hidden may list at most %d layers (got %zu)", FL_MAX_HIDDEN,
                              m->n_hidden);
        for (size_t k = 0; k < m->n_hidden; k++)
            if (m->hidden[k] < 1 || m->hidden[k] > FL_MAX_WIDTH)
                return dp_err_set(err, DP_EINVAL, "model.hidden",
                                  "model.hidden widths must be in [1, %d] (layer %zu is %zu)",
                                  FL_MAX_WIDTH, k + 1, m->hidden[k]);
    }
    /* Each factor is capped above, so the products below cannot overflow a 64-bit size_t. */
    size_t dims[FL_MAX_LAYERS + 1];
    size_t nl = spec_dims(m, dims), p = 0;
    for (size_t l = 1; l <= nl; l++)
        p += dims[l] * (dims[l - 1] + 1);
    if (p > FL_MAX_PARAMS)
        return dp_err_set(err, DP_EINVAL, "model",
                          "the model has %zu parameters, more than the %d allowed", p,
                          FL_MAX_PARAMS);
    return DP_OK;
}

size_t fl_model_n_params(const fl_model_spec *m)
{
    size_t dims[FL_MAX_LAYERS + 1];
    size_t nl = spec_dims(m, dims), p = 0;
    for (size_t l = 1; l <= nl; l++)
        p += dims[l] * (dims[l - 1] + 1);
    return p;
}

/* He-uniform (He, Zhang, Ren & Sun, "Delving Deep into Rectifiers", ICCV 2015, Sec. 2.2: variance
 * 2 / fan_in, here as U(-sqrt(6 / fan_in), sqrt(6 / fan_in))) for the MLP's weights, zero biases;
 * zeros for the linear models. */
void fl_model_init(const fl_model_spec *m, uint64_t seed, float *w)
{
    size_t n = fl_model_n_params(m);
    memset(w, 0, n * sizeof *w);
    if (m->type != FL_MODEL_MLP)
        return;
    fl_rng r;
    fl_rng_seed(&r, seed, DP_RNG_STREAM_FL_MODEL_INIT);
    size_t dims[FL_MAX_LAYERS + 1];
    size_t nl = spec_dims(m, dims), off = 0;
    for (size_t l = 1; l <= nl; l++) {
        double a = sqrt(6.0 / (double)dims[l - 1]);
        size_t nw = dims[l] * dims[l - 1];
        for (size_t j = 0; j < nw; j++) {
            double u = (double)(fl_rng_next(&r) >> 11) * 0x1.0p-53; /* [0, 1) */
            w[off + j] = (float)(a * (2.0 * u - 1.0));
        }
        off += nw + dims[l];
    }
}

/* ---- workspaces ---- */

fl_ws *fl_ws_alloc(const fl_model_spec *m, size_t max_rows, dp_err *err)
{
    if (fl_model_check(m, err) != DP_OK)
        return NULL;
    if (max_rows < 1 || max_rows > FL_MAX_WS_ROWS) {
        dp_err_set(err, DP_EINVAL, "max_rows", "max_rows must be in [1, %d] (got %zu)",
                   FL_MAX_WS_ROWS, max_rows);
        return NULL;
    }
    fl_blas_single_thread();
    fl_ws *ws = dp_calloc(1, sizeof *ws);
    if (ws == NULL)
        goto oom;
    ws->spec = *m;
    ws->n_layers = spec_dims(m, ws->dims);
    ws->max_rows = max_rows;
    ws->n_threads = 1;
    size_t off = 0, width = 0;
    for (size_t l = 1; l <= ws->n_layers; l++) {
        ws->w_off[l] = off;
        off += ws->dims[l] * (ws->dims[l - 1] + 1);
        width += ws->dims[l];
    }
    ws->n_params = off;
    if (max_rows > FL_MAX_WS_FLOATS / (2 * width + m->d_in + 4)) {
        dp_err_set(err, DP_ETOOBIG, "max_rows",
                   "a workspace of %zu rows for this model would exceed %d floats", max_rows,
                   FL_MAX_WS_FLOATS);
        fl_ws_free(ws);
        return NULL;
    }
    for (size_t l = 1; l <= ws->n_layers; l++) {
        ws->act[l] = dp_calloc(max_rows * ws->dims[l], sizeof(float));
        ws->delta[l] = dp_calloc(max_rows * ws->dims[l], sizeof(float));
        if (ws->act[l] == NULL || ws->delta[l] == NULL)
            goto oom;
    }
    ws->ones = dp_calloc(max_rows, sizeof(float));
    ws->norm2 = dp_calloc(max_rows, sizeof(double));
    ws->gtmp = dp_calloc(ws->n_params, sizeof(float));
    ws->xg = dp_calloc(max_rows * m->d_in, sizeof(float));
    ws->yg = dp_calloc(max_rows, sizeof(float));
    if (ws->ones == NULL || ws->norm2 == NULL || ws->gtmp == NULL || ws->xg == NULL ||
        ws->yg == NULL)
        goto oom;
    for (size_t i = 0; i < max_rows; i++)
        ws->ones[i] = 1.0f;
    return ws;
oom:
    fl_ws_free(ws);
    dp_err_set(err, DP_ENOMEM, NULL, "out of memory allocating a training workspace");
    return NULL;
}

void fl_ws_free(fl_ws *ws)
{
    if (ws == NULL)
        return;
    for (size_t k = 0; k + 1 < FL_SGD_LANES; k++)
        fl_ws_free(ws->peer[k]);
    for (size_t k = 0; k < FL_SGD_LANES; k++)
        dp_free(ws->lane[k]);
    dp_free(ws->noise);
    dp_free(ws->idx);
    for (size_t l = 0; l <= FL_MAX_LAYERS; l++) {
        dp_free(ws->act[l]);
        dp_free(ws->delta[l]);
    }
    dp_free(ws->ones);
    dp_free(ws->norm2);
    dp_free(ws->gtmp);
    dp_free(ws->xg);
    dp_free(ws->yg);
    dp_free(ws);
}

size_t fl_ws_max_rows(const fl_ws *ws)
{
    return ws->max_rows;
}

/* ---- forward, loss, backward ---- */

/* act[l] for the n rows of x. */
static void forward(fl_ws *ws, const float *w, const float *x, size_t n)
{
    const float *in = x;
    for (size_t l = 1; l <= ws->n_layers; l++) {
        size_t din = ws->dims[l - 1], dout = ws->dims[l];
        const float *W = w + ws->w_off[l], *b = W + dout * din;
        float *out = ws->act[l];
        if (dout == 1) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)din, 1.0f, in, (int)din, W, 1,
                        0.0f, out, 1);
            for (size_t i = 0; i < n; i++)
                out[i] += b[0];
        } else {
            for (size_t i = 0; i < n; i++)
                memcpy(out + i * dout, b, dout * sizeof *b);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)dout, (int)din, 1.0f,
                        in, (int)din, W, (int)din, 1.0f, out, (int)dout);
        }
        if (l < ws->n_layers)
            fl_vrelu(out, n * dout);
        in = out;
    }
}

/* The class index of a label, or SIZE_MAX when it is not one of 0..n_classes-1 (then no logit is
 * the target). */
static size_t label_class(float y, size_t n_classes)
{
    if (!(y >= 0.0f) || !(y < (float)n_classes))
        return SIZE_MAX;
    return (size_t)y;
}

/* log(1 + exp(t)) without overflow. */
static double softplus(double t)
{
    return t > 0.0 ? t + log1p(exp(-t)) : log1p(exp(t));
}

/* The loss of one output z of a one-output model (linear, logistic, svm) at label y, and its
 * derivative in *d: the formulas of loss_rows, shared so that the fused kernel (dense1_grad) gives
 * the same bits. */
static inline double scalar_loss(fl_model_type type, float z, float y, float *d)
{
    switch (type) {
        case FL_MODEL_LINEAR: {
            double r = (double)z - (double)y;
            *d = (float)r;
            return 0.5 * r * r;
        }
        case FL_MODEL_LOGISTIC: {
            double sg = y > 0.0f ? 1.0 : -1.0, t = -sg * (double)z;
            *d = (float)(-sg / (1.0 + exp(-t)));
            return softplus(t);
        }
        default: { /* FL_MODEL_SVM */
            double sg = y > 0.0f ? 1.0 : -1.0, margin = 1.0 - sg * (double)z;
            *d = margin > 0.0 ? (float)-sg : 0.0f;
            return margin > 0.0 ? margin : 0.0;
        }
    }
}

/* Per-row losses of the logits in act[L]; delta[L] = d loss / d logits when want_delta. Returns the
 * summed loss; adds squared errors or correct predictions to e when not NULL. */
static double loss_rows(fl_ws *ws, const float *y, size_t n, bool want_delta, fl_eval *e)
{
    size_t L = ws->n_layers, k = ws->dims[L];
    const float *z = ws->act[L];
    float *d = ws->delta[L];
    double total = 0.0;
    switch (ws->spec.type) {
        case FL_MODEL_LINEAR:
        case FL_MODEL_LOGISTIC:
        case FL_MODEL_SVM:
            for (size_t i = 0; i < n; i++) {
                float di;
                total += scalar_loss(ws->spec.type, z[i], y[i], &di);
                if (want_delta)
                    d[i] = di;
                if (e == NULL)
                    continue;
                if (ws->spec.type == FL_MODEL_LINEAR) {
                    double r = (double)z[i] - (double)y[i];
                    e->sq_err += r * r;
                } else {
                    e->correct += ((z[i] > 0.0f) == (y[i] > 0.0f)) ? 1.0 : 0.0;
                }
            }
            break;
        case FL_MODEL_SOFTMAX:
        case FL_MODEL_MLP:
            for (size_t i = 0; i < n; i++) {
                const float *zi = z + i * k;
                size_t c = label_class(y[i], k), arg = 0;
                for (size_t j = 1; j < k; j++)
                    if (zi[j] > zi[arg])
                        arg = j;
                double mx = (double)zi[arg], sum = 0.0;
                for (size_t j = 0; j < k; j++)
                    sum += exp((double)zi[j] - mx);
                double lse = mx + log(sum);
                total += lse - (c == SIZE_MAX ? 0.0 : (double)zi[c]);
                if (want_delta) {
                    float *di = d + i * k;
                    for (size_t j = 0; j < k; j++)
                        di[j] = (float)(exp((double)zi[j] - lse) - (j == c ? 1.0 : 0.0));
                }
                if (e != NULL)
                    e->correct += arg == c ? 1.0 : 0.0;
            }
            break;
    }
    return total;
}

/* delta[l-1] from delta[l] for l = L..2. */
static void backprop_deltas(fl_ws *ws, const float *w, size_t n)
{
    for (size_t l = ws->n_layers; l >= 2; l--) {
        size_t din = ws->dims[l - 1], dout = ws->dims[l];
        const float *W = w + ws->w_off[l];
        float *dprev = ws->delta[l - 1];
        const float *aprev = ws->act[l - 1];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)din, (int)dout, 1.0f,
                    ws->delta[l], (int)dout, W, (int)din, 0.0f, dprev, (int)din);
        fl_vmask(dprev, aprev, n * din);
    }
}

/* g = the weight and bias gradients summed over the rows, from delta[] and the layer inputs. */
static void weight_grads(fl_ws *ws, const float *x, size_t n, float *g)
{
    for (size_t l = 1; l <= ws->n_layers; l++) {
        size_t din = ws->dims[l - 1], dout = ws->dims[l];
        const float *in = l == 1 ? x : ws->act[l - 1];
        float *gW = g + ws->w_off[l], *gb = gW + dout * din;
        const float *D = ws->delta[l];
        if (dout == 1) {
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)din, 1.0f, in, (int)din, D, 1, 0.0f,
                        gW, 1);
            gb[0] = cblas_sdot((int)n, D, 1, ws->ones, 1);
        } else {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)dout, (int)din, (int)n, 1.0f,
                        D, (int)dout, in, (int)din, 0.0f, gW, (int)din);
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)dout, 1.0f, D, (int)dout, ws->ones,
                        1, 0.0f, gb, 1);
        }
    }
}

/* Squared L2 norm of v[0..n-1] in double: element j goes to partial sum j mod 16 (a last partial
 * block is padded with zeros, which adds +0 to the sums it misses: no change), and the partial sums
 * are then added pairwise in a fixed tree, a[k] += a[k + 8], then + 4, + 2, + 1. The AVX2 and
 * AVX-512 versions keep the sixteen sums and the tree in vector registers and give the same bits as
 * the portable one. A single running sum was a chain of dependent additions (an add's latency per
 * element: most of the ghost norms' cost at 784 inputs); the products of floats are exact in
 * double, so only the order of the additions matters. */
#define SQN_PARTS 16

static double sq_norm_c(const float *v, size_t n)
{
    double a[SQN_PARTS] = {0.0};
    size_t j = 0;
    for (; j + SQN_PARTS <= n; j += SQN_PARTS)
        for (size_t k = 0; k < SQN_PARTS; k++)
            a[k] += (double)v[j + k] * (double)v[j + k];
    for (size_t k = 0; j < n; j++, k++)
        a[k] += (double)v[j] * (double)v[j];
    for (size_t w = SQN_PARTS / 2; w >= 1; w /= 2)
        for (size_t k = 0; k < w; k++)
            a[k] += a[k + w];
    return a[0];
}

#if FL_X86_SIMD
__attribute__((target("avx2"))) static double sq_norm_avx2(const float *v, size_t n)
{
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    float pad[SQN_PARTS] = {0.0f};
    for (size_t j = 0; j < n; j += SQN_PARTS) {
        const float *b = v + j;
        if (n - j < SQN_PARTS) {
            memcpy(pad, b, (n - j) * sizeof *b);
            b = pad;
        }
        for (int q = 0; q < 4; q++) {
            __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(b + 4 * q));
            a[q] = _mm256_add_pd(a[q], _mm256_mul_pd(x, x));
        }
    }
    __m256d t = _mm256_add_pd(_mm256_add_pd(a[0], a[2]), _mm256_add_pd(a[1], a[3]));
    __m128d u = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)));
}

__attribute__((target("avx512f"))) static double sq_norm_avx512(const float *v, size_t n)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    size_t j = 0;
    for (; j + SQN_PARTS <= n; j += SQN_PARTS) {
        __m512d x0 = _mm512_cvtps_pd(_mm256_loadu_ps(v + j));
        __m512d x1 = _mm512_cvtps_pd(_mm256_loadu_ps(v + j + 8));
        a0 = _mm512_add_pd(a0, _mm512_mul_pd(x0, x0));
        a1 = _mm512_add_pd(a1, _mm512_mul_pd(x1, x1));
    }
    if (j < n) {
        __m512 x = _mm512_maskz_loadu_ps((__mmask16)((1u << (n - j)) - 1u), v + j);
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
        __m512d x1 =
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
        a0 = _mm512_add_pd(a0, _mm512_mul_pd(x0, x0));
        a1 = _mm512_add_pd(a1, _mm512_mul_pd(x1, x1));
    }
    __m512d t = _mm512_add_pd(a0, a1);
    __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
    __m128d u = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    return _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)));
}
#endif

double fl_sq_norm_path(const float *v, size_t n, int path)
{
#if FL_X86_SIMD
    int level = fl_simd_level();
    if (path == FL_ZIG_BEST || path > level)
        path = level;
    if (path == FL_ZIG_AVX512)
        return sq_norm_avx512(v, n);
    if (path == FL_ZIG_AVX2)
        return sq_norm_avx2(v, n);
#else
    (void)path;
#endif
    return sq_norm_c(v, n);
}

static double sq_norm(const float *v, size_t n)
{
    return fl_sq_norm_path(v, n, FL_ZIG_BEST);
}

/* Ghost norms: norm2[i] = sum_l ||delta_{l,i}||^2 (||a_{l-1,i}||^2 + 1), in one pass per layer
 * (plain double loops: a BLAS call per row costs more than the few products it computes). */
static void ghost_norms(fl_ws *ws, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ws->norm2[i] = 0.0;
    for (size_t l = 1; l <= ws->n_layers; l++) {
        size_t din = ws->dims[l - 1], dout = ws->dims[l];
        const float *in = l == 1 ? x : ws->act[l - 1];
        const float *D = ws->delta[l];
        for (size_t i = 0; i < n; i++)
            ws->norm2[i] += sq_norm(D + i * dout, dout) * (sq_norm(in + i * din, din) + 1.0);
    }
}

/* The clip factor of a row of gradient norm nrm: min(1, clip / nrm) as a float, 1 when clip is 0.
 */
static float clip_factor(double clip, double nrm)
{
    double c = clip / (nrm + 1e-15);
    return !(clip > 0.0) || c >= 1.0 ? 1.0f : (float)c;
}

/* One dense layer with one output: linear, logistic, svm. */
static bool is_dense1(const fl_ws *ws)
{
    return ws->n_layers == 1 && ws->dims[1] == 1;
}

/* w . x in float over four partial sums (element j to sum j mod 4, then (s0 + s2) + (s1 + s3)): a
 * fixed order, so the same bits on every call. Written as blocks of four lanes so that gcc -O2
 * keeps the four sums in one vector register (the lanes are the partial sums: same bits). */
static float dot4(const float *restrict w, const float *restrict x, size_t n)
{
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (size_t k = 0; k < 4; k++)
            s[k] += w[j + k] * x[j + k];
    for (size_t k = 0; j < n; j++, k++)
        s[k] += w[j] * x[j];
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/* ||x||^2 in double over four partial sums in the order of dot4. */
static double row_sq(const float *restrict x, size_t n)
{
    double a[4] = {0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (size_t k = 0; k < 4; k++)
            a[k] += (double)x[j + k] * (double)x[j + k];
    for (size_t k = 0; j < n; j++, k++)
        a[k] += (double)x[j] * (double)x[j];
    return (a[0] + a[2]) + (a[1] + a[3]);
}

/* 1 / sqrt(||x||^2 + 1) of one row: ||x||^2 by row_sq, the rest in double, rounded to float once.
 */
static float row_inv_s(const float *restrict x, size_t n)
{
    return (float)(1.0 / sqrt(row_sq(x, n) + 1.0));
}

void fl_rows_inv_s(const float *x, size_t n, size_t d, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = row_inv_s(x + i * d, d);
}

/* Rows per block of dense1_grad: their coefficients are computed first, then added into g four
 * parameters at a time with the four sums in one register. */
#define D1_ROWS 16

/* One dense layer with one output (linear, logistic, svm), on rows idx[i] of x (or rows 0..n-1 when
 * idx is NULL), in blocks of D1_ROWS rows, in order. Pass 1 over a block: each row's logit, its
 * loss and derivative delta_i (scalar_loss) and its clipped coefficient. Row i's gradient is
 * delta_i (x_i, 1), of norm |delta_i| s_i with s_i = sqrt(||x_i||^2 + 1) fixed by the row, so
 * clipping it to norm clip, delta_i min(1, clip / (|delta_i| s_i)), is the clamp of delta_i to
 * [-clip / s_i, clip / s_i]: no division and no square root per row once 1 / s_i is known
 * (inv_s[row] when inv_s is not NULL, see fl_rows_inv_s; else computed the same way: the same
 * bits). The bound is rounded to float, so a clipped row's norm is clip within float rounding
 * (relative 2^-23), as with a float clip factor. A NaN coefficient stays NaN (both comparisons are
 * false). Pass 2: g += the block's coefficients times their rows, per parameter in row order (the
 * same sums as adding the rows one by one), while the rows are still in cache. norms (when not
 * NULL): the unclipped norms |delta_i| s_i. */
static double dense1_grad(fl_ws *ws, const float *w, const float *x, const float *y,
                          const float *inv_s, const size_t *idx, size_t n, double clip, float *g,
                          float *norms)
{
    bool clipping = clip > 0.0;
    float cf = (float)clip;
    fl_model_type type = ws->spec.type;
    size_t din = ws->dims[0];
    const float *W = w + ws->w_off[1];
    float *gW = g + ws->w_off[1];
    memset(gW, 0, (din + 1) * sizeof *gW);
    double loss = 0.0;
    const float *rows[D1_ROWS];
    float coef[D1_ROWS];
    for (size_t s = 0; s < n; s += D1_ROWS) {
        size_t m = n - s < D1_ROWS ? n - s : D1_ROWS;
        for (size_t i = 0; i < m; i++) {
            size_t row = idx != NULL ? idx[s + i] : s + i;
            const float *xi = x + row * din;
            rows[i] = xi;
            float di;
            loss += scalar_loss(type, dot4(W, xi, din) + W[din], y[row], &di);
            if (norms != NULL)
                norms[s + i] = (float)sqrt((double)di * (double)di * (row_sq(xi, din) + 1.0));
            if (clipping) {
                float b = cf * (inv_s != NULL ? inv_s[row] : row_inv_s(xi, din));
                di = di > b ? b : di; /* minss and maxss: no branch on the data */
                di = di < -b ? -b : di;
            }
            coef[i] = di;
        }
        size_t j = 0;
        for (; j + 4 <= din; j += 4) {
            float a[4] = {gW[j], gW[j + 1], gW[j + 2], gW[j + 3]};
            for (size_t i = 0; i < m; i++)
                for (size_t k = 0; k < 4; k++)
                    a[k] += coef[i] * rows[i][j + k];
            for (size_t k = 0; k < 4; k++)
                gW[j + k] = a[k];
        }
        for (; j < din; j++) {
            float a = gW[j];
            for (size_t i = 0; i < m; i++)
                a += coef[i] * rows[i][j];
            gW[j] = a;
        }
        float bias = gW[din];
        for (size_t i = 0; i < m; i++)
            bias += coef[i];
        gW[din] = bias;
    }
    return loss;
}

double fl_model_chunk_grad(fl_ws *ws, const float *w, const float *x, const float *y, size_t n,
                           double clip, float *g, float *norms)
{
    if (n == 0) {
        memset(g, 0, ws->n_params * sizeof *g);
        return 0.0;
    }
    if (is_dense1(ws))
        return dense1_grad(ws, w, x, y, NULL, NULL, n, clip, g, norms);
    forward(ws, w, x, n);
    double loss = loss_rows(ws, y, n, true, NULL);
    backprop_deltas(ws, w, n);
    if (clip > 0.0 || norms != NULL) {
        ghost_norms(ws, x, n);
        for (size_t i = 0; i < n; i++) {
            double nrm = sqrt(ws->norm2[i]);
            if (norms != NULL)
                norms[i] = (float)nrm;
            float cf = clip_factor(clip, nrm);
            if (cf == 1.0f)
                continue;
            for (size_t l = 1; l <= ws->n_layers; l++) {
                float *di = ws->delta[l] + i * ws->dims[l];
                for (size_t j = 0; j < ws->dims[l]; j++)
                    di[j] *= cf;
            }
        }
    }
    weight_grads(ws, x, n, g);
    return loss;
}

double fl_model_chunk_grad_rows(fl_ws *ws, const float *w, const float *x, const float *y,
                                const float *inv_s, const size_t *idx, size_t n, double clip,
                                float *g)
{
    if (n > 0 && is_dense1(ws))
        return dense1_grad(ws, w, x, y, inv_s, idx, n, clip, g, NULL);
    size_t d = ws->dims[0];
    for (size_t i = 0; i < n; i++) {
        memcpy(ws->xg + i * d, x + idx[i] * d, d * sizeof(float));
        ws->yg[i] = y[idx[i]];
    }
    return fl_model_chunk_grad(ws, w, ws->xg, ws->yg, n, clip, g, NULL);
}

/* Chunks of max_rows rows; g accumulates in chunk order. */
static double grad_chunks(const fl_model_spec *m, const float *w, const float *x, const float *y,
                          size_t n, double clip, fl_ws *ws, float *g, float *norms)
{
    (void)m;
    size_t R = ws->max_rows, P = ws->n_params, d = ws->dims[0];
    if (n <= R)
        return fl_model_chunk_grad(ws, w, x, y, n, clip, g, norms);
    double loss = fl_model_chunk_grad(ws, w, x, y, R, clip, g, norms);
    for (size_t s = R; s < n; s += R) {
        size_t c = n - s < R ? n - s : R;
        loss += fl_model_chunk_grad(ws, w, x + s * d, y + s, c, clip, ws->gtmp,
                                    norms == NULL ? NULL : norms + s);
        fl_vadd(g, ws->gtmp, P);
    }
    return loss;
}

double fl_model_grad_sum(const fl_model_spec *m, const float *w, const float *x, const float *y,
                         size_t n, fl_ws *ws, float *g)
{
    return grad_chunks(m, w, x, y, n, 0.0, ws, g, NULL);
}

double fl_model_clipped_grad_sum(const fl_model_spec *m, const float *w, const float *x,
                                 const float *y, size_t n, double clip, fl_ws *ws, float *g,
                                 float *norms)
{
    return grad_chunks(m, w, x, y, n, clip, ws, g, norms);
}

void fl_model_eval(const fl_model_spec *m, const float *w, const float *x, const float *y, size_t n,
                   fl_ws *ws, fl_eval *e)
{
    (void)m;
    size_t R = ws->max_rows, d = ws->dims[0];
    for (size_t s = 0; s < n; s += R) {
        size_t c = n - s < R ? n - s : R;
        forward(ws, w, x + s * d, c);
        e->loss_sum += loss_rows(ws, y + s, c, false, e);
    }
    e->n += n;
}

/* ---- knowledge distillation (AdaPeD) ---- */

/* The outputs (logits) of a one-layer model at row x: out[c] = W_c . x + b_c in double. */
static void kd_logits(const float *w, const float *x, size_t d, size_t n_out, double *out)
{
    for (size_t c = 0; c < n_out; c++) {
        double s = (double)w[n_out * d + c];
        const float *wc = w + c * d;
        for (size_t j = 0; j < d; j++)
            s += (double)wc[j] * (double)x[j];
        out[c] = s;
    }
}

/* log softmax of u (n entries) into lp. */
static void kd_log_softmax(const double *u, size_t n, double *lp)
{
    double mx = u[0];
    for (size_t c = 1; c < n; c++)
        mx = u[c] > mx ? u[c] : mx;
    double s = 0.0;
    for (size_t c = 0; c < n; c++)
        s += exp(u[c] - mx);
    double lse = mx + log(s);
    for (size_t c = 0; c < n; c++)
        lp[c] = u[c] - lse;
}

/* g (n_out x d weights, then n_out biases) += coef[c] * (x, 1) for each output c. */
static void kd_add_outer(double *g, const double *coef, const float *x, size_t d, size_t n_out)
{
    for (size_t c = 0; c < n_out; c++) {
        double *gc = g + c * d;
        for (size_t j = 0; j < d; j++)
            gc[j] += coef[c] * (double)x[j];
        g[n_out * d + c] += coef[c];
    }
}

int fl_model_kd(const fl_model_spec *m, const float *theta, const float *mu, const float *x,
                size_t n, double *kd_sum, float *g_theta, float *g_mu, dp_err *err)
{
    if (m->type != FL_MODEL_LINEAR && m->type != FL_MODEL_LOGISTIC && m->type != FL_MODEL_SOFTMAX)
        return dp_err_set(err, DP_EINVAL, "model.type",
                          "distillation needs a linear, logistic or softmax model (got %s)",
                          fl_model_type_name(m->type));
    size_t d = m->d_in, n_out = m->type == FL_MODEL_SOFTMAX ? m->n_classes : 1;
    size_t p = n_out * (d + 1);
    double *buf = dp_calloc(4 * n_out + 2 * p, sizeof(double));
    if (buf == NULL)
        return dp_err_set(err, DP_ENOMEM, NULL, "out of memory");
    double *v = buf, *u = v + n_out, *cv = u + n_out, *cu = cv + n_out;
    double *gt = cu + n_out, *gm = gt + p;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float *xi = x + i * d;
        kd_logits(theta, xi, d, n_out, v);
        kd_logits(mu, xi, d, n_out, u);
        double kl;
        if (m->type == FL_MODEL_LINEAR) { /* unit-variance Gaussians: (u - v)^2 / 2 */
            kl = 0.5 * (u[0] - v[0]) * (u[0] - v[0]);
            cv[0] = v[0] - u[0];
            cu[0] = u[0] - v[0];
        } else if (m->type == FL_MODEL_LOGISTIC) {
            double pp = 1.0 / (1.0 + exp(-u[0])), q = 1.0 / (1.0 + exp(-v[0]));
            /* log p - log q = softplus(-v) - softplus(-u); likewise for 1 - p, 1 - q */
            double a = softplus(-v[0]) - softplus(-u[0]), b = softplus(v[0]) - softplus(u[0]);
            kl = pp * a + (1.0 - pp) * b;
            cv[0] = q - pp;
            cu[0] = pp * (1.0 - pp) * (u[0] - v[0]);
        } else { /* u, v become log p, log q */
            kd_log_softmax(u, n_out, u);
            kd_log_softmax(v, n_out, v);
            kl = 0.0;
            for (size_t c = 0; c < n_out; c++)
                kl += exp(u[c]) * (u[c] - v[c]);
            for (size_t c = 0; c < n_out; c++) {
                double pc = exp(u[c]);
                cv[c] = exp(v[c]) - pc;
                cu[c] = pc * (u[c] - v[c] - kl);
            }
        }
        total += kl;
        if (g_theta != NULL)
            kd_add_outer(gt, cv, xi, d, n_out);
        if (g_mu != NULL)
            kd_add_outer(gm, cu, xi, d, n_out);
    }
    for (size_t j = 0; j < p; j++) {
        if (g_theta != NULL)
            g_theta[j] = (float)gt[j];
        if (g_mu != NULL)
            g_mu[j] = (float)gm[j];
    }
    dp_free(buf);
    *kd_sum = total;
    return DP_OK;
}
