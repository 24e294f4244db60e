/* shapes.c: `harness --shapes CONFIG`: the tensor shapes of one block, parameter counts,
 * matmul FLOPs per token, the K/V cache of generation, and the run's budget (train/budget.c: the
 * peak memory by part, the disk its files take), computed from the config alone (no allocation:
 * works for real sizes).
 * Owns the --shapes report and the K/V cache's size (one function, shared with generate).
 * Must not know: files, training, the tasks. */
#include <stdio.h>
#include <string.h>
#include "shapes.h"
#include "train/budget.h"
#include "analysis/ablation.h"
#include "analysis/analysis.h"
#include "train/head_l0.h"
#include "model/model.h"
#include "analysis/patch_heads.h"
#include "analysis/patching.h"
#include "base/util.h"
#include "kernels/kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* 1234567 -> "1,234,567" */
static const char *grouped(double value, char *buf, int size) {
    char digits[64];
    snprintf(digits, sizeof digits, "%.0f", value);
    int n = 0, len = 0;
    while (digits[len]) len++;
    for (int i = 0; i < len && n < size - 2; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[n++] = ',';
        buf[n++] = digits[i];
    }
    buf[n] = '\0';
    return buf;
}

size_t kv_cache_bytes_per_token(ModelShape s) {
    return sizeof(float) * (size_t)model_cost(s).kv_cache_values;
}

/* 65536 -> "65,536 B (64 KiB)": the exact bytes, and whole KiB, MiB or GiB where they are one. */
static const char *binary_units(double bytes, char *buf, int size) {
    static const char *const unit[] = {"GiB", "MiB", "KiB"};
    char n[32], m[32]; /* grouped digits of a double below 1e30 fit */
    for (int i = 0; i < 3; i++) {
        double scale = (double)(1ull << (10 * (3 - i)));
        if (bytes >= scale && bytes == scale * (double)(long long)(bytes / scale)) {
            snprintf(buf, (size_t)size, "%s B (%s %s)", grouped(bytes, m, 32), grouped(bytes / scale, n, 32),
                     unit[i]);
            return buf;
        }
    }
    snprintf(buf, (size_t)size, "%s B", grouped(bytes, n, 32));
    return buf;
}

void shapes_kv_cache_line(ModelShape s, int tokens, char *buf, size_t size) {
    char a[96], b[96], c[96], d[96], e[96], f[96];
    const double values = model_cost(s).kv_cache_values;
    snprintf(buf, size, "%s values per token = %s in bf16, %s in fp32; %s tokens: %s in bf16, %s in fp32",
             grouped(values, a, 96), binary_units(2 * values, b, 96),
             binary_units(sizeof(float) * values, c, 96), grouped(tokens, d, 96),
             binary_units(2 * values * tokens, e, 96), binary_units(sizeof(float) * values * tokens, f, 96));
}

void shapes_split_text(ModelShape s, int T, int per_head, char *buf, size_t size) {
    const int H = s.n_head, Hkv = s.n_kv_head, dh = s.d_head;
    if (per_head && Hkv == H) snprintf(buf, size, "Q/K/V per head [%d, %d, %d] each", H, T, dh);
    else if (per_head)
        snprintf(buf, size, "Q per head [%d, %d, %d], K/V per head [%d, %d, %d] each", H, T, dh, Hkv, T, dh);
    else if (Hkv == H) snprintf(buf, size, "Q/K/V [%d, %d] each", T, H * dh);
    else snprintf(buf, size, "Q [%d, %d], K/V [%d, %d] each", T, H * dh, T, Hkv * dh);
}

void shapes_attention_text(ModelShape s, char *buf, size_t size) {
    static const char *const pos_names[] = {"learned positions", "rotary",
                                            "shortformer (learned positions on the Q/K input only)",
                                            "no positions"};
    const int H = s.n_head, Hkv = s.n_kv_head;
    int n = snprintf(buf, size, "%s K/V heads H_kv=%d%s; %s",
                     Hkv == H   ? "multi-head,"
                     : Hkv == 1 ? "multi-query,"
                                : "grouped-query,",
                     Hkv, Hkv == H ? "" : " (each shared by H/H_kv query heads)", pos_names[s.pos]);
    if (s.pos == POS_ROPE && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " on the first %d of %d dims per head, base %g", s.rope_dims,
                      s.d_head, s.rope_base);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "%s%s", s.output_gate ? "; sigmoid output gate" : "",
                 s.sink ? "; attention sink (a head may attend to nothing)" : "");
}

/* The config's shape in two lines: sizes, then the attention's kind. */
static void print_summary(const Config *cfg, ModelShape s, FILE *out) {
    const int D = s.d_model, H = s.n_head, dh = s.d_head, E = H * dh;
    fprintf(out,
            "%s: d_model D=%d, n_head H=%d, d_head=%d, E=H*d_head=%d%s, n_layer L=%d, "
            "seq_len T=%d, vocab V=%d\n",
            cfg->source_path, D, H, dh, E,
            E == D  ? " (= D)"
            : E > D ? " (> D)"
                    : " (< D)",
            s.n_layer, s.seq_len, s.vocab_size);
    char attention[256];
    shapes_attention_text(s, attention, sizeof attention);
    fprintf(out, "attention: %s\n\n", attention);
}

/* One row of the mainline: name, symbolic shape, its sizes, what makes it. */
static void block_row(FILE *out, const char *name, const char *symbols, const char *sizes, const char *what) {
    fprintf(out, "  %-8s %-17s = %-22s %s\n", name, symbols, sizes, what);
}

/* One block's tensors for one sequence, then the K/V cache of generation. */
static void print_block(ModelShape s, FILE *out) {
    const int D = s.d_model, H = s.n_head, Hkv = s.n_kv_head, dh = s.d_head, T = s.seq_len;
    const int E = H * dh, W = (int)model_qkv_width(s), mha = Hkv == H;
    char v[96], w[160];
    fprintf(out, "one block, one sequence (the mainline):\n");
    snprintf(v, sizeof v, "[%d, %d]", T, D);
    block_row(out, "Z", "[T,D]", v, "LN(h)");
    snprintf(v, sizeof v, "[%d, %d]", T, W);
    snprintf(w, sizeof w, "Z . W_qkv [%d, %d] + b_qkv", D, W);
    block_row(out, "QKV", mha ? "[T,3E]" : "[T,(H+2H_kv)d_h]", v, w);
    snprintf(v, sizeof v, "[%d, %d]%s", T, E, mha ? " each" : "");
    block_row(out, mha ? "Q, K, V" : "Q", "[T,E]", v,
              mha ? "QKV's columns, E each" : "QKV's first E columns");
    if (!mha) {
        snprintf(v, sizeof v, "[%d, %d] each", T, Hkv * dh);
        block_row(out, "K, V", "[T,H_kv*d_h]", v, "QKV's next H_kv*d_h columns, then the last");
    }
    snprintf(v, sizeof v, "[%d, %d, %d]%s", H, T, dh, mha ? " each" : "");
    snprintf(w, sizeof w, "the head view: each head its block of d_h = %d columns", dh);
    block_row(out, mha ? "Q, K, V" : "Q", "[H,T,d_h]", v, w);
    if (!mha) {
        snprintf(v, sizeof v, "[%d, %d, %d] each", Hkv, T, dh);
        snprintf(w, sizeof w, "K/V heads, each shared by H/H_kv = %d query heads", H / Hkv);
        block_row(out, "K, V", "[H_kv,T,d_h]", v, w);
    }
    snprintf(v, sizeof v, "[%d, %d, %d]", H, T, T);
    snprintf(w, sizeof w, "Q.K^T / sqrt(%d) + causal mask", dh);
    block_row(out, "scores", "[H,T,T]", v, w);
    block_row(out, "weights", "[H,T,T]", v, "softmax over keys: the attention maps");
    snprintf(v, sizeof v, "[%d, %d, %d]", H, T, dh);
    block_row(out, "O", "[H,T,d_h]", v, "weights . V");
    snprintf(v, sizeof v, "[%d, %d]", T, E);
    block_row(out, "O_cat", "[T,E]", v,
              s.output_gate ? "heads concatenated, times sigmoid(Z . W_gate + b_gate)"
                            : "heads concatenated");
    snprintf(v, sizeof v, "[%d, %d]", T, D);
    snprintf(w, sizeof w, "O_cat . W_o [%d, %d] + b_o, added to h", E, D);
    block_row(out, "A", "[T,D]", v, w);
    char cache[320], all_heads[96], one_head[96];
    shapes_kv_cache_line(s, T, cache, sizeof cache);
    ModelShape mha_shape = s, mqa_shape = s;
    mha_shape.n_kv_head = H;
    mqa_shape.n_kv_head = 1;
    fprintf(out, "\nK/V cache, 2*H_kv*d_head*L values per token (harness generate keeps fp32):\n  %s\n",
            cache);
    fprintf(out, "  per token in bf16 with H_kv = H = %d (MHA): %s; with H_kv = 1 (MQA): %s\n\n", H,
            binary_units(2 * model_cost(mha_shape).kv_cache_values, all_heads, 96),
            binary_units(2 * model_cost(mqa_shape).kv_cache_values, one_head, 96));
}

/* A row of a table: its label, its per-layer value (< 0: "-", a whole-model part) and its
 * whole-model value; shown only where the shape has the part. */
typedef struct {
    const char *label;
    double per_layer, whole;
    int shown;
} CountRow;

static void print_counts(const CountRow *rows, int n, FILE *out) {
    char a[32], b[32];
    for (int i = 0; i < n; i++)
        if (rows[i].shown)
            fprintf(out, "  %-34s%15s  %15s\n", rows[i].label,
                    rows[i].per_layer < 0 ? "-" : grouped(rows[i].per_layer, a, 32),
                    grouped(rows[i].whole, b, 32));
}

static void print_params(ModelShape s, ModelCost c, FILE *out) {
    const double L = s.n_layer;
    const int learned = s.pos == POS_LEARNED || s.pos == POS_SHORTFORMER;
    const double layer =
        c.params_layer_qkv + c.params_layer_o + c.params_layer_gate + c.params_layer_sink + c.params_layer_ln;
    const CountRow rows[] = {
        {learned ? "embeddings (tok V*D + pos T*D)" : "embeddings (tok V*D; no W_pos)", -1, c.params_embed,
         1},
        {"W_qkv + b_qkv (D*W + W)", c.params_layer_qkv, L * c.params_layer_qkv, 1},
        {"W_gate + b_gate (D*E + E)", c.params_layer_gate, L * c.params_layer_gate, s.output_gate},
        {"W_o + b_o (E*D + D)", c.params_layer_o, L * c.params_layer_o, 1},
        {"sink logits (H)", c.params_layer_sink, L * c.params_layer_sink, s.sink},
        {"LayerNorm (2*D)", c.params_layer_ln, L * c.params_layer_ln, 1},
        {"final LN + unembedding (2*D + D*V)", -1, c.params_final, 1},
        {"total", layer, c.params_total, 1},
    };
    fprintf(out, "parameters                          per layer        whole model\n");
    print_counts(rows, (int)(sizeof rows / sizeof rows[0]), out);
    fprintf(out, "\n");
}

static void print_flops(ModelShape s, ModelCost c, FILE *out) {
    const double per_layer = c.flops_qkv + c.flops_scores + c.flops_mix + c.flops_o + c.flops_gate;
    const struct {
        const char *label;
        double flops;
        int shown;
    } rows[] = {
        {"QKV projection   2*D*W", c.flops_qkv, 1},
        {"scores Q.K^T     2*T*E", c.flops_scores, 1},
        {"weights . V      2*T*E", c.flops_mix, 1},
        {"output W_o       2*E*D", c.flops_o, 1},
        {"output gate      2*D*E", c.flops_gate, s.output_gate},
    };
    char a[32], b[32];
    fprintf(out,
            "matmul FLOPs per token, forward (multiply-add = 2; attention over a full context of T=%d)\n",
            s.seq_len);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].shown) fprintf(out, "  %-34s%15s\n", rows[i].label, grouped(rows[i].flops, a, 32));
    fprintf(out, "  per layer                         %15s   x %d layers = %s\n", grouped(per_layer, a, 32),
            s.n_layer, grouped(s.n_layer * per_layer, b, 32));
    fprintf(out, "  unembedding      2*D*V            %15s\n", grouped(c.flops_unembed, a, 32));
    fprintf(out, "  total forward                     %15s   (forward + backward ~ 3x: %s)\n",
            grouped(c.flops_forward, a, 32), grouped(3 * c.flops_forward, b, 32));
}

static void print_memory(const Config *cfg, FILE *out) {
    MemoryEstimate e;
    budget_memory(cfg, &e);
    char a[32], b[32];
    fprintf(out, "\nmemory, estimated peak (from the sizes the allocations use):\n");
    for (int i = 0; i < e.n; i++)
        fprintf(out, "  %-12s %s  (shrink: %s)\n", budget_units(e.part[i].bytes, a, 32), e.part[i].name,
                e.part[i].shrink);
    fprintf(out, "  training     %s\n  with the study %s\n", budget_units(e.training, a, 32),
            budget_units(e.study, b, 32));
}

void shapes_print(const Config *cfg, FILE *out) {
    const ModelShape s = model_shape_from_config(cfg);
    const ModelCost c = model_cost(s);
    print_summary(cfg, s, out);
    print_block(s, out);
    print_params(s, c, out);
    print_flops(s, c, out);
    print_memory(cfg, out);
    DiskEstimate disk;
    budget_disk(cfg, &disk);
    char r[32], k[32], both[32];
    fprintf(out,
            "\ndisk (output.path, upper bounds, maps uncompressed): the results file %s, a checkpoint %s; %s "
            "reserved at step 0 for the end of the run (one checkpoint and the results file)\n",
            budget_units(disk.result, r, 32), budget_units(disk.checkpoint, k, 32),
            budget_units(disk.result + disk.checkpoint, both, 32));
}
