/* test_analysis.c: the per-head analysis of src/analysis/analysis.c against answers known by construction.
 * suite: analysis (pattern scores, snapshots, importance)
 *
 *  1. analysis_pattern_scores on hand-made maps: pure previous-token, self, first-token and
 *     uniform causal maps; induction on a repeated sequence; several earlier occurrences of a
 *     token (summed); an adjacent repeat; pooling over probes with different numbers of repeat
 *     positions (a pooled mean, not a mean of per-probe means); the (pattern, layer, head) layout.
 *  2. analysis_classify: the highest score above 0.5 wins, none above -> "mixed", exactly 0.5 is
 *     not above; the stride walks a (pattern, L*H) block.
 *  3. A one-layer model whose weights are set by hand so that head 0 attends to the previous token
 *     and head 1 to itself: model_forward + evaluate_collect_maps + scores find and classify them;
 *     and evaluate_collect_maps's (L, B, H, T, T) -> (L, H, B, T, T) reordering, map by map.
 *  4. Ablation: gating off a head whose rows of W_o are zero changes the loss by exactly 0 (and its
 *     gate gradient is exactly 0), while gating off a live head does change it.
 *  5. Importance: the gate gradients (Interventions.gate_grad) from model_backward against a finite difference of the loss in the
 *     gate (forward only, gate = 1 ± h), within 1e-5 + 1e-2 relative, on an induction-task batch;
 *     the importance (ablation_gate_grads) and evaluate_loss over the held-out batches against the
 *     same sums done by hand, batch by batch (bit for bit), and the per-layer L2 normalisation.
 *  6. Snapshots: each snapshot's scores are analysis_pattern_scores of its maps, the classes are
 *     those of the last snapshot (computed once, when it is added), the maps are kept verbatim.
 *  7. Interventions (model.h): every head patched with its own hook_z gives the plain loss bit for
 *     bit, another run's hook_z reaches W_o and moves the loss; a per-token fill of identical rows
 *     = the per-head fill; gate gradients through a per-token fill against finite differences; a
 *     forward from a saved HeadState = the whole forward; the hook points' places and shapes; and
 *     the forward/backward pairings the model refuses (a failed CHECK, in a child process).
 *
 * Hand-made maps hold values like 1/(i+1) rounded to float32, so expected scores derived in exact
 * arithmetic are compared within 1e-6 (the rounding is ~6e-8 relative). Ends with
 * "N passed, M failed" and exits 1 if any check failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "analysis/analysis.h"
#include "analysis/evaluate.h"
#include "kernels/kernels.h"
#include "config/config.h"
#include "model/model.h"
#include "analysis/prune.h"
#include "data/tasks.h"
#include "testlib.h"

#define SCORE_TOL 1e-6

static const char *const score_names[N_PATTERNS] = {"prev", "self", "first", "induction", "duplicate"};

/* scores of head lh (of LH) against expected[N_PATTERNS] (NAN: not checked), as one check. */
static void expect_scores(const char *name, const double *scores, int lh, int LH, const double *expected) {
    char details[512] = "";
    int ok = 1;
    for (int k = 0; k < N_PATTERNS; k++) {
        double got = scores[k * LH + lh];
        if (isnan(expected[k])) continue;
        if (!(fabs(got - expected[k]) <= SCORE_TOL)) {
            ok = 0;
            size_t used = strlen(details);
            snprintf(details + used, sizeof details - used, "%s%s = %.9g, expected %.9g", used ? "; " : "",
                     score_names[k], got, expected[k]);
        }
    }
    test_check(name, ok, "%s", details);
}

/* A map (T, T) of zeros with the given row i set: row i gets weight w at key j. */
static void put(float *map, int T, int i, int j, float w) { map[(size_t)i * T + j] = w; }

/* ---- 1. pattern scores on hand-made maps ---- */

static void test_simple_maps(void) {
    enum { T = 7 };
    int tokens[T] = {0, 1, 2, 3, 4, 5, 6}; /* no repeats: induction and duplicate have no positions */
    float map[T * T];
    double s[N_PATTERNS];

    /* previous token: row i on i-1, row 0 on 0. Only i = 1 has i-1 = 0, so first = 1/(T-1). */
    memset(map, 0, sizeof map);
    put(map, T, 0, 0, 1.0f);
    for (int i = 1; i < T; i++) put(map, T, i, i - 1, 1.0f);
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: pure previous-token map: prev 1, self 0, first 1/(T-1), no repeats -> 0", s, 0, 1,
                  (double[]){1.0, 0.0, 1.0 / (T - 1), 0.0, 0.0});

    /* self: row i on i */
    memset(map, 0, sizeof map);
    for (int i = 0; i < T; i++) put(map, T, i, i, 1.0f);
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: pure self map: prev 0, self 1, first 0", s, 0, 1,
                  (double[]){0.0, 1.0, 0.0, 0.0, 0.0});

    /* first token: row i on 0. Row 1's key 0 is also its previous token: prev = 1/(T-1). */
    memset(map, 0, sizeof map);
    for (int i = 0; i < T; i++) put(map, T, i, 0, 1.0f);
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: first-token map: prev 1/(T-1), self 0, first 1", s, 0, 1,
                  (double[]){1.0 / (T - 1), 0.0, 1.0, 0.0, 0.0});
}

/* Uniform causal map, T = 8: row i is 1/(i+1) on j <= i, so prev = self = first = the mean over
 * i = 1..7 of 1/(i+1) = (1/2 + 1/3 + ... + 1/8) / 7 = (H_8 - 1) / 7 = (761/280 - 1) / 7 = 481/1960. */
static void test_uniform_map(void) {
    enum { T = 8 };
    int tokens[T] = {0, 1, 2, 3, 4, 5, 6, 7};
    float map[T * T] = {0};
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++) put(map, T, i, j, 1.0f / (float)(i + 1));
    double s[N_PATTERNS], u = 481.0 / 1960.0;
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: uniform causal map: prev = self = first = 481/1960", s, 0, 1,
                  (double[]){u, u, u, 0.0, 0.0});
}

/* [BOS, a b c d, a b c d]: the repeat at i (i = 5..8) saw its token at j = i - 4 and puts 1 on
 * j + 1 = i - 3. The first half (i = 1..4) attends to BOS. So induction = 1, duplicate = 0,
 * first = 4/8, prev = 1/8 (only row 1, whose key 0 is both first and previous), self = 0. */
static void test_induction_map(void) {
    enum { T = 9 };
    int tokens[T] = {0, 11, 12, 13, 14, 11, 12, 13, 14};
    float map[T * T] = {0};
    for (int i = 0; i <= 4; i++) put(map, T, i, 0, 1.0f);
    for (int i = 5; i < T; i++) put(map, T, i, i - 3, 1.0f);
    double s[N_PATTERNS];
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: induction map on [BOS, a b c d, a b c d]: induction 1, duplicate 0", s, 0, 1,
                  (double[]){1.0 / 8, 0.0, 4.0 / 8, 1.0, 0.0});

    /* the same sequence, repeats attending to the earlier occurrence itself: duplicate 1 */
    memset(map, 0, sizeof map);
    for (int i = 0; i <= 4; i++) put(map, T, i, i, 1.0f);
    for (int i = 5; i < T; i++) put(map, T, i, i - 4, 1.0f);
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: duplicate-token map on [BOS, a b c d, a b c d]: induction 0, duplicate 1", s, 0, 1,
                  (double[]){0.0, 4.0 / 8, 0.0, 0.0, 1.0});
}

/* Tokens [0, 1, 2, 1, 2, 1]: repeat positions 3 (earlier 1), 4 (earlier 2), 5 (earlier 1 and 3).
 *   row 3: 0.5 on 2 (= 1+1), 0.25 on 1, 0.25 on 3         induction 0.5, duplicate 0.25
 *   row 4: 1 on 3 (= 2+1)                                   induction 1,   duplicate 0
 *   row 5: 0.3 on 2, 0.3 on 4 (= 1+1, 3+1), 0.2 on 1,       induction 0.6, duplicate 0.3
 *          0.1 on 3, 0.1 on 5                               (summed over both occurrences)
 * induction = (0.5 + 1 + 0.6) / 3 = 0.7, duplicate = (0.25 + 0 + 0.3) / 3 = 0.55 / 3. */
static void test_several_occurrences(void) {
    enum { T = 6 };
    int tokens[T] = {0, 1, 2, 1, 2, 1};
    float map[T * T] = {0};
    for (int i = 0; i < 3; i++) put(map, T, i, i, 1.0f);
    put(map, T, 3, 2, 0.5f), put(map, T, 3, 1, 0.25f), put(map, T, 3, 3, 0.25f);
    put(map, T, 4, 3, 1.0f);
    put(map, T, 5, 2, 0.3f), put(map, T, 5, 4, 0.3f), put(map, T, 5, 1, 0.2f), put(map, T, 5, 3, 0.1f),
        put(map, T, 5, 5, 0.1f);
    double s[N_PATTERNS];
    analysis_pattern_scores(s, map, tokens, 1, 1, 1, T);
    expect_scores("scores: several earlier occurrences are summed: induction 0.7, duplicate 0.55/3", s, 0, 1,
                  (double[]){NAN, NAN, NAN, 0.7, 0.55 / 3});

    /* an adjacent repeat [0, 5, 5]: at i = 2 the earlier j = 1 has j + 1 = 2 = i, so the
     * induction target is the query itself: row 2 = (0, 0.25, 0.75) gives induction 0.75 */
    enum { T3 = 3 };
    int tokens3[T3] = {0, 5, 5};
    float map3[T3 * T3] = {1, 0, 0, 0.5f, 0.5f, 0, 0, 0.25f, 0.75f};
    analysis_pattern_scores(s, map3, tokens3, 1, 1, 1, T3);
    expect_scores("scores: adjacent repeat: induction reads P[i, i], duplicate P[i, i-1]", s, 0, 1,
                  (double[]){(0.5 + 0.25) / 2, (0.5 + 0.75) / 2, 0.5 / 2, 0.75, 0.25});
}

/* Two probes of T = 6. Probe 0 [0 1 2 3 4 1] has one repeat (i = 5, earlier j = 1) and puts 1 on
 * j+1 = 2; probe 1 [0 5 6 5 6 5] has three (i = 3, 4, 5) and puts 1 on the latest earlier
 * occurrence. Pooled: induction 1/4, duplicate 3/4; a mean of per-probe means would give 1/2, 1/2.
 * Other rows attend to themselves: self = 6 of the 10 rows i >= 1 (4 in probe 0, 2 in probe 1). */
static void test_pooling(void) {
    enum { P = 2, T = 6 };
    int tokens[P * T] = {0, 1, 2, 3, 4, 1, 0, 5, 6, 5, 6, 5};
    float maps[P * T * T] = {0};
    float *m0 = maps, *m1 = maps + T * T;
    for (int i = 0; i < 5; i++) put(m0, T, i, i, 1.0f);
    put(m0, T, 5, 2, 1.0f);
    for (int i = 0; i < 3; i++) put(m1, T, i, i, 1.0f);
    put(m1, T, 3, 1, 1.0f), put(m1, T, 4, 2, 1.0f), put(m1, T, 5, 3, 1.0f);
    double s[N_PATTERNS];
    analysis_pattern_scores(s, maps, tokens, 1, 1, P, T);
    expect_scores("scores: pooled over probes with 1 and 3 repeat positions: induction 1/4, duplicate 3/4", s,
                  0, 1, (double[]){0.0, 6.0 / 10, 0.0, 0.25, 0.75});
}

/* Maps (L=2, H=3, P=2, T=5), a different kind per head (the same on both probes); scores
 * [k * L*H + l*H + h] must follow, and maps are read as (L, H, P, T, T): reading them as
 * (P, L, H, T, T) would mix the heads up. */
static void test_layout_and_classes(void) {
    enum { L = 2, H = 3, P = 2, T = 5, LH = L * H };
    int tokens[P * T] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    float maps[LH * P * T * T] = {0};
    const int kind[LH] = {0, 1, 2, 3, 0, 1}; /* 0 prev, 1 self, 2 first, 3 uniform */
    for (int lh = 0; lh < LH; lh++) {
        for (int p = 0; p < P; p++) {
            float *map = maps + ((size_t)lh * P + p) * T * T;
            for (int i = 0; i < T; i++) {
                if (kind[lh] == 3)
                    for (int j = 0; j <= i; j++) put(map, T, i, j, 1.0f / (float)(i + 1));
                else put(map, T, i, kind[lh] == 0 ? (i ? i - 1 : 0) : kind[lh] == 1 ? i : 0, 1.0f);
            }
        }
    }
    double s[N_PATTERNS * LH];
    analysis_pattern_scores(s, maps, tokens, L, H, P, T);
    /* uniform, T = 5: (1/2 + 1/3 + 1/4 + 1/5) / 4 = 77/240 */
    const double expected[4][N_PATTERNS] = {
        {1, 0, 0.25, 0, 0}, {0, 1, 0, 0, 0}, {0.25, 0, 1, 0, 0}, {77.0 / 240, 77.0 / 240, 77.0 / 240, 0, 0}};
    const char *classes[4] = {"prev", "self", "first", "mixed"};
    int ok_scores = 1, ok_classes = 1;
    char details[256] = "";
    for (int lh = 0; lh < LH; lh++) {
        for (int k = 0; k < N_PATTERNS; k++)
            if (!(fabs(s[k * LH + lh] - expected[kind[lh]][k]) <= SCORE_TOL)) {
                if (ok_scores)
                    snprintf(details, sizeof details, "layer %d head %d %s = %.9g, expected %.9g", lh / H,
                             lh % H, score_names[k], s[k * LH + lh], expected[kind[lh]][k]);
                ok_scores = 0;
            }
        ok_classes &= strcmp(analysis_class_name(analysis_classify(s + lh, LH)), classes[kind[lh]]) == 0;
    }
    test_check("scores: maps (L, H, P, T, T) -> scores (pattern, L, H) for 2 layers, 3 heads, 2 probes",
               ok_scores, "%s", details);
    test_check(
        "classify: stride L*H over the score block gives prev/self/first/mixed per head", ok_classes,
        "got %s %s %s %s %s %s", analysis_class_name(analysis_classify(s + 0, LH)),
        analysis_class_name(analysis_classify(s + 1, LH)), analysis_class_name(analysis_classify(s + 2, LH)),
        analysis_class_name(analysis_classify(s + 3, LH)), analysis_class_name(analysis_classify(s + 4, LH)),
        analysis_class_name(analysis_classify(s + 5, LH)));
}

/* ---- 2. classification ---- */

static void expect_class(const char *name, const double *scores, int stride, const char *expected) {
    const char *got = analysis_class_name(analysis_classify(scores, stride));
    test_check(name, got && strcmp(got, expected) == 0, "got '%s', expected '%s'", got ? got : "(null)",
               expected);
}

static void test_classify(void) {
    expect_class("classify: two above 0.5, the highest wins (induction 0.7 over prev 0.6)",
                 (double[]){0.6, 0.2, 0.1, 0.7, 0.3}, 1, "induction");
    expect_class("classify: none above 0.5 -> mixed", (double[]){0.4, 0.3, 0.2, 0.1, 0.45}, 1, "mixed");
    expect_class("classify: exactly 0.5 everywhere -> mixed", (double[]){0.5, 0.5, 0.5, 0.5, 0.5}, 1,
                 "mixed");
    expect_class("classify: just above 0.5 counts", (double[]){0.5, 0.0, 0.0, 0.0, nextafter(0.5, 1.0)}, 1,
                 "duplicate");
    expect_class("classify: each pattern can win (first)", (double[]){0.1, 0.2, 0.95, 0.0, 0.0}, 1, "first");
    /* stride 3: head 1 of a (pattern, 3) block */
    const double block[N_PATTERNS * 3] = {0.9, 0.1, 0.2, /* prev */ 0.0,  0.8, 0.3, /* self */
                                          0.0, 0.0, 0.4, /* first */ 0.0, 0.0, 0.1, /* induction */
                                          0.0, 0.0, 0.0 /* duplicate */};
    expect_class("classify: stride 3, head 0 -> prev", block + 0, 3, "prev");
    expect_class("classify: stride 3, head 1 -> self", block + 1, 3, "self");
    expect_class("classify: stride 3, head 2 -> mixed", block + 2, 3, "mixed");
}

/* ---- 3. a hand-built previous-token head in a real forward pass ---- */

/* One layer, D = T = 8, H = 2 heads of d_head 8. pos_emb[t] = e_t; LayerNorm of a one-hot vector
 * is (e_t - 1/8) / sqrt(7/64 + 1e-5), so gain sqrt(7/64 + 1e-5) and bias 1/8 give back z = e_t
 * (tok_emb keeps its GPT-2 init, std 0.02: a little noise on top). Then
 *   head 0:  Q_t = s e_t,  K_j = s e_{j+1}   ->  Q_t · K_j = s^2 [j = t - 1]
 *   head 1:  Q_t = s e_t,  K_j = s e_j       ->  Q_t · K_j = s^2 [j = t]
 * With s = 6 the matching score is 36 / sqrt(8) ≈ 12.7 above the others, so the matching key gets
 * e^12.7 / (e^12.7 + t) > 0.999 of the attention at every t < 8. */
static void test_handmade_prev_head(void) {
    enum { V = 10, D = 8, H = 2, DH = 8, T = 8, B = 2, E = H * DH };
    ModelShape shape = {V, D, H, DH, 1, T, H, POS_LEARNED, DH, 10000.0, 0, 0};
    Model m;
    model_init(&m, shape, B);
    model_init_weights(&m, 5);
    ParamTensors *p = &m.params;
    memset(p->pos_emb, 0, sizeof(float) * T * D);
    for (int t = 0; t < T; t++) p->pos_emb[t * D + t] = 1.0f;
    for (int i = 0; i < D; i++) p->ln_g[i] = sqrtf(7.0f / 64.0f + 1e-5f), p->ln_b[i] = 1.0f / 8.0f;
    memset(p->w_qkv, 0, sizeof(float) * D * 3 * E);
    memset(p->b_qkv, 0, sizeof(float) * 3 * E);
    const float s = 6.0f;
    for (int r = 0; r < D; r++) {
        float *w = p->w_qkv + (size_t)r * 3 * E;   /* row r of W_qkv: what z = e_r produces */
        w[0 * DH + r] = s;                         /* head 0 Q */
        if (r + 1 < DH) w[E + 0 * DH + r + 1] = s; /* head 0 K: shifted by one */
        w[1 * DH + r] = s;                         /* head 1 Q */
        w[E + 1 * DH + r] = s;                     /* head 1 K */
        w[2 * E + 0 * DH + r] = 1.0f;              /* V: identity, any values would do */
        w[2 * E + 1 * DH + r] = 1.0f;
    }
    int tokens[B * T] = {0, 3, 7, 3, 7, 3, 7, 3, /* repeats: the induction positions exist */
                         0, 1, 2, 4, 5, 6, 8, 9};
    const Interventions keep_maps = {.keep_maps = 1};
    model_forward(&m, &keep_maps, tokens, NULL, NULL, B, T);
    float *maps = test_alloc((size_t)H * B * T * T);
    evaluate_collect_maps(maps, &m);
    double scores[N_PATTERNS * H];
    analysis_pattern_scores(scores, maps, tokens, 1, H, B, T);
    const char *c0 = analysis_class_name(analysis_classify(scores + 0, H)),
               *c1 = analysis_class_name(analysis_classify(scores + 1, H));
    test_check("hand-built model: head 0 is a previous-token head (prev > 0.95, class prev)",
               scores[PATTERN_PREV * H + 0] > 0.95 && !strcmp(c0, "prev"),
               "prev = %.6f, self = %.6f, class %s", scores[PATTERN_PREV * H + 0],
               scores[PATTERN_SELF * H + 0], c0);
    test_check("hand-built model: head 1 is a self head (self > 0.95, class self)",
               scores[PATTERN_SELF * H + 1] > 0.95 && !strcmp(c1, "self"),
               "prev = %.6f, self = %.6f, class %s", scores[PATTERN_PREV * H + 1],
               scores[PATTERN_SELF * H + 1], c1);
    free(maps);
    model_free(&m);
}

/* evaluate_collect_maps reorders the forward's (L, B, H, T, T) into (L, H, B, T, T). */
static void test_collect_maps_layout(void) {
    enum { L = 2, H = 3, B = 2, T = 5 };
    ModelShape shape = {9, 6, H, 2, L, 7, H, POS_LEARNED, 2, 10000.0, 0, 0};
    Model m;
    model_init(&m, shape, 3);
    model_init_weights(&m, 6);
    Rng rng = rng_stream(6, 50, 0);
    for (size_t i = 0; i < m.n_params; i++) m.param_block[i] += (float)(0.5 * rng_normal(&rng));
    int tokens[B * T];
    for (int i = 0; i < B * T; i++) tokens[i] = (int)rng_below(&rng, 9);
    const Interventions keep_maps = {.keep_maps = 1};
    model_forward(&m, &keep_maps, tokens, NULL, NULL, B, T); /* B < max_batch, T < seq_len */
    float *maps = test_alloc((size_t)L * H * B * T * T);
    evaluate_collect_maps(maps, &m);
    long bad = 0;
    for (int l = 0; l < L; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                bad += memcmp(maps + (((size_t)l * H + h) * B + b) * T * T,
                              m.act.att_probs + (size_t)l * B * H * T * T + ((size_t)b * H + h) * T * T,
                              sizeof(float) * T * T) != 0;
    test_check(
        "collect_maps: (L, B, H, T, T) of the forward -> (L, H, B, T, T), with B < max_batch, T < seq_len",
        bad == 0, "%ld of %d (layer, batch, head) maps misplaced", bad, L * B * H);
    free(maps);
    model_free(&m);
}

/* ---- 4 and 5. ablation and importance ---- */

typedef struct {
    Model *m;
    const Interventions *iv;
    const int *tokens, *targets;
    const float *mask;
    int B, T;
} LossCtx;

/* The mean loss, summed in double from the per-position losses (less rounding noise for the FD). */
static double loss_of(void *p) {
    LossCtx *c = p;
    model_forward(c->m, c->iv, c->tokens, c->targets, c->mask, c->B, c->T);
    double total = 0.0;
    for (int n = 0; n < c->B * c->T; n++) total += (double)c->m->act.loss_weight[n] * c->m->act.losses[n];
    return total;
}

/* A forward started at layer l (the layers before it reused) after gating a layer-l head: the
 * same bits as a whole forward. */
static void check_partial_forward(Model *m, float *gates, const int *tokens, const int *targets,
                                  const float *mask, int B, int T) {
    const int L = m->shape.n_layer, H = m->shape.n_head;
    Interventions whole_iv = {.head_gate = gates};
    int same = 1;
    for (int l = L - 1; l >= 0; l--) /* last layer first, as the batched ablations do */
        for (int h = 0; h < H; h++) {
            gates[l * H + h] = 0.0f;
            float whole = model_forward(m, &whole_iv, tokens, targets, mask, B, T);
            model_forward(m, &whole_iv, tokens, targets, mask, B, T);
            gates[l * H + h] = 1.0f;
            model_forward(m, &whole_iv, tokens, targets, mask, B, T);
            for (int l2 = L - 1; l2 > l; l2--) { /* leave later layers' activations ablated */
                gates[l2 * H] = 0.0f;
                model_forward(m, &(Interventions){.head_gate = gates, .start_layer = l2}, tokens, targets,
                              mask, B, T);
                gates[l2 * H] = 1.0f;
            }
            gates[l * H + h] = 0.0f;
            float partial = model_forward(m, &(Interventions){.head_gate = gates, .start_layer = l}, tokens,
                                          targets, mask, B, T);
            gates[l * H + h] = 1.0f;
            same &= memcmp(&whole, &partial, sizeof whole) == 0;
        }
    test_check(
        "ablation: a forward started at layer l after gating a layer-l head = a whole forward, bit for bit",
        same, "a partial forward gave other bits");
}

static void test_ablation(void) {
    enum { V = 11, D = 12, H = 3, DH = 4, L = 2, T = 6, B = 2, E = H * DH };
    ModelShape shape = {V, D, H, DH, L, T, H, POS_LEARNED, DH, 10000.0, 0, 0};
    Model m;
    test_model_perturbed(&m, shape, B, 7);
    Rng rng = rng_stream(7, 52, 0);
    int tokens[B * T], targets[B * T];
    float mask[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)rng_below(&rng, V);
        targets[i] = (int)rng_below(&rng, V);
        mask[i] = i % 3 == 0 ? 0.0f : 1.0f;
    }
    /* heads (layer 0, head 1) and (layer 1, head 2) write nothing: their rows of W_o are zero */
    const int dead[2][2] = {{0, 1}, {1, 2}};
    for (int k = 0; k < 2; k++) {
        float *w_o = m.params.w_o + (size_t)dead[k][0] * E * D;
        memset(w_o + (size_t)dead[k][1] * DH * D, 0, sizeof(float) * DH * D);
    }
    float gates[L * H], gate_grad[L * H] = {0};
    for (int i = 0; i < L * H; i++) gates[i] = 1.0f;
    Interventions iv = {
        .head_gate = gates, .grads = MODEL_GRAD_PARAMS | MODEL_GRAD_GATES, .gate_grad = gate_grad};
    float base = model_forward(&m, &iv, tokens, targets, mask, B, T);
    model_zero_grad(&m);
    model_backward(&m);
    for (int k = 0; k < 2; k++) {
        int gate = dead[k][0] * H + dead[k][1];
        char name[160];
        gates[gate] = 0.0f;
        float ablated = model_forward(&m, &iv, tokens, targets, mask, B, T);
        gates[gate] = 1.0f;
        snprintf(
            name, sizeof name,
            "ablation: gating off layer %d head %d, whose W_o rows are zero, changes the loss by exactly 0",
            dead[k][0], dead[k][1]);
        test_check(name, memcmp(&ablated, &base, sizeof base) == 0,
                   "loss %.9g with the gate at 0, %.9g at 1 (diff %.3g)", ablated, base,
                   (double)ablated - base);
        snprintf(name, sizeof name,
                 "importance: the gate gradient of that head (layer %d head %d) is exactly 0", dead[k][0],
                 dead[k][1]);
        test_check(name, gate_grad[gate] == 0.0f, "gate_grad = %.9g", gate_grad[gate]);
    }
    check_partial_forward(&m, gates, tokens, targets, mask, B, T);
    /* a live head: the gate must do something */
    gates[0] = 0.0f;
    float live = model_forward(&m, &iv, tokens, targets, mask, B, T);
    gates[0] = 1.0f;
    test_check("ablation: gating off a live head (layer 0 head 0) changes the loss",
               fabs((double)live - base) > 1e-4, "loss %.9g with the gate at 0, %.9g at 1", live, base);
    float again = model_forward(&m, &iv, tokens, targets, mask, B, T);
    test_check("ablation: restoring the gate restores the loss bit for bit",
               memcmp(&again, &base, sizeof base) == 0, "loss %.9g after restoring, %.9g before", again,
               base);
    model_free(&m);
}

/* Gate gradients on a held-out batch of the induction task against the fourth-order central
 * difference of the loss in the gate, h = 2^-6 (1 ± h and 1 ± 2h are exact; see test_fd and the
 * step discussion in test_kernels.c). FD noise there is ~1e-5 absolute; gate gradients are ~1e-2. */
/* A tiny induction task (2 layers of 4 heads of 4, T = 12, batches of 4); 0 if it failed (said). */
static int open_induction(Config *cfg, Task *task, int64_t seed, int eval_batches) {
    config_defaults(cfg);
    cfg->task = TASK_INDUCTION;
    cfg->vocab_size = 16, cfg->d_model = 16, cfg->n_head = 4, cfg->d_head = 4, cfg->n_layer = 2,
    cfg->seq_len = 12;
    cfg->batch_size = 4, cfg->min_period = 2, cfg->max_period = 4, cfg->seed = seed,
    cfg->eval_batches = eval_batches;
    UserError err;
    if (config_resolve(cfg, &err) == ERR_OK && task_open(task, cfg, &err) == ERR_OK) return 1;
    test_check("importance: open the induction task", 0, "%s", err.text);
    return 0;
}

static void test_importance(void) {
    Config cfg;
    Task task;
    if (!open_induction(&cfg, &task, 3, 4)) return;
    Batch batch;
    batch_alloc(&batch, cfg.batch_size, cfg.seq_len);
    task_eval_batch(&task, &batch, 0);
    Model m;
    test_model_perturbed(&m, model_shape_from_config(&cfg), cfg.batch_size, 8);
    int LH = cfg.n_layer * cfg.n_head;
    float *grad = test_alloc(LH), *gates = test_alloc(LH);
    for (int i = 0; i < LH; i++) gates[i] = 1.0f;
    Interventions iv = {.head_gate = gates, .grads = MODEL_GRAD_GATES, .gate_grad = grad};
    LossCtx c = {&m, &iv, batch.inputs, batch.targets, batch.mask, batch.B, batch.T};
    loss_of(&c);
    model_backward(&m);
    TestCompare cmp = test_compare_start(1e-5, 1e-2);
#ifdef _OPENMP
    /* many tiny forwards: at one thread (spinning OpenMP workers on a busy machine made them ~100x
     * slower); the gradient above came from the default thread count */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    for (int i = 0; i < LH; i++) {
        double fd = test_fd(loss_of, &c, &gates[i], 1.0f / 64.0f);
        test_compare(&cmp, grad[i], fd, "gate_grad", i);
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    test_compare_report(
        "importance: gate_grad = finite difference of the loss in each gate (induction batch, 8 heads)",
        &cmp);
    int all_one = 1;
    for (int i = 0; i < LH; i++) all_one &= gates[i] == 1.0f;
    test_check("importance: the finite differences leave every gate at exactly 1", all_one,
               "a gate was not restored");
    free(grad), free(gates);
    model_free(&m);
    batch_free(&batch);
    task_close(&task);
}

/* Two snapshots of hand-made maps: a previous-token head that becomes a self head, and a head
 * that stays first-token. */
static void test_snapshots(void) {
    enum { L = 1, H = 2, P = 1, T = 4 };
    const int tokens[T] = {0, 1, 2, 3};
    float maps[2][L * H * P * T * T] = {{0}};
    for (int i = 0; i < T; i++) {
        put(maps[0], T, i, i ? i - 1 : 0, 1.0f); /* snapshot 0, head 0: prev */
        put(maps[0] + T * T, T, i, 0, 1.0f);     /* snapshot 0, head 1: first */
        put(maps[1], T, i, i, 1.0f);             /* snapshot 1, head 0: self */
        put(maps[1] + T * T, T, i, 0, 1.0f);     /* snapshot 1, head 1: first */
    }
    Snapshots snap;
    snapshots_init(&snap, L, H, tokens, NULL, P, T);
    snapshots_add(&snap, 0, maps[0]);
    int after_first[H] = {snap.classes[0], snap.classes[1]};
    snapshots_add(&snap, 50, maps[1]);
    double want[2][N_PATTERNS * L * H];
    analysis_pattern_scores(want[0], maps[0], tokens, L, H, P, T);
    analysis_pattern_scores(want[1], maps[1], tokens, L, H, P, T);
    int same_scores = !memcmp(snap.scores, want, sizeof want),
        same_maps = !memcmp(snap.maps, maps, sizeof maps);
    test_check(
        "snapshots: each snapshot's scores are analysis_pattern_scores of its maps, maps kept verbatim",
        snap.n == 2 && snap.steps[0] == 0 && snap.steps[1] == 50 && same_scores && same_maps,
        "n %d, steps %lld %lld, scores %s, maps %s", snap.n, (long long)snap.steps[0],
        (long long)snap.steps[1], same_scores ? "same" : "differ", same_maps ? "same" : "differ");
    test_check("snapshots: classes are the last snapshot's (prev then self for head 0, first for head 1)",
               after_first[0] == PATTERN_PREV && after_first[1] == PATTERN_FIRST &&
                   snap.classes[0] == PATTERN_SELF && snap.classes[1] == PATTERN_FIRST &&
                   snapshots_final_scores(&snap) == snap.scores + N_PATTERNS * L * H,
               "classes %s %s after the first, %s %s after the second", analysis_class_name(after_first[0]),
               analysis_class_name(after_first[1]), analysis_class_name(snap.classes[0]),
               analysis_class_name(snap.classes[1]));
    snapshots_free(&snap);
}

/* evaluate_loss through the held-out Evaluator (3 batches), and the run's importance (the head
 * study's ablation_gate_grads at every gate 1 over every held-out batch, then
 * prune_normalize_importance), against the same sums done by hand with whole forwards and
 * backwards. */
static void test_importance_evaluator(void) {
    Config cfg;
    Task task;
    if (!open_induction(&cfg, &task, 5, 3)) return;
    Model m;
    test_model_perturbed(&m, model_shape_from_config(&cfg), cfg.batch_size, 9);
    enum { LH = 8 };
    double want[LH] = {0}, want_norm[LH], want_loss = 0.0, got[LH], got_norm[LH];
    Batch batch;
    batch_alloc(&batch, cfg.batch_size, cfg.seq_len);
    float gates[LH], gate_grad[LH];
    for (int i = 0; i < LH; i++) gates[i] = 1.0f;
    Interventions iv = {
        .head_gate = gates, .grads = MODEL_GRAD_PARAMS | MODEL_GRAD_GATES, .gate_grad = gate_grad};
    double marked[3] = {0}, scored = 0.0; /* each batch weighs by the positions it scores */
    for (int k = 0; k < 3; k++) {
        task_eval_batch(&task, &batch, k);
        for (int i = 0; i < batch.B * batch.T; i++) marked[k] += batch.mask[i];
        scored += marked[k];
    }
    for (int k = 0; k < 3; k++) {
        task_eval_batch(&task, &batch, k);
        float loss_k = model_forward(&m, &iv, batch.inputs, batch.targets, batch.mask, batch.B, batch.T);
        want_loss += (double)loss_k * marked[k];
        model_zero_grad(&m);
        memset(gate_grad, 0, sizeof gate_grad);
        model_backward(&m);
        for (int i = 0; i < LH; i++) want[i] += fabs(gate_grad[i]) * (marked[k] / scored);
    }
    want_loss /= scored;
    for (int l = 0; l < 2; l++) {
        double norm = 0.0;
        for (int h = 0; h < 4; h++) norm += want[l * 4 + h] * want[l * 4 + h];
        for (int h = 0; h < 4; h++) want_norm[l * 4 + h] = want[l * 4 + h] / sqrt(norm);
    }
    Evaluator ev;
    evaluator_heldout(&ev, &task, &cfg);
    double loss = evaluate_loss(&ev, &m, NULL);
    Ablation a;
    ablation_init(&a, &m, &task, &cfg);
    float ones[LH];
    for (int i = 0; i < LH; i++) ones[i] = 1.0f;
    ablation_gate_grads(&a, ones, ABLATE_ZERO, 0, got);
    ablation_free(&a);
    prune_normalize_importance(got, NULL, 2, 4, got_norm);
    double after = evaluate_loss(&ev, &m, NULL); /* the study leaves nothing of its gates on the model */
    test_check(
        "evaluate_loss: the held-out batches' losses weighted by the positions each scores, bit for bit",
        loss == want_loss, "%.17g, by hand %.17g", loss, want_loss);
    test_check("importance: |dL/dgate| over the held-out batches weighted as the loss, bit for bit; the loss "
               "after it unchanged",
               !memcmp(got, want, sizeof want) && !memcmp(&after, &loss, sizeof loss),
               "head 0: %.17g, by hand %.17g", got[0], want[0]);
    int close = 1;
    for (int i = 0; i < LH; i++) close &= fabs(got_norm[i] - want_norm[i]) <= 1e-15;
    test_check("prune_normalize_importance: divided by each layer's L2 norm", close,
               "head 0: %.17g, expected %.17g", got_norm[0], want_norm[0]);
    evaluator_free(&ev);
    batch_free(&batch);
    model_free(&m);
    task_close(&task);
}

/* ---- 7. interventions: fills, starts, hook points, and the pairings the model refuses ---- */

typedef struct {
    Model *m;
    const Interventions *iv;
    const Batch *b;
} Pairing;

static void backward(void *p) { model_backward(p); }

/* Whether the backward after this forward is refused. The forward runs here, the backward in the
 * child, whose CHECK fires before any OpenMP region (a child of a process with OpenMP threads
 * must not start one). */
static int backward_refused(const Pairing *c) {
    model_forward(c->m, c->iv, c->b->inputs, c->b->targets, c->b->mask, c->b->B, c->b->T);
    return test_aborts(backward, c->m);
}

static void test_interventions(void) {
    Config cfg;
    Task task;
    if (!open_induction(&cfg, &task, 4, 2)) return;
    Model m;
    test_model_perturbed(&m, model_shape_from_config(&cfg), cfg.batch_size, 10);
    const int L = cfg.n_layer, H = cfg.n_head, LH = L * H, E = H * cfg.d_head;
    Batch a, b;
    batch_alloc(&a, cfg.batch_size, cfg.seq_len);
    batch_alloc(&b, cfg.batch_size, cfg.seq_len);
    task_eval_batch(&task, &a, 0);
    task_eval_batch(&task, &b, 1);
    const size_t BTE = (size_t)a.B * a.T * E;
    float *z_a = test_alloc(L * BTE), *z_b = test_alloc(L * BTE), *gates = test_alloc(LH),
          *grad = test_alloc(LH);
    /* each run's hook_z, layer by layer */
    model_forward(&m, NULL, b.inputs, b.targets, b.mask, b.B, b.T);
    for (int l = 0; l < L; l++) memcpy(z_b + l * BTE, model_hook(&m, HOOK_Z, l), sizeof(float) * BTE);
    float plain = model_forward(&m, NULL, a.inputs, a.targets, a.mask, a.B, a.T);
    for (int l = 0; l < L; l++) memcpy(z_a + l * BTE, model_hook(&m, HOOK_Z, l), sizeof(float) * BTE);

    int hooks_ok = model_hook(&m, HOOK_HEAD_MIX, 0) == model_hook(&m, HOOK_Z, 0) &&
                   model_hook(&m, HOOK_RESID_POST, 0) == model_hook(&m, HOOK_RESID_PRE, 1) &&
                   /* maps not kept: written only where the attention's backward reads them (small T here) */
                   (model_hook(&m, HOOK_PATTERN, 0) != NULL) == attention_reads_maps(cfg.d_head) &&
                   model_hook_floats(&m, HOOK_PATTERN, a.B, a.T) == (size_t)a.B * H * a.T * a.T &&
                   !strcmp(model_hook_name(HOOK_Z), "blocks.{l}.attn.hook_z");
    test_check("hooks: resid_post of layer l is resid_pre of l+1; head_mix is z with every gate 1; no "
               "pattern of thin "
               "heads unless kept",
               hooks_ok, "a hook point is not where docs/model.md puts it");

    /* every head patched with the run's own activations: the same bits */
    for (int i = 0; i < LH; i++) gates[i] = 0.0f;
    Interventions self = {.head_gate = gates, .fill = {HEAD_FILL_PER_TOKEN, z_a}};
    float patched = model_forward(&m, &self, a.inputs, a.targets, a.mask, a.B, a.T);
    test_check(
        "patching: every head's output replaced by its own hook_z (gate 0) gives the plain loss, bit for bit",
        !memcmp(&patched, &plain, sizeof plain), "%.9g vs %.9g", patched, plain);
    /* another run's activations in layer 1 only: the loss moves, and equals W_o applied to them */
    for (int i = 0; i < LH; i++) gates[i] = i < H ? 1.0f : 0.0f;
    Interventions other = {.head_gate = gates, .fill = {HEAD_FILL_PER_TOKEN, z_b}};
    float from_b = model_forward(&m, &other, a.inputs, a.targets, a.mask, a.B, a.T);
    int head_mix_is_b = !memcmp(model_hook(&m, HOOK_HEAD_MIX, 1), z_b + BTE, sizeof(float) * BTE);
    test_check(
        "patching: layer 1's heads from another batch's run: W_o reads that run's hook_z, and the loss moves",
        head_mix_is_b && fabs((double)from_b - plain) > 1e-4, "head_mix %s, loss %.9g vs %.9g",
        head_mix_is_b ? "is the other run's" : "differs", from_b, plain);

    /* a per-token fill whose rows are all one vector = that vector as a per-head fill */
    float *mean = test_alloc(L * E), *rows = test_alloc(L * BTE);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < E; i++) mean[l * E + i] = 0.1f * (float)(i % 7) - 0.3f;
    for (int l = 0; l < L; l++)
        for (size_t n = 0; n < (size_t)a.B * a.T; n++)
            memcpy(rows + l * BTE + n * E, mean + l * E, sizeof(float) * E);
    for (int i = 0; i < LH; i++) gates[i] = i % 3 == 0 ? 0.25f : 1.0f;
    Interventions per_head = {.head_gate = gates, .fill = {HEAD_FILL_PER_HEAD, mean}};
    Interventions per_token = {.head_gate = gates, .fill = {HEAD_FILL_PER_TOKEN, rows}};
    float lh = model_forward(&m, &per_head, a.inputs, a.targets, a.mask, a.B, a.T);
    float lt = model_forward(&m, &per_token, a.inputs, a.targets, a.mask, a.B, a.T);
    test_check("fills: a per-token fill of identical rows = the per-head fill, bit for bit",
               !memcmp(&lh, &lt, sizeof lh), "%.9g vs %.9g", lt, lh);

    /* gate gradients through a per-token fill (another run's hook_z) = finite differences */
    for (int i = 0; i < LH; i++) gates[i] = 1.0f, grad[i] = 0.0f;
    other.grads = MODEL_GRAD_GATES;
    other.gate_grad = grad;
    LossCtx c = {&m, &other, a.inputs, a.targets, a.mask, a.B, a.T};
    loss_of(&c);
    model_backward(&m);
    TestCompare cmp = test_compare_start(1e-5, 1e-2);
    for (int i = 0; i < LH; i++)
        test_compare(&cmp, grad[i], test_fd(loss_of, &c, &gates[i], 1.0f / 64.0f), "gate_grad", i);
    test_compare_report("patching: d loss / d gate towards another run's activations = finite differences",
                        &cmp);

    /* a forward from a HeadState of layer 1 (saved from a gated forward) = the whole forward */
    for (int i = 0; i < LH; i++) gates[i] = i % 2 ? 0.0f : 1.0f;
    Interventions gated = {.head_gate = gates, .fill = {HEAD_FILL_PER_HEAD, mean}};
    model_forward(&m, &gated, a.inputs, a.targets, a.mask, a.B, a.T);
    size_t D = cfg.d_model, BTD = (size_t)a.B * a.T * D;
    float *resid = test_alloc(BTD), *z1 = test_alloc(BTE);
    memcpy(resid, model_hook(&m, HOOK_RESID_PRE, 1), sizeof(float) * BTD);
    memcpy(z1, model_hook(&m, HOOK_Z, 1), sizeof(float) * BTE);
    gates[H + 1] = 0.5f; /* a layer-1 gate moves */
    float whole = model_forward(&m, &gated, a.inputs, a.targets, a.mask, a.B, a.T);
    HeadState state = {.resid_pre = resid, .z = z1};
    Interventions restart = gated;
    restart.start_layer = 1;
    restart.start_state = &state;
    float restarted = model_forward(&m, &restart, a.inputs, a.targets, a.mask, a.B, a.T);
    test_check(
        "start: a forward from layer 1's HeadState = a whole forward with the same gates, bit for bit; "
        "the layers before it have no hook points",
        !memcmp(&whole, &restarted, sizeof whole) && model_hook(&m, HOOK_Z, 0) == NULL &&
            model_hook(&m, HOOK_QKV, 1) == NULL && model_hook(&m, HOOK_Z, 1) != NULL,
        "%.9g vs %.9g", restarted, whole);

    /* the pairings the model refuses */
    Interventions none = {0}, params_from_state = restart, gates_from_layer1 = restart;
    params_from_state.grads = MODEL_GRAD_PARAMS;
    params_from_state.start_layer = 0;
    gates_from_layer1.grads = MODEL_GRAD_GATES;
    gates_from_layer1.gate_grad = grad;
    Pairing refused[] = {{&m, &none, &a}, {&m, &params_from_state, &a}, {&m, &gates_from_layer1, &a}};
    int refused_all = 1;
    for (int k = 0; k < 3; k++) refused_all &= backward_refused(&refused[k]);
    Model view;
    model_init_view(&view, &m, cfg.batch_size);
    Pairing on_view = {&view, NULL, &a};
    refused_all &= backward_refused(&on_view);
    model_free(&view);
    test_check(
        "pairings: no backward after a forward that asked for no gradients, parameter gradients only after a "
        "whole forward, gate gradients only from layer 0, none on a view",
        refused_all, "a backward ran where it must not");

    /* the plan of stages follows the shape and the interventions: a training step's lists no
     * patching stage */
    char plain_plan[160] = "", qwen_plan[160] = "", patched_plan[160] = "";
    for (int i = 0; model_stage_name(&m, NULL, i); i++)
        strcat(plain_plan, model_stage_name(&m, NULL, i)), strcat(plain_plan, " ");
    ModelShape qwen = {16, 16, 4, 4, 1, 8, 2, POS_ROPE, 2, 10000.0, 1, 1}; /* GQA, rotary, gate, sink */
    Model q;
    model_init(&q, qwen, 1);
    Interventions with_patching = {.head_gate = gates};
    with_patching.input[HEAD_INPUT_K].fill = z_a, with_patching.input[HEAD_INPUT_PATTERN].fill = z_a;
    for (int i = 0; model_stage_name(&q, NULL, i); i++)
        strcat(qwen_plan, model_stage_name(&q, NULL, i)), strcat(qwen_plan, " ");
    for (int i = 0; model_stage_name(&q, &with_patching, i); i++)
        strcat(patched_plan, model_stage_name(&q, &with_patching, i)), strcat(patched_plan, " ");
    model_free(&q);
    test_check("stages: the plan of a learned-position MHA layer and of a GQA + rotary + output-gate layer, "
               "unpatched and with head gates and input fills",
               !strcmp(plain_plan, "layernorm+project attend w_o ") &&
                   !strcmp(qwen_plan, "layernorm+project rotary kv_repeat attend output_gate w_o ") &&
                   !strcmp(patched_plan, "layernorm+project rotary qkv_patch kv_repeat attend pattern_patch "
                                         "output_gate head_mix w_o "),
               "'%s', '%s' and '%s'", plain_plan, qwen_plan, patched_plan);

    free(z_a), free(z_b), free(gates), free(grad), free(mean), free(rows), free(resid), free(z1);
    model_free(&m);
    batch_free(&a);
    batch_free(&b);
    task_close(&task);
}

int main(void) {
    test_simple_maps();
    test_uniform_map();
    test_induction_map();
    test_several_occurrences();
    test_pooling();
    test_layout_and_classes();
    test_classify();
    test_handmade_prev_head();
    test_collect_maps_layout();
    test_ablation();
    test_importance();
    test_importance_evaluator();
    test_snapshots();
    test_interventions();
    return test_finish();
}
