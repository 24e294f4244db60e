"""heads.plots.overtraining_sweep: a sweep's runs over training in one gnuplot figure
(over_training_sweep.png): per head count a column, the ICL score (top) and the largest
single-head ablation Δloss of the layer-0 previous-token heads (dashed) and of the layer-1
induction heads (solid) at every weight snapshot (bottom), a colour per seed, x = step + 1 on a
log scale; over_training_sweep.csv beside it holds every number drawn, a row per run, curve and
step.

Draws what heads.answers.over_training measured; knows nothing of the other plots.
"""
import os

from ..answers.sweepaxes import write_csv
from . import gnuplot

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"]


def curves(run):
    """{name: [(step, value)]}: the three curves of one measured run."""
    return {"icl_score": list(zip(run["eval_steps"], run["icl"])),
            "delta_prev": list(zip(run["snapshots"], run["delta_prev"])),
            "delta_induction": list(zip(run["snapshots"], run["delta_induction"]))}


def plot(runs, out, tmp):
    """Draw the runs (heads.answers.over_training.measure, with eval_steps and icl) into out."""
    out = os.path.abspath(out)  # gnuplot runs in tmp
    rows = [[r["run"], r["n_head"], r["seed"], name, s, v] for r in runs for name, pts in curves(r).items()
            for s, v in pts]
    write_csv(out, ["run", "n_head", "seed", "curve", "step", "value"], rows)
    heads = sorted({r["n_head"] for r in runs})
    width, height = 430 * len(heads) + 60, 660
    script = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
              f"set multiplot layout 2,{len(heads)} columnsfirst title "
              + gnuplot.gp_string("over training: the ICL score, and the largest single-head ablation Δloss\n"
                                  "dashed: layer-0 previous-token heads, solid: layer-1 induction heads; a colour per seed")
              + " font ',11'", "set grid", "set logscale x", "unset key"]
    for n in heads:
        rs = [r for r in runs if r["n_head"] == n]
        for panel, names, ylabel in (("ICL score", ["icl_score"], "late − early loss (nats)"),
                                     ("ablation Δloss", ["delta_prev", "delta_induction"], "Δloss (nats)")):
            parts = []
            for k, r in enumerate(rs):
                for name in names:
                    pts = [(s + 1, v) for s, v in curves(r)[name] if v == v]
                    if not pts:
                        continue
                    path = os.path.join(tmp, f"ot_{r['run']}_{name}.txt")
                    gnuplot.write_columns(path, ["x", "value"], pts)
                    dash = "dt 2" if name == "delta_prev" else "dt 1"
                    parts.append(f"{gnuplot.gp_string(path)} using 1:2 with lines lw 1.5 {dash} "
                                 f"lc rgb '{COLOURS[k % len(COLOURS)]}' notitle")
            script += [f"set title {gnuplot.gp_string(f'{n} heads: {panel}')} font ',10'",
                       f"set ylabel {gnuplot.gp_string(ylabel)}",
                       "set xlabel " + gnuplot.gp_string("training step + 1 (log scale)" if panel != "ICL score" else ""),
                       "plot " + ", \\\n     ".join(parts) if parts else
                       "set label 1 'no head of the class in the final model' at graph 0.5,0.5 center\n"
                       "plot [1:1000] [0:1] -1 notitle\nunset label 1"]
    script.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(script) + "\n", out, tmp)
