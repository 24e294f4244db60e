"""heads.core.stats: mean and sample std, Welch's t-test (own Welch-Satterthwaite df; the p-value from
scipy.stats.t when scipy is there, else from our own regularized incomplete beta).

Pure functions of numbers: knows nothing of files or runs.
"""
import math

import numpy as np


def mean_std(values):
    """Mean and sample standard deviation (ddof = 1; nan for fewer than 2 values)."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan"), 0
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else float("nan"), len(x)


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc_regularized(a, b, x):
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df, use_scipy=True):
    """P(|T| >= |t|) for Student's t with df (real) degrees of freedom."""
    if math.isnan(t) or math.isnan(df) or df <= 0:
        return float("nan")
    if math.isinf(t):
        return 0.0
    if use_scipy:
        try:
            from scipy import stats
            return float(2.0 * stats.t.sf(abs(t), df))
        except ImportError:
            pass
    return betainc_regularized(df / 2.0, 0.5, df / (df + t * t))


def welch_t_test(a, b, use_scipy=True):
    """Welch's t-test of mean(a) - mean(b): (t, df, two-sided p). df by Welch-Satterthwaite:
        t  = (ma - mb) / sqrt(va/na + vb/nb)
        df = (va/na + vb/nb)^2 / ((va/na)^2/(na-1) + (vb/nb)^2/(nb-1))
    with sample variances (ddof 1). nan when either side has fewer than 2 values or no spread."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return float("nan"), float("nan"), float("nan")
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se2 = va + vb
    if se2 == 0.0:
        return float("nan"), float("nan"), float("nan")
    t = (a.mean() - b.mean()) / math.sqrt(se2)
    df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1))
    return float(t), float(df), t_two_sided_p(float(t), float(df), use_scipy)
