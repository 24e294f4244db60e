"""heads.report_sweep: a sweep directory (summary.h5 and its runs) as the data of a report page:
final loss against head count per series (mean, sample std and every seed), the comparison table
exactly as scripts/compare prints it (same code, Welch's t-test from the statistics module), the
head-class counts per head count, and one row per run with a link to its own report.

Knows the summary's columns (README "Sweeps"); knows nothing of HTML.
"""
import importlib.machinery
import importlib.util
import math
import os

from . import results, stats
from .cli import UserError
from .configs import format_value

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compare_module():
    """scripts/compare as a module: its table() is the comparison, used here unchanged (one
    table for the terminal and the page, whatever columns compare grows)."""
    path = os.path.join(REPO, "scripts", "compare")
    loader = importlib.machinery.SourceFileLoader("heads_compare_front", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


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
    if metric not in s.data:
        raise UserError(f"--metric {metric}: not a summary column; try final_eval_loss, "
                        "min_eval_loss or final_train_loss")
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
        lines, notes = _compare_module().table(s, metric)
        d["compare"] = {"header": _cells(lines[0]), "rows": [_cells(x) for x in lines[2:]],
                        "notes": notes, "n_text": len(other)}
    else:
        d["compare"] = {"header": [], "rows": [], "notes": ["no complete runs"], "n_text": 0}
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
