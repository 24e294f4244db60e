/* head_table.h: the end-of-run table of heads on the terminal: one row per head (layer, head,
 * class, top score, Δloss zeroed and mean-ablated, importance) and a count per class.
 * Owns: that table's layout. Must not know: how the numbers are computed (analysis.c, the head
 * study) or stored (results_layout.c). */
#ifndef HEAD_TABLE_H
#define HEAD_TABLE_H

#include <stdio.h>

/* scores (N_PATTERNS, L, H) of the final snapshot; classes, delta, delta_mean, importance (L, H). */
void head_table_print(FILE *out, int n_layer, int n_head, const double *scores, const int *classes,
                      const double *delta, const double *delta_mean, const double *importance);

#endif
