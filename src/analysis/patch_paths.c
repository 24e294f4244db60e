/* patch_paths.c: path patching from every earlier head to every later head's Q, K and V inputs
 * (patch_paths.h).
 * Owns which heads take part, the settings and their order. Must not know: files, training, the
 * task, the config (the caller passes the limit). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "patch_paths.h"
#include "base/util.h"
#include "kernels/kernels.h"
#include "views.h"

const char *const path_kind_names[N_PATH_KINDS] = {"path_q", "path_k", "path_v"};

/* One setting: sender head (layer, head), receiver (layer, head: a K/V head for K and V), input. */
typedef struct {
    int kind, sender_layer, sender_head, receiver_layer, receiver_head;
} PathSetting;

/* The heads that take part: every head, or in each layer the top_heads with the largest
 * |head_out_effect| of that layer (NAN last; ties to the lower index). Per layer, because an
 * early head acts through the later ones and its own effect is small: a ranking over all heads
 * would take the last layer's alone and leave no path. */
static void select_heads(PathPatching *pp, const double *head_out_effect) {
    const int L = pp->n_layer, H = pp->n_head;
    const int per_layer = pp->top_heads > 0 && pp->top_heads < H ? pp->top_heads : H;
    pp->selected = xcalloc((size_t)L * H, sizeof(int));
    pp->n_selected = L * per_layer;
    for (int l = 0; l < L; l++) {
        const double *e = head_out_effect + (size_t)l * H;
        int *taken = pp->selected + (size_t)l * H;
        for (int n = 0; n < per_layer; n++) {
            int best = -1;
            for (int h = 0; h < H; h++) {
                if (taken[h]) continue;
                double v = fabs(e[h]), b = best < 0 ? 0 : fabs(e[best]);
                if (best < 0 || (isnan(b) && !isnan(v)) || v > b) best = h;
            }
            taken[best] = 1;
        }
    }
}

/* Whether receiver r (a query head for Q, a K/V head for K and V) of layer l takes part: for K
 * and V, when one of the query heads of its group does. */
static int receiver_selected(const PathPatching *pp, int kind, int l, int r) {
    if (kind == HEAD_INPUT_Q) return pp->selected[l * pp->n_head + r];
    const int group = pp->n_head / pp->n_kv_head;
    for (int q = r * group; q < (r + 1) * group; q++)
        if (pp->selected[l * pp->n_head + q]) return 1;
    return 0;
}

/* Every (kind, sender, later receiver) of the selected heads. */
static PathSetting *list_settings(const PathPatching *pp, int *n) {
    const int L = pp->n_layer, H = pp->n_head;
    PathSetting *s = xcalloc((size_t)N_PATH_KINDS * L * H * L * H, sizeof(PathSetting));
    *n = 0;
    for (int kind = 0; kind < N_PATH_KINDS; kind++)
        for (int lb = L - 1; lb > 0; lb--)
            for (int r = 0; r < pp->receivers[kind]; r++) {
                if (!receiver_selected(pp, kind, lb, r)) continue;
                for (int la = 0; la < lb; la++)
                    for (int a = 0; a < H; a++)
                        if (pp->selected[la * H + a]) s[(*n)++] = (PathSetting){kind, la, a, lb, r};
            }
    return s;
}

/* The sender's clean-minus-corrupted output through its rows of W_O, (B·T, D), into delta, with
 * zdiff (B·T, d_head) as scratch. */
static void sender_delta(float *delta, float *zdiff, const Model *m, const PatchRuns *r, int c, int layer,
                         int head) {
    const ModelShape s = m->shape;
    const int dh = s.d_head, D = s.d_model, E = s.n_head * dh, BT = r->set->chunk * r->set->T;
    const float *clean = patch_runs_hook(r, PATCH_CLEAN, HOOK_Z, c) + layer * r->floats[HOOK_Z];
    const float *corrupt = patch_runs_hook(r, PATCH_CORRUPT, HOOK_Z, c) + layer * r->floats[HOOK_Z];
    for (int n = 0; n < BT; n++)
        for (int j = 0; j < dh; j++)
            zdiff[(size_t)n * dh + j] =
                clean[(size_t)n * E + head * dh + j] - corrupt[(size_t)n * E + head * dh + j];
    linear_forward(delta, zdiff, model_head_params(s, &m->params, layer, head).w_o, NULL, BT, dh, D);
}

/* The metric's sum over chunk c of one setting's patched forward, on model view v. */
static double setting_sum(const Model *m, const PatchRuns *r, PatchMetric metric, const PathSetting *st,
                          int c, Model *v, float *delta, float *zdiff) {
    sender_delta(delta, zdiff, m, r, c, st->sender_layer, st->sender_head);
    const InputDelta d = {st->receiver_layer, (HeadInput)st->kind, st->receiver_head, delta};
    /* the corrupted run's state of the receiver's layer: the forward recomputes the heads that
     * read the delta and keeps every other head's corrupted output */
    const HeadState from = patch_runs_state(r, PATCH_CORRUPT, c, st->receiver_layer);
    const Interventions iv = {
        .start_layer = st->receiver_layer, .start_state = &from, .input_deltas = &d, .n_input_deltas = 1};
    return patch_forward_metric(v, &iv, r->set, c, PATCH_CORRUPT, metric);
}

void path_patching_run(PathPatching *pp, Model *m, const PatchRuns *r, PatchMetric metric,
                       const double *head_out_effect, int top_heads) {
    const double cpu_start = util_cpu_seconds();
    const ModelShape s = m->shape;
    const int L = s.n_layer, H = s.n_head, C = r->set->n_chunks, threads = thread_count();
    memset(pp, 0, sizeof *pp);
    pp->n_layer = L;
    pp->n_head = H;
    pp->n_kv_head = s.n_kv_head;
    pp->top_heads = top_heads;
    for (int k = 0; k < N_PATH_KINDS; k++) {
        pp->receivers[k] = k == HEAD_INPUT_Q ? H : s.n_kv_head;
        const size_t n = (size_t)L * H * L * pp->receivers[k];
        pp->effect[k] = xcalloc(n, sizeof(double));
        for (size_t i = 0; i < n; i++) pp->effect[k][i] = NAN;
    }
    select_heads(pp, head_out_effect);
    int n_settings;
    PathSetting *settings = list_settings(pp, &n_settings);
    const size_t BT = (size_t)r->set->chunk * r->set->T;
    ThreadModels models;
    thread_models_init(&models, m, r->set->chunk);
    float *delta = xcalloc((size_t)threads * BT * s.d_model, sizeof(float));
    float *zdiff = xcalloc((size_t)threads * BT * s.d_head, sizeof(float));
    double *sum = xcalloc((size_t)n_settings * C + 1, sizeof(double)); /* (setting, chunk) */
#pragma omp parallel for schedule(dynamic)
    for (long job = 0; job < (long)n_settings * C; job++) {
        const int t = thread_index();
        sum[job] =
            setting_sum(m, r, metric, &settings[job / C], (int)(job % C), thread_models_get(&models, t),
                        delta + (size_t)t * BT * s.d_model, zdiff + (size_t)t * BT * s.d_head);
    }
    for (int i = 0; i < n_settings; i++) {
        const PathSetting *st = &settings[i];
        double total = 0.0; /* in chunk order, whichever thread ran what */
        for (int c = 0; c < C; c++) total += sum[(size_t)i * C + c];
        const size_t at = (((size_t)st->receiver_layer * pp->receivers[st->kind] + st->receiver_head) * L +
                           st->sender_layer) *
                              H +
                          st->sender_head;
        pp->effect[st->kind][at] = patch_effect(r, metric, patch_metric_mean(r->set, total));
    }
    pp->n_forwards = (long)n_settings * C;
    thread_models_free(&models);
    free(delta), free(zdiff), free(sum), free(settings);
    pp->cpu_seconds = util_cpu_seconds() - cpu_start;
}

void path_patching_free(PathPatching *pp) {
    for (int k = 0; k < N_PATH_KINDS; k++) free(pp->effect[k]);
    free(pp->selected);
    memset(pp, 0, sizeof *pp);
}

size_t path_patching_bytes(ModelShape shape, int chunk, int T) {
    const size_t BT = (size_t)chunk * T, threads = (size_t)thread_count();
    const size_t per_thread =
        BT * (shape.d_model + shape.d_head) * sizeof(float) + patch_forward_bytes(shape, chunk, T);
    return thread_models_bytes(shape, chunk, T, model_sparse_floats(shape, chunk, T)) + threads * per_thread;
}

void path_patching_print(const PathPatching *pp, FILE *out) {
    static const char *const input_names[N_PATH_KINDS] = {"Q", "K", "V"};
    const int L = pp->n_layer, H = pp->n_head;
    fprintf(out, "path patching (%d of %d heads, %ld forwards, %.2f s CPU): strongest", pp->n_selected, L * H,
            pp->n_forwards, pp->cpu_seconds);
    for (int k = 0; k < N_PATH_KINDS; k++) {
        const int R = pp->receivers[k];
        const size_t n = (size_t)L * H * L * R;
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!isnan(pp->effect[k][i]) && (best == n || pp->effect[k][i] > pp->effect[k][best])) best = i;
        if (best == n) {
            fprintf(out, " %s none measured%s", input_names[k], k + 1 < N_PATH_KINDS ? "," : "\n");
            continue;
        }
        const int receiver = (int)(best / ((size_t)L * H)), sender = (int)(best % ((size_t)L * H));
        fprintf(out, " %s L%dH%d -> L%d%s%d %+.3f%s", input_names[k], sender / H, sender % H, receiver / R,
                k == HEAD_INPUT_Q || pp->n_kv_head == H ? "H" : "KV", receiver % R, pp->effect[k][best],
                k + 1 < N_PATH_KINDS ? "," : "\n");
    }
    fflush(out);
}
