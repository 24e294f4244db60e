"""heads.plot_sweep: the command `scripts/plot-sweep` (its usage text is that script's
docstring): a whole sweep drawn with gnuplot from its summary.h5 and its runs' files: final eval
loss against head count (mean ± std over seeds, every seed), the mean eval curves of every head
count, the head classes at each head count, and the head study's sweep figures
(heads.studyplots: pruning curves, heads needed).

Owns those figures' layout, the head-count colour ramp and the command's messages; reads through
heads.results, draws through heads.gnuplot. Knows nothing of how the runs were made.
"""
import math
import os
import sys
import tempfile

import numpy as np

from . import cli, configs, gnuplot, results, stats, studyplots

SERIES_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf"]
CLASS_COLOURS = {"prev": "#1f77b4", "self": "#2ca02c", "first": "#ff7f0e", "induction": "#d62728",
                 "duplicate": "#9467bd", "mixed": "#c7c7c7"}


def sequential(i, n):
    """Colour i of n along a light-to-dark blue-purple ramp (head counts in order)."""
    t = 0.0 if n <= 1 else i / (n - 1)
    stops = [(0.0, (0x9e, 0xca, 0xe1)), (0.35, (0x42, 0x92, 0xc6)), (0.7, (0x6a, 0x51, 0xa3)),
             (1.0, (0x3f, 0x00, 0x7d))]
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            u = (t - t0) / (t1 - t0)
            return "#%02x%02x%02x" % tuple(int(round(a + u * (b - a))) for a, b in zip(c0, c1))
    return "#3f007d"


def series_label(keys, values):
    return ", ".join(f"{k.split('.')[-1]} {configs.format_value(v)}" for k, v in zip(keys, values))


def head_tics(summary, heads):
    d_heads = {}
    for i in range(summary.n):
        d_heads.setdefault(int(summary["n_head"][i]), set()).add(int(summary["d_head"][i]))
    parts = []
    one_width = len(set().union(*d_heads.values())) == 1  # fixed d_head: show E = H * d_head
    for h in heads:
        dh = d_heads.get(h, set())
        extra = "" if len(dh) != 1 else f"\\nE {h * next(iter(dh))}" if one_width \
            else f"\\ndh {next(iter(dh))}"
        parts.append(f'"{h}{extra}" {h}')
    return "set xtics (" + ", ".join(parts) + ")"


def plot_final_loss(s, out, tmp):
    other = s.other_keys()
    groups = results.group_runs(s, other + ["n_head"])
    series = {}
    for key, idx in groups.items():
        series.setdefault(key[:-1], []).append((key[-1], idx))
    heads = sorted({int(h) for _, runs in series.items() for h, _ in runs})
    parts, dots = [], []
    n_seeds = set()
    for k, (name, runs) in enumerate(series.items()):
        colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
        mean_rows, dot_rows = [], []
        for h, idx in sorted(runs):
            losses = [float(s["final_eval_loss"][i]) for i in idx]
            m, sd, n = stats.mean_std(losses)
            n_seeds.add(n)
            mean_rows.append([h, m, 0.0 if math.isnan(sd) else sd, n])
            dot_rows += [[h, v] for v in losses]
        mp = os.path.join(tmp, f"final_mean_{k}.txt")
        dp = os.path.join(tmp, f"final_dots_{k}.txt")
        gnuplot.write_columns(mp, ["n_head", "mean", "std", "n"], mean_rows)
        gnuplot.write_columns(dp, ["n_head", "loss"], dot_rows)
        title = series_label(other, name) if other else "mean ± std over seeds"
        parts.append(f"{gnuplot.gp_string(mp)} using 1:2:3 with yerrorlines lw 2 pt 7 ps 1.2 "
                     f"lc rgb '{colour}' title {gnuplot.gp_string(title)}")
        dots.append(f"{gnuplot.gp_string(dp)} using 1:2 with points pt 6 ps 0.8 lc rgb '{colour}' "
                    + ("title 'each seed'" if k == 0 else "notitle"))
    seeds = "/".join(str(n) for n in sorted(n_seeds))
    values = np.asarray([float(v) for v in s["final_eval_loss"] if np.isfinite(v) and v > 0])
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    width_text = {"fixed_width": "fixed width: d_head = d_model / n_head (same params and FLOPs)",
                  "fixed_d_head": "fixed d_head: width H*d_head grows with the heads",
                  }.get(s.width, f"width rule {s.width}")
    title = f"{s.name}: final eval loss against head count ({seeds} seeds)\\n{width_text}"
    script = f"""{gnuplot.terminal_for(out, 900, 600)}
set output {gnuplot.gp_string(out)}
set title "{title}"
set logscale x 2
set xrange [{min(heads) / 1.4}:{max(heads) * 1.4}]
{head_tics(s, heads)}
set xlabel 'number of heads (log2 scale)' offset 0,-1
set bmargin 7
set ylabel 'final eval loss (mean ± sample std over seeds){", log scale" if logy else ""}'
{"set logscale y" if logy else ""}
set format y '{"%g" if logy else "%.3f"}'
set grid
set key below
set bars 2
set offsets 0, 0, graph 0.05, graph 0.05
plot {", ".join(parts + dots)}
"""
    gnuplot.run_gnuplot(script, out, tmp)


def mean_curves(s, idx):
    """Mean eval loss over the runs idx, on the eval steps all of them share."""
    curves = []
    for i in idx:
        with results.open_file(s.run_path(i)) as f:
            curves.append((np.asarray(f["eval/step"][()]), np.asarray(f["eval/loss"][()])))
    common = set(curves[0][0].tolist())
    for steps, _ in curves[1:]:
        common &= set(steps.tolist())
    common = sorted(common)
    mean = [float(np.mean([loss[list(steps).index(st)] for steps, loss in curves]))
            for st in common]
    return common, mean


def plot_eval_curves(s, out, tmp):
    other = s.other_keys()
    groups = results.group_runs(s, other + ["n_head"])
    keys = sorted(groups, key=lambda k: (tuple(configs.format_value(x) for x in k[:-1]), k[-1]))
    series_names = list(dict.fromkeys(k[:-1] for k in keys))
    dash = {name: j + 1 for j, name in enumerate(series_names)}
    heads = sorted({k[-1] for k in keys})
    parts, all_values, max_step = [], [], 0
    for k, key in enumerate(keys):
        steps, mean = mean_curves(s, groups[key])
        all_values += mean
        max_step = max(max_step, max(steps) if steps else 0)
        path = os.path.join(tmp, f"curve_{k}.txt")
        gnuplot.write_columns(path, ["step", "mean_eval_loss"], zip(steps, mean))
        colour = sequential(heads.index(key[-1]), len(heads))
        label = f"{key[-1]} head{'s' if key[-1] != 1 else ''}"
        if other:
            label += " (" + series_label(other, key[:-1]) + ")"
        parts.append((path, colour, dash[key[:-1]], label))
    values = np.asarray([v for v in all_values if np.isfinite(v) and v > 0])
    logy = len(values) and values.max() / values.min() > 3.0
    late = [v for path, *_ in parts for st, v in np.loadtxt(path, ndmin=2)[:, :2]
            if st >= max_step / 2]
    lo, hi = (min(late), max(late)) if late else (0, 1)
    pad = 0.08 * (hi - lo) if hi > lo else 0.01
    zoom_range = f"[{lo / 1.25}:{hi * 1.25}]" if logy and lo > 0 else f"[{lo - pad}:{hi + pad}]"
    plot_cmd = ", \\\n     ".join(
        f"{gnuplot.gp_string(p)} using 1:2 with linespoints lw 2 pt 7 ps 0.5 dt {d} lc rgb '{c}' "
        f"title {gnuplot.gp_string(t)}" for p, c, d, t in parts)
    n = len(results.group_runs(s, ["run"]))
    script = f"""{gnuplot.terminal_for(out, 1300, 560)}
set output {gnuplot.gp_string(out)}
set multiplot layout 1,2 title {gnuplot.gp_string(f'{s.name}: eval loss during training, mean over seeds, one line per head count ({n} complete runs)')} font ',12'
set xlabel 'training step'
set ylabel 'eval loss{" (log scale)" if logy else ""}'
set grid
set format y '%g'
{"set logscale y" if logy else ""}
set key top right font ',9'
set title 'whole run'
plot {plot_cmd}
{"" if logy else "set format y '%.3f'"}
set title 'second half of training (zoom)'
set xrange [{max_step / 2}:{max_step}]
set yrange {zoom_range}
set key top right font ',9'
plot {plot_cmd}
unset multiplot
"""
    gnuplot.run_gnuplot(script, out, tmp)


def plot_head_classes(s, out, tmp):
    other = s.other_keys()
    groups = results.group_runs(s, other + ["n_head"])
    keys = sorted(groups, key=lambda k: (tuple(configs.format_value(x) for x in k[:-1]), k[-1]))
    classes = list(results.CLASSES)
    for c in s.columns:
        if c.startswith("heads_") and c[6:] not in classes:
            classes.insert(-1, c[6:])
    counts, labels = [], []
    for key in keys:
        idx = groups[key]
        row = [float(np.mean([float(s[f"heads_{c}"][i]) for i in idx])) if f"heads_{c}" in s.data
               else 0.0 for c in classes]
        counts.append(row)
        n_layer = int(s["n_layer"][idx[0]])
        label = f"{key[-1]} × {n_layer}"
        if other:
            label += "\\n" + series_label(other, key[:-1])
        labels.append(label)
    counts = np.asarray(counts)
    total = counts.sum(axis=1, keepdims=True)
    frac = counts / np.where(total > 0, total, 1)
    cpath, fpath = os.path.join(tmp, "class_counts.txt"), os.path.join(tmp, "class_frac.txt")
    for path, data in ((cpath, counts), (fpath, frac)):
        with open(path, "w") as f:
            f.write("# label " + " ".join(classes) + "\n")
            for label, row in zip(labels, data):
                f.write(f'"{label}" ' + " ".join(f"{v:.6g}" for v in row) + "\n")

    def stacked(path):
        cols = []
        for j, c in enumerate(classes):
            colour = CLASS_COLOURS.get(c, SERIES_COLOURS[j % len(SERIES_COLOURS)])
            first = ":xtic(1)" if j == 0 else ""
            cols.append(f"{gnuplot.gp_string(path)} using {j + 2}{first} title {gnuplot.gp_string(c)} "
                        f"lc rgb '{colour}'")
        return "plot " + ", \\\n     ".join(cols)

    n_runs = sum(len(v) for v in groups.values())
    script = f"""{gnuplot.terminal_for(out, 1300, 560)}
set output {gnuplot.gp_string(out)}
set multiplot layout 1,2 title {gnuplot.gp_string(f'{s.name}: head classes at each head count (final /scores/class, mean over seeds; {n_runs} complete runs)')} font ',12'
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb '#444444'
set boxwidth 0.7
set grid ytics
set xlabel 'heads per layer × layers'
set key outside right top font ',9' title 'class'
set title 'number of heads'
set ylabel 'heads of each class (mean over seeds)'
set yrange [0:{max(1.0, float(total.max()) * 1.08)}]
{stacked(cpath)}
set title 'fraction of heads'
set ylabel 'fraction of all heads'
set yrange [0:1]
{stacked(fpath)}
unset multiplot
"""
    gnuplot.run_gnuplot(script, out, tmp)


def main(doc):
    """scripts/plot-sweep: doc is its usage text (--help); returns the exit status."""
    ap = cli.arg_parser(doc)
    ap.add_argument("results_dir")
    ap.add_argument("-o", "--outdir")
    ap.add_argument("--format", default="png")
    args = ap.parse_args()
    if args.format not in gnuplot.FORMATS:
        cli.die(f"--format {args.format}: use one of " + ", ".join(gnuplot.FORMATS))
    names = [f"{stem}.{args.format}" for stem in ("final_eval_loss", "eval_curves", "head_classes")]
    try:
        s = results.Summary(args.results_dir)
        if s.left_out_note():
            print(s.left_out_note(), file=sys.stderr)
        if "n_head" not in s.data or not any(st == "complete" for st in s["status"]):
            cli.die(f"{args.results_dir}: no complete runs to plot")
        outdir = os.path.abspath(args.outdir or os.path.join(s.dir, "plots"))
        os.makedirs(outdir, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            for plot, name in zip((plot_final_loss, plot_eval_curves, plot_head_classes), names):
                plot(s, os.path.join(outdir, name), tmp)
            written = list(names)
            # the head study's sweep plots, when the runs have pruning curves
            name = f"pruning_curves.{args.format}"
            if studyplots.plot_sweep_pruning(s, os.path.join(outdir, name), tmp, sequential):
                written.append(name)
            name = f"heads_needed.{args.format}"
            if studyplots.plot_heads_needed(s, os.path.join(outdir, name), tmp):
                written.append(name)
    except cli.UserError as e:
        cli.die(str(e))
    print(f"{outdir}/: " + ", ".join(written))
    return 0
