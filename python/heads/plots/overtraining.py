"""heads.plots.overtraining: one run over training in one gnuplot figure (over_training.png):
the held-out loss, the ICL score, every head's previous-token and induction scores, and every
head's ablation Δloss against the step (a log-scaled x, step + 1, when output.snapshots is a log
schedule), with over_training.csv beside it holding exactly the numbers drawn, a row per step.

Reads the file through heads.read.steps (every stored step: /attn's snapshots, /study_steps);
knows nothing of the other plots.
"""
import os

import numpy as np

from ..read import steps as over_training
from ..read.results import text
from ..answers.sweepaxes import write_csv
from . import gnuplot

PANELS = (("eval_loss", "held-out loss (nats)"), ("icl_score", "ICL score: late minus early loss (nats)"),
          ("prev", "previous-token score, every head"), ("induction", "induction score, every head"),
          ("ablation_delta", "ablation Δloss (nats), every head (/study_steps)"))


def series(f):
    """{panel: {label: {step: value}}}: what each panel draws, by line."""
    out = {p: {} for p, _ in PANELS}
    if "eval/step" in f:
        es = [int(s) for s in f["eval/step"][()]]
        out["eval_loss"]["eval_loss"] = dict(zip(es, map(float, f["eval/loss"][()])))
        if "eval/icl_score" in f:
            out["icl_score"]["icl_score"] = dict(zip(es, map(float, f["eval/icl_score"][()])))
    steps, scores = over_training.scores_over_steps(f)
    for p in ("prev", "induction"):
        if p in scores:
            _, L, H = scores[p].shape
            for layer in range(L):
                for h in range(H):
                    out[p][f"L{layer}H{h}"] = {int(s): float(v) for s, v in zip(steps, scores[p][:, layer, h])}
    for s in sorted(f["study_steps"], key=int) if "study_steps" in f else []:
        d = np.asarray(f[f"study_steps/{s}/heads/ablation_delta"][()])
        for (layer, h), v in np.ndenumerate(d):
            out["ablation_delta"].setdefault(f"L{layer}H{h}", {})[int(s)] = float(v)
    return out


def plot_over_training(f, run_name, out, tmp):
    """Draw out and out's CSV; False (nothing written) when the file has no /eval."""
    lines = series(f)
    if not lines["eval_loss"]:
        return False
    all_steps = sorted({s for panel in lines.values() for line in panel.values() for s in line})
    columns = [f"{p} {label}" if p not in ("eval_loss", "icl_score") else p
               for p, _ in PANELS for label in lines[p]]
    rows = [[s] + [lines[p][label].get(s) for p, _ in PANELS for label in lines[p]] for s in all_steps]
    write_csv(out, ["step"] + columns, rows)
    log = text(f["config"].attrs.get("snapshots", "")).startswith("log")
    x = (lambda s: s + 1) if log else (lambda s: s)
    drawn = [(p, title) for p, title in PANELS if lines[p] and any(v == v for line in lines[p].values()
                                                                   for v in line.values())]
    formed = over_training.formation(*over_training.scores_over_steps(f))
    note = "; ".join(f"{p} heads formed {over_training.interval_text(m)}" for p, m in formed.items())
    title = f"{run_name} over training" + (f": {note}" if note else "")
    width, panel_h = 900, 230
    height = 60 + panel_h * len(drawn)
    script = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
              f"set multiplot layout {len(drawn)},1 title {gnuplot.gp_string(title)} font ',11'",
              "set grid", "unset key", "set lmargin 12", "set rmargin 12"]
    if log:
        script.append("set logscale x")
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf"]
    for k, (p, panel_title) in enumerate(drawn):
        parts = []
        ends = sorted(((line[max(line)], label) for label, line in lines[p].items() if line), reverse=True)
        top = {label for _, label in ends[:3]}
        for j, (label, line) in enumerate(lines[p].items()):
            path = os.path.join(tmp, f"over_{p}_{j}.txt")
            gnuplot.write_columns(path, ["x", "value"], [[x(s), v] for s, v in sorted(line.items())])
            wide = label in top or len(lines[p]) == 1
            parts.append(f"{gnuplot.gp_string(path)} using 1:2 with linespoints pt 7 ps 0.4 "
                         f"lw {2 if wide else 0.7} lc rgb '{colours[j % len(colours)]}' notitle")
        tags = [f"set label {10 + i} {gnuplot.gp_string(label)} at {x(max(lines[p][label]))},{v} "
                f"offset 0.5,{0.9 - 0.9 * i:g} font ',8'" for i, (v, label) in enumerate(ends[:3]) if len(lines[p]) > 1]
        xlabel = ("training step + 1 (log scale: output.snapshots is a log schedule)" if log
                  else "training step") if k == len(drawn) - 1 else ""
        script += [f"set title {gnuplot.gp_string(panel_title)} font ',10'",
                   f"set xlabel {gnuplot.gp_string(xlabel)}"] + tags + \
                  ["plot " + ", \\\n     ".join(parts)] + [f"unset label {10 + i}" for i in range(3)]
    script.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(script) + "\n", out, tmp)
    return True
