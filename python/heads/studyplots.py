"""heads.studyplots: gnuplot pictures of the head study (the harness's /heads, /prune and /circuits;
heads.pruning): per run, the single-head ablation Δloss (zero and mean) and importance as
layer x head heatmaps with the values written in, the pruning curves, and the composition scores
with previous-token and induction heads labelled; per sweep, every head count's mean pruning
curve on one axis (fraction of heads pruned vs eval loss) and heads needed against n_head.

Each function takes an open results file (or a Summary) and the output path, and writes one
figure in the format the path's extension names (PNG, SVG, PDF).
Knows the results layout of those groups; nothing of the other plots.
"""
import math
import os

import numpy as np

from . import gnuplot as gp
from . import heatmaps, pruning
from .results import read_classes, text

CURVE_COLOURS = {"importance": "#1f77b4", "delta_loss": "#d62728"}

HEAD_PANELS = [  # (dataset, title, cell format) of heads.png
    ("heads/ablation_delta", "Δloss with the head's output zeroed (nats; one scale with the next)",
     "delta"),
    ("heads/ablation_delta_mean", "Δloss with the head's output replaced by its mean over the "
     "held-out tokens (nats; same scale)", "delta"),
    ("heads/importance_normalized", "Michel importance |∂L/∂gate|, normalised per layer", "score")]


def plot_head_heatmaps(f, run_name, out, tmp):
    """ablation Δloss zeroed and mean-ablated (one shared diverging scale, nats) and Michel
    importance normalised per layer ([0, 1]): one panel per quantity, values written in."""
    panels = [(path, title, fmt) for path, title, fmt in HEAD_PANELS if path in f]
    if not panels:
        return False
    values = {path: np.asarray(f[path][()], float) for path, _, _ in panels}
    top = max([float(np.nanmax(np.abs(v))) for p, v in values.items() if "ablation" in p]
              + [1e-6])
    heatmaps.layer_head_heatmaps(
        out, f"{run_name}: what each head is worth on the held-out loss (layer × head)",
        [(title, values[path], fmt, (-top, top), "nats") if "ablation" in path
         else (title, values[path], fmt, (0, 1), "importance") for path, title, fmt in panels],
        tmp)
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
    script = f"""{gp.terminal_for(out, 1000, 640)}
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
    width = max(left + len(kinds) * (pw + gap) + 60, 820)  # room for the header and the note
    height = top + ph + bottom
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    xt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(earlier) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    yt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(later) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    lines = [gp.terminal_for(out, width, height, 10), f"set output {gp.gp_string(out)}", "set multiplot",
             heatmaps.SEQUENTIAL, f"set cbrange [0:{vmax}]", "unset key",
             f"set xrange [-0.5:{n_c - 0.5}]", f"set yrange [{n_r - 0.5}:-0.5]",
             f"set xtics ({xt}) rotate by 60 right scale 0 font ',{8 if cell >= 14 else 7}'",
             f"set ytics ({yt}) scale 0 font ',{8 if cell >= 14 else 7}'",
             f"set label 1 {gp.gp_string(run_name + ': composition scores (Elhage et al. 2021)' + chr(10) + 'rows = later head reading, columns = earlier head writing; prev / ind = previous-token / induction heads')} "
             f"at screen 0.5, screen {sy(28)} center font ',11'"]
    note = f[f"circuits/{kinds[0]}"].attrs.get("note")
    if note is not None:  # why some scores are missing (rotary: V only), under the panels
        lines.append(f"set label 2 {gp.gp_string(text(note))} at screen 0.5, screen {sy(height - 14)} "
                     "center font ',9'")
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
                  f"plot {gp.gp_string(m)} matrix with {gp.image_style(out)}"]
        if j == 0:
            lines += ["unset label 1", "unset label 2"]
    lines.append("unset multiplot")
    gp.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True


def plot_sweep_pruning(s, out, tmp, colour_of):
    """Both criteria side by side: mean eval loss against the fraction of heads pruned, one line
    per head count; colour_of(i, n) gives the i-th of n head counts its colour."""
    panels = [(c, pruning.sweep_curves(s, c)) for c in pruning.CRITERIA]
    panels = [(c, d) for c, d in panels if d]
    if not panels:
        return False
    heads = sorted({h for _, d in panels for h in d})
    values = np.concatenate([m for _, d in panels for _, m, _ in d.values()])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    lines = [gp.terminal_for(out, 1300, 600), f"set output {gp.gp_string(out)}",
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
    logy = all(m - sd > 0 for _, m, sd, _ in mean_rows)  # 0 heads needed has no place on a log axis
    script = f"""{gp.terminal_for(out, 900, 600)}
set output {gp.gp_string(out)}
set title {gp.gp_string(f'{s.name}: heads needed to keep the eval loss within {100 * s.tolerance:g}% of the unpruned model (fewer of the two pruning criteria)')} font ',10'
set logscale {'xy' if logy else 'x'} 2
{'' if logy else 'set yrange [0:*]'}
set xrange [{min(hs) / 1.4}:{max(hs) * 1.4}]
set xtics ({", ".join(f'"{h}" {h}' for h in hs)})
set xlabel 'heads per layer (log2 scale)'
set ylabel 'heads (all layers{", log2 scale" if logy else ""})'
set grid
set key top left
set bars 2
plot {gp.gp_string(mp)} using 1:4 with linespoints dt 2 lw 1 pt 4 lc rgb '#7f7f7f' title 'all heads (n_head × n_layer)', \\
     {gp.gp_string(mp)} using 1:2:3 with yerrorlines lw 2 pt 7 lc rgb '#d62728' title 'heads needed (mean ± std over seeds)', \\
     {gp.gp_string(dp)} using 1:2 with points pt 6 ps 0.8 lc rgb '#d62728' title 'each seed'
"""
    gp.run_gnuplot(script, out, tmp)
    return True
