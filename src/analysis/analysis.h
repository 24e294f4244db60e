/* analysis.h: per-head evidence, computed and returned: pattern scores of attention maps, head
 * classes and the attention snapshots of a run.
 *
 * Owns: the pattern and class definitions (docs/model.md), Snapshots (maps, scores and classes at
 * each snapshot step).
 * Must not know: the results file (results_layout.c writes what these return), printing (the caller
 * prints the end-of-run table: head_table.c), the training loop, the model's evaluation.
 * Ablations, gate-gradient importance and pruning are the head study's (ablation.h,
 * headstudy.h). */
#ifndef ANALYSIS_H
#define ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

enum { PATTERN_PREV, PATTERN_SELF, PATTERN_FIRST, PATTERN_INDUCTION, PATTERN_DUPLICATE, N_PATTERNS };
enum { CLASS_MIXED = N_PATTERNS, N_CLASSES }; /* a class is a pattern index, or CLASS_MIXED */
extern const char *const analysis_pattern_names[N_PATTERNS];

/* scores[pattern * L * H + l * H + h] for maps (L, H, P, T, T) of probes tokens (P, T):
 * pooled means over all qualifying (probe, query) pairs, as docs/model.md defines them. */
void analysis_pattern_scores(double *scores, const float *maps, const int *tokens, int L, int H, int P,
                             int T);
/* The pattern whose score exceeds 0.5 (the highest if several), else CLASS_MIXED; the head's
 * scores are scores_of_head[k * stride] for pattern k. */
int analysis_classify(const double *scores_of_head, int stride);
/* "prev", "self", "first", "induction", "duplicate" or "mixed" (the names the results file stores). */
const char *analysis_class_name(int cls);
/* "previous-token", ..., for sentences. */
const char *analysis_class_description(int cls);

/* Where a head's pattern holds when it holds only at some rows: its scores over the task's
 * marked query rows alone (Probes.marked: two_source's "=" queries, induction's repeats), the five
 * patterns (induction and duplicate over the marked rows whose token occurred before) and one
 * more, "k back": the mean weight on the key a fixed k >= 2 positions back, the best k. */
typedef struct {
    int top;      /* the highest: a pattern index, or MARKED_BACK */
    int offset;   /* top MARKED_BACK: k */
    double score; /* top's score */
    int cls;      /* top when score > 0.5, else CLASS_MIXED */
} MarkedScore;
enum { MARKED_BACK = N_CLASSES };
/* out (L, H) for maps (L, H, P, T, T) of probe tokens (P, T) and their marked rows (P, T). */
void analysis_marked_scores(MarkedScore *out, const float *maps, const int *tokens,
                            const unsigned char *marked, int L, int H, int P, int T);
/* A marked score's class, or its top (which = 0 / 1), by name: "prev", "2 back", "mixed". */
void analysis_marked_name(const MarkedScore *m, int which, char *buf, size_t size);

/* The attention snapshots of a run: at each snapshot step the maps of the probes, their pattern
 * scores, and the classes of the latest one (computed once per snapshot). */
typedef struct {
    int n_layer, n_head, P, T;
    const int *tokens;           /* (P, T) the probes (not owned) */
    const unsigned char *marked; /* (P, T) their marked rows, or NULL (not owned) */
    size_t map_floats;           /* L * H * P * T * T, one snapshot */
    int n, cap;
    int64_t *steps;             /* (S) */
    float *maps;                /* (S, L, H, P, T, T) */
    double *scores;             /* (S, N_PATTERNS, L, H) */
    int *classes;               /* (L, H) of the last snapshot */
    MarkedScore *marked_scores; /* (L, H) of the last snapshot, with marked rows; else NULL */
} Snapshots;

/* marked: the probes' marked rows (P, T), or NULL (the task marks every row: no marked scores). */
void snapshots_init(Snapshots *s, int n_layer, int n_head, const int *tokens, const unsigned char *marked,
                    int P, int T);
void snapshots_free(Snapshots *s);
/* The bytes n snapshots of (n_layer, n_head, P, T) maps fill (maps, steps, scores) as
 * snapshots_add stores them: what a memory estimate reads. (The capacity it allocates doubles
 * from 16, but pages never written take no memory.) */
size_t snapshots_bytes(int n_layer, int n_head, int P, int T, int64_t n);
/* Add the maps (L, H, P, T, T) of step; its scores and classes are computed from them. */
void snapshots_add(Snapshots *s, int64_t step, const float *maps);
/* The scores (N_PATTERNS, L, H) of the last snapshot (there must be one). */
const double *snapshots_final_scores(const Snapshots *s);

#endif
