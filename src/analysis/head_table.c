/* head_table.c: the end-of-run table of heads (see head_table.h).
 * Must not know: how the numbers are computed or stored. */
#include "head_table.h"
#include "analysis.h"

#include <stdio.h>
#include <string.h>

/* "prev 0.98" where the class holds at the marked rows, "mixed (2 back 0.50)" where it does not. */
static void marked_cell(const MarkedScore *m, char *buf, size_t size) {
    char top[32];
    analysis_marked_name(m, 1, top, sizeof top);
    if (m->cls == CLASS_MIXED) snprintf(buf, size, "mixed (%s %.2f)", top, m->score);
    else snprintf(buf, size, "%s %.2f", top, m->score);
}

void head_table_print(FILE *out, int n_layer, int n_head, const double *scores, const int *classes,
                      const MarkedScore *marked, const double *delta, const double *delta_mean,
                      const double *importance, const HeadTableCausal *causal) {
    int L = n_layer, H = n_head, LH = L * H;
    const HeadTableCausal none = {0};
    const HeadTableCausal *c = causal ? causal : &none;
    fprintf(
        out,
        "\nlayer  head  class      top score   %s      Δloss zeroed  Δloss mean-ablated  importance%s%s%s\n",
        marked ? "at marked rows       " : "", c->copying ? "  copying" : "", c->patching ? "  patching" : "",
        c->dla ? "      DLA" : "");
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            int i = l * H + h, top = 0;
            for (int k = 1; k < N_PATTERNS; k++)
                if (scores[k * LH + i] > scores[top * LH + i]) top = k;
            char cell[64] = "";
            if (marked) marked_cell(&marked[i], cell, sizeof cell);
            fprintf(out, "%5d  %4d  %-9s  %-9s %.3f  %-*s  %+12.4f  %+18.4f  %10.4f", l, h,
                    analysis_class_name(classes[i]), analysis_pattern_names[top], scores[top * LH + i],
                    marked ? 21 : 0, cell, delta[i], delta_mean[i], importance[i]);
            if (c->copying) fprintf(out, "  %+7.3f", c->copying[i]);
            if (c->patching) fprintf(out, "  %+8.4f", c->patching[i]);
            if (c->dla) fprintf(out, "  %+7.3f", c->dla[i]);
            fputc('\n', out);
        }
    }
    static const int order[] = {PATTERN_PREV, PATTERN_INDUCTION, PATTERN_DUPLICATE,
                                PATTERN_SELF, PATTERN_FIRST,     CLASS_MIXED};
    fprintf(out, "\n");
    for (int k = 0; k < N_CLASSES; k++) {
        int count = 0;
        for (int i = 0; i < LH; i++) count += classes[i] == order[k];
        if (count) {
            const char *what = analysis_class_description(order[k]);
            fprintf(out, "%d head%s %s %s head%s\n", count, count == 1 ? "" : "s",
                    count == 1 ? (strchr("aeiou", what[0]) ? "is an" : "is a") : "are", what,
                    count == 1 ? "" : "s");
        }
    }
    if (marked)
        fprintf(out, "(at marked rows: the scores over only the queries where the task takes its loss, "
                     "two_source's \"=\" rows or induction's repeats; \"k back\": the key k positions "
                     "back. A class above holds over every query.)\n");
    fflush(out);
}
