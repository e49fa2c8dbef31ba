/*
 * ledger/curves.c: the cache of event costs (issue: DP-SGD charges).
 *
 * WHY. A charge's cost is its event's RDP curve on the ledger's order grid and its zCDP rho
 * (lg_item_prepare). For a trivial event that is a few microseconds; for a DP-SGD round,
 * self_composed(steps, poisson(q, gaussian(z))), every order of the grid is a series over the
 * binomial expansion of the subsampled Gaussian (Mironov, Talwar & Zhang, "Renyi Differential
 * Privacy of the Sampled Gaussian Mechanism", 2019, Sec. 3.3), hundreds of microseconds per charge.
 * A training job charges the same round event to the same silo every round, so the curve of an
 * event seen before is taken from here instead of being computed again.
 *
 * WHAT IS CACHED. Only what is a pure function of the event tree and the neighbouring relation
 * (and of the ledger's order grid, fixed at open): the per-order curve and rho, exactly as
 * acct_rdp_eval and acct_zcdp_eval returned them (copied bit for bit, so a hit is identical to a
 * fresh computation), and, per entry, the event's own epsilon at up to LG_CURVE_REFINED (delta,
 * conversion) pairs: the charge's cost_eps of an (eps, delta) rdp or pld silo, lg_refined_eps of
 * the curve (the continuous-order search with conversion "optimal"), which depends on nothing but
 * the event, the delta and the conversion (lg_cost_eps). Figures that depend on a silo (its sums,
 * its log and claims, the refinement of their composition, PLD figures) are never cached here;
 * events whose evaluation failed are not cached either (the error is computed again, with its
 * message).
 *
 * KEY. SHA-256 over a pre-order walk of the tree that writes, per node, its type and exactly the
 * parameters that type uses (doubles by their bit pattern, counts as 64-bit integers, the number
 * of children), then the relation. Two trees with the same key are the same event, whatever JSON
 * text a caller stored for them; a different spelling of the same event (a noise of -0.0, say) is
 * only a miss. A collision of SHA-256 is not a practical concern.
 *
 * SHAPE. capacity = sets x LG_CURVE_WAYS entries, set-associative: the key's first bytes choose
 * the set, and a full set evicts its least recently used entry (a stamp per entry). Lookups and
 * inserts are O(LG_CURVE_WAYS); the curves live in one array of capacity x n_orders doubles
 * allocated at open, so a full cache uses no more memory than an empty one.
 *
 * THREADS. Costs are computed on the callers' threads (HTTP workers, job workers), before
 * enqueueing, so the cache is shared by all of them: one mutex (mu) guards every field but
 * `enabled`, an atomic read without it. It is held only to find, copy or store one entry (never
 * while an event is evaluated, never with another lock of the ledger), so callers that miss
 * compute in parallel; two that miss on the same event both compute it and the second insert
 * finds the entry present.
 */
#include "service/ledger/internal.h"

/* One entry: an event's key and costs (its curve is in lg_curve_cache.curve at the same index). */
typedef struct lg_curve_slot {
    uint8_t key[DP_SHA256_DIGEST_BYTES];
    bool used;
    uint64_t stamp; /* clock at the last get or put: the set's smallest is evicted */
    double rho;
    struct { /* the event's own refined epsilon (lg_cost_eps) at one (delta, conv) */
        bool used;
        uint64_t delta_bits;
        int conv;
        double eps;
    } ref[LG_CURVE_REFINED]; /* filled in turn (next_ref) */
    unsigned next_ref;
    char *json; /* owned (malloc), NULL until attached: event_json_dumps of the event */
} lg_curve_slot;

struct lg_curve_cache {
    pthread_mutex_t mu;
    atomic_bool enabled;     /* false: every get misses without counting, every put is dropped */
    size_t n_sets, n_orders; /* immutable after alloc */
    uint64_t clock;          /* the stamp of the next use; guarded by mu */
    lg_curve_slot *slot;     /* n_sets * LG_CURVE_WAYS; guarded by mu */
    double *curve;           /* n_sets * LG_CURVE_WAYS * n_orders; guarded by mu */
    uint64_t hits, misses, evictions, ref_hits; /* guarded by mu */
    size_t entries;                             /* guarded by mu */
};

lg_curve_cache *lg_curve_cache_alloc(size_t capacity, size_t n_orders)
{
    if (capacity < LG_CURVE_WAYS || n_orders == 0 || n_orders > LEDGER_MAX_ORDERS)
        return NULL;
    lg_curve_cache *c = dp_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->n_sets = capacity / LG_CURVE_WAYS;
    c->n_orders = n_orders;
    atomic_init(&c->enabled, true);
    c->slot = dp_calloc(c->n_sets * LG_CURVE_WAYS, sizeof *c->slot);
    c->curve = dp_calloc(c->n_sets * LG_CURVE_WAYS * n_orders, sizeof *c->curve);
    if (c->slot == NULL || c->curve == NULL || pthread_mutex_init(&c->mu, NULL) != 0) {
        dp_free(c->curve);
        dp_free(c->slot);
        dp_free(c);
        return NULL;
    }
    return c;
}

void lg_curve_cache_free(lg_curve_cache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_destroy(&c->mu);
    for (size_t i = 0; i < c->n_sets * LG_CURVE_WAYS; i++)
        free(c->slot[i].json);
    dp_free(c->curve);
    dp_free(c->slot);
    dp_free(c);
}

void lg_curve_cache_enable(lg_curve_cache *c, bool on)
{
    atomic_store(&c->enabled, on);
}

bool lg_curve_cache_enabled(const lg_curve_cache *c)
{
    return c != NULL && atomic_load(&((lg_curve_cache *)c)->enabled);
}

/* ---- the key ---- */

static void key_u64(dp_sha256_ctx *h, uint64_t v)
{
    uint8_t b[8];
    for (size_t i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i)); /* little-endian whatever the host: a stable key */
    dp_sha256_update(h, b, sizeof b);
}

static void key_dbl(dp_sha256_ctx *h, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    key_u64(h, bits);
}

static void key_walk(dp_sha256_ctx *h, const acct_event *ev)
{
    if (ev == NULL) { /* a missing child: acct_rdp_eval refuses the tree, so it is never stored */
        key_u64(h, UINT64_MAX);
        return;
    }
    key_u64(h, (uint64_t)ev->type);
    switch (ev->type) {
        case ACCT_EV_GAUSSIAN:
        case ACCT_EV_LAPLACE:
            key_dbl(h, ev->noise_multiplier);
            return;
        case ACCT_EV_ZCDP:
            key_dbl(h, ev->rho);
            return;
        case ACCT_EV_PURE:
            key_dbl(h, ev->epsilon);
            return;
        case ACCT_EV_POISSON:
            key_dbl(h, ev->sampling_rate);
            key_walk(h, ev->child);
            return;
        case ACCT_EV_SWOR:
            key_u64(h, ev->source_size);
            key_u64(h, ev->sample_size);
            key_walk(h, ev->child);
            return;
        case ACCT_EV_SELF_COMPOSED:
            key_u64(h, ev->count);
            key_u64(h, ev->count_open);
            key_walk(h, ev->child);
            return;
        case ACCT_EV_COMPOSED:
            key_u64(h, ev->n_children);
            for (size_t i = 0; i < ev->n_children; i++)
                key_walk(h, ev->children[i]);
            return;
        case ACCT_EV_REPEAT_SELECT:
            key_u64(h, (uint64_t)ev->dist.kind);
            key_u64(h, ev->dist.k);
            key_dbl(h, ev->dist.mean);
            key_dbl(h, ev->dist.eta);
            key_dbl(h, ev->dist.gamma);
            key_walk(h, ev->child);
            return;
    }
    key_u64(h, UINT64_MAX - 1); /* an unknown type: hashed by its number alone */
}

void lg_event_key(const acct_event *ev, acct_neighboring nb, uint8_t key[DP_SHA256_DIGEST_BYTES])
{
    dp_sha256_ctx h;
    dp_sha256_init(&h);
    static const char tag[] = "dpsilo ledger event cost v1";
    dp_sha256_update(&h, tag, sizeof tag);
    key_u64(&h, (uint64_t)nb);
    key_walk(&h, ev);
    dp_sha256_final(&h, key);
}

/* ---- lookups ---- */

static size_t set_of(const lg_curve_cache *c, const uint8_t *key)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = (v << 8) | key[i];
    return (size_t)(v % c->n_sets);
}

/* The slot index of key in its set, or SIZE_MAX. c->mu held. */
static size_t find(const lg_curve_cache *c, const uint8_t *key)
{
    size_t base = set_of(c, key) * LG_CURVE_WAYS;
    for (size_t w = 0; w < LG_CURVE_WAYS; w++)
        if (c->slot[base + w].used &&
            memcmp(c->slot[base + w].key, key, DP_SHA256_DIGEST_BYTES) == 0)
            return base + w;
    return SIZE_MAX;
}

bool lg_curve_cache_get(lg_curve_cache *c, const uint8_t *key, double *rdp, double *rho)
{
    if (!lg_curve_cache_enabled(c))
        return false;
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, key);
    if (i != SIZE_MAX) {
        memcpy(rdp, c->curve + i * c->n_orders, c->n_orders * sizeof *rdp);
        *rho = c->slot[i].rho;
        c->slot[i].stamp = ++c->clock;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return i != SIZE_MAX;
}

void lg_curve_cache_put(lg_curve_cache *c, const uint8_t *key, const double *rdp, double rho)
{
    if (!lg_curve_cache_enabled(c))
        return;
    pthread_mutex_lock(&c->mu);
    if (find(c, key) == SIZE_MAX) { /* present: another thread stored the same figures first */
        size_t base = set_of(c, key) * LG_CURVE_WAYS, victim = base;
        for (size_t w = 0; w < LG_CURVE_WAYS; w++) {
            const lg_curve_slot *s = &c->slot[base + w];
            if (!s->used) {
                victim = base + w;
                break;
            }
            if (s->stamp < c->slot[victim].stamp)
                victim = base + w;
        }
        if (c->slot[victim].used)
            c->evictions++;
        else
            c->entries++;
        lg_curve_slot *s = &c->slot[victim];
        free(s->json);
        memset(s, 0, sizeof *s);
        memcpy(s->key, key, DP_SHA256_DIGEST_BYTES);
        s->used = true;
        s->stamp = ++c->clock;
        s->rho = rho;
        memcpy(c->curve + victim * c->n_orders, rdp, c->n_orders * sizeof *rdp);
    }
    pthread_mutex_unlock(&c->mu);
}

bool lg_curve_cache_get_refined(lg_curve_cache *c, const uint8_t *key, double delta,
                                acct_conversion conv, double *eps)
{
    if (!lg_curve_cache_enabled(c))
        return false;
    uint64_t bits;
    memcpy(&bits, &delta, sizeof bits);
    bool found = false;
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, key);
    for (size_t r = 0; i != SIZE_MAX && r < LG_CURVE_REFINED && !found; r++)
        if (c->slot[i].ref[r].used && c->slot[i].ref[r].delta_bits == bits &&
            c->slot[i].ref[r].conv == (int)conv) {
            *eps = c->slot[i].ref[r].eps;
            found = true;
        }
    if (found) {
        c->slot[i].stamp = ++c->clock;
        c->ref_hits++;
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

void lg_curve_cache_put_refined(lg_curve_cache *c, const uint8_t *key, double delta,
                                acct_conversion conv, double eps)
{
    if (!lg_curve_cache_enabled(c))
        return;
    uint64_t bits;
    memcpy(&bits, &delta, sizeof bits);
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, key); /* evicted since its curve was taken: nothing to attach it to */
    if (i != SIZE_MAX) {
        lg_curve_slot *s = &c->slot[i];
        size_t r = s->next_ref++ % LG_CURVE_REFINED;
        s->ref[r].used = true;
        s->ref[r].delta_bits = bits;
        s->ref[r].conv = (int)conv;
        s->ref[r].eps = eps;
    }
    pthread_mutex_unlock(&c->mu);
}

/* The event's canonical JSON (a C caller's charge: lg_item_prepare writes it for the log) is a
 * function of exactly what the key hashes: event_json_encode writes per node its type and the
 * parameters that type uses (the repeat-select distribution's fields a subset of those hashed),
 * each double by a text its bit pattern determines. An entry keeps the
 * text of the first computation, and a hit hands out a copy instead of encoding the tree again. */
char *lg_curve_cache_get_json(lg_curve_cache *c, const uint8_t *key)
{
    if (!lg_curve_cache_enabled(c))
        return NULL;
    char *out = NULL;
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, key);
    if (i != SIZE_MAX && c->slot[i].json != NULL) {
        size_t n = strlen(c->slot[i].json) + 1;
        if ((out = malloc(n)) != NULL) /* the caller frees it with free(), as jansson's text */
            memcpy(out, c->slot[i].json, n);
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

void lg_curve_cache_put_json(lg_curve_cache *c, const uint8_t *key, const char *json)
{
    if (!lg_curve_cache_enabled(c) || json == NULL)
        return;
    size_t n = strlen(json) + 1;
    char *copy = malloc(n);
    if (copy == NULL)
        return;
    memcpy(copy, json, n);
    pthread_mutex_lock(&c->mu);
    size_t i = find(c, key); /* evicted meanwhile: nothing to attach it to */
    if (i != SIZE_MAX && c->slot[i].json == NULL) {
        c->slot[i].json = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    free(copy);
}

void lg_curve_cache_stats(lg_curve_cache *c, ledger_curve_stats *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->refined_hits = c->ref_hits;
    out->entries = c->entries;
    out->capacity = c->n_sets * LG_CURVE_WAYS;
    pthread_mutex_unlock(&c->mu);
    out->enabled = lg_curve_cache_enabled(c);
}

/* ---- the public face (ledger.h) ---- */

void ledger_curve_cache_enable(ledger *l, bool on)
{
    if (l->curves != NULL)
        lg_curve_cache_enable(l->curves, on);
}

void ledger_curve_cache_stats(const ledger *l, ledger_curve_stats *out)
{
    lg_curve_cache_stats(l->curves, out);
    out->would_be_hits = atomic_load_explicit(&l->wb_hits, memory_order_relaxed);
}

/* ---- conversion tables ----
 *
 * Every epsilon of the ledger is a conversion of a per-order sum at a silo's delta (lg_loss_of)
 * and, for rdp and pld silos, its refinement (acct_rdp_epsilon_curve), whose first step is the same
 * grid conversion. Each is a minimum over the grid of a bound whose terms log1p(-1/alpha) and (log
 * delta + log alpha)/(alpha - 1) depend only on the order and the delta: an acct_conv_table
 * computes them once per (delta, conversion) instead of three transcendental functions per order
 * per conversion, with the same values bit for bit (accounting/rdp.h). Tables are made on first use
 * and kept until the ledger is freed (immutable, so a pointer handed out stays valid without the
 * lock); a ledger whose silos use more than LG_CONV_TABLES (delta, conversion) pairs converts the
 * others without one, with the same results. */
#define LG_CONV_TABLES 32

struct lg_conv_tables {
    pthread_mutex_t mu; /* guards n and the entries; held only to find or add one */
    size_t n;
    struct {
        uint64_t delta_bits;
        acct_conversion base; /* MIRONOV2017 or BALLE2020 (OPTIMAL shares BALLE2020's table) */
        acct_conv_table *t;
    } e[LG_CONV_TABLES];
    const double *orders; /* the ledger's grid (borrowed) */
    size_t n_orders;
};

lg_conv_tables *lg_conv_tables_alloc(const double *orders, size_t n_orders)
{
    lg_conv_tables *c = dp_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        dp_free(c);
        return NULL;
    }
    c->orders = orders;
    c->n_orders = n_orders;
    return c;
}

void lg_conv_tables_free(lg_conv_tables *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        acct_conv_table_free(c->e[i].t);
    pthread_mutex_destroy(&c->mu);
    dp_free(c);
}

const acct_conv_table *lg_conv_table(lg_conv_tables *c, double delta, acct_conversion conv)
{
    if (c == NULL || isnan(delta))
        return NULL;
    acct_conversion base =
        conv == ACCT_CONV_MIRONOV2017 ? ACCT_CONV_MIRONOV2017 : ACCT_CONV_BALLE2020;
    uint64_t bits;
    memcpy(&bits, &delta, sizeof bits);
    const acct_conv_table *t = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n && t == NULL; i++)
        if (c->e[i].delta_bits == bits && c->e[i].base == base)
            t = c->e[i].t;
    if (t == NULL && c->n < LG_CONV_TABLES) {
        /* NULL on a delta the conversion refuses: the caller converts without a table and gets
         * the conversion's own error */
        acct_conv_table *nt = acct_conv_table_new(c->orders, c->n_orders, delta, base, NULL);
        if (nt != NULL) {
            c->e[c->n].delta_bits = bits;
            c->e[c->n].base = base;
            c->e[c->n].t = nt;
            c->n++;
            t = nt;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return t;
}
