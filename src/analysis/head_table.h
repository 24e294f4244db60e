/* head_table.h: the end-of-run table of heads on the terminal: one row per head (layer, head,
 * class, top score, Δloss zeroed and mean-ablated, importance; the copying score, the head-output
 * patching effect and the direct logit attribution where the run has them) and a count per class.
 * Owns: that table's layout. Must not know: how the numbers are computed (analysis.c, the head
 * study) or stored (results_layout.c). */
#ifndef HEAD_TABLE_H
#define HEAD_TABLE_H

#include <stdio.h>
#include "analysis.h"

/* The causal columns, each (L, H) or NULL (no column): the OV copying score, the normalised
 * effect of patching the head's output, its direct logit attribution. */
typedef struct {
    const float *copying;
    const double *patching, *dla;
} HeadTableCausal;

/* scores (N_PATTERNS, L, H) of the final snapshot; classes, delta, delta_mean, importance (L, H);
 * marked (L, H): the scores at the task's marked rows (a column "at marked rows"), or NULL;
 * causal may be NULL. */
void head_table_print(FILE *out, int n_layer, int n_head, const double *scores, const int *classes,
                      const MarkedScore *marked, const double *delta, const double *delta_mean,
                      const double *importance, const HeadTableCausal *causal);

#endif
