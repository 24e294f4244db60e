"""heads.core.stats: mean and sample std, Welch's t-test (own Welch-Satterthwaite df; the p-value from
scipy.stats.t when scipy is there, else from our own regularized incomplete beta), Welch's
confidence interval of a difference, Schuirmann's equivalence test (TOST), and the seeds per arm
a two-sample t test needs for 80% power (noncentral t from scipy.stats.nct, else the normal
approximation).

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


def t_quantile(q, df, use_scipy=True):
    """The q quantile (0.5 < q < 1) of Student's t with df degrees of freedom: scipy.stats.t.ppf,
    else t_two_sided_p inverted by bisection."""
    if math.isnan(df) or df <= 0:
        return float("nan")
    if use_scipy:
        try:
            from scipy import stats
            return float(stats.t.ppf(q, df))
        except ImportError:
            pass
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df, False) > 2 * (1 - q):
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df, False) > 2 * (1 - q) else (lo, mid)
    return (lo + hi) / 2


def welch_interval(a, b, level=0.95, use_scipy=True):
    """The level confidence interval of mean(a) - mean(b) by Welch's method: the difference
    ± t_{(1+level)/2, df} · sqrt(va/na + vb/nb), df by Welch-Satterthwaite; (nan, nan) when the
    test is not defined (welch_t_test)."""
    t, df, _ = welch_t_test(a, b, use_scipy)
    if t != t:
        return float("nan"), float("nan")
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    delta = a.mean() - b.mean()
    half = t_quantile((1 + level) / 2, df, use_scipy) * math.sqrt(
        a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return float(delta - half), float(delta + half)


def t_one_sided_p(t, df, use_scipy=True):
    """P(T >= t) for Student's t with df degrees of freedom (half the two-sided p, mirrored)."""
    two = t_two_sided_p(t, df, use_scipy)
    return two / 2 if t >= 0 else 1 - two / 2


def welch_tost(a, b, margin, use_scipy=True):
    """Schuirmann's two one-sided tests, Welch form, of |mean(a) - mean(b)| < margin:
        p = max(P(T >= (Δ + margin) / se), P(T <= (Δ - margin) / se))
    with se² = va/na + vb/nb and T Student's t with the Welch–Satterthwaite df. The means are
    equivalent at level alpha when p < alpha, which is the (1 - 2 alpha) Welch interval lying
    inside (-margin, margin). nan when the t-test is not defined or margin is not positive."""
    t, df, _ = welch_t_test(a, b, use_scipy)
    if t != t or not margin > 0:
        return float("nan")
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    delta = a.mean() - b.mean()
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return max(t_one_sided_p((delta + margin) / se, df, use_scipy),
               t_one_sided_p((margin - delta) / se, df, use_scipy))


SEEDS_CAP = 100000  # seeds_needed stops counting here (and says ">")


def seeds_needed(delta, sd_a, sd_b, power=0.8, alpha=0.05, use_scipy=True):
    """Seeds per arm (n, the same in both) that a two-sided two-sample t test at level alpha
    needs to detect a true difference delta with the given power, when each arm's seeds spread
    as observed: standardized effect d = |delta| / s with s = sqrt((sd_a² + sd_b²) / 2) (the
    standard error of the difference is then s·sqrt(2/n), as Welch's with equal n), df = 2n - 2.
    With scipy: the smallest n >= 2 whose power P(|T| > t_{1-alpha/2, df}), T noncentral t with
    noncentrality d·sqrt(n/2) (scipy.stats.nct), reaches power; without scipy: the normal
    approximation n = ceil(2 (z_{1-alpha/2} + z_power)² / d²), at least 2.
    Returns (n or None, method): None when delta or the spread is not a number or delta is 0;
    SEEDS_CAP + 1 when more than SEEDS_CAP would be needed."""
    from statistics import NormalDist
    s = math.sqrt((sd_a * sd_a + sd_b * sd_b) / 2) if sd_a == sd_a and sd_b == sd_b else float("nan")
    d = abs(delta) / s if s == s and s > 0 and delta == delta else float("nan")
    z = NormalDist()
    guess = 2 * (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) ** 2 / d ** 2 if d == d and d > 0 \
        else float("nan")
    if guess != guess:
        return None, seeds_method(use_scipy)
    if use_scipy:
        try:
            from scipy import stats

            def power_at(n):
                df = 2 * n - 2
                crit = stats.t.ppf(1 - alpha / 2, df)
                nc = d * math.sqrt(n / 2)
                with np.errstate(invalid="ignore"):
                    p = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
                return p if p == p else _nct_power(crit, df, nc)
            if guess > SEEDS_CAP or power_at(SEEDS_CAP) < power:
                return SEEDS_CAP + 1, seeds_method(True)
            lo, hi = 1, 2  # power rises with n: power_at(lo) < power <= power_at(hi)
            while power_at(hi) < power:
                lo, hi = hi, min(2 * hi, SEEDS_CAP)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if power_at(mid) >= power else (mid, hi)
            n = hi
            return n, seeds_method(True)
        except ImportError:
            pass
    return min(max(2, math.ceil(guess)), SEEDS_CAP + 1), seeds_method(False)


def _nct_power(crit, df, nc):
    """P(|T| > crit) for T = (Z + nc) / sqrt(V / df), V ~ chi² df, by integrating over V (where
    scipy.stats.nct returns nan: small df and noncentrality)."""
    from scipy import integrate, stats
    f = lambda v: (stats.norm.sf(crit * math.sqrt(v / df) - nc)
                   + stats.norm.cdf(-crit * math.sqrt(v / df) - nc)) * stats.chi2.pdf(v, df)
    return integrate.quad(f, stats.chi2.ppf(1e-12, df), stats.chi2.ppf(1 - 1e-12, df))[0]


def seeds_method(use_scipy=True):
    """How seeds_needed counts, in words (what the tables' notes print)."""
    if use_scipy:
        try:
            import scipy  # noqa: F401
            return ("two-sided two-sample t test at α = 0.05, 80% power, noncentral t "
                    "(scipy.stats.nct), spread s = sqrt((s₁² + s₂²)/2) as observed")
        except ImportError:
            pass
    return ("two-sided two-sample t test at α = 0.05, 80% power, normal approximation "
            "n = 2(z₀.₉₇₅ + z₀.₈)²/d², spread s = sqrt((s₁² + s₂²)/2) as observed")
