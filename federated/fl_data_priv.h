/*
 * fl_data_priv.h: helpers shared by the fl_data sources (fl_data.c, fl_synth.c, fl_csv.c, fl_idx.c,
 * fl_partition.c). Not part of the library's interface.
 */
#ifndef DP_FEDERATED_FL_DATA_PRIV_H
#define DP_FEDERATED_FL_DATA_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

/* Fisher-Yates shuffle of a[0..n) (Knuth, TAOCP vol. 2, Sec. 3.4.2, Algorithm P) with
 * gsl_rng_uniform_int, so the order depends only on the stream. n <= 2^32. */
void fl_shuffle_u32(gsl_rng *r, uint32_t *a, size_t n);

/* k dp_malloc'd strings "0".."k-1" in a dp_malloc'd array, or NULL (out of memory). */
char **fl_numbered_names(size_t k);

/* Frees k strings and the array (NULL entries and a NULL array are fine). */
void fl_names_free(char **names, size_t k);

#endif
