"""heads.report.report_sweep: a sweep directory (summary.h5 and its runs) as the data of a report page:
final loss against the key compared along (heads.answers.sweepaxes: n_head, else the one swept key), a
series per group of the other swept keys (mean, sample std and every seed), the comparison table
exactly as scripts/compare prints it (heads.answers.compare: Welch's t, Holm-adjusted p, heads needed), the
mean pruning curves of every point and heads needed per group (runs with /prune), the head-class
counts of every point, and one row per run with a link to its own report; for a tuned sweep the
tuning table and figure (heads.answers.tuning), the rest of its arms at their chosen values.

Knows the summary's columns (docs/sweeps.md); knows nothing of HTML.
"""
import math

from ..answers import compare, l0curve, sweepaxes, tuning
from ..sweep import sweepread
from ..answers.prune_curves import sweep_curves
from ..read import pruning, results
from ..core import stats
from ..core.cli import UserError
from ..core.configs import format_value
from ..core.words import plural


def _number(v):
    v = results.plain(v)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def read_sweep(directory, metric=None, run_reports=None):
    """The page data of a sweep; run_reports: {run: relative link} of the runs' own pages; metric
    None: compare's default (the test split when the runs have one). A tuned sweep's loss chart
    and table are of its arms at their chosen values, with the tuning table and figure's data."""
    s = sweepread.Summary(directory)
    if "n_head" not in s.data or s.n == 0:
        raise UserError(f"{directory}: summary.h5 has no runs")
    metric = metric or tuning.default_metric(s)[0]
    compare.check_metric(s, metric)
    full, sel = s, tuning.select(s)
    if sel is not None:  # the chart and the class counts of the chosen runs, as compare's table
        s = tuning.view(s, sel)
    layout = sweepaxes.Layout(s)
    heads = layout.by in sweepaxes.HEAD_KEYS
    series = []
    for group in layout.groups:
        points = []
        for point, idx in layout.points.items():
            if point[:-1] != group:
                continue
            values = [v for v in (_number(s[metric][i]) for i in idx) if v is not None]
            m, sd, n = stats.mean_std(values)
            points.append({"x": layout.by_values.index(point[-1]), "value": format_value(point[-1]),
                           "mean": _number(m), "std": _number(sd), "n": n, "values": values})
        series.append({"label": layout.group_label(group), "points": points})
    d = {"kind": "sweep", "name": s.name, "width": s.width, "description": s.description,
         "metric": metric, "n_complete": sum(1 for st in full["status"] if st == "complete"),
         "by": layout.by, "x_label": "heads per layer" if heads else layout.axis_label(),
         "xticks": [[j, format_value(v)] for j, v in enumerate(layout.by_values)],
         "series": series}
    if layout.points:
        d["compare"] = compare.comparison(full, metric)  # a tuned sweep: its arms, as compare
        d["compare"].pop("json")
    else:
        d["compare"] = {"header": [], "rows": [], "n_text": 0,
                        "notes": ["no complete runs"] + [n for n in [s.left_out_note()] if n]}
    tuned = d["compare"].pop("tuning", None)
    d["tuning"] = {"table": {k: v for k, v in tuned.items() if k != "json"},
                   "figure": tuning.figure_series(sel)} if tuned else None
    d["pruning"] = _pruning(s, layout)
    d["gates"] = _gates(s) if layout.points and l0curve.is_gate_sweep(s) else None
    classes = sweepaxes.class_names(s)
    d["class_names"] = classes
    d["class_counts"] = [
        {"label": (layout.point_label(point) + "; ") + plural(n, "seed"),
         "heads": f"{int(s['n_head'][layout.points[point][0]])} × "
                  f"{int(s['n_layer'][layout.points[point][0]])}",
         "all_heads": all_heads, "counts": counts}
        for point, all_heads, n, counts in sweepaxes.class_counts(s, layout)]
    d["runs"] = []
    s = full  # every run, the ones a tuned value did not choose too
    for i in range(s.n):
        run = str(s["run"][i])
        counts = [(c, _number(s[f"heads_{c}"][i])) for c in classes if f"heads_{c}" in s.data]
        d["runs"].append({"run": run, "status": str(s["status"][i]),
                          "n_head": _number(s["n_head"][i]), "d_head": _number(s["d_head"][i]),
                          "seed": _number(s["seed"][i]),
                          "final_eval_loss": _number(s["final_eval_loss"][i]),
                          "classes": ", ".join(f"{int(v)} {c}" for c, v in counts if v),
                          "report": (run_reports or {}).get(run)})
    return d


def _gates(s):
    """A sweep over train.head_l0: per group the λ = 0 runs' mean pruning curves and every λ's
    heads kept and loss (mean, sample std, every seed), and the tables scripts/compare adds (the
    gates against pruning; the scratch comparison when DIR_scratch is beside the sweep)."""
    answer = l0curve.gate_curve(s)
    groups = []
    for g in answer["groups"]:
        points = []
        for p in g["points"]:
            if p["lambda"] == 0:
                continue
            km, ksd, n = stats.mean_std([float(v) for v in p["heads_kept"]])
            lm, lsd, _ = stats.mean_std(p["eval_loss"])
            points.append({"lambda": format_value(p["lambda"]), "n": n, "heads_mean": km,
                           "heads_std": _number(ksd), "loss_mean": lm, "loss_std": _number(lsd),
                           "seeds": [[k, v] for k, v in zip(p["heads_kept"], p["eval_loss"])]})
        curves = [{"criterion": c, "title": pruning.CRITERION_TEXT[c], "n": curve["n"],
                   "heads_left": curve["heads_left"], "mean": curve["mean"],
                   "std": [_number(x) for x in curve["std"]]} for c, curve in g["michel"].items()]
        groups.append({"label": g["label"], "curves": curves, "points": points})
    tables = []
    for title, table in l0curve.tables(s):
        table.pop("json")
        tables.append({"title": title, **table})
    return {"groups": groups, "tables": tables}


def _pruning(s, layout):
    """The head study of a sweep: per criterion the mean pruning curve of every point (fraction of
    heads pruned, mean eval loss over seeds), and heads needed per point of each group (mean,
    sample std, every seed, all heads) from the summary; None when no run has pruning curves."""
    curves = {}
    for c in pruning.CRITERIA:
        per_point = sweep_curves(s, c, layout.keys, layout.points)
        if per_point:
            curves[c] = {"title": pruning.CRITERION_TEXT[c], "series": [
                {"label": layout.point_label(point), "x": layout.by_values.index(point[-1]),
                 "fraction": [float(x) for x in frac], "mean": [_number(x) for x in mean],
                 "seeds": n} for point, (frac, _, mean, _, n) in per_point.items()]}
    needed = []
    if "heads_needed" in s.data:
        for group in layout.groups:
            points = []
            for point, idx in layout.points.items():
                if point[:-1] != group:
                    continue
                values = [v for v in (_number(s["heads_needed"][i]) for i in idx) if v is not None]
                if values:
                    m, sd, n = stats.mean_std(values)
                    points.append({"x": layout.by_values.index(point[-1]),
                                   "all_heads": int(s["n_head"][idx[0]]) * int(s["n_layer"][idx[0]]),
                                   "mean": _number(m), "std": _number(sd), "values": values})
            if points:
                needed.append({"label": layout.group_label(group), "points": points})
    if not curves and not needed:
        return None
    return {"curves": curves, "heads_needed": needed,
            "tolerance_text": pruning.tolerance_text(*sweepaxes.tolerance_of(s))}
