/* shapes.c: `harness --shapes CONFIG`: the tensor shapes of one block, parameter counts and
 * matmul FLOPs per token, computed from the config alone (no allocation: works for real sizes).
 * Owns the --shapes report and the K/V cache's size (one function, shared with generate). Must not know: files, training, the tasks. */
#include <stdio.h>
#include <string.h>
#include "shapes.h"
#include "model.h"

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

void shapes_kv_cache_line(ModelShape s, int tokens, char *buf, size_t size) {
    char a[32], b[32], c[32], d[32];
    size_t per_token = kv_cache_bytes_per_token(s);
    snprintf(buf, size, "%s values = %s bytes per token in fp32; %s tokens: %s bytes",
             grouped(model_cost(s).kv_cache_values, a, 32), grouped((double)per_token, b, 32),
             grouped(tokens, c, 32), grouped((double)per_token * tokens, d, 32));
}

void shapes_print(const Config *cfg, FILE *out) {
    ModelShape s = model_shape_from_config(cfg);
    ModelCost c = model_cost(s);
    int D = s.d_model, H = s.n_head, Hkv = s.n_kv_head, dh = s.d_head, T = s.seq_len;
    int E = H * dh, W = (H + 2 * Hkv) * dh, L = s.n_layer;
    static const char *const pos_names[] = {"learned positions", "rotary",
                                            "shortformer (learned positions on the Q/K input only)", "no positions"};
    char a[32], b[32], d[32];
    fprintf(out, "%s: d_model D=%d, n_head H=%d, d_head=%d, E=H*d_head=%d%s, n_layer L=%d, "
                 "seq_len T=%d, vocab V=%d\n",
            cfg->source_path, D, H, dh, E, E == D ? " (= D)" : E > D ? " (> D)" : " (< D)", L, T,
            s.vocab_size);
    fprintf(out, "attention: %s K/V heads H_kv=%d%s; %s", Hkv == H ? "multi-head," : Hkv == 1 ? "multi-query," : "grouped-query,",
            Hkv, Hkv == H ? "" : " (each shared by H/H_kv query heads)", pos_names[s.pos]);
    if (s.pos == POS_ROPE) fprintf(out, " on the first %d of %d dims per head, base %g", s.rope_dims, dh, s.rope_base);
    fprintf(out, "%s\n\n", s.output_gate ? "; sigmoid output gate" : "");
    fprintf(out, "one block, one sequence (the mainline):\n");
    fprintf(out, "  Z       [T,D]      = [%d, %d]          LN(h)\n", T, D);
    const char *qkv_cols = Hkv == H ? "3E" : "(H+2H_kv)d_h";
    int pad = 7 - (int)strlen(qkv_cols); /* "=" under the rows below, where the label leaves room */
    fprintf(out, "  QKV     [T,%s]%*s= [%d, %d]          Z . W_qkv [%d, %d] + b_qkv\n", qkv_cols, pad > 1 ? pad : 1,
            "", T, W, D, W);
    if (Hkv == H) fprintf(out, "  Q/K/V   [H,T,d_h]  = [%d, %d, %d] each\n", H, T, dh);
    else fprintf(out, "  Q [H,T,d_h] = [%d, %d, %d];  K/V [H_kv,T,d_h] = [%d, %d, %d] each\n", H, T, dh, Hkv, T, dh);
    fprintf(out, "  scores  [H,T,T]    = [%d, %d, %d]      Q.K^T / sqrt(%d) + causal mask\n", H, T, T, dh);
    fprintf(out, "  weights [H,T,T]    = [%d, %d, %d]      softmax over keys: the attention maps\n", H, T, T);
    fprintf(out, "  O       [H,T,d_h]  = [%d, %d, %d]      weights . V\n", H, T, dh);
    fprintf(out, "  O_cat   [T,E]      = [%d, %d]          heads concatenated%s\n", T, E,
            s.output_gate ? ", times sigmoid(Z . W_gate + b_gate)" : "");
    fprintf(out, "  A       [T,D]      = [%d, %d]          O_cat . W_o [%d, %d] + b_o, added to h\n\n", T, D, E, D);
    char cache[160];
    shapes_kv_cache_line(s, T, cache, sizeof cache);
    fprintf(out, "K/V cache (harness generate's): 2*H_kv*d_head*L = %s (%s bytes per token in bf16)\n\n", cache,
            grouped(2 * c.kv_cache_values, a, 32));

    fprintf(out, "parameters                          per layer        whole model\n");
    fprintf(out, "  %-34s%15s  %15s\n", s.pos == POS_LEARNED || s.pos == POS_SHORTFORMER
            ? "embeddings (tok V*D + pos T*D)" : "embeddings (tok V*D; no W_pos)", "-", grouped(c.params_embed, a, 32));
    fprintf(out, "  W_qkv + b_qkv (D*W + W)           %15s  %15s\n", grouped(c.params_layer_qkv, a, 32), grouped(L * c.params_layer_qkv, b, 32));
    if (s.output_gate)
        fprintf(out, "  W_gate + b_gate (D*E + E)         %15s  %15s\n", grouped(c.params_layer_gate, a, 32), grouped(L * c.params_layer_gate, b, 32));
    fprintf(out, "  W_o + b_o (E*D + D)               %15s  %15s\n", grouped(c.params_layer_o, a, 32), grouped(L * c.params_layer_o, b, 32));
    if (s.sink)
        fprintf(out, "  sink logits (H)                   %15s  %15s\n", grouped(c.params_layer_sink, a, 32), grouped(L * c.params_layer_sink, b, 32));
    fprintf(out, "  LayerNorm (2*D)                   %15s  %15s\n", grouped(c.params_layer_ln, a, 32), grouped(L * c.params_layer_ln, b, 32));
    fprintf(out, "  final LN + unembedding (2*D + D*V)%15s  %15s\n", "-", grouped(c.params_final, a, 32));
    fprintf(out, "  total                             %15s  %15s\n\n",
            grouped(c.params_layer_qkv + c.params_layer_o + c.params_layer_gate + c.params_layer_sink + c.params_layer_ln, a, 32),
            grouped(c.params_total, b, 32));

    double per_layer = c.flops_qkv + c.flops_scores + c.flops_mix + c.flops_o + c.flops_gate;
    fprintf(out, "matmul FLOPs per token, forward (multiply-add = 2; attention over a full context of T=%d)\n", T);
    fprintf(out, "  QKV projection   2*D*W            %15s\n", grouped(c.flops_qkv, a, 32));
    fprintf(out, "  scores Q.K^T     2*T*E            %15s\n", grouped(c.flops_scores, a, 32));
    fprintf(out, "  weights . V      2*T*E            %15s\n", grouped(c.flops_mix, a, 32));
    fprintf(out, "  output W_o       2*E*D            %15s\n", grouped(c.flops_o, a, 32));
    if (s.output_gate) fprintf(out, "  output gate      2*D*E            %15s\n", grouped(c.flops_gate, a, 32));
    fprintf(out, "  per layer                         %15s   x %d layers = %s\n", grouped(per_layer, a, 32), L, grouped(L * per_layer, d, 32));
    fprintf(out, "  unembedding      2*D*V            %15s\n", grouped(c.flops_unembed, a, 32));
    fprintf(out, "  total forward                     %15s   (forward + backward ~ 3x: %s)\n",
            grouped(c.flops_forward, a, 32), grouped(3 * c.flops_forward, b, 32));
}
