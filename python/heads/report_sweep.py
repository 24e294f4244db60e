"""heads.report_sweep: a sweep directory (summary.h5 and its runs) as the data of a report page:
final loss against head count per series (mean, sample std and every seed), the comparison table
exactly as scripts/compare prints it (heads.compare: Welch's t, Holm-adjusted p, heads needed), the
mean pruning curves of every head count and heads needed against n_head (runs with /prune), the
head-class counts per head count, and one row per run with a link to its own report.

Knows the summary's columns (docs/sweeps.md); knows nothing of HTML.
"""
import math

from . import compare, pruning, results, stats
from .cli import UserError
from .configs import format_value


def _number(v):
    v = results.plain(v)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def read_sweep(directory, metric="final_eval_loss", run_reports=None):
    """The page data of a sweep; run_reports: {run: relative link} of the runs' own pages."""
    s = results.Summary(directory)
    if "n_head" not in s.data or s.n == 0:
        raise UserError(f"{directory}: summary.h5 has no runs")
    compare.check_metric(s, metric)
    other = s.other_keys()
    group_runs = results.group_runs
    groups = group_runs(s, other + ["n_head"])
    series = {}
    for key, idx in groups.items():
        values = [_number(s[metric][i]) for i in idx]
        m, sd, n = stats.mean_std([v for v in values if v is not None])
        series.setdefault(key[:-1], []).append({"n_head": int(key[-1]), "mean": _number(m),
                                                "std": _number(sd), "n": n,
                                                "values": [v for v in values if v is not None]})
    label = lambda key: ", ".join(f"{k.split('.')[-1]} {format_value(v)}"
                                  for k, v in zip(other, key))
    d = {"kind": "sweep", "name": s.name, "width": s.width, "description": s.description,
         "metric": metric, "n_complete": sum(len(v) for v in groups.values()),
         "series": [{"label": label(k), "points": sorted(v, key=lambda p: p["n_head"])}
                    for k, v in series.items()]}
    if groups:
        d["compare"] = compare.comparison(s, metric)
    else:
        d["compare"] = {"header": [], "rows": [], "n_text": 0,
                        "notes": ["no complete runs"] + [n for n in [s.left_out_note()] if n]}
    d["pruning"] = _pruning(s)
    classes = list(results.CLASSES)
    classes += [c[6:] for c in s.columns if c.startswith("heads_") and c[6:] not in classes]
    d["class_names"] = classes
    d["class_counts"] = []
    for key, idx in sorted(groups.items(), key=lambda kv: (tuple(map(str, kv[0][:-1])), kv[0][-1])):
        counts = {c: sum(_number(s[f"heads_{c}"][i]) or 0 for i in idx) / len(idx)
                  if f"heads_{c}" in s.data else 0 for c in classes}
        d["class_counts"].append({"label": (label(key[:-1]) + "; " if other else "") +
                                  f"{len(idx)} seed{'s' if len(idx) != 1 else ''}",
                                  "heads": f"{key[-1]} × {int(s['n_layer'][idx[0]])}",
                                  "counts": counts})
    d["runs"] = []
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


def _pruning(s):
    """The head study of a sweep: per criterion the mean pruning curve of every head count
    (fraction of heads pruned, mean eval loss over seeds), and heads needed per head count (mean,
    sample std, every seed, all heads) from the summary; None when no run has pruning curves."""
    curves = {}
    for c in pruning.CRITERIA:
        per_heads = pruning.sweep_curves(s, c)
        if per_heads:
            curves[c] = {"title": pruning.CRITERION_TEXT[c], "series": [
                {"n_head": h, "fraction": [float(x) for x in frac],
                 "mean": [_number(x) for x in mean], "seeds": n}
                for h, (frac, mean, n) in sorted(per_heads.items())]}
    needed = []
    if "heads_needed" in s.data:
        by_heads = {}
        for i in range(s.n):
            v = _number(s["heads_needed"][i])
            if s["status"][i] == "complete" and v is not None:
                h = int(s["n_head"][i])
                by_heads.setdefault(h, ([], h * int(s["n_layer"][i])))[0].append(v)
        for h, (values, total) in sorted(by_heads.items()):
            m, sd, n = stats.mean_std(values)
            needed.append({"n_head": h, "all_heads": total, "mean": _number(m), "std": _number(sd),
                           "values": values})
    if not curves and not needed:
        return None
    return {"curves": curves, "heads_needed": needed, "tolerance": s.tolerance}
