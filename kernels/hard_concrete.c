/* hard_concrete.c: the Hard Concrete distribution of Louizos, Welling and Kingma (2018), "Learning
 * Sparse Neural Networks through L0 Regularization", §4, on a vector of gates, each with its own
 * location log α, and a temperature β and stretch interval (l, r), l < 0 < 1 < r:
 *   s = σ((log u − log(1 − u) + log α) / β),  u ~ U(0, 1) given (the caller's noise)
 *   g = min(1, max(0, s · (r − l) + l))
 *   P(g ≠ 0) = σ(log α − β · log(−l / r))
 * The sample is reparameterised: for fixed u, g is a function of log α, and its derivative is
 * (r − l) · s (1 − s) / β where the stretched value lies strictly inside (0, 1), 0 where it is
 * clipped. Arithmetic in double; the results rounded to float.
 * Must not know: what the gates multiply (attention heads), where u comes from, the penalty's
 * weight; kernels/ includes only kernels/ headers and the C library. */
#include <math.h>
#include "kernels.h"

static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

/* s of the sample, and its stretched value s · (r − l) + l. */
static double concrete(float log_alpha, float u, HardConcrete hc, double *stretched) {
    double s = sigmoid((log((double)u) - log1p(-(double)u) + log_alpha) / hc.temperature);
    *stretched = s * ((double)hc.high - hc.low) + hc.low;
    return s;
}

void hard_concrete_sample(float *gate, const float *log_alpha, const float *u, int n, HardConcrete hc) {
    for (int i = 0; i < n; i++) {
        double stretched;
        concrete(log_alpha[i], u[i], hc, &stretched);
        gate[i] = (float)(stretched < 0 ? 0 : stretched > 1 ? 1 : stretched);
    }
}

void hard_concrete_sample_backward(float *d_log_alpha, const float *d_gate, const float *log_alpha,
                                   const float *u, int n, HardConcrete hc) {
    for (int i = 0; i < n; i++) {
        double stretched, s = concrete(log_alpha[i], u[i], hc, &stretched);
        if (stretched > 0 && stretched < 1)
            d_log_alpha[i] += (float)(d_gate[i] * ((double)hc.high - hc.low) * s * (1 - s) / hc.temperature);
    }
}

/* log α − β · log(−l / r): the logit of P(g ≠ 0). */
static double open_logit(float log_alpha, HardConcrete hc) {
    return log_alpha - (double)hc.temperature * log(-(double)hc.low / hc.high);
}

void hard_concrete_p_open(float *p_open, const float *log_alpha, int n, HardConcrete hc) {
    for (int i = 0; i < n; i++) p_open[i] = (float)sigmoid(open_logit(log_alpha[i], hc));
}

void hard_concrete_p_open_backward(float *d_log_alpha, const float *d_p_open, const float *log_alpha, int n,
                                   HardConcrete hc) {
    for (int i = 0; i < n; i++) {
        double p = sigmoid(open_logit(log_alpha[i], hc));
        d_log_alpha[i] += (float)(d_p_open[i] * p * (1 - p));
    }
}
