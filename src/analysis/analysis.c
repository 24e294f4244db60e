/* analysis.c: pattern scores, classes, snapshots and head importance (see analysis.h). Computes
 * and returns; writes no file and prints nothing.
 * Must not know: the results file, printing, training. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analysis.h"
#include "base/util.h"

const char *const analysis_pattern_names[N_PATTERNS] = {"prev", "self", "first", "induction", "duplicate"};

void analysis_pattern_scores(double *scores, const float *maps, const int *tokens, int L, int H, int P,
                             int T) {
    size_t LH = (size_t)L * H;
    memset(scores, 0, sizeof(double) * N_PATTERNS * LH);
    /* positions i >= 1 count for prev/self/first; positions whose token occurred before count for
     * induction/duplicate. Both counts are the same for every head. */
    double n_positions = (double)P * (T - 1), n_repeats = 0.0;
    for (int p = 0; p < P; p++)
        for (int i = 1; i < T; i++)
            for (int j = 0; j < i; j++)
                if (tokens[p * T + j] == tokens[p * T + i]) {
                    n_repeats += 1.0;
                    break;
                }
    for (size_t lh = 0; lh < LH; lh++) {
        double sum[N_PATTERNS] = {0};
        for (int p = 0; p < P; p++) {
            const float *map = maps + (lh * P + p) * (size_t)T * T;
            const int *tok = tokens + (size_t)p * T;
            for (int i = 1; i < T; i++) {
                const float *row = map + (size_t)i * T;
                sum[PATTERN_PREV] += row[i - 1];
                sum[PATTERN_SELF] += row[i];
                sum[PATTERN_FIRST] += row[0];
                for (int j = 0; j < i; j++) {
                    if (tok[j] != tok[i]) continue;
                    sum[PATTERN_INDUCTION] += row[j + 1];
                    sum[PATTERN_DUPLICATE] += row[j];
                }
            }
        }
        for (int k = 0; k < N_PATTERNS; k++) {
            double n = k >= PATTERN_INDUCTION ? n_repeats : n_positions;
            scores[k * LH + lh] = n > 0 ? sum[k] / n : 0.0;
        }
    }
}

int analysis_classify(const double *scores_of_head, int stride) {
    int best = CLASS_MIXED;
    double best_score = 0.5;
    for (int k = 0; k < N_PATTERNS; k++) {
        double s = scores_of_head[k * stride];
        if (s > best_score) {
            best_score = s;
            best = k;
        }
    }
    return best;
}

const char *analysis_class_name(int cls) {
    CHECK(cls >= 0 && cls < N_CLASSES);
    return cls == CLASS_MIXED ? "mixed" : analysis_pattern_names[cls];
}

const char *analysis_class_description(int cls) {
    static const char *const description[N_CLASSES] = {
        [PATTERN_PREV] = "previous-token",       [PATTERN_SELF] = "self",
        [PATTERN_FIRST] = "first-token",         [PATTERN_INDUCTION] = "induction",
        [PATTERN_DUPLICATE] = "duplicate-token", [CLASS_MIXED] = "mixed",
    };
    CHECK(cls >= 0 && cls < N_CLASSES);
    return description[cls];
}

/* The sums over one head's marked rows: the five patterns, and the weight k back for every k. */
static void marked_sums(double *sum, double *back, const float *maps, const int *tokens,
                        const unsigned char *marked, int P, int T) {
    for (int p = 0; p < P; p++) {
        const float *map = maps + (size_t)p * T * T;
        const int *tok = tokens + (size_t)p * T;
        for (int i = 1; i < T; i++) {
            if (!marked[(size_t)p * T + i]) continue;
            const float *row = map + (size_t)i * T;
            sum[PATTERN_PREV] += row[i - 1];
            sum[PATTERN_SELF] += row[i];
            sum[PATTERN_FIRST] += row[0];
            for (int j = 0; j < i; j++) {
                back[i - j] += row[j];
                if (tok[j] != tok[i]) continue;
                sum[PATTERN_INDUCTION] += row[j + 1];
                sum[PATTERN_DUPLICATE] += row[j];
            }
        }
    }
}

void analysis_marked_scores(MarkedScore *out, const float *maps, const int *tokens,
                            const unsigned char *marked, int L, int H, int P, int T) {
    double n_rows = 0, n_repeats = 0;
    double *n_back = xcalloc((size_t)T, sizeof(double)), *back = xcalloc((size_t)T, sizeof(double));
    for (int p = 0; p < P; p++)
        for (int i = 1; i < T; i++) {
            if (!marked[(size_t)p * T + i]) continue;
            n_rows += 1;
            for (int k = 2; k <= i; k++) n_back[k] += 1;
            for (int j = 0; j < i; j++)
                if (tokens[p * T + j] == tokens[p * T + i]) {
                    n_repeats += 1;
                    break;
                }
        }
    for (size_t lh = 0; lh < (size_t)L * H; lh++) {
        double sum[N_PATTERNS] = {0};
        memset(back, 0, sizeof(double) * T);
        marked_sums(sum, back, maps + lh * P * (size_t)T * T, tokens, marked, P, T);
        MarkedScore m = {CLASS_MIXED, 0, 0.0, CLASS_MIXED};
        for (int k = 0; k < N_PATTERNS; k++) {
            double n = k >= PATTERN_INDUCTION ? n_repeats : n_rows, score = n > 0 ? sum[k] / n : 0.0;
            if (score > m.score) m = (MarkedScore){k, 0, score, CLASS_MIXED};
        }
        /* k back over the rows that have a key k back; only where every marked row has one */
        for (int k = 2; k < T; k++)
            if (n_back[k] == n_rows && n_rows > 0 && back[k] / n_rows > m.score)
                m = (MarkedScore){MARKED_BACK, k, back[k] / n_rows, CLASS_MIXED};
        m.cls = m.score > 0.5 ? m.top : CLASS_MIXED;
        out[lh] = m;
    }
    free(n_back);
    free(back);
}

void analysis_marked_name(const MarkedScore *m, int which, char *buf, size_t size) {
    int k = which ? m->top : m->cls;
    if (k == MARKED_BACK) snprintf(buf, size, "%d back", m->offset);
    else snprintf(buf, size, "%s", analysis_class_name(k));
}

void snapshots_init(Snapshots *s, int n_layer, int n_head, const int *tokens, const unsigned char *marked,
                    int P, int T) {
    memset(s, 0, sizeof *s);
    s->n_layer = n_layer;
    s->n_head = n_head;
    s->tokens = tokens;
    s->marked = marked;
    if (marked) s->marked_scores = xcalloc((size_t)n_layer * n_head, sizeof(MarkedScore));
    s->P = P;
    s->T = T;
    s->map_floats = (size_t)n_layer * n_head * P * T * T;
    s->classes = xcalloc((size_t)n_layer * n_head, sizeof(int));
}

void snapshots_free(Snapshots *s) {
    free(s->steps);
    free(s->maps);
    free(s->scores);
    free(s->classes);
    free(s->marked_scores);
    memset(s, 0, sizeof *s);
}

size_t snapshots_bytes(int n_layer, int n_head, int P, int T, int64_t n) {
    size_t LH = (size_t)n_layer * n_head, map_floats = LH * P * T * T;
    return (size_t)n * (sizeof(int64_t) + sizeof(float) * map_floats + sizeof(double) * N_PATTERNS * LH);
}

void snapshots_add(Snapshots *s, int64_t step, const float *maps) {
    size_t LH = (size_t)s->n_layer * s->n_head;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->steps = xrealloc(s->steps, sizeof(int64_t) * s->cap);
        s->maps = xrealloc(s->maps, sizeof(float) * s->cap * s->map_floats);
        s->scores = xrealloc(s->scores, sizeof(double) * s->cap * N_PATTERNS * LH);
    }
    int i = s->n++;
    s->steps[i] = step;
    memcpy(s->maps + (size_t)i * s->map_floats, maps, sizeof(float) * s->map_floats);
    double *scores = s->scores + (size_t)i * N_PATTERNS * LH;
    analysis_pattern_scores(scores, maps, s->tokens, s->n_layer, s->n_head, s->P, s->T);
    for (size_t lh = 0; lh < LH; lh++) s->classes[lh] = analysis_classify(scores + lh, (int)LH);
    if (s->marked)
        analysis_marked_scores(s->marked_scores, maps, s->tokens, s->marked, s->n_layer, s->n_head, s->P,
                               s->T);
}

const double *snapshots_final_scores(const Snapshots *s) {
    CHECK(s->n > 0);
    return s->scores + (size_t)(s->n - 1) * N_PATTERNS * s->n_layer * s->n_head;
}
