"""heads.plots.plot_run: the command `scripts/plot` (its usage text is that script's docstring): one
run's results file drawn with gnuplot: the loss curves with the steps where heads formed, the
attention maps of one probe per layer, the pattern-score heatmaps, every head's scores over
training, the ablation and importance heatmaps, the head study's figures (heads.plots.studyplots) and
the causal ones: patching, direct logit attribution, copying (heads.plots.causalplots).

Owns those figures' layout and the command's messages; reads the results file through
heads.results, draws through heads.plots.gnuplot and heads.plots.heatmaps. Knows nothing of sweeps.
"""
import colorsys
import math
import os
import sys
import tempfile

import numpy as np

from . import causalplots, gnuplot, heatmaps, overtraining, studyplots
from ..core import cli, tokens, words
from ..read import results
from ..read import steps as over_training

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",  # a head's
           "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173",  # colour
           "#e7969c", "#6b6ecf"]
PATTERN_MEANING = {
    "prev": "attention to the previous token",
    "self": "attention to the query's own position",
    "first": "attention to the first token (the sink)",
    "induction": "attention to the token after an earlier copy of the current one",
    "duplicate": "attention to earlier copies of the current token",
}


def describe(f, run_name):
    c = {k: results.text(v) if isinstance(v, bytes) else v for k, v in f["config"].attrs.items()}
    return (f"{run_name}: {c.get('task', '?')}, d_model {c.get('d_model')}, "
            f"{words.plural(int(c.get('n_head', 0)), 'head')} of {c.get('d_head')}, "
            f"{words.plural(int(c.get('n_layer', 0)), 'layer')}, {words.plural(int(c.get('steps', 0)), 'step')}, "
            f"seed {c.get('seed')}")


def formation_marks(f):
    """gnuplot arrows and labels at the steps where heads formed (heads.read.steps.formation), each
    said as the interval it was measured in."""
    if "attn/step" not in f:
        return ""
    marks = over_training.formation(*over_training.scores_over_steps(f))
    colours = {"prev": "#1f77b4", "induction": "#d62728", "duplicate": "#9467bd",
               "first": "#ff7f0e", "self": "#2ca02c"}
    lines = []
    for k, (p, m) in enumerate(marks.items()):
        step, text = m["step"], gnuplot.gp_string(f"{p} heads form ({over_training.interval_text(m)})")
        lines += [f"set arrow {k + 1} from {step}, graph 0 to {step}, graph 1 nohead dt 2 lw 1.5 "
                  f"lc rgb '{colours[p]}'",
                  f"set label {k + 1} {text} at {step}, graph {0.95 - 0.06 * k} offset 0.5,0 "
                  f"textcolor rgb '{colours[p]}'"]
    return "\n".join(lines)


def plot_loss(f, title, out, tmp):
    ts, tl = f["train/step"][()], f["train/loss"][()]
    es, el = (f["eval/step"][()], f["eval/loss"][()]) if "eval/loss" in f else ([], [])
    gnuplot.write_columns(os.path.join(tmp, "train.txt"), ["step", "loss"], zip(ts, tl))
    gnuplot.write_columns(os.path.join(tmp, "eval.txt"), ["step", "loss"], zip(es, el))
    values = np.concatenate([np.asarray(tl, float), np.asarray(el, float)])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    final = f"final eval loss {el[-1]:.4f} at step {es[-1]}" if len(el) else "no eval loss"
    script = f"""{gnuplot.terminal_for(out, 900, 560)}
set output {gnuplot.gp_string(out)}
set title {gnuplot.gp_string(gnuplot.fit(title + chr(10) + final, 860))}
{formation_marks(f)}
set xlabel 'training step'
set ylabel 'cross-entropy loss{" (log scale)" if logy else ""}'
{"set logscale y" if logy else ""}
set format y '%g'
set grid
set key top right
plot 'train.txt' using 1:2 with lines lw 1 lc rgb '#7fa7d1' title 'train (each logged step)', \\
     'eval.txt' using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '#d62728' title 'eval (held out)'
"""
    gnuplot.run_gnuplot(script, out, tmp)


def top_score(scores, si, layer, head):
    best = max(results.PATTERNS, key=lambda p: scores[p][si, layer, head] if p in scores else -1)
    return best, float(scores[best][si, layer, head])


def plot_attention(f, layer, si, probe, run_name, out, tmp, scores, classes):
    step = int(f["attn/step"][si])
    maps = f["attn/maps"]
    n_head, T = maps.shape[2], maps.shape[4]
    data = np.asarray(maps[si, layer, :, probe], dtype=float)  # [H, T, T]
    labels = results.read_strings(f, "/probe/labels")
    text = labels[probe] if labels and probe < len(labels) else None
    ids = [int(t) for t in f["probe/tokens"][probe][:T]] if "probe/tokens" in f else None
    task = results.text(f["config"].attrs.get("task", ""))
    chars = tokens.token_labels(task, int(f["config"].attrs.get("vocab_size", 0)), ids,
                                results.read_strings(f, "/tokenizer/pieces")) if ids else None
    wide = chars is not None and max(len(c) for c in chars) > 1  # ids, pieces: rotated x labels

    cols = n_head if n_head <= 4 else 4 if n_head <= 16 and n_head % 4 == 0 else \
        min(8, math.ceil(math.sqrt(n_head)) if n_head <= 16 else 8)
    rows = math.ceil(n_head / cols)
    panel = 360 if n_head == 1 else 300 if n_head <= 4 else 250 if n_head <= 16 else 220
    if chars is not None:
        panel = max(panel, min(11 * T, 440))  # room for one label per position
    left, gap_x, gap_y, top, bottom, right = 40, 50, 55, 95, 30, 130
    if wide:  # room for the rotated labels under each panel
        gap_y, bottom = gap_y + 28, bottom + 28
    content = cols * panel + (cols - 1) * gap_x
    width = max(left + content + right, 1100)  # room for the header line
    left += (width - (left + content + right)) // 2
    height = top + rows * panel + (rows - 1) * gap_y + bottom
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height  # from the top

    every = max(1, math.ceil(T / max(1, panel // 9)))
    marked = [int(x) for x in f["probe/marked"][probe][:T]] if "probe/marked" in f else []
    marked_class = results.read_marked(f)
    if chars:
        tics = ", ".join(f"{gnuplot.gp_string(chars[i])} {i}" for i in range(0, T, every))
        # rows: the task's marked queries (where its loss is taken) when it marks some, else every k-th
        rows = [i for i in range(T) if i == 0 or marked[i]] if any(marked) else range(0, T, every)
        row_tics = ", ".join(f"{gnuplot.gp_string(chars[i])} {i}" for i in rows)
        tic_cmd = (f"set xtics ({tics}) scale 0 font ',7'{' rotate by 90 right' if wide else ''}"
                   f"\nset ytics ({row_tics}) scale 0 font ',7'")
    else:
        step_t = 8 if T > 32 else 4 if T > 8 else 1
        tic_cmd = f"set xtics 0,{step_t} scale 0.5 font ',8'\nset ytics 0,{step_t} scale 0.5 font ',8'"

    probe_desc = f"'{text}'" if text is not None else (
        "tokens " + " ".join(chars[:16]) + (" …" if T > 16 else "") if chars else "")
    header = (f"{run_name}: layer {layer} attention maps at step {step}, probe {probe}: "
              f"{probe_desc}")
    sub = ("rows = query position (top = first), columns = key position; colour = attention "
           "weight, one scale [0, 1] for all heads; grey = masked (future)")
    head_lines = gnuplot.wrap(header, width - 40, 12)
    sub_lines = gnuplot.wrap(sub, width - 40, 10)
    extra = (len(head_lines) - 1) * gnuplot.line_px(12) + (len(sub_lines) - 1) * gnuplot.line_px(10)
    top += int(extra)
    height += int(extra)
    lines = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
             heatmaps.SEQUENTIAL, "set cbrange [0:1]", "set multiplot", tic_cmd,
             f"set xrange [-0.5:{T - 0.5}]", f"set yrange [{T - 0.5}:-0.5]", "set size ratio -1",
             "unset key", "set tics out",
             "set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb '#d9d9d9' "
             "fillstyle solid noborder",
             ]
    lp12, lp10 = gnuplot.line_px(12), gnuplot.line_px(10)
    words = [(t, 22 + i * lp12, 12) for i, t in enumerate(head_lines)]
    words += [(t, 48 + (len(head_lines) - 1) * lp12 + i * lp10, 10) for i, t in enumerate(sub_lines)]
    lines += [f"set label {k + 1} {gnuplot.gp_string(t)} at screen 0.5, screen {sy(y)} center "
              f"font ',{size}'" for k, (t, y, size) in enumerate(words)]
    for h in range(n_head):
        r, c = divmod(h, cols)
        x0 = left + c * (panel + gap_x)
        y0 = top + r * (panel + gap_y)
        m = os.path.join(tmp, f"attn_l{layer}_h{h}.txt")
        shown = data[h].copy()
        shown[np.triu_indices(T, 1)] = np.nan  # causal mask: grey background, not "0 attention"
        gnuplot.write_matrix(m, shown)
        klass = classes[layer][h] if classes and layer < len(classes) else "?"
        best, value = top_score(scores, si, layer, h) if scores else ("?", float("nan"))
        if klass in scores:
            title = f"head {h}: {klass} {scores[klass][si, layer, h]:.2f}"
        else:
            title = f"head {h}: {klass} (top {best} {value:.2f})"
        if marked_class and si == len(f["attn/step"]) - 1:  # /scores/marked_* are the last snapshot's
            # the class at the task's marked rows, in the longest wording the panel has room for
            for extra in (f"; at marked rows {marked_class[layer][h]}", f"; marked: {marked_class[layer][h]}"):
                if len(title + extra) * 7 <= panel:
                    title += extra
                    break
        lines += [
            f"set lmargin at screen {sx(x0)}", f"set rmargin at screen {sx(x0 + panel)}",
            f"set tmargin at screen {sy(y0 + 22)}", f"set bmargin at screen {sy(y0 + panel)}",
            f"set title {gnuplot.gp_string(title)} offset 0,-0.6 font ',{10 if panel >= 250 else 9}'",
        ]
        if h == n_head - 1:
            lines.append(f"set colorbox user origin screen {sx(left + content + 35)}, screen "
                         f"{sy(height - bottom)} size screen {sx(18)}, screen "
                         f"{(height - top - bottom) / height}")
            lines.append("set cbtics 0.2 font ',9'")
            lines.append("set cblabel 'attention weight' font ',10'")
        else:
            lines.append("unset colorbox")
        lines.append(f"plot {gnuplot.gp_string(m)} matrix with {gnuplot.image_style(out)}")
        if h == 0:
            lines += [f"unset label {k + 1}" for k in range(len(words))]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)


def plot_score_heatmaps(f, si, run_name, out, tmp, scores):
    step = int(f["attn/step"][si])
    panels = [(f"{p}: {PATTERN_MEANING[p]}", scores[p][si], "score")
              for p in results.PATTERNS if p in scores]
    heatmaps.layer_head_heatmaps(out, f"{run_name}: pattern scores at step {step} (layer × head; "
                                 "head class = the pattern above 0.5)", panels, tmp, shared=(0, 1),
                                 cblabel="score (mean attention)")


HEAD_FIGURES = {  # file stem: (header, [(dataset under /heads, panel title)])
    "ablation": ("ablation Δloss: held-out loss increase when the head's output is removed", [
        ("ablation_delta", "zero ablation: Δloss with the head's output set to 0"),
        ("ablation_delta_mean", "mean ablation: Δloss with the head's output set to its mean")]),
    "importance": ("head importance (Michel et al. 2019): mean |∂loss/∂gate| over held-out "
                   "batches", [
        ("importance", "importance |∂loss/∂gate|"),
        ("importance_normalized", "importance ÷ its layer's L2 norm")]),
}


def plot_head_metrics(f, run_name, outdir, fmt, tmp):
    """ablation and importance heatmaps, each panel on its own colour scale; the names written."""
    written = []
    for stem, (header, datasets) in HEAD_FIGURES.items():
        panels = [(title, np.asarray(f[f"heads/{key}"][()], dtype=float), "value")
                  for key, title in datasets if f"heads/{key}" in f]
        if panels:
            name = f"{stem}.{fmt}"
            heatmaps.layer_head_heatmaps(os.path.join(outdir, name), f"{run_name}: {header}",
                                         panels, tmp)
            written.append(name)
    return written


def end_labels(ends, gap=0.055, per_row=3, lo=0.0, hi=1.0):
    """[(head, final score)] -> [([heads], label height)]: the names at the lines' ends, each as near
    its line's end as the others allow. Heads ending within `gap` of each other share a row
    ('h3 h5 h9', up to per_row names, in score order); rows at least gap apart, each placed to
    least squares from the mean end of its heads (pool-adjacent-violators), within [lo, hi]."""
    rows = []  # [names, mean end]
    for h, v in sorted(ends, key=lambda x: x[1]):
        if rows and len(rows[-1][0]) < per_row and v - rows[-1][2] < gap:
            rows[-1][0].append(h)
            rows[-1][1].append(v)
        else:
            rows.append([[h], [v], v])
        rows[-1][2] = rows[-1][1][0]  # a row is joined by ends within gap of its first
    targets = [float(np.mean(vs)) for _, vs, _ in rows]
    n = len(targets)
    if n == 0:
        return []
    gap = min(gap, (hi - lo) / (n - 1)) if n > 1 else gap
    blocks = []  # [first row, count, position of the first]: rows k at position + (k - first) gap
    for k, t in enumerate(targets):
        blocks.append([k, 1, t])
        while True:
            first, count, pos = blocks[-1]
            pos = min(max(pos, lo), hi - (count - 1) * gap)
            blocks[-1][2] = pos
            if len(blocks) < 2 or blocks[-2][2] + blocks[-2][1] * gap <= pos + 1e-12:
                break
            f0, c0, _ = blocks[-2]
            members = range(f0, first + count)
            blocks[-2:] = [[f0, c0 + count,
                            float(np.mean([targets[j] - (j - f0) * gap for j in members]))]]
    out = []
    for first, count, pos in blocks:
        for j in range(first, first + count):
            out.append((rows[j][0], round(pos + (j - first) * gap, 3)))
    return out


def plot_scores_over_steps(f, run_name, out, tmp, scores, classes):
    """A panel per (layer, pattern), a colour per head (the same in every panel) with a legend
    per layer; the heads of that pattern's final class thick and named at their last point."""
    steps = np.asarray(f["attn/step"][()])
    patterns = [p for p in results.PATTERNS if p in scores]
    S, L, H = scores[patterns[0]].shape
    style = "linespoints pt 7 ps 0.6" if S <= 3 else "lines"
    title = run_name + ": pattern scores of every head during training (a colour per head)"
    if S == 1:  # nothing to follow: say how to get more snapshots
        style = "points pt 7 ps 1.0"
        title += f"\nonly one snapshot (step {int(steps[0])}); set output.attn_every to record more"
        pad = max(1.0, 0.1 * float(steps[0]))
        x_range = f"set xrange [{steps[0] - pad}:{steps[0] + pad}]\nset xtics ({int(steps[0])})"
    else:
        x_range = f"set xrange [{steps.min()}:{steps.max()}]"  # the data's steps, no further
    # the names of each pattern's heads at their lines' ends, in the panel's right margin: as
    # wide as the widest row of them (gnuplot offsets them in characters of its 10-pt font)
    placed = {(layer, p): end_labels([(h, float(scores[p][-1, layer, h])) for h in range(H)
                                      if classes and classes[layer][h] == p]) if S > 1 else []
              for layer in range(L) for p in patterns}
    names_px = max([gnuplot.text_px("0" * math.ceil(0.3 + sum(len(f"h{h}") + 0.6 for h in row)), 10)
                    for rows in placed.values() for row, _ in rows] + [0])
    panel_w, panel_h = 300 + int(names_px), 250
    # the legend: a column of up to legend_rows entries ('h12 induction') per layer, as many
    # columns as it takes, each as wide as its longest entry
    legend_rows = max(1, (panel_h - 30) // 11)
    names = [f"h{h} {c}" for h in range(H) for c in ([classes[l][h] for l in range(L)]
                                                      if classes else [""])]
    # gnuplot spaces a key's columns by its own reckoning, 0.8 of the font size a character
    entry = max(max(gnuplot.text_px(t, 8) for t in names), 6.4 * max(map(len, names))) + 40
    legend_w = int(20 + math.ceil(H / legend_rows) * entry)
    width = len(patterns) * panel_w + legend_w
    title_lines = gnuplot.wrap(title, width - 40, 12)
    head = int(55 + (len(title_lines) - 1) * gnuplot.line_px(12))  # px above the first row
    height = head + 15 + L * panel_h
    colour = lambda h: COLOURS[h % len(COLOURS)] if H <= len(COLOURS) else \
        "#%02x%02x%02x" % tuple(int(255 * c) for c in colorsys.hsv_to_rgb(h / H, 0.75, 0.8))
    lines = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
             "set multiplot", x_range,
             "set yrange [0:1]", "set grid", "unset key", "set ytics 0,0.25,1 font ',8'",
             "set xtics font ',8'"]
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    lines += [f"set label {k + 1} {gnuplot.gp_string(t)} at screen 0.5, screen "
              f"{sy(22 + k * gnuplot.line_px(12))} center font ',12'"
              for k, t in enumerate(title_lines)]
    first_plot = True
    for layer in range(L):
        path = os.path.join(tmp, f"steps_l{layer}.txt")
        for k, p in enumerate(patterns):
            gnuplot.write_columns(f"{path}.{p}", ["step"] + [f"h{h}" for h in range(H)],
                                  [[int(steps[s])] + [float(v) for v in scores[p][s, layer]]
                                   for s in range(S)])
            x0, y0 = k * panel_w, head + layer * panel_h
            lines += [f"set lmargin at screen {sx(x0 + 45)}",
                      f"set rmargin at screen {sx(x0 + panel_w - 10 - names_px)}",
                      f"set tmargin at screen {sy(y0 + 22)}",
                      f"set bmargin at screen {sy(y0 + panel_h - 45)}",
                      f"set title {gnuplot.gp_string(f'layer {layer}: {p}')} font ',10'",
                      "set ylabel 'score' font ',9'" if k == 0 else "unset ylabel",
                      "set xlabel 'training step' font ',9'" if layer == L - 1 else "unset xlabel"]
            mine = [h for h in range(H) if classes and classes[layer][h] == p]
            parts = [f"{gnuplot.gp_string(f'{path}.{p}')} using 1:{h + 2} with {style} "
                     f"lw {2.5 if h in mine else 1} lc rgb '{colour(h)}' notitle" for h in range(H)]
            tags = []  # a label per name, a row's names side by side, each in its line's colour
            for row, y in placed[layer, p]:
                x_chars = 0.3
                for h in row:
                    tags.append(f"set label {200 + h} 'h{h}' at {int(steps[-1])},{y} offset "
                                f"{x_chars:g},0 font ',8' textcolor rgb '{colour(h)}'")
                    x_chars += len(f"h{h}") + 0.6
            parts.append("0.5 with lines dt 2 lw 1 lc rgb '#555555' notitle")
            lines += tags + ["plot " + ", \\\n     ".join(parts)]
            lines += [f"unset label {200 + h}" for h in range(H)]
            if first_plot:
                lines += [f"unset label {j + 1}" for j in range(len(title_lines))]
                first_plot = False
        # the layer's legend: a colour per head with its final class
        legend = [f"NaN with lines lw 2 lc rgb '{colour(h)}' title "
                  f"{gnuplot.gp_string(f'h{h} ' + (classes[layer][h] if classes else ''))}"
                  for h in range(H)]
        lines += ["set lmargin at screen 0", f"set rmargin at screen {sx(width - legend_w)}",
                  "unset title", "unset border", "unset tics", "unset xlabel", "unset ylabel",
                  "unset grid", f"set key at screen {sx(width - legend_w + 10)}, screen "
                  f"{sy(head + layer * panel_h + 20)} left top Left reverse font ',8' samplen 1.5 "
                  f"spacing 0.9 maxrows {legend_rows}",
                  "plot " + ", ".join(legend),
                  "unset key", "set border", "set tics", "set ytics 0,0.25,1 font ',8'",
                  "set xtics font ',8'", "set grid"]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)


def plot_maps(f, args, run_name, outdir, tmp, scores, final_classes):
    """attention maps per layer, score heatmaps, scores over steps; the names written."""
    ext, written = args.format, []
    steps = np.asarray(f["attn/step"][()])
    si = len(steps) - 1 if args.step is None else int(np.argmin(abs(steps - args.step)))
    L, H, n_probe = f["attn/maps"].shape[1:4]
    if not 0 <= args.probe < n_probe:
        cli.die(f"--probe {args.probe}: this run has probes 0..{n_probe - 1}")
    classes = final_classes
    if si != len(steps) - 1 and scores:
        # /scores/class is the final classification; at an earlier step, classify again
        classes = [["mixed" if max(scores[p][si, l, h] for p in scores) <= 0.5 else
                    max(scores, key=lambda p: scores[p][si, l, h]) for h in range(H)]
                   for l in range(L)]
    for layer in range(L):
        name = f"attn_layer{layer}.{ext}"
        plot_attention(f, layer, si, args.probe, run_name, os.path.join(outdir, name), tmp,
                       scores, classes)
        written.append(name)
    if scores:
        plot_score_heatmaps(f, si, run_name, os.path.join(outdir, f"scores.{ext}"), tmp, scores)
        plot_scores_over_steps(f, run_name, os.path.join(outdir, f"scores_over_steps.{ext}"),
                               tmp, scores, final_classes)
        written += [f"scores.{ext}", f"scores_over_steps.{ext}"]
    return written


def main(doc):
    """scripts/plot: doc is its usage text (--help); returns the exit status."""
    ap = cli.arg_parser(doc)
    ap.add_argument("run")
    ap.add_argument("-o", "--outdir")
    ap.add_argument("--probe", type=int, default=0)
    ap.add_argument("--step", type=int)
    ap.add_argument("--format", default="png")
    args = ap.parse_args()
    if args.format not in gnuplot.FORMATS:
        cli.die(f"--format {args.format}: use one of " + ", ".join(gnuplot.FORMATS))
    run_name = os.path.splitext(os.path.basename(args.run))[0]
    outdir = os.path.abspath(args.outdir or os.path.join(os.path.dirname(
        os.path.abspath(args.run)), run_name + "_plots"))
    try:
        f = results.open_file(args.run)
    except cli.UserError as e:
        cli.die(str(e))
    written = []
    with f, tempfile.TemporaryDirectory() as tmp:
        try:
            os.makedirs(outdir, exist_ok=True)
            status = results.text(f.attrs.get("status", "?"))
            title = describe(f, run_name) + ("" if status == "complete" else f" [{status}]")
            if "train/loss" in f:
                plot_loss(f, title, os.path.join(outdir, f"loss.{args.format}"), tmp)
                written.append(f"loss.{args.format}")
            scores = {p: np.asarray(f[f"scores/{p}"][()]) for p in results.PATTERNS
                      if f"scores/{p}" in f}
            if "attn/maps" in f and "attn/step" in f and len(f["attn/step"]) > 0:
                written += plot_maps(f, args, run_name, outdir, tmp, scores,
                                     results.read_classes(f))
            else:
                print(f"{args.run}: no /attn/maps: attention and score plots skipped",
                      file=sys.stderr)
            written += plot_head_metrics(f, run_name, outdir, args.format, tmp)
            for stem, draw in (("over_training", overtraining.plot_over_training),
                               ("heads", studyplots.plot_head_heatmaps),
                               ("pruning", studyplots.plot_pruning_curves),
                               ("composition", studyplots.plot_composition)):
                name = f"{stem}.{args.format}"
                if draw(f, run_name, os.path.join(outdir, name), tmp):
                    written.append(name)
            extra = {k: os.path.join(outdir, f"patching_{k}.{args.format}") for k in ("atp", "kv")}
            if causalplots.plot_patching(f, run_name, os.path.join(outdir, f"patching.{args.format}"), tmp,
                                         out_atp=extra["atp"], out_kv=extra["kv"]):
                written.append(f"patching.{args.format}")
                written += [os.path.basename(p) for p in extra.values() if os.path.exists(p)]
            for stem, draw in (("dla", causalplots.plot_dla), ("copying", causalplots.plot_copying)):
                name = f"{stem}.{args.format}"
                if draw(f, run_name, os.path.join(outdir, name), tmp):
                    written.append(name)
        except cli.UserError as e:
            cli.die(str(e), 1)
    print(f"{outdir}/: " + ", ".join(written))
    return 0
