"""heads.plots.tuneplots: the figure of a tuned sweep (scripts/plot-sweep draws it as tuning.png):
the validation metric against the first tuned key, one line per arm (mean ± sample std over
seeds as error bars, every seed a hollow dot, the chosen value ringed), a log x axis for rates or
values spanning more than 10x; tuning.csv beside it with exactly the numbers drawn.

Owns that figure's layout; reads through heads.answers.tuning (the one selection), draws through
heads.plots.gnuplot. Knows nothing of how the runs were made.
"""
import math
import os

from . import gnuplot
from .sweep_style import SERIES_COLOURS
from ..answers import sweepaxes, tuning
from ..core import configs


def plot_tuning(s, out, tmp):
    """tuning.png (or .svg, .pdf) and tuning.csv of a tuned sweep; False (nothing drawn) for a
    sweep without tune:."""
    sel = tuning.select(s)
    if sel is None:
        return False
    fig = tuning.figure_series(sel)
    key, metric = fig["key"], fig["metric"]
    x_of = (lambda v: float(v)) if fig["numeric"] else (lambda v: fig["x_values"].index(v))
    columns = sel.arm_keys + sel.keys[1:] + [key, f"{metric}_mean", f"{metric}_std", "n",
                                             "chosen", f"{metric}_each_seed"]
    csv_rows, parts, dots, ring = [], [], [], []
    for k, sr in enumerate(fig["series"]):
        colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
        mean_rows, dot_rows = [], []
        for p in sr["points"]:
            csv_rows.append(list(sr["arm"].values()) + list(sr["rest"].values()) + [
                p["x"], p["mean"], p["std"], p["n"], int(p["chosen"]),
                " ".join(repr(v) for v in p["values"])])
            if p["n"]:
                x = x_of(p["x"])
                mean_rows.append([x, p["mean"], 0.0 if math.isnan(p["std"]) else p["std"]])
                dot_rows += [[x, v] for v in p["values"] if v == v]
                if p["chosen"]:
                    ring.append([x, p["mean"]])
        mp, dp = os.path.join(tmp, f"tune_mean_{k}.txt"), os.path.join(tmp, f"tune_dots_{k}.txt")
        gnuplot.write_columns(mp, ["x", "mean", "std"], mean_rows)
        gnuplot.write_columns(dp, ["x", "loss"], dot_rows)
        parts.append(f"{gnuplot.gp_string(mp)} using 1:2:3 with yerrorlines lw 2 pt 7 ps 1.1 "
                     f"lc rgb '{colour}' title {gnuplot.gp_string(sr['label'])}")
        dots.append(f"{gnuplot.gp_string(dp)} using 1:2 with points pt 6 ps 0.7 lc rgb "
                    f"'{colour}' " + ("title 'each seed'" if k == 0 else "notitle"))
    rp = os.path.join(tmp, "tune_chosen.txt")
    gnuplot.write_columns(rp, ["x", "mean"], ring)
    parts.append(f"{gnuplot.gp_string(rp)} using 1:2 with points pt 6 ps 3 lw 2 lc rgb 'black' "
                 "title 'chosen (lowest mean)'")
    sweepaxes.write_csv(out, columns, csv_rows)
    if fig["numeric"]:
        xs = [float(x) for x in fig["x_values"]]
        pad = (lambda lo, hi: (lo / 1.5, hi * 1.5)) if fig["log_x"] else \
            (lambda lo, hi: (lo - 0.1 * (hi - lo or 1), hi + 0.1 * (hi - lo or 1)))
        lo, hi = pad(min(xs), max(xs))
        x_axis = (f"set xrange [{lo!r}:{hi!r}]\nset xtics ("
                  + ", ".join(f"{gnuplot.gp_string(configs.format_value(x))} {float(x)!r}"
                              for x in fig["x_values"]) + ")")
    else:
        x_axis = (f"set xrange [-0.5:{len(fig['x_values']) - 0.5}]\nset xtics ("
                  + ", ".join(f"{gnuplot.gp_string(configs.format_value(x))} {j}"
                              for j, x in enumerate(fig["x_values"])) + ")")
    seeds = "/".join(str(n) for n in sorted({p["n"] for sr in fig["series"]
                                             for p in sr["points"]}))
    title = gnuplot.fit(f"{s.name}: {metric} ({fig['split']} split) against {key}, {seeds} "
                        "seeds; each arm's chosen value ringed (the test split is not read)", 860)
    script = f"""{gnuplot.terminal_for(out, 900, 620 + 18 * len(parts))}
set output {gnuplot.gp_string(out)}
set title {gnuplot.gp_string(title)}
{"set logscale x" if fig["log_x"] else ""}
{x_axis}
set xlabel {gnuplot.gp_string(key + (" (log scale)" if fig["log_x"] else ""))}
set ylabel {gnuplot.gp_string(f"{metric}, {fig['split']} split (mean ± sample std over seeds)")}
set format y '%.3f'
{gnuplot.MEAN_STD_FRAME}
plot {", ".join(parts + dots)}
"""
    gnuplot.run_gnuplot(script, out, tmp)
    return True
