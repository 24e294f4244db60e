"""heads.plots.plot_sweep: the command `scripts/plot-sweep` (its usage text is that script's
docstring): a whole sweep drawn with gnuplot from its summary.h5 and its runs' files, along the
key compared along (heads.answers.sweepaxes.Layout: n_head, else the grid's first key) with a series per
group of the other swept keys: final eval loss (mean ± std over seeds, every seed), the mean eval
curves of every layout, the head classes of every layout, the mean pruning curves and heads
needed, and for a tuned sweep the validation metric against the tuned key (heads.plots.tuneplots);
beside every figure a CSV of exactly the numbers it draws.

Owns those figures' layout, the colour ramp and the command's messages; reads through
heads.results and heads.answers.sweepaxes, draws through heads.plots.gnuplot. Knows nothing of how the runs
were made.
"""
import math
import os
import sys
import tempfile

import numpy as np

from ..sweep import sweepread
from ..core import cli, configs, stats, words
from . import gnuplot, l0plots, tuneplots
from .sweep_style import (CLASS_COLOURS, SERIES_COLOURS, below_plot, dodge, group_colours, sequential,
                          series_style, x_label, x_tic_lines, x_tics)
from ..read import pruning, results
from ..answers.prune_curves import sweep_curves
from ..answers import sweepaxes, tuning
from ..answers.sweepaxes import short

def plot_answer_loss(s, out, tmp, by):
    """The figure of the answer compare gives: its default metric (the test split's loss when the
    runs have one) against the by key, a tuned sweep's arms each at its chosen value (the
    validation split chose it); <metric>.csv beside it. Returns the metric drawn."""
    metric, _ = tuning.default_metric(s)
    selection = tuning.select(s)
    answer = tuning.view(s, selection) if selection else s
    chosen = f"; each arm at the {', '.join(short(k) for k in selection.keys)} its validation loss chose" \
        if selection else ""
    split, _ = tuning.split_of(metric)
    plot_final_loss(answer, out, tmp, sweepaxes.Layout(answer, by), metric,
                    f"{split} loss{chosen}")
    return metric


def plot_final_loss(s, out, tmp, layout, metric="final_eval_loss", what="final eval loss"):
    """A final loss (the summary's column metric) against the by key (mean ± std over seeds,
    every seed a dot), a series per group; <metric>.csv beside it."""
    colours = group_colours(layout)
    parts, dots, csv_rows, n_seeds = [], [], [], set()
    for k, group in enumerate(layout.groups):
        mean_rows, dot_rows = [], []
        for point in layout.points:
            if point[:-1] != group:
                continue
            x = layout.by_values.index(point[-1]) + dodge(layout, k)
            losses = layout.values(point, metric)
            m, sd, n = stats.mean_std(losses)
            n_seeds.add(n)
            mean_rows.append([x, m, 0.0 if math.isnan(sd) else sd, n])
            dot_rows += [[x, v] for v in losses]
            csv_rows.append(list(point) + [m, sd, n, " ".join(repr(v) for v in losses)])
        mp = os.path.join(tmp, f"final_mean_{k}.txt")
        dp = os.path.join(tmp, f"final_dots_{k}.txt")
        gnuplot.write_columns(mp, ["x", "mean", "std", "n"], mean_rows)
        gnuplot.write_columns(dp, ["x", "loss"], dot_rows)
        title = layout.group_label(group) if group else "mean ± std over seeds"
        parts.append(f"{gnuplot.gp_string(mp)} using 1:2:3 with {series_style(layout)} lw 2 pt 7 ps 1.2 "
                     f"lc rgb '{colours[group]}' title {gnuplot.gp_string(title)}")
        dots.append(f"{gnuplot.gp_string(dp)} using 1:2 with points pt 6 ps 0.8 lc rgb "
                    f"'{colours[group]}' " + ("title 'each seed'" if k == 0 else "notitle"))
    sweepaxes.write_csv(out, layout.keys + [f"{metric}_mean", f"{metric}_std", "n", f"{metric}_each_seed"],
                        csv_rows)
    seeds = "/".join(str(n) for n in sorted(n_seeds))
    values = np.asarray([r[-4] for r in csv_rows if np.isfinite(r[-4]) and r[-4] > 0])
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    width_text = {"fixed_width": "fixed width: d_head = d_model / n_head (same params and FLOPs)",
                  "fixed_d_head": "fixed d_head: width H*d_head grows with the heads",
                  "free": "d_head as each run's config says (0 = d_model / n_head); E = n_head × d_head",
                  }.get(s.width, f"width rule {s.width}")
    title = gnuplot.fit(f"{s.name}: {what} against {x_label(layout)}, {seeds} seeds\n"
                        f"{width_text}", 860)
    # a log axis spans what is drawn (every seed, mean ± std), not whole decades
    drawn = [v for r in csv_rows for v in [r[-4] - (r[-3] if r[-3] == r[-3] else 0),
                                            r[-4] + (r[-3] if r[-3] == r[-3] else 0)]
             + [float(x) for x in r[-1].split()] if np.isfinite(v) and v > 0]
    y_range = (f"set yrange [{min(drawn) / 1.3:g}:{max(drawn) * 1.3:g}]\n"
               + gnuplot.log_tics(min(drawn) / 1.3, max(drawn) * 1.3)) if logy and drawn else ""
    bmargin, extra = below_plot(layout, len(parts) + 1, x_tic_lines(layout, s))
    script = f"""{gnuplot.terminal_for(out, 900, 600 + extra)}
set output {gnuplot.gp_string(out)}
set title {gnuplot.gp_string(title)}
set xrange [-0.5:{len(layout.by_values) - 0.5}]
{x_tics(layout, s)}
set xlabel {gnuplot.gp_string(x_label(layout))} offset 0,{1 - x_tic_lines(layout, s)}
set bmargin {bmargin:.1f}
set ylabel '{metric} (mean ± sample std over seeds){", log scale" if logy else ""}'
{"set logscale y" if logy else ""}
{y_range}
set format y '{"%g" if logy else "%.3f"}'
{gnuplot.MEAN_STD_FRAME}
plot {", ".join(parts + dots)}
"""
    gnuplot.run_gnuplot(script, out, tmp)


def eval_curves(s, idx):
    """Eval steps all runs idx share, with the mean and sample std of their eval loss there."""
    curves = []
    for i in idx:
        with results.open_file(s.run_path(i)) as f:
            curves.append((np.asarray(f["eval/step"][()]), np.asarray(f["eval/loss"][()])))
    common = set(curves[0][0].tolist())
    for steps, _ in curves[1:]:
        common &= set(steps.tolist())
    common = sorted(common)
    at = [[float(loss[list(steps).index(st)]) for steps, loss in curves] for st in common]
    return common, [stats.mean_std(v)[:2] for v in at]


def plot_eval_curves(s, out, tmp, layout):
    """Mean eval loss against step, a line per point (colour: the by value, dash: the group),
    whole run and second half; eval_curves.csv beside it."""
    dash = {g: j + 1 for j, g in enumerate(layout.groups)}
    heads = layout.by in sweepaxes.HEAD_KEYS
    parts, all_values, max_step, csv_rows = [], [], 0, []
    for k, (point, idx) in enumerate(layout.points.items()):
        steps, ms = eval_curves(s, idx)
        mean = [m for m, _ in ms]
        csv_rows += [list(point) + [st, m, sd, len(idx)] for st, (m, sd) in zip(steps, ms)]
        all_values += mean
        max_step = max(max_step, max(steps) if steps else 0)
        path = os.path.join(tmp, f"curve_{k}.txt")
        gnuplot.write_columns(path, ["step", "mean_eval_loss"], zip(steps, mean))
        colour = sequential(layout.by_values.index(point[-1]), len(layout.by_values))
        parts.append((path, colour, dash[point[:-1]], layout.point_label(point), steps, mean))
    sweepaxes.write_csv(out, layout.keys + ["step", "eval_loss_mean", "eval_loss_std", "n"],
                        csv_rows)
    values = np.asarray([v for v in all_values if np.isfinite(v) and v > 0])
    logy = len(values) and values.max() / values.min() > 3.0
    late = [v for *_, steps, mean in parts for st, v in zip(steps, mean) if st >= max_step / 2]
    lo, hi = (min(late), max(late)) if late else (0, 1)
    pad = 0.08 * (hi - lo) if hi > lo else 0.01
    zoom_range = f"[{lo / 1.25}:{hi * 1.25}]" if logy and lo > 0 else f"[{lo - pad}:{hi + pad}]"
    plot_cmd = ", \\\n     ".join(
        f"{gnuplot.gp_string(p)} using 1:2 with linespoints lw 2 pt 7 ps 0.5 dt {d} lc rgb '{c}' "
        f"title {gnuplot.gp_string(t)}" for p, c, d, t, *_ in parts)
    n = sum(len(v) for v in layout.points.values())
    line_of = "head count" if heads else layout.by
    script = f"""{gnuplot.terminal_for(out, 1300, 560)}
set output {gnuplot.gp_string(out)}
set multiplot layout 1,2 title {gnuplot.gp_string(gnuplot.fit(f'{s.name}: eval loss during training, mean over seeds, one line per {line_of}{" and group" if layout.group_keys else ""} ({words.plural(n, "complete run")})', 1260, 12))} font ',12'
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


def plot_head_classes(s, out, tmp, layout):
    """Head classes of every point: mean count over seeds (stacked; the bar is n_head x n_layer
    heads) and the fraction of all heads; head_classes.csv beside it."""
    classes = sweepaxes.class_names(s)
    rows = sweepaxes.class_counts(s, layout)
    labels, counts = [], []
    for point, all_heads, n, c in rows:
        n_head = {int(s["n_head"][i]) for i in layout.points[point]}
        n_layer = {int(s["n_layer"][i]) for i in layout.points[point]}
        text = f"{'/'.join(map(str, sorted(n_head)))} × {'/'.join(map(str, sorted(n_layer)))}"
        others = [k for k in layout.keys if k not in sweepaxes.HEAD_KEYS]
        if layout.layout_heads:  # the label names the heads: '4×32' (the layers: the x label)
            text = configs.format_value(point[-1])
            others = layout.group_keys
        if others:
            text += "\\n" + sweepaxes.label(others, [dict(zip(layout.keys, point))[k]
                                                     for k in others])
        labels.append(text)
        counts.append([c[k] for k in classes])
    counts = np.asarray(counts)
    total = counts.sum(axis=1, keepdims=True)
    frac = counts / np.where(total > 0, total, 1)
    sweepaxes.write_csv(out, layout.keys + ["all_heads", "n"] + [f"count_{c}" for c in classes]
                        + [f"fraction_{c}" for c in classes],
                        [list(p) + [a, n] + list(cr) + list(fr)
                         for (p, a, n, _), cr, fr in zip(rows, counts, frac)])
    cpath, fpath = os.path.join(tmp, "class_counts.txt"), os.path.join(tmp, "class_frac.txt")
    for path, data in ((cpath, counts), (fpath, frac)):
        with open(path, "w") as f:
            f.write("# label " + " ".join(classes) + "\n")
            for text, row in zip(labels, data):
                f.write(f'"{text}" ' + " ".join(f"{v:.6g}" for v in row) + "\n")

    def stacked(path):
        cols = []
        for j, c in enumerate(classes):
            colour = CLASS_COLOURS.get(c, SERIES_COLOURS[j % len(SERIES_COLOURS)])
            first = ":xtic(1)" if j == 0 else ""
            cols.append(f"{gnuplot.gp_string(path)} using {j + 2}{first} title {gnuplot.gp_string(c)} "
                        f"lc rgb '{colour}'")
        return "plot " + ", \\\n     ".join(cols)

    n_runs = sum(len(v) for v in layout.points.values())
    layer_counts = sorted({int(s["n_layer"][i]) for idx in layout.points.values() for i in idx})  # drawn runs only
    layers_text = (f"layout (heads × d_head per layer), "
                   f"{'/'.join(map(str, layer_counts))} {'layer' if layer_counts == [1] else 'layers'}")
    # bar labels side by side when they fit the room of a bar, else one line each, at 45 degrees
    width = 1300
    room = (width / 2 - 80 - 150) / (len(labels) + 1)
    widest = max(gnuplot.text_px(line, 10) for t in labels for line in t.split("\\n"))
    slanted = widest > room - 8
    if slanted:
        for path in (cpath, fpath):
            with open(path) as f:
                data = f.read()
            with open(path, "w") as f:
                f.write(data.replace("\\n", ", "))
        longest = max(gnuplot.text_px(t.replace("\\n", ", "), 10) for t in labels)
        xtics = "set xtics rotate by 90 right"  # down from the bar: nothing reaches sideways
        # gnuplot puts the x label under rotated tics at 8 px a character (a character's width
        # at 10 points), 15.5 px a character row: the margin as it reckons
        longest = max(longest, 8 * max(len(t) for t in labels))
        bmargin = int((longest + 45) / 15.5) + 1
    else:
        xtics = "set xtics norotate"
        bmargin = 6 if len(layout.keys) > 1 or layout.by not in sweepaxes.HEAD_KEYS else 4
    height = 560 + (int(longest) if slanted else 0)
    script = f"""{gnuplot.terminal_for(out, width, height)}
set output {gnuplot.gp_string(out)}
set multiplot layout 1,2 title {gnuplot.gp_string(gnuplot.fit(f'{s.name}: head classes of every layout (final /scores/class, mean over seeds; {words.plural(n_runs, "complete run")})', width - 40, 12))} font ',12'
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb '#444444'
set boxwidth 0.7
set grid ytics
set xlabel '{layers_text if layout.layout_heads else "heads per layer × layers"}' {"offset 0,-1.2" if not slanted and (len(layout.keys) > 1 or layout.by not in sweepaxes.HEAD_KEYS) else ""}
set bmargin {bmargin}
{xtics}
set key outside right top font ',9' title 'class'
set title 'number of heads (a bar: all n_head × n_layer heads)'
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


def plot_sweep_pruning(s, out, tmp, layout):
    """Both criteria side by side: mean eval loss against the fraction of heads pruned, a line per
    point; pruning_curves.csv beside it. False when no run has pruning curves."""
    panels = [(c, sweep_curves(s, c, layout.keys, layout.points)) for c in pruning.CRITERIA]
    panels = [(c, d) for c, d in panels if d]
    if not panels:
        return False
    sweepaxes.write_csv(out, ["criterion"] + layout.keys + [
        "fraction_pruned", "heads_left", "eval_loss_mean", "eval_loss_std", "n"],
        [[c] + list(point) + [fr, left, m, sd, n]
         for c, data in panels for point, (frac, lefts, mean, std, n) in data.items()
         for fr, left, m, sd in zip(frac, lefts, mean, std)])
    dash = {g: j + 1 for j, g in enumerate(layout.groups)}
    values = np.concatenate([v[2] for _, d in panels for v in d.values()])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    lines = [gnuplot.terminal_for(out, 1300, 600), f"set output {gnuplot.gp_string(out)}",
             f"set multiplot layout 1,{len(panels)} title {gnuplot.gp_string(gnuplot.fit(f'{s.name}: pruning curves of every layout (mean over seeds; importance measured again after each step)', 1260, 12))} font ',12'",
             "set xlabel 'fraction of all heads pruned'", "set xrange [0:1]", "set grid",
             f"set ylabel 'held-out eval loss{' (log scale)' if logy else ''}'",
             "set logscale y" if logy else "", "set format y '%g'", "set key top left font ',9'"]
    for c, data in panels:
        parts = []
        for k, (point, (frac, _, mean, _, n)) in enumerate(data.items()):
            path = os.path.join(tmp, f"sweep_prune_{c}_{k}.txt")
            gnuplot.write_columns(path, ["fraction_pruned", "mean_eval_loss"], zip(frac, mean))
            colour = sequential(layout.by_values.index(point[-1]), len(layout.by_values))
            title = f"{layout.point_label(point)}, {words.plural(n, 'seed')}"
            parts.append(f"{gnuplot.gp_string(path)} using 1:2 with linespoints lw 2 pt 7 ps 0.6 "
                         f"dt {dash[point[:-1]]} lc rgb '{colour}' title {gnuplot.gp_string(title)}")
        lines += [f"set title {gnuplot.gp_string(pruning.CRITERION_TEXT[c])}",
                  "plot " + ", ".join(parts)]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def heads_needed_points(s, layout):
    """[(point, all heads, [heads needed of each seed])] of the points whose runs have them."""
    if "heads_needed" not in s.data:
        return []
    out = []
    for point, idx in layout.points.items():
        values = [float(s["heads_needed"][i]) for i in idx if float(s["heads_needed"][i]) == float(s["heads_needed"][i])]
        if values:
            out.append((point, int(s["n_head"][idx[0]]) * int(s["n_layer"][idx[0]]), values))
    return out


def plot_heads_needed(s, out, tmp, layout):
    """Heads needed (mean ± std over seeds, every seed a dot) and all heads against the by key, a
    series per group; heads_needed.csv beside it. False when no run has them."""
    points = heads_needed_points(s, layout)
    if not points:
        return False
    tol = pruning.tolerance_text(*sweepaxes.tolerance_of(s))
    colours = group_colours(layout)
    csv_rows, parts, all_drawn = [], [], []
    for k, group in enumerate(layout.groups):
        mine = [(p, a, v) for p, a, v in points if p[:-1] == group]
        if not mine:
            continue
        mean_rows, dots = [], []
        for point, all_heads, values in mine:
            m, sd, n = stats.mean_std(values)
            x = layout.by_values.index(point[-1]) + dodge(layout, k)
            mean_rows.append([x, m, 0.0 if math.isnan(sd) else sd, all_heads])
            dots += [[x, v] for v in values]
            csv_rows.append(list(point) + [all_heads, m, sd, n, " ".join(repr(v) for v in values)])
        mp, dp = os.path.join(tmp, f"needed_mean_{k}.txt"), os.path.join(tmp, f"needed_dots_{k}.txt")
        gnuplot.write_columns(mp, ["x", "mean", "std", "all_heads"], mean_rows)
        gnuplot.write_columns(dp, ["x", "heads_needed"], dots)
        name = f" ({layout.group_label(group)})" if group else ""
        all_heads = [(round(x), a) for x, _, _, a in mean_rows]  # the layout, not its dodge
        if all_heads not in all_drawn:  # groups of the same layouts share one grey line
            all_drawn.append(all_heads)
            joined = "points" if layout.by == sweepaxes.LAYOUT else "linespoints dt 2 lw 1"
            parts.append(f"{gnuplot.gp_string(mp)} using 1:4 with {joined} pt 4 lc "
                         f"rgb '#7f7f7f' title 'all heads (n_head × n_layer)'")
        parts += [f"{gnuplot.gp_string(mp)} using 1:2:3 with {series_style(layout)} lw 2 pt 7 lc rgb "
                  f"'{colours[group]}' title {gnuplot.gp_string('heads needed (mean ± std over seeds)' + name)}",
                  f"{gnuplot.gp_string(dp)} using 1:2 with points pt 6 ps 0.8 lc rgb '{colours[group]}' "
                  + ("title 'each seed'" if k == 0 else "notitle")]
    sweepaxes.write_csv(out, layout.keys + ["all_heads", "heads_needed_mean", "heads_needed_std",
                                            "n", "heads_needed_each_seed"], csv_rows)
    top = max(r[len(layout.keys)] for r in csv_rows)
    titled = sum(1 for p in parts if " title " in p and "notitle" not in p)
    bmargin, extra = below_plot(layout, titled, x_tic_lines(layout, s))
    script = f"""{gnuplot.terminal_for(out, 900, 600 + extra)}
set output {gnuplot.gp_string(out)}
set title {gnuplot.gp_string(gnuplot.fit(f'{s.name}: heads needed to keep the eval loss within {tol} of the unpruned model (fewer of the two pruning criteria)', 860))} font ',10'
set xrange [-0.5:{len(layout.by_values) - 0.5}]
{x_tics(layout, s)}
set yrange [0:{top * 1.1 + 0.5}]
set xlabel {gnuplot.gp_string(x_label(layout))} offset 0,{1 - x_tic_lines(layout, s)}
set bmargin {bmargin:.1f}
set ylabel 'heads (all layers)'
set grid
set key below vertical maxcols 1
set bars 2
plot {", ".join(parts)}
"""
    gnuplot.run_gnuplot(script, out, tmp)
    return True


def main(doc):
    """scripts/plot-sweep: doc is its usage text (--help); returns the exit status."""
    ap = cli.arg_parser(doc)
    ap.add_argument("results_dir")
    ap.add_argument("-o", "--outdir")
    ap.add_argument("--format", default="png")
    ap.add_argument("--by")
    args = ap.parse_args()
    if args.format not in gnuplot.FORMATS:
        cli.die(f"--format {args.format}: use one of " + ", ".join(gnuplot.FORMATS))
    names = [f"{stem}.{args.format}" for stem in ("final_eval_loss", "eval_curves", "head_classes")]
    try:
        s = sweepread.Summary(args.results_dir, "scripts/plot-sweep")
        if s.left_out_note():
            print(s.left_out_note(), file=sys.stderr)
        if "n_head" not in s.data or not any(st == "complete" for st in s["status"]):
            cli.die(f"{args.results_dir}: no complete runs to plot")
        outdir = os.path.abspath(args.outdir or os.path.join(s.dir, "plots"))
        os.makedirs(outdir, exist_ok=True)
        layout = sweepaxes.Layout(s, args.by)
        with tempfile.TemporaryDirectory() as tmp:
            for plot, name in zip((plot_final_loss, plot_eval_curves, plot_head_classes), names):
                plot(s, os.path.join(outdir, name), tmp, layout)
            written = list(names)
            if "test_loss" in s.data:  # the answer's own figure: the test split, tuned arms chosen
                metric = plot_answer_loss(s, os.path.join(outdir, f"answer.{args.format}"), tmp, args.by)
                written.append(f"answer.{args.format} ({metric})")
            # the head study's sweep plots, when the runs have pruning curves
            # and, for a sweep over train.head_l0, the learned gates beside the pruning curves
            for plot, stem in ((plot_sweep_pruning, "pruning_curves"),
                               (plot_heads_needed, "heads_needed"),
                               (lambda s, out, tmp, _: l0plots.plot_gate_curve(s, out, tmp),
                                "l0_curve"),
                               (lambda s, out, tmp, _: tuneplots.plot_tuning(s, out, tmp),
                                "tuning")):
                name = f"{stem}.{args.format}"
                if plot(s, os.path.join(outdir, name), tmp, layout):
                    written.append(name)
    except cli.UserError as e:
        cli.die(str(e))
    print(f"{outdir}/: " + ", ".join(written) + " (each with its numbers in a .csv beside it)")
    return 0
