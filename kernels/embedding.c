/* embedding.c: token + learned position embedding, forward and backward.
 * Must not know: the program (config, files, user errors, training); kernels/ includes only
 * kernels/ headers and the C library. */
#include "kernels.h"

void embedding_forward(float *out, const int *tokens, const float *tok_emb, const float *pos_emb, int B,
                       int T, int D) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * D;
            const float *te = tok_emb + (size_t)tokens[b * T + t] * D;
            if (pos_emb) {
                const float *pe = pos_emb + (size_t)t * D;
                for (int i = 0; i < D; i++) o[i] = te[i] + pe[i];
            } else {
                for (int i = 0; i < D; i++) o[i] = te[i];
            }
        }
    }
}

/* Differentiates h0[b,t] = W_tok[x[b,t]] + W_pos[t]. Several positions may share a token, so
 * the rows of d_tok_emb are reduced serially over (b, t) in order; threads split the columns. */
void embedding_backward(float *d_tok_emb, float *d_pos_emb, const float *d_out, const int *tokens, int B,
                        int T, int D, int V) {
    (void)V;
    const int col_block = 16;
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < D; c0 += col_block) {
        int c1 = c0 + col_block < D ? c0 + col_block : D;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *g = d_out + ((size_t)b * T + t) * D;
                float *dt = d_tok_emb + (size_t)tokens[b * T + t] * D;
                for (int i = c0; i < c1; i++) dt[i] += g[i];
                if (d_pos_emb) {
                    float *dp = d_pos_emb + (size_t)t * D;
                    for (int i = c0; i < c1; i++) dp[i] += g[i];
                }
            }
        }
    }
}

/* out[b, t] = inp[b, t] + W_pos[t]: the shortformer's Q/K input (positions added inside a layer). */
void position_add_forward(float *out, const float *inp, const float *pos_emb, int B, int T, int D) {
    const size_t BT = (size_t)B * T;
    for (size_t n = 0; n < BT; n++)
        for (int i = 0; i < D; i++) out[n * D + i] = inp[n * D + i] + pos_emb[(n % (size_t)T) * D + i];
}

/* Differentiates out = inp + W_pos[t]: both get d_out; the rows of d_pos_emb are summed over
 * (b, t) in order. */
void position_add_backward(float *d_inp, float *d_pos_emb, const float *d_out, int B, int T, int D) {
    const size_t BT = (size_t)B * T;
    for (size_t n = 0; n < BT; n++)
        for (int i = 0; i < D; i++) {
            d_inp[n * D + i] += d_out[n * D + i];
            d_pos_emb[(n % (size_t)T) * D + i] += d_out[n * D + i];
        }
}
