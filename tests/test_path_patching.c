/* test_path_patching.c: the model's input deltas (Interventions.input_deltas, model.h), the
 * intervention path patching is built on, against answers computed here by hand.
 * suite: path patching (input deltas of Q, K and V)
 *
 *  1. linear_forward_columns: a band of columns of a product, written in place, is bit for bit
 *     those columns of linear_forward's, and leaves the others untouched.
 *  2. A delta of 0 on any head's Q, K or V gives the plain forward bit for bit (loss and every
 *     hook point), for MHA with learned positions, grouped K/V with rotary, an output gate and a
 *     sink, the shortformer, and multi-query heads of 16 (past the attention's thin path); 3 and
 *     4 below run on every one of them.
 *  3. A delta on one head's input changes exactly that head's columns of hook_qkv, to
 *     LN_l(h + delta) · W_qkv + b_qkv computed here in double (+ W_pos[t] inside the LayerNorm for
 *     the shortformer's Q and K, not its V), within 1e-5; every other column, the layer's input
 *     and the heads that do not read the changed columns keep the plain bits (a grouped K/V
 *     head's change reaches every query head of its group, and only those).
 *  4. A delta in the layer a forward starts at sparsely (a HeadState with hook_qkv and
 *     hook_resid_post: only the heads reading it recomputed, their attention alone) = the layer
 *     run whole from a state without z: the loss and hook_resid_post within 1e-5; the layer's
 *     input is the state's own and its hook_z not there (never computed); every layout and input.
 *  5. Two deltas in one forward (two heads, two layers) = the by-hand columns of each.
 *  6. The refusals (a failed CHECK, in a child): a delta below the layer a forward starts at, two
 *     at a sparse start's layer, one at a head-mix start without qkv and resid_post, a K/V head
 *     past n_kv_head, and a forward with deltas that asks for gradients.
 * Ends with "N passed, M failed" and exits 1 if any check failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "model/model.h"
#include "base/rng.h"
#include "testlib.h"

enum { B = 3, T = 10 };

typedef struct {
    const char *name;
    ModelShape shape;
} Layout;

/* vocab, d_model, n_head, d_head, n_layer, seq_len, n_kv_head, pos, rope_dims, rope_base, gate, sink */
static const Layout layouts[] = {
    {"MHA, learned positions", {16, 16, 4, 4, 2, T, 4, POS_LEARNED, 4, 10000.0, 0, 0}},
    {"GQA 4/2, rotary, output gate, sink", {16, 16, 4, 4, 2, T, 2, POS_ROPE, 4, 10000.0, 1, 1}},
    {"shortformer, 3 layers", {16, 12, 3, 4, 3, T, 3, POS_SHORTFORMER, 4, 10000.0, 0, 0}},
    {"MQA, heads of 16 (the attention's general path)",
     {16, 32, 2, 16, 2, T, 1, POS_LEARNED, 16, 10000.0, 0, 0}},
};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

static void init_model(Model *m, ModelShape s, uint64_t seed) {
    model_init(m, s, B);
    model_init_weights(m, seed);
    Rng rng = rng_stream(seed, 77, 0);
    for (size_t i = 0; i < m->n_params; i++) m->param_block[i] += 0.3f * (float)rng_normal(&rng);
}

static void random_inputs(int *tokens, int *targets, float *delta, ModelShape s, uint64_t seed) {
    Rng rng = rng_stream(seed, 78, 0);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)(rng_uniform(&rng) * s.vocab_size) % s.vocab_size;
    for (int i = 0; i < B * T; i++) targets[i] = (int)(rng_uniform(&rng) * s.vocab_size) % s.vocab_size;
    for (int i = 0; i < B * T * s.d_model; i++) delta[i] = (float)rng_normal(&rng);
}

static size_t qkv_cols(ModelShape s) { return (size_t)(s.n_head + 2 * s.n_kv_head) * s.d_head; }

/* The first column of a head's part in hook_qkv (Q of every head, then K, then V of every K/V
 * head: docs/model.md's layout). */
static size_t first_column(ModelShape s, HeadInput part, int head) {
    int before = part == HEAD_INPUT_Q ? 0 : part == HEAD_INPUT_K ? s.n_head : s.n_head + s.n_kv_head;
    return (size_t)(before + head) * s.d_head;
}

/* Every hook of every layer of the model's last forward, concatenated (patterns left out). */
static float *all_hooks(const Model *m, size_t *n) {
    static const HookPoint points[] = {HOOK_RESID_PRE, HOOK_QKV, HOOK_Z, HOOK_HEAD_MIX, HOOK_RESID_POST};
    size_t total = 0;
    for (int l = 0; l < m->shape.n_layer; l++)
        for (int k = 0; k < 5; k++) total += model_hook_floats(m, points[k], B, T);
    float *out = test_alloc(total), *at = out;
    for (int l = 0; l < m->shape.n_layer; l++)
        for (int k = 0; k < 5; k++) {
            size_t size = model_hook_floats(m, points[k], B, T);
            memcpy(at, model_hook(m, points[k], l), sizeof(float) * size);
            at += size;
        }
    *n = total;
    return out;
}

/* Columns [c0, c0 + d_head) of LN_l(h + delta (+ W_pos[t])) · W_qkv + b_qkv, in double, from the
 * parameters alone: (B·T, d_head). */
static void columns_by_hand(double *out, const Model *m, int l, const float *h, const float *delta,
                            int with_positions, size_t c0) {
    const ModelShape s = m->shape;
    const int D = s.d_model, dh = s.d_head;
    const size_t W = qkv_cols(s);
    const float *g = m->params.ln_g + (size_t)l * D, *b = m->params.ln_b + (size_t)l * D;
    const float *w = m->params.w_qkv + (size_t)l * D * W, *bias = m->params.b_qkv + (size_t)l * W;
    double *x = calloc(D, sizeof(double));
    for (int n = 0; n < B * T; n++) {
        double mean = 0, var = 0;
        for (int i = 0; i < D; i++) {
            x[i] = (double)h[n * D + i] + delta[n * D + i];
            if (with_positions) x[i] += m->params.pos_emb[(n % T) * D + i];
            mean += x[i] / D;
        }
        for (int i = 0; i < D; i++) var += (x[i] - mean) * (x[i] - mean) / D;
        for (int i = 0; i < D; i++) x[i] = (x[i] - mean) / sqrt(var + 1e-5) * g[i] + b[i];
        for (int j = 0; j < dh; j++) {
            double sum = bias[c0 + j];
            for (int i = 0; i < D; i++) sum += x[i] * w[(size_t)i * W + c0 + j];
            out[(size_t)n * dh + j] = sum;
        }
    }
    free(x);
}

static void test_linear_columns(void) {
    enum { N = 37, C = 29, OC = 70, FIRST = 21, COLS = 13 };
    Rng rng = rng_stream(5, 1, 0);
    float *inp = test_alloc(N * C), *w = test_alloc(C * OC), *bias = test_alloc(OC);
    float *whole = test_alloc(N * OC), *band = test_alloc(N * OC);
    test_fill_normal(inp, N * C, &rng, 0, 1);
    test_fill_normal(w, C * OC, &rng, 0, 1);
    test_fill_normal(bias, OC, &rng, 0, 1);
    linear_forward(whole, inp, w, bias, N, C, OC);
    for (int i = 0; i < N * OC; i++) band[i] = -7.0f;
    linear_forward_columns(band, inp, w, bias, N, C, OC, FIRST, COLS);
    int same = 1, untouched = 1;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < OC; j++) {
            float v = band[n * OC + j];
            if (j >= FIRST && j < FIRST + COLS) same &= !memcmp(&v, &whole[n * OC + j], sizeof v);
            else untouched &= v == -7.0f;
        }
    test_check("linear_forward_columns: the band is linear_forward's columns bit for bit, the rest untouched",
               same && untouched, "band %s, rest %s", same ? "same" : "differs",
               untouched ? "untouched" : "written");
    free(inp), free(w), free(bias), free(whole), free(band);
}

static void test_zero_delta(const Layout *lay) {
    const ModelShape s = lay->shape;
    Model m;
    init_model(&m, s, 11);
    int tokens[B * T], targets[B * T];
    float *delta = test_alloc((size_t)B * T * s.d_model), *zero = test_alloc((size_t)B * T * s.d_model);
    random_inputs(tokens, targets, delta, s, 12);
    float plain = model_forward(&m, NULL, tokens, targets, NULL, B, T);
    size_t n_hooks;
    float *hooks = all_hooks(&m, &n_hooks);
    int same = 1, cases = 0;
    for (int l = 0; l < s.n_layer; l++)
        for (int part = 0; part < HEAD_INPUT_PATTERN; part++)
            for (int h = 0; h < (part == HEAD_INPUT_Q ? s.n_head : s.n_kv_head); h++) {
                InputDelta d = {l, (HeadInput)part, h, zero};
                Interventions iv = {.input_deltas = &d, .n_input_deltas = 1};
                float loss = model_forward(&m, &iv, tokens, targets, NULL, B, T);
                size_t n;
                float *got = all_hooks(&m, &n);
                same &= !memcmp(&loss, &plain, sizeof loss) && n == n_hooks &&
                        !memcmp(got, hooks, sizeof(float) * n);
                free(got);
                cases++;
            }
    test_check(lay->name, same, "a zero delta changed the forward (%d cases)", cases);
    free(hooks), free(delta), free(zero);
    model_free(&m);
}

/* One delta on (l, part, head): the head's columns by hand, everything else the plain bits. */
static void test_one_delta(const Layout *lay, int l, HeadInput part, int head) {
    const ModelShape s = lay->shape;
    const size_t W = qkv_cols(s), E = (size_t)s.n_head * s.d_head, BT = (size_t)B * T;
    const int dh = s.d_head, group = s.n_head / s.n_kv_head;
    Model m;
    init_model(&m, s, 21);
    int tokens[B * T], targets[B * T];
    float *delta = test_alloc(BT * s.d_model);
    random_inputs(tokens, targets, delta, s, 22);
    float plain = model_forward(&m, NULL, tokens, targets, NULL, B, T);
    float *qkv0 = test_alloc(BT * W), *z0 = test_alloc(BT * E), *h = test_alloc(BT * s.d_model);
    memcpy(qkv0, model_hook(&m, HOOK_QKV, l), sizeof(float) * BT * W);
    memcpy(z0, model_hook(&m, HOOK_Z, l), sizeof(float) * BT * E);
    memcpy(h, model_hook(&m, HOOK_RESID_PRE, l), sizeof(float) * BT * s.d_model);

    InputDelta d = {l, part, head, delta};
    Interventions iv = {.input_deltas = &d, .n_input_deltas = 1};
    float loss = model_forward(&m, &iv, tokens, targets, NULL, B, T);
    const float *qkv = model_hook(&m, HOOK_QKV, l), *z = model_hook(&m, HOOK_Z, l);
    const size_t c0 = first_column(s, part, head);
    double *want = calloc(BT * dh, sizeof(double));
    int positions = s.pos == POS_SHORTFORMER && part != HEAD_INPUT_V;
    columns_by_hand(want, &m, l, h, delta, positions, c0);
    /* rotary turns Q and K after the projection: the by-hand columns are compared unrotated */
    int rotated = s.pos == POS_ROPE && part != HEAD_INPUT_V;
    TestCompare cmp = test_compare_start(1e-5, 1e-5);
    int others_same = 1, moved = 0;
    for (size_t n = 0; n < BT; n++)
        for (size_t j = 0; j < W; j++) {
            float got = qkv[n * W + j], was = qkv0[n * W + j];
            if (j >= c0 && j < c0 + dh) {
                if (!rotated) test_compare(&cmp, got, want[n * dh + (j - c0)], "column", (long)(n * W + j));
                moved |= got != was;
            } else others_same &= !memcmp(&got, &was, sizeof got);
        }
    /* the heads that read the changed columns: the head itself for Q, its group for K and V */
    int heads_ok = 1;
    for (int q = 0; q < s.n_head; q++) {
        int reads = part == HEAD_INPUT_Q ? q == head : q / group == head;
        int differs = 0;
        for (size_t n = 0; n < BT; n++)
            differs |= memcmp(z + n * E + q * dh, z0 + n * E + q * dh, sizeof(float) * dh);
        heads_ok &= reads ? differs : !differs;
    }
    int input_same = !memcmp(model_hook(&m, HOOK_RESID_PRE, l), h, sizeof(float) * BT * s.d_model);
    char name[200];
    static const char *const part_names[] = {"Q", "K", "V"};
    snprintf(name, sizeof name,
             "%s: a delta on L%d head %d's %s: its columns by hand%s; only the heads reading them move",
             lay->name, l, head, part_names[part], rotated ? " (rotated: moved, not compared)" : "");
    if (rotated)
        test_check(name, moved && others_same && heads_ok && input_same && loss != plain,
                   "moved %d, other columns %s, heads %s, input %s", moved, others_same ? "same" : "differ",
                   heads_ok ? "as expected" : "wrong", input_same ? "same" : "differs");
    else {
        int ok = test_compare_report(name, &cmp);
        if (ok)
            test_check("  ... and every other column, the layer's input and the other heads' outputs keep "
                       "the plain bits",
                       others_same && heads_ok && input_same && loss != plain,
                       "other columns %s, heads %s, input %s", others_same ? "same" : "differ",
                       heads_ok ? "as expected" : "wrong", input_same ? "same" : "differs");
    }
    free(want), free(qkv0), free(z0), free(h), free(delta);
    model_free(&m);
}

/* Two deltas in one forward, in two layers: each one's columns by hand (the second layer's input
 * is the forward's own, after the first layer's change reached it). */
static void test_two_deltas(void) {
    const ModelShape s = layouts[0].shape;
    const size_t W = qkv_cols(s), BT = (size_t)B * T;
    const int dh = s.d_head;
    Model m;
    init_model(&m, s, 31);
    int tokens[B * T], targets[B * T];
    float *delta = test_alloc(BT * s.d_model), *delta2 = test_alloc(BT * s.d_model);
    random_inputs(tokens, targets, delta, s, 32);
    for (size_t i = 0; i < BT * s.d_model; i++) delta2[i] = 0.5f * delta[(i * 7) % (BT * s.d_model)];
    InputDelta d[2] = {{0, HEAD_INPUT_V, 2, delta}, {1, HEAD_INPUT_K, 1, delta2}};
    Interventions iv = {.input_deltas = d, .n_input_deltas = 2};
    model_forward(&m, &iv, tokens, targets, NULL, B, T);
    TestCompare cmp = test_compare_start(1e-5, 1e-5);
    double *want = calloc(BT * dh, sizeof(double));
    for (int k = 0; k < 2; k++) {
        size_t c0 = first_column(s, d[k].part, d[k].head);
        columns_by_hand(want, &m, d[k].layer, model_hook(&m, HOOK_RESID_PRE, d[k].layer), d[k].delta, 0, c0);
        const float *qkv = model_hook(&m, HOOK_QKV, d[k].layer);
        for (size_t n = 0; n < BT; n++)
            for (int j = 0; j < dh; j++)
                test_compare(&cmp, qkv[n * W + c0 + j], want[n * dh + j], "column", (long)n);
    }
    test_compare_report(
        "two deltas (L0 head 2's V, L1 head 1's K) in one forward: each one's columns by hand", &cmp);
    free(want), free(delta), free(delta2);
    model_free(&m);
}

/* Layer l's hooks of the last forward, as a sparse start reads them. */
typedef struct {
    float *resid_pre, *qkv, *z, *resid_post;
} Kept;

static void keep_layer(Kept *k, const Model *m, int l) {
    const HookPoint p[] = {HOOK_RESID_PRE, HOOK_QKV, HOOK_Z, HOOK_RESID_POST};
    float **to[] = {&k->resid_pre, &k->qkv, &k->z, &k->resid_post};
    for (int i = 0; i < 4; i++) {
        const size_t n = model_hook_floats(m, p[i], B, T);
        *to[i] = test_alloc(n);
        memcpy(*to[i], model_hook(m, p[i], l), sizeof(float) * n);
    }
}

/* sparse 1: every hook; 0: a head-mix start's resid_pre and z alone */
static HeadState kept_state(const Kept *k, int sparse) {
    return (HeadState){k->resid_pre, k->z, sparse ? k->qkv : NULL, sparse ? k->resid_post : NULL};
}

static void kept_free(Kept *k) { free(k->resid_pre), free(k->qkv), free(k->z), free(k->resid_post); }

typedef struct {
    Model *m;
    const Interventions *iv;
    const int *tokens, *targets;
} Forward;

static void run_forward(void *p) {
    Forward *f = p;
    model_forward(f->m, f->iv, f->tokens, f->targets, NULL, B, T);
}

static void test_refusals(void) {
    const ModelShape s = layouts[1].shape; /* grouped K/V: 2 K/V heads */
    const size_t BT = (size_t)B * T;
    Model m;
    init_model(&m, s, 41);
    int tokens[B * T], targets[B * T];
    float *delta = test_alloc(BT * s.d_model);
    random_inputs(tokens, targets, delta, s, 42);
    model_forward(&m, NULL, tokens, targets, NULL, B, T);
    Kept kept;
    keep_layer(&kept, &m, 1);
    const HeadState state = kept_state(&kept, 1), mix_only = kept_state(&kept, 0);
    InputDelta layer0 = {0, HEAD_INPUT_Q, 0, delta}, layer1 = {1, HEAD_INPUT_K, 0, delta};
    InputDelta past_kv = {1, HEAD_INPUT_V, 2, delta}; /* K/V heads are 0 and 1 */
    Interventions below_start = {.input_deltas = &layer0, .n_input_deltas = 1, .start_layer = 1};
    InputDelta two[2] = {layer1, {1, HEAD_INPUT_Q, 3, delta}};
    Interventions at_state = {
        .input_deltas = two, .n_input_deltas = 2, .start_layer = 1, .start_state = &state};
    Interventions at_head_mix = {
        .input_deltas = &layer1, .n_input_deltas = 1, .start_layer = 1, .start_state = &mix_only};
    Interventions bad_head = {.input_deltas = &past_kv, .n_input_deltas = 1};
    Interventions with_grads = {.input_deltas = &layer1, .n_input_deltas = 1, .grads = MODEL_GRAD_PARAMS};
    Interventions fine = {.input_deltas = &layer1, .n_input_deltas = 1, .start_layer = 1};
    Forward f[] = {{&m, &below_start, tokens, targets},
                   {&m, &at_state, tokens, targets},
                   {&m, &at_head_mix, tokens, targets},
                   {&m, &bad_head, tokens, targets},
                   {&m, &with_grads, tokens, targets}};
    int refused = 1;
    for (int k = 0; k < 5; k++) refused &= test_aborts(run_forward, &f[k]);
    /* the valid one here: a child of a process with OpenMP threads must not start a region */
    float loss = model_forward(&m, &fine, tokens, targets, NULL, B, T);
    int accepted = isfinite(loss);
    test_check("refusals: a delta below start_layer, two at a sparse start's layer, one at a head-mix start "
               "without qkv and resid_post, a K/V head past n_kv_head, gradients asked with deltas; a delta "
               "at start_layer runs",
               refused && accepted, "refused all: %d, the valid one ran: %d", refused, accepted);
    free(delta);
    kept_free(&kept);
    model_free(&m);
}

/* A delta in the layer a forward starts at sparsely (a HeadState with qkv and resid_post: only
 * the heads that read it recomputed) = the same delta with the layer run whole from a state
 * without z: the loss and hook_resid_post within 1e-5; the sparse layer's hook_resid_pre is the
 * state's and its hook_z is not there (only the changed heads were computed). */
static void test_sparse_start(const Layout *lay, int l, HeadInput part, int head) {
    const ModelShape s = lay->shape;
    const size_t BT = (size_t)B * T, D = s.d_model;
    Model m;
    init_model(&m, s, 51);
    int tokens[B * T], targets[B * T];
    float *delta = test_alloc(BT * D), *post_whole = test_alloc(BT * D);
    random_inputs(tokens, targets, delta, s, 52);
    model_forward(&m, NULL, tokens, targets, NULL, B, T);
    Kept kept;
    keep_layer(&kept, &m, l);
    InputDelta d = {l, part, head, delta};
    HeadState input = {.resid_pre = kept.resid_pre}, state = kept_state(&kept, 1);
    Interventions whole = {.input_deltas = &d, .n_input_deltas = 1, .start_layer = l, .start_state = &input};
    Interventions heads = whole;
    heads.start_state = &state;
    float loss_whole = model_forward(&m, &whole, tokens, targets, NULL, B, T);
    memcpy(post_whole, model_hook(&m, HOOK_RESID_POST, l), sizeof(float) * BT * D);
    float loss_heads = model_forward(&m, &heads, tokens, targets, NULL, B, T);
    const float *post_heads = model_hook(&m, HOOK_RESID_POST, l);
    TestCompare cmp = test_compare_start(1e-5, 1e-5);
    test_compare(&cmp, loss_heads, loss_whole, "loss", 0);
    for (size_t i = 0; i < BT * D; i++)
        test_compare(&cmp, post_heads[i], post_whole[i], "hook_resid_post", (long)i);
    int moved = memcmp(post_heads, kept.resid_post, sizeof(float) * BT * D) != 0;
    static const char *const part_names[] = {"Q", "K", "V"};
    char name[240];
    snprintf(
        name, sizeof name,
        "%s: a delta on L%d head %d's %s from a sparse start (its heads alone recomputed) = the layer run "
        "whole (loss, hook_resid_post)",
        lay->name, l, head, part_names[part]);
    if (test_compare_report(name, &cmp))
        test_check("  ... the output moved, its input is the state's and hook_z is not there (not computed)",
                   moved && model_hook(&m, HOOK_RESID_PRE, l) == kept.resid_pre && !model_hook(&m, HOOK_Z, l),
                   "moved %d", moved);
    free(delta), free(post_whole);
    kept_free(&kept);
    model_free(&m);
}

int main(void) {
    test_linear_columns();
    for (int k = 0; k < N_LAYOUTS; k++) {
        char name[160];
        snprintf(name, sizeof name,
                 "zero delta on every head's Q, K and V, every layer: the plain forward bit for bit (%s)",
                 layouts[k].name);
        Layout named = {name, layouts[k].shape};
        test_zero_delta(&named);
    }
    for (int k = 0; k < N_LAYOUTS; k++)
        for (int part = 0; part < HEAD_INPUT_PATTERN; part++) {
            int l = layouts[k].shape.n_layer - 1, head = layouts[k].shape.n_kv_head - 1;
            test_one_delta(&layouts[k], l, (HeadInput)part, head);
            if (layouts[k].shape.n_layer == 3)
                test_one_delta(&layouts[k], 1, (HeadInput)part, 0); /* a middle layer */
        }
    for (int k = 0; k < N_LAYOUTS; k++)
        for (int part = 0; part < HEAD_INPUT_PATTERN; part++)
            test_sparse_start(&layouts[k], 1, (HeadInput)part, layouts[k].shape.n_kv_head - 1);
    test_two_deltas();
    test_refusals();
    return test_finish();
}
