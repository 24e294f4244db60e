"""heads.compare: a sweep's head counts compared (scripts/compare prints it as Markdown, the sweep
report shows the same table): per head count (per combination of any other swept keys) n_head,
d_head, parameters, FLOPs per token, seeds, the metric as mean ± sample std, its difference from
the baseline head count, Welch's t and p, Holm-adjusted p over the family of tests (the
comparisons against the baseline and, per series, the best head count against the narrowest),
and, when the runs have pruning curves, heads needed and the prunable fraction.

Knows the summary's columns and /prune (through heads.pruning); nothing of printing or HTML.
"""
import math
import os

from . import configs, pruning, results, stats
from .cli import UserError


def fmt_int(v):
    try:
        return f"{int(v):,}"
    except (TypeError, ValueError):
        return "?"


def decimals(m):
    """Decimals that show 3 significant digits of a small loss and at least 4 of any."""
    if m != m or m <= 0:
        return 4
    return max(4, 2 - math.floor(math.log10(m)))


def fmt_p(p):
    if p != p:  # nan
        return "n/a"
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def mean_std_text(values, digits):
    m, sd, n = stats.mean_std(values)
    if n == 0:
        return "n/a"
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if n > 1 else f"{m:.{digits}f}"


def needed_columns(s, tolerance=None):
    """{column: [value per run]} of heads needed / prunable fraction, from the summary or, with a
    tolerance, recomputed from the runs' /prune curves; {} when no run has curves."""
    if tolerance is None:
        if "heads_needed" not in s.data:
            return {}
        return {c: [float(v) for v in s[c]] for c in ("heads_needed", "prunable_fraction")}
    out = {"heads_needed": [], "prunable_fraction": []}
    for i in range(s.n):
        curves = {}
        if s["status"][i] == "complete" and os.path.exists(s.run_path(i)):
            with results.open_file(s.run_path(i)) as f:  # a damaged file: one line
                curves = pruning.read_curves(f)
        row = pruning.summary_values(curves, tolerance)
        for c in out:
            out[c].append(float("nan") if row[c] is None else float(row[c]))
    return out if any(v == v for v in out["heads_needed"]) else {}


def _p_source():
    try:
        import scipy  # noqa: F401
        return "scipy.stats.t"
    except ImportError:
        return "own incomplete beta"


def _row(s, key, idx, base_idx, base_h, needed, metric):
    """The cells of one head count's row; (cells, mean, Welch p or None when not tested)."""
    values = [float(s[metric][i]) for i in idx]
    m, _, n = stats.mean_std(values)
    d = decimals(m)
    first = idx[0]
    cells = [configs.format_value(v) for v in key[:-1]]
    d_heads = sorted({int(s["d_head"][i]) for i in idx})
    cells += [str(key[-1]), "/".join(map(str, d_heads)), fmt_int(s["params"][first]),
              fmt_int(s["flops_per_token"][first]), str(n), mean_std_text(values, d)]
    p = None
    if base_idx is None:
        cells += ["n/a", "n/a", "n/a", "n/a"]
    elif key[-1] == base_h:
        cells += ["(baseline)", "", "", ""]
    else:
        base = [float(s[metric][i]) for i in base_idx]
        delta = m - stats.mean_std(base)[0]
        t, df, p = stats.welch_t_test(values, base)
        cells += [f"{delta:+.{d}f}", f"{t:+.2f} ({df:.1f})" if t == t else "n/a", fmt_p(p), ""]
    if needed:
        hn = [needed["heads_needed"][i] for i in idx]
        cells += [f"{mean_std_text(hn, 1)} of {key[-1] * int(s['n_layer'][first])}",
                  mean_std_text([needed["prunable_fraction"][i] for i in idx], 2)]
    return cells, m, p


def check_metric(s, metric):
    """A UserError unless metric is a column of the Summary s."""
    if metric not in s.data:
        raise UserError(f"--metric {metric}: not a summary column; try final_eval_loss, "
                        "min_eval_loss or final_train_loss")


def comparison(s, metric="final_eval_loss", baseline=None, tolerance=None):
    """The comparison of a Summary: {"header": [...], "rows": [[cell, ...]], "notes": [...],
    "n_text": how many leading columns are text (the other swept keys)}."""
    check_metric(s, metric)
    other = s.other_keys()
    groups = results.group_runs(s, other + ["n_head"])
    if not groups:
        raise UserError(f"{s.dir}: no complete runs to compare")
    heads = sorted({k[-1] for k in groups})
    base_h = baseline if baseline is not None else (1 if 1 in heads else heads[0])
    if base_h not in heads:
        raise UserError(f"--baseline {base_h}: no complete runs with that head count "
                        f"(have {', '.join(map(str, heads))})")
    needed = needed_columns(s, tolerance)
    keys = sorted(groups, key=lambda k: (tuple(configs.format_value(x) for x in k[:-1]), k[-1]))
    cols = [k.split(".")[-1] for k in other] + [
        "n_head", "d_head", "params", "FLOPs/token", "seeds", f"{metric} (mean ± std)",
        f"Δ vs {base_h} head{'s' if base_h != 1 else ''}", "Welch t (df)", "p", "Holm p"]
    if needed:
        cols += ["heads needed", "prunable"]
    rows, tests, best = [], [], {}  # tests: (row index or None, p) of the family Holm adjusts
    for key in keys:
        cells, m, p = _row(s, key, groups[key], groups.get(key[:-1] + (base_h,)), base_h,
                           needed, metric)
        if p is not None:
            tests.append((len(rows), p))
        if key[:-1] not in best or m < best[key[:-1]][1]:
            best[key[:-1]] = (key, m)
        rows.append(cells)
    extra = []  # per series: the narrowest head count against the best
    for series, (key, m) in best.items():
        narrow_h = max(k[-1] for k in keys if k[:-1] == series)
        if narrow_h == key[-1]:
            continue
        a = [float(s[metric][i]) for i in groups[key]]
        b = [float(s[metric][i]) for i in groups[series + (narrow_h,)]]
        t, df, p = stats.welch_t_test(b, a)
        extra.append((series, key[-1], narrow_h, stats.mean_std(b)[0] - m, t, df, p))
        tests.append((None, p))
    adjusted = pruning.holm([p for _, p in tests])
    for (r, _), q in zip(tests, adjusted):
        if r is not None:
            rows[r][cols.index("Holm p")] = fmt_p(q)
    holm_of_extra = [q for (r, _), q in zip(tests, adjusted) if r is None]
    n_all = sum(len(v) for v in groups.values())
    notes = [f"{s.name}: {n_all} complete runs; width rule {s.width}; {metric} of each run, "
             f"mean ± sample std over seeds; Δ = mean − mean of {base_h} head(s) (negative = "
             f"better); two-sided Welch t-test, Welch–Satterthwaite df, p from {_p_source()}; "
             f"Holm p: Holm-adjusted over the {len(tests)} tests of the table and below."]
    if needed:
        tol = f"{100 * (tolerance if tolerance is not None else s.tolerance):g}%"
        notes.append(f"heads needed: fewest heads keeping the eval loss within {tol} (relative) of "
                     "the unpruned model on its pruning curves (/prune, the fewer of the two "
                     "criteria), of all heads n_head × n_layer; prunable: the fraction that can go.")
    for series, (key, m) in best.items():
        label = ", ".join(f"{k.split('.')[-1]} {configs.format_value(v)}"
                          for k, v in zip(other, series))
        where = f"{key[-1]} head{'s' if key[-1] != 1 else ''}" + (f" ({label})" if label else "")
        notes.append(f"lowest {metric}: {where} at {m:.{decimals(m)}f}" +
                     (", the baseline itself." if key[-1] == base_h else "."))
    for (series, best_h, narrow_h, delta, t, df, p), q in zip(extra, holm_of_extra):
        notes.append(f"narrowest ({narrow_h} heads) against the best ({best_h} heads): Δ "
                     f"{delta:+.{decimals(best[series][1])}f}, Welch t {t:+.2f} ({df:.1f} df), "
                     f"p = {fmt_p(p)}, Holm p = {fmt_p(q)}.")
    return {"header": cols, "rows": rows, "notes": notes, "n_text": len(other)}


def markdown(table):
    """The comparison as Markdown table lines (text columns left-aligned, numbers right)."""
    cols = table["header"]
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---:" if i >= table["n_text"] else "---"
                            for i in range(len(cols))) + "|"]
    return lines + ["| " + " | ".join(cells) + " |" for cells in table["rows"]]
