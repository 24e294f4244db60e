"""heads.answers.compare: a sweep's runs compared along one swept key (scripts/compare prints it as Markdown
or JSON, the sweep report shows the same table): per point (a value of the key compared along,
within a group of the other swept keys) n_head, d_head, parameters, FLOPs per token, seeds, the
metric as mean ± sample std, its difference from the baseline value of the group, Welch's t and p,
Holm-adjusted p over the family of distinct tests printed (the rows against the baseline and, when
comparing head counts, per group the best head count against the narrowest when that is not a row
already), and, when the runs have pruning curves, heads needed and the prunable fraction; when they
have activation patching, the heads that carry 80% of its effect.

Knows the summary's columns (through heads.answers.sweepaxes) and /prune (through heads.read.pruning); nothing
of printing or HTML.
"""
import math
import os

from ..read import causal, pruning, results
from ..core import configs, stats
from ..core.cli import UserError
from . import tuning
from .sweepaxes import HEAD_KEYS, LAYOUT, OWN_COLUMNS, Layout, label, short, tolerance_of
from ..core.words import fmt_p, plural


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


def mean_std_text(values, digits):
    m, sd, n = stats.mean_std(values)
    if n == 0:
        return "n/a"
    return f"{m:.{digits}f} ± {sd:.{digits}f}" if n > 1 else f"{m:.{digits}f}"


def needed_columns(s, tolerance=None, floor=None):
    """{column: [value per run]} of heads needed / prunable fraction, from the summary or, with a
    tolerance or floor, recomputed from the runs' /prune curves; {} when no run has curves."""
    if tolerance is None and floor is None:
        if "heads_needed" not in s.data:
            return {}
        return {c: [float(v) for v in s[c]] for c in ("heads_needed", "prunable_fraction")}
    rel, flo = tolerance_of(s)
    rel = rel if tolerance is None else tolerance
    flo = flo if floor is None else floor
    out = {"heads_needed": [], "prunable_fraction": []}
    for i in range(s.n):
        curves = {}
        if s["status"][i] == "complete" and os.path.exists(s.run_path(i)):
            with results.open_file(s.run_path(i)) as f:  # a damaged file: one line
                curves = pruning.read_curves(f)
        row = pruning.summary_values(curves, rel, flo)
        for c in out:
            out[c].append(float("nan") if row[c] is None else float(row[c]))
    return out if any(v == v for v in out["heads_needed"]) else {}


def _p_source():
    try:
        import scipy  # noqa: F401
        return "scipy.stats.t"
    except ImportError:
        return "own incomplete beta"


def best_on_validation(s, layout, metric, means):
    """(column, {group: point}): per group the point with the lowest mean validation loss — the
    column selections read (tuning.selection_metric) — when the table reports another split, so
    that "the best" of the narrowest-against-best test is never chosen on the split it reports;
    else the reported metric's own means (the test then says it is optimistic)."""
    chooser = tuning.selection_metric(s)
    if tuning.split_of(metric)[0] != "test" or chooser not in s.data:
        chooser = metric
    best = {}
    for point in means:
        vals = [v for v in layout.values(point, chooser) if v == v]
        m = sum(vals) / len(vals) if vals else math.inf
        if point[:-1] not in best or m < best[point[:-1]][1]:
            best[point[:-1]] = (point, m)
    return chooser, {g: p for g, (p, _) in best.items()}


def check_metric(s, metric):
    """A UserError unless metric is a column of the Summary s."""
    if metric not in s.data:
        raise UserError(f"--metric {metric}: not a summary column; try final_eval_loss, "
                        "min_eval_loss or final_train_loss")


def pick_baseline(layout, baseline):
    """The baseline value of the key compared along: --baseline (matched as the harness reads
    values: 2 == 2.0, 'rope'), else 1 head (or the fewest) for n_head, else the grid's first."""
    values = layout.by_values
    if baseline is not None:
        if layout.by == LAYOUT:  # 4x32 is 4×32
            baseline = str(baseline).replace("x", "×").replace("X", "×")
        for v in values:
            if configs.values_equal(v, baseline):
                return v
        raise UserError(f"--baseline {baseline}: no complete runs with {short(layout.by)} "
                        f"{baseline} (have {', '.join(configs.format_value(v) for v in values)})")
    if layout.by in HEAD_KEYS:
        return 1 if 1 in values else min(values)
    first_seen = [results.plain(layout.s[layout.by][i]) for i in range(layout.s.n)
                  if layout.s["status"][i] == "complete"]
    return first_seen[0]


def nan_none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def seeds_text(n):
    return "n/a" if n is None else f"> {stats.SEEDS_CAP:,}" if n > stats.SEEDS_CAP else str(n)


def ci_text(lo, hi, d):
    return "n/a" if lo != lo else f"[{lo:+.{d}f}, {hi:+.{d}f}]"


def margin_of(equivalence, baseline_values):
    """The equivalence margin in the metric's units: a number as given, or "spread": the
    baseline's sample std over its seeds. None without --equivalence."""
    if equivalence is None:
        return None
    if equivalence == "spread":
        return stats.mean_std(baseline_values)[1]
    return float(equivalence)


def comparison(s, metric=None, baseline=None, tolerance=None, by=None, floor=None,
               equivalence=None):
    """The comparison of a Summary along the key `by` (heads.answers.sweepaxes.choose_by):
    {"header": [...], "rows": [[cell, ...]], "notes": [...], "n_text": how many leading columns
    are text (the group keys), "json": the same numbers machine-readably, "tuning": the tuning
    table (heads.answers.tuning.table) of a tuned sweep, else None}. metric None: the test split
    when the runs have one (heads.answers.tuning.default_metric). A tuned sweep is compared on its
    arms, each at its chosen value (heads.answers.tuning.select)."""
    metric_note = None
    if metric is None:
        metric, metric_note = tuning.default_metric(s)
    check_metric(s, metric)
    sel = tuning.select(s)
    tuned = tuning.table(sel) if sel is not None else None
    if sel is not None:
        s = tuning.view(s, sel)
    layout = Layout(s, by)
    if not layout.points:
        raise UserError(f"{s.dir}: no complete runs to compare"
                        + (f"; {s.left_out_note()}" if s.left_out_note() else ""))
    base = pick_baseline(layout, baseline)
    heads = layout.by in HEAD_KEYS
    needed = needed_columns(s, tolerance, floor)
    rel, flo = tolerance_of(s)
    rel = rel if tolerance is None else tolerance
    flo = flo if floor is None else floor
    by_name = short(layout.by)
    value_text = lambda v: (plural(v, "head") if heads else configs.format_value(v)
                            if layout.by == LAYOUT else f"{by_name} {configs.format_value(v)}")
    base_text = value_text(base)
    # each key once: the key compared along is its own column unless it is n_head or d_head
    # (columns of every table); a layout that names n_head×d_head stands for both
    by_column = layout.by not in HEAD_KEYS + OWN_COLUMNS
    shape_columns = [] if layout.layout_heads else ["n_head", "d_head"]
    tokens_column = tuning.TOKENS.get(metric) if metric in tuning.TOKENS else None
    tuned_name = ", ".join(short(k) for k in sel.keys) if sel is not None else ""
    cols = [short(k) for k in layout.group_keys] + ([by_name] if by_column else []) + \
        shape_columns + ["params", "FLOPs/token"] + ([f"chosen {tuned_name}"] if sel else []) + \
        ["seeds", f"{metric} (mean ± std)"] + (["tokens/run"] if tokens_column else []) + \
        [f"Δ vs {base_text}", "95% CI of Δ", "Welch t (df)", "p", "Holm p", "seeds for 80% power"] + \
        (["equivalence margin", "TOST p"] if equivalence is not None else [])
    n_test_cells = 6 + (2 if equivalence is not None else 0)
    if needed:
        cols += ["heads needed", "prunable"]
    carrying = causal.CARRY_COLUMN in s.data and any(v == v for v in s[causal.CARRY_COLUMN])
    if carrying:
        cols += [f"heads carrying {round(100 * causal.CARRY_SHARE)}% of patching"]
    rows, json_rows, tests = [], [], []  # tests: (points tested, p, where its Holm p goes)
    means = {}
    for point, idx in layout.points.items():
        values = layout.values(point, metric)
        m, sd, n = stats.mean_std(values)
        means[point] = m
        d = decimals(m)
        first = idx[0]
        n_heads = sorted({int(s["n_head"][i]) for i in idx})
        d_heads = sorted({int(s["d_head"][i]) for i in idx})
        cells = [configs.format_value(v) for v in point[:-1]]
        cells += [configs.format_value(point[-1])] if by_column else []
        cells += ["/".join(map(str, n_heads)), "/".join(map(str, d_heads))] if shape_columns \
            else []
        cells += [fmt_int(s["params"][first]), fmt_int(s["flops_per_token"][first])]
        cells += [tuning.chosen_text(sel, point_arm(layout, sel, point))] if sel else []
        cells += [str(n), mean_std_text(values, d)]
        tokens = tuning.tokens_of(s, tokens_column, idx)
        cells += [tuning.tokens_text(tokens)] if tokens_column else []
        row = {"keys": dict(zip(layout.keys, point)), "n_head": n_heads, "d_head": d_heads,
               "params": nan_none(results.plain(s["params"][first])),
               "flops_per_token": nan_none(results.plain(s["flops_per_token"][first])),
               "n": n, "mean": m, "std": sd, "values": values, "tokens": tokens,
               "baseline": point[-1] == base, "delta": None, "ci95": None, "t": None,
               "df": None, "p": None, "holm_p": None, "seeds_needed": None,
               "equivalence_margin": None, "tost_p": None}
        if sel:
            arm = sel.arms.get(point_arm(layout, sel, point))
            row["chosen"] = dict(zip(sel.keys, arm["chosen"])) if arm else None
        base_point = point[:-1] + (base,)
        if base_point not in layout.points:
            cells += ["n/a"] * n_test_cells
        elif point[-1] == base:
            cells += ["(baseline)"] + [""] * (n_test_cells - 1)
        else:
            b = layout.values(base_point, metric)
            bm, bsd, _ = stats.mean_std(b)
            delta = m - bm
            t, df, p = stats.welch_t_test(values, b)
            lo, hi = stats.welch_interval(values, b)
            need = stats.seeds_needed(delta, sd, bsd)[0]
            cells += [f"{delta:+.{d}f}", ci_text(lo, hi, d),
                      f"{t:+.2f} ({df:.1f})" if t == t else "n/a", fmt_p(p), "", seeds_text(need)]
            row.update(delta=delta, t=t, df=df, p=p, ci95=[lo, hi] if lo == lo else None,
                       seeds_needed=need)
            margin = margin_of(equivalence, b)
            if margin is not None:
                tost = stats.welch_tost(values, b, margin)
                cells += [f"±{margin:.{d + 1}f}", fmt_p(tost)]
                row.update(equivalence_margin=margin, tost_p=tost)
            tests.append(({point, base_point}, p, ("row", len(rows))))
        if needed:
            hn = [needed["heads_needed"][i] for i in idx]
            pf = [needed["prunable_fraction"][i] for i in idx]
            all_heads = int(s["n_head"][first]) * int(s["n_layer"][first])
            cells += [f"{mean_std_text(hn, 1)} of {all_heads}", mean_std_text(pf, 2)]
            hm, hsd, hn_n = stats.mean_std(hn)
            pm, psd, _ = stats.mean_std(pf)
            row.update(heads_needed={"mean": hm, "std": hsd, "n": hn_n, "values": hn,
                                     "all_heads": all_heads},
                       prunable={"mean": pm, "std": psd})
        if carrying:
            hc = [float(s[causal.CARRY_COLUMN][i]) for i in idx]
            hc = [v for v in hc if v == v]
            all_heads = int(s["n_head"][first]) * int(s["n_layer"][first])
            cells.append(f"{mean_std_text(hc, 1)} of {all_heads}" if hc else "n/a")
            cm, csd, cn = stats.mean_std(hc)
            row["heads_carrying"] = {"mean": cm, "std": csd, "n": cn, "values": hc, "all_heads": all_heads}
        rows.append(cells)
        json_rows.append(row)

    best = {}
    for point, m in means.items():
        if point[:-1] not in best or m < means[best[point[:-1]]]:
            best[point[:-1]] = point
    chooser, chosen_best = best_on_validation(s, layout, metric, means)
    extra = []
    if heads:  # per group: the best head count (chosen on validation) against the narrowest
        for group, best_point in chosen_best.items():
            narrow = group + (max(p[-1] for p in layout.points if p[:-1] == group),)
            if narrow == best_point:
                continue
            pair = {best_point, narrow}
            same = next((k for k, (pts, _, _) in enumerate(tests) if pts == pair), None)
            a, b = layout.values(best_point, metric), layout.values(narrow, metric)
            t, df, p = stats.welch_t_test(b, a)
            lo, hi = stats.welch_interval(b, a)
            delta = means[narrow] - means[best_point]
            entry = {"group": dict(zip(layout.group_keys, group)), "best": best_point[-1], "best_by": chooser,
                     "narrowest": narrow[-1], "delta": delta, "ci95": [lo, hi] if lo == lo
                     else None, "t": t, "df": df, "p": p, "holm_p": None,
                     "seeds_needed": stats.seeds_needed(delta, stats.mean_std(b)[1],
                                                        stats.mean_std(a)[1])[0],
                     "same_as_row": same is not None}
            extra.append(entry)
            if same is None:  # a new test; else it is the table's row, counted once
                tests.append((pair, p, ("extra", len(extra) - 1)))
            else:
                entry["row_test"] = tests[same][2][1]
    adjusted = pruning.holm([p for _, p, _ in tests])
    for (_, _, (kind, k)), q in zip(tests, adjusted):
        if kind == "row":
            rows[k][cols.index("Holm p")] = fmt_p(q)
            json_rows[k]["holm_p"] = q
        else:
            extra[k]["holm_p"] = q
    for entry in extra:
        if entry["same_as_row"]:
            entry["holm_p"] = json_rows[entry.pop("row_test")]["holm_p"]
    family = sum(1 for _, p, _ in tests if p == p)

    n_all = sum(len(v) for v in layout.points.values())
    groups_text = (f" within each group of {', '.join(short(k) for k in layout.group_keys)}"
                   if layout.group_keys else "")
    split, what = tuning.split_of(metric)
    notes = [f"{s.name}: {plural(n_all, 'complete run')}"
             f"{' (each arm at its chosen ' + tuned_name + ')' if sel else ''}; compared along "
             f"{layout.by}{groups_text}; width rule {s.width}; {metric} of each run, mean ± sample "
             f"std over seeds; Δ = mean − mean of {base_text} (negative = better); two-sided Welch "
             f"t-test, Welch–Satterthwaite df, p from {_p_source()}; 95% CI of Δ: Δ ± t(0.975, "
             "df) × sqrt(s₁²/n₁ + s₀²/n₀), the same df; Holm p: Holm-adjusted over "
             f"the {plural(family, 'distinct test')} of the table and below.",
             f"{metric}: the {split} split: {what}"
             + (f"; {tokens_column}: the tokens each run's figure covers" if tokens_column
                else "") + (f" ({metric_note})." if metric_note else "."),
             *([f"equivalence: Schuirmann's two one-sided Welch tests of |Δ| < the margin ("
                + ("the baseline's sample std over its seeds" if equivalence == "spread"
                   else f"{float(equivalence):g}, as given") + "); TOST p < 0.05: equivalent at "
                "5%, the 90% CI of Δ inside ± the margin. Not significant p with a large TOST p "
                "is no evidence either way."] if equivalence is not None else []),
             f"seeds for 80% power: the seeds per arm that would detect the observed Δ "
             f"({stats.seeds_method()}); more than the runs have: not significant may be too "
             "few seeds, not no difference."]
    warnings = []  # under this table; the tuning table's own (the edges) are under it
    if sel is not None:
        sel_split = tuning.split_of(sel.metric)[0]
        notes.insert(1, f"tuned over {tuned_name}: chosen on the {sel_split} split "
                        f"({sel.metric}, the lowest mean over seeds), reported on the {split} "
                        f"split ({metric}); the table above lists every tried value.")
        if split == sel_split:
            warnings.append(f"warning: {metric} is on the {split} split that chose the tuned "
                            "values: each arm's figure is optimistic; report on test_loss")
    if s.left_out_note():
        notes.append(s.left_out_note())
    if needed:
        notes.append(f"heads needed: fewest heads keeping the eval loss within "
                     f"{pruning.tolerance_text(rel, flo)} of the unpruned model on its pruning "
                     "curves (/prune, the fewer of the two criteria), of all heads n_head × "
                     "n_layer; prunable: the fraction that can go.")
        low = [str(s["run"][i]) for idx in layout.points.values() for i in idx
               if pruning.below_floor_warning(float(s["final_eval_loss"][i]), flo or 0.0)]
        if low:
            warnings.append(f"warning: {plural(len(low), 'run')} ({', '.join(low[:4])}"
                            f"{', …' if len(low) > 4 else ''}) end with an eval loss below the "
                            f"{flo:g}-nat floor of the tolerance: their heads needed counts the "
                            "heads whose removal costs more than the floor, a coarse count")
    if carrying:
        notes.append(f"heads carrying {round(100 * causal.CARRY_SHARE)}% of patching: the fewest heads, "
                     "by |normalised effect| of activation patching their output (/patching/head_out) "
                     f"from the largest, whose |effects| sum to {round(100 * causal.CARRY_SHARE)}% "
                     "of all heads'; mean ± std over the seeds that have it.")
    for group, point in best.items():
        where = value_text(point[-1])
        if group:
            where += f" ({layout.group_label(group)})"
        m = means[point]
        notes.append(f"lowest {metric}: {where} at {m:.{decimals(m)}f}" +
                     (", the baseline itself." if point[-1] == base else "."))
    for entry in extra:
        d = decimals(means[(tuple(entry["group"].values()) + (entry["best"],))])
        where = f" ({label(layout.group_keys, tuple(entry['group'].values()))})" \
            if entry["group"] else ""
        by = f"the best by {entry['best_by']}" + (", the split it reports on: optimistic"
                                                 if entry["best_by"] == metric else "")
        text = (f"narrowest ({plural(entry['narrowest'], 'head')}) against {by} "
                f"({plural(entry['best'], 'head')}){where}: Δ {entry['delta']:+.{d}f}, Welch t "
                f"{entry['t']:+.2f} ({entry['df']:.1f} df), p = {fmt_p(entry['p'])}, Holm p = "
                f"{fmt_p(entry['holm_p'])}")
        notes.append(text + (" (the table's row: one test, counted once)."
                             if entry["same_as_row"] else "."))
    notes += warnings
    json_out = {
        "experiment": s.name, "metric": metric, "split": split, "split_note": what,
        "metric_note": metric_note, "by": layout.by, "groups": layout.group_keys,
        "baseline": base, "width": s.width, "holm_family": family, "equivalence": equivalence,
        "ci_method": "Welch: Δ ± t(0.975, Welch–Satterthwaite df) × sqrt(s₁²/n₁ + s₀²/n₀)",
        "seeds_method": stats.seeds_method(), "tokens_column": tokens_column,
        "tuning": dict(tuned["json"], report_metric=metric, report_split=split) if tuned else None,
        "tolerance": {"relative": rel, "floor": flo} if needed else None,
        "rows": json_rows, "extra_tests": extra,
        "best": [{"group": dict(zip(layout.group_keys, g)), "value": p[-1], "mean": means[p],
                  "is_baseline": p[-1] == base} for g, p in best.items()],
        "warnings": (tuned["json"]["warnings"] if tuned else []) + warnings}
    return {"header": cols, "rows": rows, "notes": notes,
            "n_text": len(layout.group_keys) + (1 if by_column else 0), "json": json_out,
            "tuning": tuned}


def point_arm(layout, sel, point):
    """The arm (values of the selection's arm keys) of a point of the tuned view's layout."""
    values = dict(zip(layout.keys, point))
    return tuple(values[k] for k in sel.arm_keys)


def json_safe(x):
    """x with NaN and infinities as null (JSON has neither), numpy scalars as Python numbers."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    x = results.plain(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def markdown(table):
    """The comparison as Markdown table lines (text columns left-aligned, numbers right)."""
    cols = table["header"]
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---:" if i >= table["n_text"] else "---"
                            for i in range(len(cols))) + "|"]
    return lines + ["| " + " | ".join(cells) + " |" for cells in table["rows"]]
