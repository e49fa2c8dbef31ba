/*
 * federated/fl_model: the models a silo trains, their gradients, and record-level DP-SGD.
 *
 * Models (single precision, matrix products through a CBLAS, linked against OpenBLAS):
 *   LINEAR    f(x) = w.x + b, loss 1/2 (f - y)^2                       (regression; metric MSE)
 *   LOGISTIC  f(x) = w.x + b, loss log(1 + exp(-s f)), s = +1 if y > 0 else -1   (binary)
 *   SVM       f(x) = w.x + b, loss max(0, 1 - s f), s as above          (binary; predict sign f)
 *   SOFTMAX   f(x) = W x + b (classes outputs), softmax cross-entropy   (multiclass)
 *   MLP       dense layers with ReLU between them (hidden sizes listed), softmax cross-entropy
 * Parameters are one float vector: for each dense layer in order, W (out x in, row-major) then b
 * (out). Linear models start at zero (Liu et al., NeurIPS 2022, App. C.4); the MLP draws He-uniform
 * weights and zero biases from (seed, DP_RNG_STREAM_FL_MODEL_INIT).
 *
 * Gradients are SUMS over the rows given (not means); losses are summed too. Per-example clipping
 * never materialises per-example gradients: for a dense layer the per-example gradient of W is the
 * outer product delta_i a_i^T, whose norm is ||delta_i|| ||a_i|| (the bias adds ||delta_i||^2), so
 * the squared norms over all layers need only the per-layer activations and back-propagated
 * deltas; the clipped sum is then the same backward pass with each row's delta scaled by
 * min(1, C / ||g_i||) (one matrix product per layer). For the MLP the cross terms of a layer's
 * weight gradient are exact because each row contributes one outer product per layer.
 *
 * Determinism: results are bit-identical for the same inputs whatever the number of threads: the
 * library calls BLAS single-threaded and any parallel split of a batch uses fixed chunks summed in
 * a fixed order.
 * Thread-safety: a workspace (fl_ws) belongs to one thread; parameters passed const may be shared.
 */
#ifndef DP_FEDERATED_FL_MODEL_H
#define DP_FEDERATED_FL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dp_err.h"

#define FL_MAX_HIDDEN    8
#define FL_MAX_FEATURES  100000    /* d_in */
#define FL_MAX_WIDTH     16384     /* a hidden layer's width */
#define FL_MAX_PARAMS    100000000 /* floats in a parameter vector */
#define FL_MAX_WS_ROWS   1048576   /* a workspace's max_rows */
#define FL_MAX_WS_FLOATS 268435456 /* floats in a workspace's row buffers (1 GiB) */

typedef enum fl_model_type {
    FL_MODEL_LINEAR = 0,
    FL_MODEL_LOGISTIC,
    FL_MODEL_SVM,
    FL_MODEL_SOFTMAX,
    FL_MODEL_MLP
} fl_model_type;

typedef struct fl_model_spec {
    fl_model_type type;
    size_t d_in;                  /* features */
    size_t n_classes;             /* SOFTMAX, MLP: >= 2; ignored otherwise */
    size_t n_hidden;              /* MLP: 0..FL_MAX_HIDDEN hidden layers */
    size_t hidden[FL_MAX_HIDDEN]; /* their widths */
} fl_model_spec;

/* DP_OK, or DP_EINVAL naming the field ("model.type", "model.hidden", ...). */
int fl_model_check(const fl_model_spec *m, dp_err *err);
/* Number of floats in the parameter vector. */
size_t fl_model_n_params(const fl_model_spec *m);
/* "linear", "logistic", "svm", "softmax", "mlp"; fl_model_type_parse returns -1 if unknown. */
const char *fl_model_type_name(fl_model_type t);
int fl_model_type_parse(const char *name);
/* true for LINEAR (regression, metric MSE), false for the classifiers (metric accuracy). */
bool fl_model_is_regression(const fl_model_spec *m);

/* Writes the initial parameters (fl_model_n_params floats) for seed. */
void fl_model_init(const fl_model_spec *m, uint64_t seed, float *w);

/* Scratch space for batches of up to max_rows rows (1..FL_MAX_WS_ROWS; larger inputs are processed
 * in chunks of max_rows, summed in order). Owned by the caller: fl_ws_free (NULL is a no-op).
 * NULL with err: DP_EINVAL (model fields, "max_rows"), DP_ETOOBIG (rows x widths above
 * FL_MAX_WS_FLOATS), DP_ENOMEM. The first call pins OpenBLAS to one thread for the whole process
 * (openblas_set_num_threads(1), once): results then do not depend on BLAS's threading. */
/* Pins OpenBLAS to one thread, once per process (pthread_once). Called by fl_ws_alloc and by every
 * entry point of fl_altmin.c that reaches GSL's linear algebra (which calls OpenBLAS): results do
 * not depend on BLAS's threading, and no BLAS thread touches memory the caller later reuses. */
void fl_blas_single_thread(void);

typedef struct fl_ws fl_ws;
fl_ws *fl_ws_alloc(const fl_model_spec *m, size_t max_rows, dp_err *err);
void fl_ws_free(fl_ws *ws);
size_t fl_ws_max_rows(const fl_ws *ws);

/* fl_sgd_run on this workspace splits each step's batch over threads (1..4; default 1): chunk k of
 * max_rows rows goes to lane k mod 4, each lane sums its chunks in order, and the lanes are added
 * in order, whatever the number of threads, so the results are bit-identical for 1..4 threads.
 * Allocates threads - 1 peer workspaces (owned by ws). DP_EINVAL ("threads") or DP_ENOMEM; on
 * failure ws keeps its previous setting. */
int fl_ws_set_threads(fl_ws *ws, size_t threads, dp_err *err);

/* In the functions below m must be the spec ws was allocated for (the workspace's copy is used).
 *
 * g (n_params floats, overwritten) = sum over the n rows (x: n x d_in row-major, y: n labels) of
 * the loss gradient at w; returns the summed loss. n may exceed the workspace's max_rows: the rows
 * are then processed in chunks of max_rows whose gradients are added in order. */
double fl_model_grad_sum(const fl_model_spec *m, const float *w, const float *x, const float *y,
                         size_t n, fl_ws *ws, float *g);

/* The same with each row's gradient clipped to L2 norm <= clip first (factor
 * min(1, clip / (||g_i|| + 1e-15))), computed without per-example gradients (header comment); clip
 * <= 0 means no clipping. norms (n floats, or NULL) receives each row's unclipped gradient norm. */
double fl_model_clipped_grad_sum(const fl_model_spec *m, const float *w, const float *x,
                                 const float *y, size_t n, double clip, fl_ws *ws, float *g,
                                 float *norms);

/* Evaluation over n rows, accumulated into *e (so that several calls pool their rows). */
typedef struct fl_eval {
    double loss_sum; /* summed training loss */
    double sq_err;   /* LINEAR: summed squared error (f - y)^2 */
    double correct;  /* classifiers: rows predicted right */
    size_t n;
} fl_eval;
void fl_model_eval(const fl_model_spec *m, const float *w, const float *x, const float *y, size_t n,
                   fl_ws *ws, fl_eval *e);

/* ---- knowledge distillation (AdaPeD: Ozkara, Acharya et al., "A Statistical Framework for
 * Personalized Federated Learning and Estimation", Sec. 3.2, Eq. (11) and App. H) ----
 *
 * *kd_sum = sum over the n rows x of KL(p_mu(.|x_i) || p_theta(.|x_i)): the global model mu is the
 * teacher, temperature 1. SOFTMAX: the KL of the two softmax distributions; LOGISTIC: of the two
 * Bernoulli(sigma(f(x))); LINEAR: of two unit-variance Gaussians N(f(x), 1), (f_mu - f_theta)^2
 * / 2. With logits v = f_theta(x), u = f_mu(x), p = softmax(u), q = softmax(v) the gradients are
 * dKL/dv = q - p and dKL/du_c = p_c (log p_c - log q_c - KL) (binary: p (1 - p) (u - v); linear:
 * v - u and u - v), chained through the layer (x, 1). g_theta and g_mu (n_params floats each, or
 * NULL) receive the summed gradients in theta and in mu. Sums and logits in double. DP_EINVAL
 * ("model.type") for svm and mlp, DP_ENOMEM. */
int fl_model_kd(const fl_model_spec *m, const float *theta, const float *mu, const float *x,
                size_t n, double *kd_sum, float *g_theta, float *g_mu, dp_err *err);

/* ---- (DP-)SGD on one silo's rows ---- */

typedef struct fl_sgd_cfg {
    double lr;
    size_t steps;            /* steps to run */
    double q;                /* Poisson sampling rate in (0, 1]: each row joins a step's batch with
                                probability q, independently (what the accountant assumes) */
    double expected_batch;   /* q * n: the (noisy) gradient sum is divided by this */
    double clip;             /* > 0: per-example clipping to this L2 norm; 0: none */
    double noise_multiplier; /* Gaussian noise of std noise_multiplier * clip added to each step's
                                clipped sum; 0 = none (then clip may be 0) */
    double prox_lambda;      /* >= 0: the data-independent proximal gradient lambda (w - anchor) is
                                added after clipping and noise, never clipped */
    const float *anchor;     /* n_params floats; NULL iff prox_lambda == 0 */
    const float *x_inv_s;    /* NULL, or n floats: fl_rows_inv_s of the rows x exactly as they
                                are now (see fl_rows_inv_s); read by linear, logistic and svm */
} fl_sgd_cfg;

/* out[i] = 1 / sqrt(||x_i||^2 + 1) of the n rows of x (row-major, d wide): ||x_i||^2 summed in
 * double in a fixed order, the rest in double, rounded to float once; the linear, logistic and svm
 * kernels compute the same expression when they have no cache, so a cached copy passed as
 * fl_sgd_cfg.x_inv_s gives the same bits as none. Those models' per-example gradient is
 * r_i (x_i, 1), of norm |r_i| s_i with s_i = sqrt(||x_i||^2 + 1), so clipping it to norm c is the
 * clamp of r_i to [-c / s_i, c / s_i]; the rows of a silo do not change between its steps and
 * rounds, so the engine computes 1 / s_i once per silo (fl_federate keeps them in
 * fl_silo_data.x_train_inv_s). A stale copy (rows changed afterwards) would clip with wrong norms
 * and void the privacy guarantee: whoever changes x recomputes them (fl_federation_refresh). */
void fl_rows_inv_s(const float *x, size_t n, size_t d, float *out);

/* Runs cfg->steps steps of w <- w - lr (noisy clipped sum / expected_batch + prox) in place on the
 * rows (x, y, n). Batch membership draws from sample_seed and noise from noise_seed only (each
 * through its own dp_rng stream id: DP_RNG_STREAM_FL_SGD_SAMPLING, DP_RNG_STREAM_FL_SGD_NOISE), so
 * the same (w, rows, cfg, seeds) give the same w bit for bit. A step whose batch is empty still
 * adds its noise. A batch larger than the workspace is processed in fixed chunks of its max_rows,
 * summed in a fixed order (fl_ws_set_threads). *train_loss = summed loss over the batches' rows /
 * their count (NAN if none drawn).
 * The prox term is added after clipping and noise and never clipped (the MR-MTL objective of Liu
 * et al., "On Privacy and Personalization in Cross-Silo Federated Learning", NeurIPS 2022, Sec. 5,
 * Eq. 3): it depends on no row, only on w and the already private anchor, so it is post-processing;
 * clipping it inside each example's gradient, as that paper's code does, would also cap its pull
 * towards the anchor at large lambda.
 * Errors: DP_EINVAL naming the field (lr, steps, q, expected_batch, clip, noise_multiplier,
 * prox_lambda, anchor, y for a label that is not a class index of the model or not finite, ws for
 * a workspace of another model, model.* from fl_model_check), DP_ENOMEM. w is unchanged on error.
 */
int fl_sgd_run(const fl_model_spec *m, float *w, const float *x, const float *y, size_t n,
               const fl_sgd_cfg *cfg, uint64_t sample_seed, uint64_t noise_seed, fl_ws *ws,
               double *train_loss, dp_err *err);

/* Fills out[0..n) with independent N(0, sigma^2) float normals: eight interleaved xoshiro256++
 * generators seeded from seed, 512-layer ziggurat (fl_noise.c; vectorised with AVX2 or AVX-512
 * where the CPU has them, about 1.5 G normals/s per core with AVX-512). Deterministic by seed, with
 * the same bits on every machine whatever vector unit it has; a shorter fill is a prefix of a
 * longer one. Reentrant. Simulation-grade noise (PRNG floating point; Mironov, CCS 2012), not a
 * hardened release mechanism. */
void fl_gauss_fill(float *out, size_t n, double sigma, uint64_t seed);

#endif
