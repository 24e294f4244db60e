"""heads.studyplots: gnuplot pictures of the head study (the harness's /heads, /prune and /circuits;
heads.pruning): per run, the single-head ablation Δloss (zero and mean) and importance as
layer x head heatmaps with the values written in, the pruning curves, and the composition scores
with previous-token and induction heads labelled; per sweep, every head count's mean pruning
curve on one axis (fraction of heads pruned vs eval loss) and heads needed against n_head.

Each function takes an open results file (or a Summary) and the output path, and writes one PNG.
Knows the results layout of those groups; nothing of the other plots.
"""
import math
import os

import numpy as np

from . import gnuplot as gp
from . import pruning
from .results import read_classes, text

DIVERGING = ("set palette defined (-1 '#2166ac', -0.25 '#92c5de', 0 '#f7f7f7', 0.25 '#f4a582', "
             "1 '#b2182b')")
SEQUENTIAL = ("set palette defined (0 '#ffffff', 0.1 '#deebf7', 0.3 '#9ecae1', 0.5 '#4292c6', "
              "0.75 '#08519c', 1 '#08306b')")
CURVE_COLOURS = {"importance": "#1f77b4", "delta_loss": "#d62728"}


def _value_labels(values, first_tag, fmt, threshold):
    """gnuplot `set label` lines writing each cell's value, white on dark cells; and their tags."""
    lines, tags = [], []
    L, H = values.shape
    for layer in range(L):
        for h in range(H):
            v = values[layer, h]
            tags.append(first_tag + layer * H + h)
            colour = "white" if abs(v) > threshold else "black"
            lines.append(f"set label {tags[-1]} '{fmt(v)}' at {h},{layer} center front font ',8' "
                         f"textcolor rgb '{colour}'")
    return lines, tags


def _short(v):
    if v == 0 or v != v:
        return "0" if v == 0 else "nan"
    return f"{v:+.2f}" if abs(v) >= 0.01 else f"{v:+.3f}" if abs(v) >= 0.001 else f"{v:+.0e}"


def plot_head_heatmaps(f, run_name, out, tmp):
    """ablation Δloss zeroed and mean-ablated (one shared diverging scale, nats) and Michel
    importance normalised per layer ([0, 1]): one row of panels per quantity."""
    panels = [("heads/ablation_delta", "Δloss with the head's output zeroed (nats; one scale with the next)"),
              ("heads/ablation_delta_mean", "Δloss with the head's output replaced by its mean "
                                            "over the held-out tokens (nats; same scale)"),
              ("heads/importance_normalized", "Michel importance |dL/dgate|, normalised per layer")]
    panels = [(p, t) for p, t in panels if p in f]
    if not panels:
        return False
    L, H = f[panels[0][0]].shape
    deltas = [np.asarray(f[p][()], float) for p, _ in panels if "ablation" in p]
    scale = max([float(np.nanmax(np.abs(d))) for d in deltas] + [1e-6])
    cell = int(max(20, min(60, 1100 / H)))
    left, right, top, bottom, gap = 70, 150, 70, 40, 80
    panel_h = max(L * cell, 40)
    width = max(left + H * cell + right, 720)
    height = top + len(panels) * (panel_h + gap) - gap + bottom
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    show = cell >= 44  # room for '+0.005'
    lines = [gp.png_terminal(width, height, 10), f"set output {gp.gp_string(out)}", "set multiplot",
             "unset key", f"set xrange [-0.5:{H - 0.5}]", f"set yrange [{L - 0.5}:-0.5]",
             f"set xtics 0,{1 if H <= 16 else 2 if H <= 32 else 4} scale 0 font ',8'",
             "set ytics 0,1 scale 0 font ',9'", "set ylabel 'layer' font ',9'",
             f"set label 1 {gp.gp_string(run_name + ': what each head is worth on the held-out loss (layer x head)')} "
             f"at screen 0.5, screen {sy(24)} center font ',11'"]
    for k, (path, title) in enumerate(panels):
        y0 = top + k * (panel_h + gap)
        values = np.asarray(f[path][()], float)
        m = os.path.join(tmp, f"head_{k}.txt")
        gp.write_matrix(m, values)
        is_delta = "ablation" in path
        lines += [DIVERGING if is_delta else SEQUENTIAL,
                  f"set cbrange [{-scale}:{scale}]" if is_delta else "set cbrange [0:1]",
                  f"set lmargin at screen {sx(left)}", f"set rmargin at screen {sx(left + H * cell)}",
                  f"set tmargin at screen {sy(y0)}", f"set bmargin at screen {sy(y0 + panel_h)}",
                  f"set title {gp.gp_string(title)} font ',10'",
                  "set xlabel 'head' font ',9' offset 0,0.5" if k == len(panels) - 1 else "unset xlabel",
                  f"set colorbox user origin screen {sx(left + H * cell + 25)}, screen "
                  f"{sy(y0 + panel_h)} size screen {sx(16)}, screen {panel_h / height}",
                  f"set cbtics {scale / 2:.3g}" if is_delta else "set cbtics 0.5",
                  f"set cblabel {gp.gp_string('nats' if is_delta else 'importance')} font ',9'"]
        tags = []
        if show:
            label_lines, tags = _value_labels(values, 100, _short if is_delta else (lambda v: f"{v:.2f}"),
                                              0.6 * scale if is_delta else 0.6)
            lines += label_lines
        lines.append(f"plot {gp.gp_string(m)} matrix with image")
        if k == 0:
            lines.append("unset label 1")
        lines += [f"unset label {t}" for t in tags]
    lines.append("unset multiplot")
    gp.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def plot_pruning_curves(f, run_name, out, tmp):
    """eval loss against heads left, both criteria, the unpruned loss and its tolerance band."""
    curves = pruning.read_curves(f)
    if not curves:
        return False
    parts = []
    first = next(iter(curves.values()))
    total, base = int(first[0][0]), float(first[1][0])
    for c, (left, loss) in curves.items():
        path = os.path.join(tmp, f"prune_{c}.txt")
        gp.write_columns(path, ["heads_left", "eval_loss"], zip(left, loss))
        needed = pruning.heads_needed(left, loss)
        parts.append(f"{gp.gp_string(path)} using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb "
                     f"'{CURVE_COLOURS[c]}' title {gp.gp_string(f'{pruning.CRITERION_TEXT[c]}: {needed} heads needed')}")
    parts.append(f"{base * (1 + pruning.DEFAULT_TOLERANCE)} with lines dt 2 lw 1 lc rgb '#555555' "
                 "title 'unpruned loss + 5% (the heads-needed tolerance)'")
    one = ""
    if "prune/one_head_per_layer/best_delta_loss" in f:
        best = np.asarray(f["prune/one_head_per_layer/best_delta_loss"][()])
        heads = np.asarray(f["prune/one_head_per_layer/best_head"][()])
        one = "\none head per layer (its best head kept, the other layers whole): " + ", ".join(
            f"layer {l} head {h} {d:+.3f}" for l, (h, d) in enumerate(zip(heads, best)))
    step = int(f["prune/" + next(iter(curves)) + "/heads_left"][0] - f["prune/" + next(iter(curves)) + "/heads_left"][1]) \
        if len(first[0]) > 1 else 1
    values = np.concatenate([loss for _, loss in curves.values()])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    script = f"""{gp.png_terminal(1000, 640)}
set output {gp.gp_string(out)}
set title {gp.gp_string(f'{run_name}: pruning curves (Michel et al. 2019), {step} head(s) removed a step, importance measured again after each{one}')} font ',10'
set xlabel 'heads left (of {total}, all layers)'
set ylabel 'held-out eval loss{" (log scale)" if logy else ""}'
{"set logscale y" if logy else ""}
set format y '%g'
set xrange [{total + 0.5}:-0.5]
set grid
set key top left font ',9'
plot {", ".join(parts)}
"""
    gp.run_gnuplot(script, out, tmp)
    return True


def _head_label(layer, h, classes):
    klass = classes[layer][h] if classes and layer < len(classes) else ""
    tag = {"prev": " prev", "induction": " ind"}.get(klass, "")
    return f"L{layer}H{h}{tag}"


def plot_composition(f, run_name, out, tmp):
    """Q-, K- and V-composition of every (later, earlier) head pair: rows the later heads, columns
    the earlier ones, prev/induction heads (/scores/class) labelled; the random baseline beside."""
    kinds = [k for k in ("q_composition", "k_composition", "v_composition") if f"circuits/{k}" in f]
    if not kinds:
        return False
    L, H = f[f"circuits/{kinds[0]}"].shape[:2]
    if L < 2:
        return False
    classes = read_classes(f)
    later = [(l, h) for l in range(1, L) for h in range(H)]
    earlier = [(l, h) for l in range(L - 1) for h in range(H)]
    mats = {}
    for k in kinds:
        s = np.asarray(f[f"circuits/{k}"][()], float)
        mats[k] = np.array([[s[a, b, c, d] for (c, d) in earlier] for (a, b) in later])
    vmax = max(float(np.nanmax(m)) for m in mats.values())
    n_r, n_c = len(later), len(earlier)
    cell = int(max(8, min(40, 420 / max(n_r, n_c))))
    every = max(1, math.ceil(12 / cell))
    pw, ph = n_c * cell, n_r * cell
    left, gap, top, bottom = 120, 150, 90, 110
    width = left + len(kinds) * (pw + gap) + 60
    height = top + ph + bottom
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    xt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(earlier) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    yt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(later) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    lines = [gp.png_terminal(width, height, 10), f"set output {gp.gp_string(out)}", "set multiplot",
             SEQUENTIAL, f"set cbrange [0:{vmax}]", "unset key",
             f"set xrange [-0.5:{n_c - 0.5}]", f"set yrange [{n_r - 0.5}:-0.5]",
             f"set xtics ({xt}) rotate by 60 right scale 0 font ',{8 if cell >= 14 else 7}'",
             f"set ytics ({yt}) scale 0 font ',{8 if cell >= 14 else 7}'",
             f"set label 1 {gp.gp_string(run_name + ': composition scores (Elhage et al. 2021), rows = later head reading, columns = earlier head writing; prev / ind = previous-token / induction heads')} "
             f"at screen 0.5, screen {sy(24)} center font ',11'"]
    for j, k in enumerate(kinds):
        x0 = left + j * (pw + gap)
        m = os.path.join(tmp, f"comp_{k}.txt")
        gp.write_matrix(m, mats[k])
        base = float(f[f"circuits/{k}"].attrs.get("random_baseline", float("nan")))
        title = f"{k[0].upper()}-composition (random matrices: {base:.3f})"
        lines += [f"set lmargin at screen {sx(x0)}", f"set rmargin at screen {sx(x0 + pw)}",
                  f"set tmargin at screen {sy(top)}", f"set bmargin at screen {sy(top + ph)}",
                  f"set title {gp.gp_string(title)} font ',10'",
                  f"set colorbox user origin screen {sx(x0 + pw + 12)}, screen {sy(top + ph)} size "
                  f"screen {sx(12)}, screen {ph / height}" if j == len(kinds) - 1 else "unset colorbox",
                  f"plot {gp.gp_string(m)} matrix with image"]
        if j == 0:
            lines.append("unset label 1")
    if "circuits/" + kinds[0] in f and "note" in f["circuits/" + kinds[0]].attrs:
        lines.append(f"set label 2 {gp.gp_string(text(f['circuits/' + kinds[0]].attrs['note']))} at screen 0.5, "
                     f"screen 0.02 center font ',9'")
    lines.append("unset multiplot")
    gp.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def _sweep_curves(s, criterion):
    """{n_head: (fraction pruned, mean eval loss over seeds, seeds)} of one criterion, complete runs
    with /prune; one series per head count (other swept keys are pooled)."""
    by_heads = {}
    for i in range(s.n):
        if s["status"][i] != "complete" or not os.path.exists(s.run_path(i)):
            continue
        import h5py
        with h5py.File(s.run_path(i), "r") as f:
            curves = pruning.read_curves(f)
        if criterion in curves:
            by_heads.setdefault(int(s["n_head"][i]), []).append(curves[criterion])
    out = {}
    for h, runs in by_heads.items():
        left = runs[0][0]
        same = [loss for l, loss in runs if len(l) == len(left) and (l == left).all()]
        out[h] = (1.0 - left / float(left[0]), np.mean(same, axis=0), len(same))
    return out


def plot_sweep_pruning(s, out, tmp, colour_of):
    """Both criteria side by side: mean eval loss against the fraction of heads pruned, one line
    per head count; colour_of(i, n) gives the i-th of n head counts its colour."""
    panels = [(c, _sweep_curves(s, c)) for c in pruning.CRITERIA]
    panels = [(c, d) for c, d in panels if d]
    if not panels:
        return False
    heads = sorted({h for _, d in panels for h in d})
    values = np.concatenate([m for _, d in panels for _, m, _ in d.values()])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    lines = [gp.png_terminal(1300, 600), f"set output {gp.gp_string(out)}",
             f"set multiplot layout 1,{len(panels)} title {gp.gp_string(f'{s.name}: pruning curves of every head count (mean over seeds; importance measured again after each step)')} font ',12'",
             "set xlabel 'fraction of all heads pruned'", "set xrange [0:1]", "set grid",
             f"set ylabel 'held-out eval loss{' (log scale)' if logy else ''}'",
             "set logscale y" if logy else "", "set format y '%g'", "set key top left font ',9'"]
    for c, data in panels:
        parts = []
        for h in heads:
            if h not in data:
                continue
            frac, mean, n = data[h]
            path = os.path.join(tmp, f"sweep_prune_{c}_{h}.txt")
            gp.write_columns(path, ["fraction_pruned", "mean_eval_loss"], zip(frac, mean))
            parts.append(f"{gp.gp_string(path)} using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb "
                         f"'{colour_of(heads.index(h), len(heads))}' title '{h} head{'s' if h != 1 else ''} ({n} seeds)'")
        lines += [f"set title {gp.gp_string(pruning.CRITERION_TEXT[c])}", "plot " + ", ".join(parts)]
    lines.append("unset multiplot")
    gp.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def plot_heads_needed(s, out, tmp):
    """Heads needed (mean ± std over seeds, every seed a dot) and all heads against n_head."""
    if "heads_needed" not in s.data:
        return False
    rows, dots = {}, []
    for i in range(s.n):
        v = float(s["heads_needed"][i])
        if s["status"][i] != "complete" or v != v:
            continue
        h, total = int(s["n_head"][i]), int(s["n_head"][i]) * int(s["n_layer"][i])
        rows.setdefault(h, ([], total))[0].append(v)
        dots.append([h, v])
    if not rows:
        return False
    mean_rows = []
    for h in sorted(rows):
        vals, total = rows[h]
        x = np.asarray(vals)
        mean_rows.append([h, x.mean(), x.std(ddof=1) if len(x) > 1 else 0.0, total])
    mp, dp = os.path.join(tmp, "needed_mean.txt"), os.path.join(tmp, "needed_dots.txt")
    gp.write_columns(mp, ["n_head", "mean", "std", "all_heads"], mean_rows)
    gp.write_columns(dp, ["n_head", "heads_needed"], dots)
    hs = sorted(rows)
    script = f"""{gp.png_terminal(900, 600)}
set output {gp.gp_string(out)}
set title {gp.gp_string(f'{s.name}: heads needed to keep the eval loss within {100 * s.tolerance:g}% of the unpruned model (fewer of the two pruning criteria)')} font ',10'
set logscale xy 2
set xrange [{min(hs) / 1.4}:{max(hs) * 1.4}]
set xtics ({", ".join(f'"{h}" {h}' for h in hs)})
set xlabel 'heads per layer (log2 scale)'
set ylabel 'heads (all layers, log2 scale)'
set grid
set key top left
set bars 2
plot {gp.gp_string(mp)} using 1:4 with linespoints dt 2 lw 1 pt 4 lc rgb '#7f7f7f' title 'all heads (n_head x n_layer)', \\
     {gp.gp_string(mp)} using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '#d62728' title 'heads needed (mean +- std over seeds)', \\
     {gp.gp_string(dp)} using 1:2 with points pt 6 ps 0.8 lc rgb '#d62728' title 'each seed'
"""
    gp.run_gnuplot(script, out, tmp)
    return True
