/* head_table.c: the end-of-run table of heads (see head_table.h).
 * Must not know: how the numbers are computed or stored. */
#include "head_table.h"
#include "analysis.h"

#include <string.h>

void head_table_print(FILE *out, int n_layer, int n_head, const double *scores, const int *classes,
                      const double *delta, const double *delta_mean, const double *importance,
                      const HeadTableCausal *causal) {
    int L = n_layer, H = n_head, LH = L * H;
    const HeadTableCausal none = {0};
    const HeadTableCausal *c = causal ? causal : &none;
    fprintf(
        out,
        "\nlayer  head  class      top score         Δloss zeroed  Δloss mean-ablated  importance%s%s%s\n",
        c->copying ? "  copying" : "", c->patching ? "  patching" : "", c->dla ? "      DLA" : "");
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            int i = l * H + h, top = 0;
            for (int k = 1; k < N_PATTERNS; k++)
                if (scores[k * LH + i] > scores[top * LH + i]) top = k;
            fprintf(out, "%5d  %4d  %-9s  %-9s %.3f  %+12.4f  %+18.4f  %10.4f", l, h,
                    analysis_class_name(classes[i]), analysis_pattern_names[top], scores[top * LH + i],
                    delta[i], delta_mean[i], importance[i]);
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
    fflush(out);
}
