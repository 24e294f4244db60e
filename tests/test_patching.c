/* test_patching.c: the clean/corrupted set and the metric of activation patching (src/analysis/patching.c).
 * suite: patching (clean and corrupted inputs, metric, clean and corrupted runs)
 *
 *  1. induction: the clean inputs are the run's held-out batches; each corrupted row is the clean
 *     one up to the first marked query and differs from it at every later token (inputs and
 *     targets one sequence); the positions are the marked queries after the first.
 *  2. two_source: in each group exactly one source changed and the pair token is the pair of the
 *     new sources; the positions are the "=" queries; the answers are the tokens after them.
 *  3. The metric recomputed here in double from the logits of a plain forward (log-softmax of
 *     the clean answer, the logit difference), each a mean over every position of the set; the
 *     clean and corrupted runs' stored hook tensors are those of a forward of their input, and
 *     neither keeps maps (hook_pattern: a pattern patch recomputes the map from hook_qkv); the
 *     effect is 1 at the clean metric, 0 at the corrupted one.
 *  4. Patching with a run's own values changes nothing: on the clean input, every head of a kind
 *     gated to 0 with the clean run's values as the fill gives the clean metric, effect 1 bit for
 *     bit (the pattern's P·V is the attention itself on the same Q, K and V); on the corrupted
 *     input, every gate 1 with the clean fills gives the corrupted metric bit for bit, effect 0.
 *     For grouped K/V too.
 *  5. head_patching_run at 1 and 2 threads: the same bits (settings spread over threads), path
 *     patching's included.
 *  6. A layer-1 head's Q, K, V or pattern patched by a forward from layer 1's input (a HeadState
 *     without z: the corrupted run's hook_resid_pre) = the same patch in a whole forward, bit for
 *     bit, and hook_qkv of that layer is there.
 *  7. One head of each kind, in layer 0 and 1, patched from a sparse start (only that head
 *     recomputed, its output's change through W_o added to the corrupted hook_resid_post) = the
 *     same patch in a whole forward within 1e-5; gates all 1 from it: the corrupted metrics bit
 *     for bit. Rotary + grouped K/V + output gate + sink, and the shortformer.
 * Tolerances: metrics 1e-6 relative (float logits, summed in another order). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "config/config.h"
#include "model/model.h"
#include "analysis/patch_heads.h"
#include "analysis/patching.h"
#include "data/tasks.h"
#include "testlib.h"

typedef struct {
    Config cfg;
    Task task;
    Model m;
} Setup;

/* The task and a perturbed model on s->cfg as it stands (the layout keys set) with these sizes. */
static int setup_with(Setup *s, TaskKind task, int vocab, int n_head, int n_kv_head, uint64_t seed) {
    Config *c = &s->cfg;
    c->task = task;
    c->vocab_size = vocab, c->d_model = 16, c->n_head = n_head, c->n_kv_head = n_kv_head, c->d_head = 4;
    c->n_layer = 2, c->seq_len = 17, c->batch_size = 3, c->eval_batches = 2, c->min_period = 2;
    c->max_period = 5, c->max_prefix = 2;
    c->seed = (int64_t)seed;
    UserError err;
    if (config_resolve(c, &err) != ERR_OK || task_open(&s->task, c, &err) != ERR_OK) {
        test_check("setup: open the task", 0, "%s", err.text);
        return 0;
    }
    test_model_perturbed_by(&s->m, model_shape_from_config(c), c->batch_size, seed, 61);
    return 1;
}

static int setup(Setup *s, TaskKind task, int vocab, int n_head, int n_kv_head, uint64_t seed) {
    config_defaults(&s->cfg);
    return setup_with(s, task, vocab, n_head, n_kv_head, seed);
}

static void teardown(Setup *s) {
    model_free(&s->m);
    task_close(&s->task);
}

static void test_induction_set(void) {
    Setup s;
    if (!setup(&s, TASK_INDUCTION, 16, 2, 2, 5)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 2, 3);
    const int T = ps.T;
    Batch clean;
    batch_alloc(&clean, 3, T);
    int same_clean = 1, prefix_kept = 1, rest_differs = 1, one_sequence = 1, positions_ok = 1;
    for (int c = 0; c < 2; c++) {
        task_eval_batch(&s.task, &clean, c);
        for (int b = 0; b < 3; b++) {
            const size_t row = ((size_t)c * 3 + b) * T, r = (size_t)b * T;
            const int *x = ps.tokens[PATCH_CLEAN] + row, *y = ps.tokens[PATCH_CORRUPT] + row;
            const int *ya = ps.answer[PATCH_CORRUPT] + row;
            same_clean &= !memcmp(x, clean.inputs + r, sizeof(int) * T) &&
                          !memcmp(ps.answer[PATCH_CLEAN] + row, clean.targets + r, sizeof(int) * T);
            int first = 0;
            while (clean.mask[r + first] == 0.0f) first++;
            for (int t = 0; t < T; t++) {
                if (t <= first) prefix_kept &= x[t] == y[t];
                else rest_differs &= x[t] != y[t] && y[t] >= 1 && y[t] < 16;
                if (t >= first) rest_differs &= ya[t] != ps.answer[PATCH_CLEAN][row + t];
                if (t + 1 < T) one_sequence &= ya[t] == y[t + 1];
                positions_ok &= ps.positions[row + t] == (t > first ? 1.0f : 0.0f);
            }
        }
    }
    test_check("induction: the clean inputs and answers are the held-out batches", same_clean, "differ");
    test_check("induction: the corrupted row keeps the clean one up to the first marked query", prefix_kept,
               "a token before it changed");
    test_check("induction: every later token (input and answer) is another symbol", rest_differs,
               "a token kept or out of range");
    test_check("induction: the corrupted inputs and answers are one sequence", one_sequence, "they disagree");
    test_check("induction: the positions are the marked queries after the first", positions_ok,
               "they differ");
    batch_free(&clean);
    patch_set_free(&ps);
    teardown(&s);
}

static void test_two_source_set(void) {
    Setup s;
    if (!setup(&s, TASK_TWO_SOURCE, 30, 2, 2, 7)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 1, 3);
    const int T = ps.T, S = s.task.pair_symbols;
    int one_changed = 1, pair_ok = 1, positions_ok = 1, answers_ok = 1;
    for (int b = 0; b < 3; b++) {
        const int *x = ps.tokens[PATCH_CLEAN] + (size_t)b * T, *y = ps.tokens[PATCH_CORRUPT] + (size_t)b * T;
        const int *xa = ps.answer[PATCH_CLEAN] + (size_t)b * T,
                  *ya = ps.answer[PATCH_CORRUPT] + (size_t)b * T;
        for (int t = 1; t + 1 < T; t += 4) {
            one_changed &= (x[t] != y[t]) + (x[t + 1] != y[t + 1]) == 1;
            int a = y[t] - 2, bb = y[t + 1] - 2 - S;
            if (t + 2 < T) pair_ok &= ya[t + 2] == 2 + 2 * S + a * S + bb;
        }
        for (int t = 0; t < T; t++) {
            positions_ok &= ps.positions[(size_t)b * T + t] == (x[t] == 1 ? 1.0f : 0.0f);
            if (t + 1 < T) answers_ok &= xa[t] == x[t + 1] && ya[t] == y[t + 1];
        }
    }
    test_check("two_source: exactly one source of each group changed", one_changed, "not one");
    test_check("two_source: the corrupted answer at '=' is the pair of the new sources", pair_ok,
               "it is not");
    test_check("two_source: the positions are the '=' queries", positions_ok, "they differ");
    test_check("two_source: the answers are the next tokens", answers_ok, "they are not");
    test_check("two_source: a one-answer task (logit difference)",
               ps.one_answer && patch_metric_of(&ps) == PATCH_LOGIT_DIFF, "not");
    patch_set_free(&ps);
    teardown(&s);
}

/* The two metrics of a plain forward of every chunk of one input, in double from the logits. */
static void metric_by_hand(Model *m, const PatchSet *ps, PatchInput in, double *metric) {
    const int B = ps->chunk, T = ps->T, V = m->shape.vocab_size;
    double loss = 0, diff = 0;
    for (int c = 0; c < ps->n_chunks; c++) {
        const size_t at = (size_t)c * B * T;
        model_forward(m, NULL, ps->tokens[in] + at, NULL, NULL, B, T);
        for (int n = 0; n < B * T; n++) {
            if (ps->positions[at + n] == 0.0f) continue;
            const float *z = m->act.logits + (size_t)n * V;
            double mx = z[0], sum = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
            for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
            loss += mx + log(sum) - z[ps->answer[PATCH_CLEAN][at + n]];
            diff += (double)z[ps->answer[PATCH_CLEAN][at + n]] - z[ps->answer[PATCH_CORRUPT][at + n]];
        }
    }
    metric[PATCH_LOSS] = loss / ps->n_positions;
    metric[PATCH_LOGIT_DIFF] = diff / ps->n_positions;
}

static void test_metric_and_runs(TaskKind task, int vocab, int n_kv_head) {
    Setup s;
    if (!setup(&s, task, vocab, 4, n_kv_head, 11)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 2, 3);
    PatchRuns r;
    patch_runs_init(&r, &s.m, &ps);
    const char *name = config_task_name(task);
    for (int in = 0; in < N_PATCH_INPUTS; in++) {
        double hand[N_PATCH_METRICS];
        metric_by_hand(&s.m, &ps, (PatchInput)in, hand);
        for (int k = 0; k < N_PATCH_METRICS; k++) {
            char what[160];
            snprintf(what, sizeof what, "%s, %s run: the %s is the one recomputed from its logits", name,
                     in == PATCH_CLEAN ? "clean" : "corrupted", patch_metric_names[k]);
            test_check(what, fabs(r.metric[in][k] - hand[k]) <= 1e-6 * fmax(1, fabs(hand[k])), "%.9g vs %.9g",
                       r.metric[in][k], hand[k]);
        }
        /* the kept hook tensors are a forward's of that input (chunk 1, every layer); the clean
         * run keeps no residual stream (nothing starts from it) */
        Interventions keep = {.keep_maps = 1};
        model_forward(&s.m, &keep, ps.tokens[in] + (size_t)3 * ps.T, NULL, NULL, 3, ps.T);
        int same = 1;
        const HookPoint hooks[] = {HOOK_RESID_PRE, HOOK_QKV, HOOK_Z, HOOK_RESID_POST};
        same &= !r.act[in][HOOK_PATTERN]; /* a pattern patch recomputes the map from hook_qkv */
        for (int i = 0; i < 4; i++) {
            const float *layers = patch_runs_hook(&r, (PatchInput)in, hooks[i], 1);
            if (in == PATCH_CLEAN && (hooks[i] == HOOK_RESID_PRE || hooks[i] == HOOK_RESID_POST)) {
                same &= !layers;
                continue;
            }
            for (int l = 0; l < s.m.shape.n_layer && layers; l++)
                same &= !memcmp(layers + l * r.floats[hooks[i]], model_hook(&s.m, hooks[i], l),
                                sizeof(float) * r.floats[hooks[i]]);
            same &= layers != NULL;
        }
        char what[160];
        snprintf(what, sizeof what, "%s, %s run: the kept hook tensors are its forward's, no maps among them",
                 name, in == PATCH_CLEAN ? "clean" : "corrupted");
        test_check(what, same, "they differ");
    }
    PatchMetric k = patch_metric_of(&ps);
    test_check("the effect is 1 at the clean metric and 0 at the corrupted one",
               patch_effect(&r, k, r.metric[PATCH_CLEAN][k]) == 1.0 &&
                   patch_effect(&r, k, r.metric[PATCH_CORRUPT][k]) == 0.0,
               "%g, %g", patch_effect(&r, k, r.metric[PATCH_CLEAN][k]),
               patch_effect(&r, k, r.metric[PATCH_CORRUPT][k]));
    patch_runs_free(&r);
    patch_set_free(&ps);
    teardown(&s);
}

/* The interventions of one kind with every gate `g` and the clean run's values of chunk c as fill. */
static Interventions every_head(const PatchRuns *r, int kind, const float *gates, int c) {
    Interventions iv = {0};
    if (kind == PATCH_HEAD_OUT) {
        iv.head_gate = gates;
        iv.fill = (HeadFill){HEAD_FILL_PER_TOKEN, patch_runs_hook(r, PATCH_CLEAN, HOOK_Z, c)};
        return iv;
    }
    const HeadInput in = kind == PATCH_Q   ? HEAD_INPUT_Q
                         : kind == PATCH_K ? HEAD_INPUT_K
                         : kind == PATCH_V ? HEAD_INPUT_V
                                           : HEAD_INPUT_PATTERN;
    iv.input[in] =
        (InputPatch){gates, patch_runs_hook(r, PATCH_CLEAN, HOOK_QKV, c)}; /* the pattern's: its Q and K */
    return iv;
}

static void test_own_values(int n_kv_head) {
    Setup s;
    if (!setup(&s, TASK_INDUCTION, 16, 4, n_kv_head, 13)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 2, 3);
    PatchRuns r;
    patch_runs_init(&r, &s.m, &ps);
    const PatchMetric k = patch_metric_of(&ps);
    float zeros[64] = {0}, ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    for (int kind = 0; kind < N_PATCH_KINDS; kind++) {
        double all[N_PATCH_METRICS] = {0}, none[N_PATCH_METRICS] = {0};
        for (int c = 0; c < ps.n_chunks; c++) {
            Interventions iv = every_head(&r, kind, zeros, c);
            patch_forward(&s.m, &iv, &ps, c, PATCH_CLEAN, all);
            iv = every_head(&r, kind, ones, c);
            patch_forward(&s.m, &iv, &ps, c, PATCH_CORRUPT, none);
        }
        const double e_all = patch_effect(&r, k, patch_metric_mean(&ps, all[k]));
        const double e_none = patch_effect(&r, k, patch_metric_mean(&ps, none[k]));
        char what[200];
        snprintf(what, sizeof what,
                 "H_kv %d, %s: every head patched with the clean run's own values: effect 1%s", n_kv_head,
                 patch_kind_names[kind], " exactly");
        test_check(what, e_all == 1.0, "%.12g", e_all);
        snprintf(what, sizeof what, "H_kv %d, %s: no head patched (gates 1, clean fills): effect 0 exactly",
                 n_kv_head, patch_kind_names[kind]);
        test_check(what, e_none == 0.0, "%.12g", e_none);
    }
    patch_runs_free(&r);
    patch_set_free(&ps);
    teardown(&s);
}

static void test_start_at_input(void) {
    Setup s;
    if (!setup(&s, TASK_INDUCTION, 16, 4, 2, 19)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 1, 3);
    PatchRuns r;
    patch_runs_init(&r, &s.m, &ps);
    for (int kind = PATCH_Q; kind < N_PATCH_KINDS; kind++) {
        float gates[16];
        for (int i = 0; i < 16; i++)
            gates[i] = i == (kind == PATCH_K || kind == PATCH_V ? 2 + 1 : 4 + 2) ? 0.0f : 1.0f;
        double whole[N_PATCH_METRICS] = {0}, from[N_PATCH_METRICS] = {0};
        Interventions iv = every_head(&r, kind, gates, 0);
        patch_forward(&s.m, &iv, &ps, 0, PATCH_CORRUPT, whole);
        HeadState state = {.resid_pre = patch_runs_hook(&r, PATCH_CORRUPT, HOOK_RESID_PRE, 0) +
                                        r.floats[HOOK_RESID_PRE]};
        iv.start_layer = 1;
        iv.start_state = &state;
        patch_forward(&s.m, &iv, &ps, 0, PATCH_CORRUPT, from);
        char what[160];
        snprintf(what, sizeof what,
                 "%s of a layer-1 head from layer 1's input = in a whole forward, bit for bit",
                 patch_kind_names[kind]);
        test_check(what,
                   !memcmp(whole, from, sizeof whole) && model_hook(&s.m, HOOK_QKV, 1) &&
                       !model_hook(&s.m, HOOK_QKV, 0),
                   "%.9g vs %.9g", whole[PATCH_LOGIT_DIFF], from[PATCH_LOGIT_DIFF]);
    }
    patch_runs_free(&r);
    patch_set_free(&ps);
    teardown(&s);
}

/* One head of each kind patched from a sparse start of its layer (patch_runs_state: the
 * corrupted run's hooks, only that head recomputed) = the same patch in a whole forward, the
 * metrics within 1e-5 relative; with every gate 1 the corrupted metric bit for bit. Layer 0 and
 * 1, in a layout with rotary, grouped K/V, an output gate and a sink, and the shortformer's. */
static void test_sparse_start(PositionKind pos, int gated_sink) {
    Setup s;
    config_defaults(&s.cfg);
    s.cfg.pos = pos, s.cfg.output_gate = gated_sink, s.cfg.sink = gated_sink;
    if (!setup_with(&s, TASK_INDUCTION, 16, 4, 2, 29)) return;
    PatchSet ps;
    patch_set_build(&ps, &s.task, 1, 3);
    PatchRuns r;
    patch_runs_init(&r, &s.m, &ps);
    const char *layout =
        pos == POS_ROPE ? "rotary, 2 K/V heads, output gate, sink" : "shortformer, 2 K/V heads";
    for (int kind = 0; kind < N_PATCH_KINDS; kind++)
        for (int l = 0; l < 2; l++) {
            float gates[16], ones[16];
            const int per_layer = kind == PATCH_K || kind == PATCH_V ? 2 : 4;
            for (int i = 0; i < 16; i++) gates[i] = i == l * per_layer + 1 ? 0.0f : 1.0f, ones[i] = 1.0f;
            double whole[N_PATCH_METRICS] = {0}, sparse[N_PATCH_METRICS] = {0}, none[N_PATCH_METRICS] = {0};
            Interventions iv = every_head(&r, kind, gates, 0);
            patch_forward(&s.m, &iv, &ps, 0, PATCH_CORRUPT, whole);
            const HeadState state = patch_runs_state(&r, PATCH_CORRUPT, 0, l);
            iv.start_layer = l;
            iv.start_state = &state;
            patch_forward(&s.m, &iv, &ps, 0, PATCH_CORRUPT, sparse);
            Interventions unchanged = every_head(&r, kind, ones, 0);
            unchanged.start_layer = l;
            unchanged.start_state = &state;
            patch_forward(&s.m, &unchanged, &ps, 0, PATCH_CORRUPT, none);
            int close = 1;
            for (int k = 0; k < N_PATCH_METRICS; k++)
                close &= fabs(sparse[k] - whole[k]) <= 1e-5 * fmax(1, fabs(whole[k]));
            double corrupt[N_PATCH_METRICS] = {0};
            patch_forward(&s.m, NULL, &ps, 0, PATCH_CORRUPT, corrupt);
            char what[200];
            snprintf(
                what, sizeof what,
                "%s: %s of a layer-%d head from a sparse start = in a whole forward (1e-5); none patched: "
                "the corrupted metrics bit for bit",
                layout, patch_kind_names[kind], l);
            test_check(what, close && !memcmp(none, corrupt, sizeof none),
                       "logit diff %.9g vs %.9g, loss %.9g vs %.9g", sparse[PATCH_LOGIT_DIFF],
                       whole[PATCH_LOGIT_DIFF], sparse[PATCH_LOSS], whole[PATCH_LOSS]);
        }
    patch_runs_free(&r);
    patch_set_free(&ps);
    teardown(&s);
}

static void test_threads(void) {
#ifdef _OPENMP
    Setup s;
    if (!setup(&s, TASK_INDUCTION, 16, 4, 2, 17)) return;
    s.cfg.patch_batches = 2;
    HeadPatching one, two;
    omp_set_num_threads(1);
    head_patching_run(&one, &s.m, &s.task, &s.cfg);
    omp_set_num_threads(2);
    head_patching_run(&two, &s.m, &s.task, &s.cfg);
    int same = 1;
    for (int kind = 0; kind < N_PATCH_KINDS; kind++) {
        const size_t n = (size_t)one.n_layer * one.heads[kind];
        same &= !memcmp(one.effect[kind], two.effect[kind], n * sizeof(double)) &&
                !memcmp(one.atp[kind], two.atp[kind], n * sizeof(double));
    }
    for (int k = 0; k < N_PATH_KINDS; k++) { /* path patching, run inside it */
        const size_t n = (size_t)one.n_layer * one.path.receivers[k] * one.n_layer * one.n_head;
        same &= !memcmp(one.path.effect[k], two.path.effect[k], n * sizeof(double));
    }
    test_check("head_patching_run at 1 and 2 threads: the same bits (path patching's too)", same,
               "they differ");
    head_patching_free(&one);
    head_patching_free(&two);
    teardown(&s);
#endif
}

int main(void) {
    test_induction_set();
    test_two_source_set();
    test_metric_and_runs(TASK_INDUCTION, 16, 4);
    test_metric_and_runs(TASK_TWO_SOURCE, 30, 2);
    test_own_values(4);
    test_own_values(2);
    test_start_at_input();
    test_sparse_start(POS_ROPE, 1);
    test_sparse_start(POS_SHORTFORMER, 0);
    test_threads();
    return test_finish();
}
