"""heads.plots.l0plots: the figure of a sweep over train.head_l0 (scripts/plot-sweep draws it as
l0_curve.png): held-out loss against heads left, the mean pruning curves of the λ = 0 runs (both
criteria, mean ± std over seeds) and, per λ, the heads the learned gates kept and the loss with
them (mean ± std both ways, every seed a hollow point); l0_curve.csv beside it with exactly the
numbers drawn.

Owns that figure's layout; reads through heads.answers.l0curve, draws through heads.plots.gnuplot. Knows
nothing of how the runs were made.
"""
import math
import os

import numpy as np

from . import gnuplot
from ..answers import l0curve, sweepaxes
from ..read import pruning
from ..core import stats, words

CURVE_COLOURS = {"importance": "#1f77b4", "delta_loss": "#2ca02c"}
GATE_COLOURS = ["#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
CSV_COLUMNS = ["series", "train.head_l0", "heads_left_mean", "heads_left_std", "eval_loss_mean",
               "eval_loss_std", "n", "each_seed"]


def curve_rows(answer):
    """[(group, [CSV row after the group keys])] of every point the figure draws: the λ = 0
    runs' mean pruning curves per criterion, then per λ > 0 the gates' point; each_seed is
    'seed:heads:loss' per seed (the curves' points are at the same heads for every seed)."""
    out = []
    for g in answer["groups"]:
        group = tuple(g["group"].values())
        for c, curve in g["michel"].items():
            for j, left in enumerate(curve["heads_left"]):
                out.append((group, [c, 0.0, float(left), 0.0, curve["mean"][j], curve["std"][j],
                                    curve["n"], ""]))
        for p in g["points"]:
            if p["lambda"] == 0:
                continue
            km, ksd, n = stats.mean_std([float(v) for v in p["heads_kept"]])
            lm, lsd, _ = stats.mean_std(p["eval_loss"])
            seeds = " ".join(f"{seed}:{k}:{loss!r}" for seed, k, loss in
                             zip(p["seeds"], p["heads_kept"], p["eval_loss"]))
            out.append((group, ["gates", p["lambda"], km, ksd, lm, lsd, n, seeds]))
    return out


def plot_gate_curve(s, out, tmp):
    """l0_curve.<format> and its CSV; False (nothing written) unless s swept train.head_l0."""
    if not l0curve.is_gate_sweep(s):
        return False
    answer = l0curve.gate_curve(s)
    rows = curve_rows(answer)
    sweepaxes.write_csv(out, answer["group_keys"] + CSV_COLUMNS,
                        [list(group) + row for group, row in rows])
    losses = np.asarray([r[4] for _, r in rows], dtype=float)
    losses = losses[np.isfinite(losses) & (losses > 0)]
    logy = len(losses) > 0 and losses.max() / losses.min() > 3.0
    seeds = [float(x.split(":")[2]) for _, r in rows if r[0] == "gates" for x in r[7].split()]
    drawn = np.concatenate([losses, [v for v in seeds if v > 0]])
    # on a log axis a bar of mean - std <= 0 would stretch it to nothing: the axis spans what
    # is drawn as points, and such bars run off its bottom
    y_range = f"set yrange [{drawn.min() / 2:g}:{drawn.max() * 2:g}]" if logy else ""
    lambdas = sorted({r[1] for _, r in rows if r[0] == "gates"})
    n_groups = len(answer["groups"])
    width = 1000 if n_groups == 1 else 700 * n_groups
    lines = [gnuplot.terminal_for(out, width, 640),
             f"set output {gnuplot.gp_string(out)}",
             f"set multiplot layout 1,{n_groups} title "
             f"{gnuplot.gp_string(gnuplot.fit(title(s), width - 40, 11))} font ',11'",
             "set xlabel 'heads left (all layers)'", "set grid", "set bars 1",
             f"set ylabel 'held-out eval loss{' (log scale)' if logy else ''}'",
             "set logscale y" if logy else "", y_range, "set format y '%g'",
             "set key top right font ',9' spacing 1.1"]
    for k, g in enumerate(answer["groups"]):
        group = tuple(g["group"].values())
        parts = []
        for c, curve in g["michel"].items():
            path = os.path.join(tmp, f"l0_curve_{k}_{c}.txt")
            gnuplot.write_columns(path, ["heads_left", "mean", "std"], [
                (left, m, 0.0 if math.isnan(sd) else sd)
                for left, m, sd in zip(curve["heads_left"], curve["mean"], curve["std"])])
            name = (f"pruning the λ = 0 run, {pruning.CRITERION_TEXT[c]} "
                    f"(mean ± std, {words.plural(curve['n'], 'seed')})")
            parts.append(f"{gnuplot.gp_string(path)} using 1:2:3 with yerrorlines lw 2 pt 7 "
                         f"ps 0.5 lc rgb '{CURVE_COLOURS[c]}' title {gnuplot.gp_string(name)}")
        for r in (r for gr, r in rows if gr == group and r[0] == "gates"):
            j = lambdas.index(r[1])
            colour = GATE_COLOURS[j % len(GATE_COLOURS)]
            mp = os.path.join(tmp, f"l0_gate_{k}_{j}.txt")
            dp = os.path.join(tmp, f"l0_seeds_{k}_{j}.txt")
            gnuplot.write_columns(mp, ["heads", "loss", "heads_std", "loss_std"], [
                (r[2], r[4], 0.0 if math.isnan(r[3]) else r[3], 0.0 if math.isnan(r[5]) else r[5])])
            gnuplot.write_columns(dp, ["heads", "loss"], [
                (float(x.split(":")[1]), float(x.split(":")[2])) for x in r[7].split()])
            name = f"learned gates, λ = {r[1]:g} (mean ± std, {words.plural(r[6], 'seed')})"
            parts += [f"{gnuplot.gp_string(mp)} using 1:2:3:4 with xyerrorbars lw 2 pt 5 ps 1.3 "
                      f"lc rgb '{colour}' title {gnuplot.gp_string(name)}",
                      f"{gnuplot.gp_string(dp)} using 1:2 with points pt 6 ps 1.0 lc rgb "
                      f"'{colour}' notitle"]
        lines += [f"set title {gnuplot.gp_string(gnuplot.fit(g['label'], width / n_groups - 40))}",
                  "set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05",
                  "plot " + ", ".join(parts)]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def title(s):
    return (f"{s.name}: the heads learned L0 gates keep (Voita et al. 2019) against pruning the "
            "λ = 0 runs (Michel et al. 2019)\nheld-out loss against heads left; "
            "hollow points: each seed")
